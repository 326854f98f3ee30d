"""playbooks/drift.yml full mode runs each owner role's normal entry (tasks/main.yml), the one site.yml and the drift
correction run, with the play variable topotune_export_managed: false. What Ansible itself compiles from the
playbooks, tags evaluated as when a play starts, is checked here:

- every task site.yml runs for an owner role is in full drift too, in the same order, except the export of
  <role>_managed (the tasks tagged topotune_managed) and kernel_tuning's pending-reboot message, which reads it;
- those are left out of the play (no task, not even a skipped one, on any host), and only by the switch: the same play
  with -e topotune_export_managed=true has them all, as does a role used alone;
- the correction play leaves the switch unset, so the roles it runs again export what the manifest records.

The drift the full mode reports is checked on converged nodes by the drills of molecule/cluster and, from the installed
collection, by tests/integration/test_collection_package.py."""

import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FULL = "Run the roles in check mode with diff (full)"
CORRECTION = "Correct the drifted settings"

# Every play of a playbook as the play iterator builds it (Play.compile, then the tag filter with the play's variables,
# as TaskQueueManager.run does before any host's variables exist): per task its role, name, action, tags and the facts
# a set_fact sets.
_COMPILE = r"""
import json, os, sys
from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
playbook, extra = sys.argv[1:]
# no --tags, --skip-tags: what a plain ansible-playbook run selects
context.CLIARGS = ImmutableDict({"extra_vars": (extra,)} if extra else {})
_AnsibleCollectionFinder(paths=os.environ["ANSIBLE_COLLECTIONS_PATH"].split(":"))._install()
from ansible.parsing.dataloader import DataLoader
from ansible.inventory.manager import InventoryManager
from ansible.vars.manager import VariableManager
from ansible.playbook import Playbook
loader = DataLoader()
manager = VariableManager(loader=loader, inventory=InventoryManager(loader=loader, sources=["localhost,"]))
plays = Playbook.load(playbook, variable_manager=manager, loader=loader).get_plays()
loader.set_basedir(os.path.dirname(playbook))
out = []
for play in plays:
    all_vars = manager.get_vars(play=play)
    tasks = []
    for block in play.compile():
        for task in block.filter_tagged_tasks(all_vars).get_tasks():
            role = task._role.get_name(include_role_fqcn=False) if task._role else None
            sets = sorted(task.args) if task.action in ("set_fact", "ansible.builtin.set_fact") else []
            tasks.append({"role": role, "name": task.name, "action": task.action, "tags": sorted(map(str, task.tags)),
                          "sets": sets})
    out.append({"play": play.get_name(), "tasks": tasks})
print(json.dumps(out))
"""


def _compile(playbook, **extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
        [os.path.join(REPO, ".cache", "collections"), os.path.join(REPO, ".vendor", "collections")]))
    out = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(REPO, "playbooks", playbook),
                          json.dumps(extra) if extra else ""], env=env, capture_output=True, text=True, check=False,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _owners():
    from ansible_collections.topotune.instinct.plugins.plugin_utils.core.owners import owner_roles

    return owner_roles()


def _by_role(plays, names=None):
    """{role: [task, ...]} over the plays (all, or those named), in play order."""
    roles = {}
    for play in plays:
        if names is None or play["play"] in names:
            for task in play["tasks"]:
                if task["role"]:
                    roles.setdefault(task["role"], []).append(task)
    return roles


def _export(role, task):
    """The export (the tasks tagged topotune_managed) and kernel_tuning's pending-reboot step, which reads it."""
    return "topotune_managed" in task["tags"] or (role == "kernel_tuning" and "kernel_tuning_reboot" in task["tags"])


@pytest.fixture(scope="module")
def compiled():
    return {"site": _compile("site.yml"), "drift": _compile("drift.yml"),
            "drift_exporting": _compile("drift.yml", topotune_export_managed=True)}


def _site_role_plays():
    """The plays of site.yml that run the owner roles' main entry (its roles: lists)."""
    site = yaml.safe_load(open(os.path.join(REPO, "playbooks", "site.yml"), encoding="utf-8"))
    return [play["name"] for play in site if play.get("roles")]


