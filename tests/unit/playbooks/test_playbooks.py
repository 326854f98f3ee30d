"""The playbooks define each default once: the report directory and the owner roles in playbooks/vars/topotune.yml,
loaded by every play (the owner roles read from the roles' metadata); reports are written by one run_once
report_files task, never a delegated copy per host."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOKS = os.path.join(REPO, "playbooks")
SHARED = "vars/topotune.yml"
PLAYBOOK_FILES = sorted(f for f in os.listdir(PLAYBOOKS) if f.endswith(".yml"))


def _load(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _plays(name):
    return [play for play in _load("playbooks", name) if not any(key.endswith("import_playbook") for key in play)]


def _roles(play):
    """The roles of a play: its roles list, then the roles its tasks import (drift.yml's full play)."""
    listed = [(r["role"] if isinstance(r, dict) else r) for r in play.get("roles") or []]
    imported = [task["ansible.builtin.import_role"]["name"] for task in play.get("tasks") or []
                if "ansible.builtin.import_role" in task]
    return [name.rsplit(".", 1)[-1] for name in listed + imported]


def _text_files(*dirs):
    for top in dirs:
        for root, _dirs, files in os.walk(os.path.join(REPO, top)):
            for name in files:
                if name.endswith((".yml", ".j2")):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as handle:
                        yield os.path.relpath(path, REPO), handle.read()


@pytest.mark.parametrize("name", PLAYBOOK_FILES)
def test_every_play_loads_the_shared_vars(name):
    for play in _plays(name):
        files = play.get("vars_files") or []
        files = [files] if isinstance(files, str) else files
        assert files[:1] == [SHARED], "%s: play %r must load %s first (vars_files)" % (name, play.get("name"), SHARED)


def test_report_dir_default_is_written_once():
    shared = _load("playbooks", "vars", "topotune.yml")
    assert "topotune_report_dir | default(" in shared["__topotune_report_dir"]
    pattern = re.compile(r"playbook_dir ~ '/\.\./out'")
    copies = [path for path, text in _text_files("playbooks", "roles") if pattern.search(text)]
    assert copies == [os.path.join("playbooks", "vars", "topotune.yml")], copies


def test_owner_roles_are_declared_once_and_match_the_plays():
    """The owner roles are their role metadata's (meta/topotune.yml), in site.yml's order; the playbooks and the
    drift_capture callback read them through the owner_roles lookup and nobody spells the list out again."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.core.owners import owner_roles

    owners = owner_roles()
    # an owner is a role whose tasks export <role>_managed, the manifest entry site.yml records
    for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
        exported = any("%s_managed" % role in text for _path, text in _text_files(os.path.join("roles", role, "tasks")))
        assert (role in owners) == exported, "%s: meta/topotune.yml owner must be %s" % (role, str(exported).lower())
    assert _load("playbooks", "vars", "topotune.yml")["__topotune_owners"] == "{{ query('topotune.instinct.owner_roles') }}"
    site = [role for play in _plays("site.yml") for role in _roles(play)]
    full = [role for play in _plays("drift.yml") for role in _roles(play)]
    assert [role for role in site if role not in owners] == ["platform_checks"] and full == owners, (owners, site, full)
    spelled = re.compile(r"cpu_governor\W+kernel_tuning")
    copies = [path for path, text in _text_files("playbooks") if spelled.search(text)]
    copies += [os.path.relpath(os.path.join(root, name), REPO) for root, _dirs, files in os.walk(os.path.join(REPO, "plugins"))
               for name in files if name.endswith(".py") and spelled.search(open(os.path.join(root, name)).read())]
    assert copies == [], copies


@pytest.mark.parametrize("name", PLAYBOOK_FILES)
def test_reports_are_written_in_one_task(name):
    for play in _plays(name):
        for task in (play.get("tasks") or []) + (play.get("pre_tasks") or []):
            module = next((k for k in task if k.startswith(("ansible.builtin.", "topotune."))), "")
            if task.get("delegate_to") == "localhost" and module in ("ansible.builtin.copy", "ansible.builtin.template"):
                pytest.fail("%s: %r writes a file per host on the controller; use one run_once "
                            "topotune.instinct.report_files task" % (name, task.get("name")))


_RENDER = r"""
import json, os, sys
from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
context.CLIARGS = ImmutableDict({})
_AnsibleCollectionFinder(paths=os.environ["ANSIBLE_COLLECTIONS_PATH"].split(":"))._install()
from ansible.parsing.dataloader import DataLoader
from ansible.inventory.manager import InventoryManager
from ansible.vars.manager import VariableManager
from ansible.playbook import Playbook
from ansible.template import Templar, trust_as_template
inventory, playbook, play_name, host, expr = sys.argv[1:]
loader = DataLoader()
inv = InventoryManager(loader=loader, sources=[inventory])
manager = VariableManager(loader=loader, inventory=inv)
plays = Playbook.load(playbook, variable_manager=manager, loader=loader).get_plays()
# ansible-playbook runs with the playbook's directory as the base directory (playbook_dir)
loader.set_basedir(os.path.dirname(playbook))
play = next(p for p in plays if p.get_name() == play_name)
variables = manager.get_vars(play=play, host=inv.get_host(host))
print(json.dumps(Templar(loader=loader, variables=variables).template(trust_as_template(expr))))
"""


def _render(inventory, playbook, play, host, expr, **extra_env):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
        [os.path.join(REPO, ".cache", "collections"), os.path.join(REPO, ".vendor", "collections")]), **extra_env)
    out = subprocess.run([sys.executable, "-c", _RENDER, os.path.join(REPO, inventory), os.path.join(REPO, playbook),
                          play, host, expr], env=env, capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_production_inventory_writes_checks():
    """README: with inventory/production, site.yml writes checks/ beside topology/ (the default out/): the role's
    default report directory (null) is checks/ under the run's one, as the platform_checks action resolves it."""
    from ansible_collections.topotune.instinct.plugins.action.platform_checks import RUN_REPORT_DIRS
    from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import default_report_dir

    play = "Platform checks (read-only verification)"
    assert _render("inventory/production", "playbooks/site.yml", play, "gpu-a001.example.org",
                   "{{ platform_checks_report_dir }}") is None
    run = _render("inventory/production", "playbooks/site.yml", play, "gpu-a001.example.org",
                  "{{ %s }}" % RUN_REPORT_DIRS[0])
    checks = default_report_dir(run)
    assert checks == os.path.join(PLAYBOOKS, "../out/checks")
    topology = _render("inventory/production", "playbooks/topology.yml", "Discover the GPU topology",
                       "gpu-a001.example.org", "{{ __topotune_report_dir }}/topology")
    assert os.path.dirname(checks) == os.path.dirname(topology)


def test_installed_collection_writes_out_in_the_working_directory(tmp_path):
    """Run as topotune.instinct.<playbook> from an installed collection, the default out/ is in the directory
    ansible-playbook runs from, never inside the installed collection."""
    installed = os.path.join(".cache", "collections", "ansible_collections", "topotune", "instinct", "playbooks", "topology.yml")
    got = _render("inventory/production", installed, "Discover the GPU topology", "gpu-a001.example.org",
                  "{{ __topotune_report_dir }}", PWD=str(tmp_path))
    assert got == str(tmp_path / "out")


def test_the_plays_read_the_owner_roles_from_the_lookup():
    """__topotune_owners templates to the owner roles in a play, as the manifest task and the correction use it."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.core.owners import owner_roles

    got = _render("inventory/production", "playbooks/site.yml", "Record the manifest of managed settings",
                  "gpu-a001.example.org", "{{ __topotune_owners }}")
    assert got == owner_roles()
    pattern = _render("inventory/production", "playbooks/site.yml", "Record the manifest of managed settings",
                      "gpu-a001.example.org", "{{ '^(' ~ __topotune_owners | join('|') ~ ')_managed$' }}")
    assert pattern == "^(%s)_managed$" % "|".join(owner_roles())