def test_full_drift_runs_what_site_runs_without_the_export(compiled):
    owners = _owners()
    site = _by_role(compiled["site"], _site_role_plays())
    full = _by_role(compiled["drift"], [FULL])
    assert sorted(full) == sorted(owners), full.keys()
    for role in owners:
        exports = [t for t in site[role] if _export(role, t)]
        # the export is there in site.yml: one set_fact of <role>_managed among the tasks tagged topotune_managed
        assert any("%s_managed" % role in t["sets"] for t in exports), (role, exports)
        kept = [t for t in site[role] if not _export(role, t)]
        assert [(t["name"], t["action"]) for t in full[role]] == [(t["name"], t["action"]) for t in kept], role
        # nothing in the full play sets a fact an owner exports for the manifest
        assert not [t for t in full[role] if any(name.endswith("_managed") for name in t["sets"])], role
    assert [t["name"] for t in site["kernel_tuning"] if _export("kernel_tuning", t) and not t["sets"]] == [
        "Name the nodes whose running kernel lacks configured parameters"]


def test_only_the_switch_leaves_the_export_out(compiled):
    """-e topotune_export_managed=true (above the play's false) brings back exactly what site.yml runs."""
    site = _by_role(compiled["site"], _site_role_plays())
    exporting = _by_role(compiled["drift_exporting"], [FULL])
    for role in _owners():
        assert [(t["name"], t["action"]) for t in exporting[role]] == [(t["name"], t["action"]) for t in site[role]], role


def test_the_full_play_sets_the_switch_and_nothing_else_does():
    drift = yaml.safe_load(open(os.path.join(REPO, "playbooks", "drift.yml"), encoding="utf-8"))
    plays = {play["name"]: play for play in drift if "name" in play and "hosts" in play}
    assert plays[FULL]["vars"]["topotune_export_managed"] is False
    # the correction (and every other play) reads the roles' default: the roles it runs again export
    assert [name for name, play in plays.items() if "topotune_export_managed" in (play.get("vars") or {})] == [FULL]
    for name in os.listdir(os.path.join(REPO, "playbooks", "vars")):
        text = open(os.path.join(REPO, "playbooks", "vars", name), encoding="utf-8").read()
        assert "topotune_export_managed" not in text, name
    site = yaml.safe_load(open(os.path.join(REPO, "playbooks", "site.yml"), encoding="utf-8"))
    assert not [play for play in site if "topotune_export_managed" in json.dumps(play)]


def test_the_full_play_imports_each_role_main_entry():
    drift = yaml.safe_load(open(os.path.join(REPO, "playbooks", "drift.yml"), encoding="utf-8"))
    full = next(play for play in drift if play.get("name") == FULL)
    imports = [task["ansible.builtin.import_role"] for task in full["tasks"] if "ansible.builtin.import_role" in task]
    assert [i["name"].rsplit(".", 1)[-1] for i in imports] == _owners()
    assert all(set(i) == {"name"} for i in imports), imports
    for role in _owners():
        assert not os.path.exists(os.path.join(REPO, "roles", role, "tasks", "drift.yml")), role


SWITCHES = [(None, True), (True, True), ("yes", True), (False, False), ("false", False)]


def test_a_role_used_alone_exports_unless_switched_off(tmp_path):
    """A playbook of one's own that runs every owner role (as a user of the collection writes it), one play per value
    of the switch (None: unset): unset or true exports, false (also as -e passes it, text) leaves the export out."""
    plays = []
    for number, (switch, _exports) in enumerate(SWITCHES):
        play = {"name": "Mine %d" % number, "hosts": "all", "gather_facts": False,
                "roles": [{"role": "topotune.instinct.%s" % role} for role in _owners()]}
        if switch is not None:
            play["vars"] = {"topotune_export_managed": switch}
        plays.append(play)
    (tmp_path / "mine.yml").write_text(yaml.safe_dump(plays))
    compiled = _compile(str(tmp_path / "mine.yml"))
    for number, (switch, exports) in enumerate(SWITCHES):
        roles = _by_role(compiled, ["Mine %d" % number])
        for role in _owners():
            sets = [name for task in roles[role] for name in task["sets"]]
            assert ("%s_managed" % role in sets) is exports, (role, switch, sets)
