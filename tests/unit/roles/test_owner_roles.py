"""The owner roles, declared once by each role's meta/topotune.yml and ordered by playbooks/site.yml: the
owner_roles lookup (playbooks/vars/topotune.yml's __topotune_owners) and the drift_capture callback read them."""

import json
import os
import shutil

import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleLookupError

from ansible_collections.topotune.instinct.plugins.plugin_utils.core import owners as ow

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_the_owners_are_the_declared_roles_in_site_order():
    declared = ow.declared()
    assert set(declared) == set(os.listdir(os.path.join(REPO, "roles")))
    site = yaml.safe_load(open(os.path.join(REPO, "playbooks", "site.yml"), encoding="utf-8"))
    order = [r["role"].rsplit(".", 1)[-1] for play in site for r in play.get("roles") or []]
    assert ow.owner_roles() == [r for r in order if declared[r]]
    assert ow.owner_roles() is not ow.owner_roles()


@pytest.fixture()
def root(tmp_path):
    """A copy of the collection's roles metadata and site.yml to edit."""
    for role in os.listdir(os.path.join(REPO, "roles")):
        os.makedirs(tmp_path / "roles" / role / "tasks")
        os.makedirs(tmp_path / "roles" / role / "meta")
        shutil.copy(os.path.join(REPO, "roles", role, "meta", "topotune.yml"), tmp_path / "roles" / role / "meta")
    os.makedirs(tmp_path / "playbooks")
    shutil.copy(os.path.join(REPO, "playbooks", "site.yml"), tmp_path / "playbooks")
    return tmp_path


def test_the_order_is_site_ymls(root):
    site = root / "playbooks" / "site.yml"
    text = site.read_text()
    site.write_text(text.replace("role: topotune.instinct.cpu_governor", "role: topotune.instinct.TMP")
                    .replace("role: topotune.instinct.launch_templates", "role: topotune.instinct.cpu_governor")
                    .replace("role: topotune.instinct.TMP", "role: topotune.instinct.launch_templates"))
    assert ow.owner_roles(str(root)) == ["launch_templates", "kernel_tuning", "rocm_env", "container_runtime",
                                         "cpu_governor"]


# (edit of the copy, message)
BROKEN = [
    (lambda r: os.unlink(r / "roles" / "rocm_env" / "meta" / "topotune.yml"),
     "role rocm_env has no meta/topotune.yml: add one with `owner: true`"),
    (lambda r: (r / "roles" / "rocm_env" / "meta" / "topotune.yml").write_text("owner: yes please\n"),
     "rocm_env/meta/topotune.yml: owner must be true or false, got 'yes please'"),
    (lambda r: (r / "roles" / "platform_checks" / "meta" / "topotune.yml").write_text("owner: true\n"),
     "owner role(s) platform_checks (meta/topotune.yml owner: true) are not run by playbooks/site.yml"),
    (lambda r: (r / "roles" / "kernel_tuning" / "meta" / "topotune.yml").write_text("owner: [\n"),
     "kernel_tuning/meta/topotune.yml is not valid YAML"),
]


@pytest.mark.parametrize("edit,message", BROKEN)
def test_bad_metadata_is_one_clear_error(root, edit, message):
    if "platform_checks" in message:  # a role site.yml does not run
        site = root / "playbooks" / "site.yml"
        site.write_text(site.read_text().replace("    - role: topotune.instinct.platform_checks\n", ""))
    edit(root)
    with pytest.raises(ow.OwnersError) as err:
        ow.owner_roles(str(root))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_lookup_returns_the_owner_roles():
    from ansible_collections.topotune.instinct.plugins.lookup.owner_roles import LookupModule

    assert LookupModule().run([]) == ow.owner_roles()
    with pytest.raises(AnsibleLookupError, match="takes no terms"):
        LookupModule().run(["cpu_governor"])


class _Role:
    def __init__(self, name):
        self.name = name

    def get_name(self, include_role_fqcn=True):
        return self.name


class _Task:
    def __init__(self, role, check_mode=True):
        self._role = _Role(role) if role else None
        self.check_mode = check_mode

    def get_name(self, include_role_fqcn=True):
        return "%s : Write the file" % (self._role.name if self._role else "play")


class _Result:
    def __init__(self, role, host="n1", check_mode=True, **result):
        self._task = _Task(role, check_mode)
        self._host = _Role(host)
        self._result = result


def test_the_callback_records_the_owner_roles_only(monkeypatch):
    from ansible_collections.topotune.instinct.plugins.callback import drift_capture

    capture = drift_capture.CallbackModule()
    try:
        assert capture.owners == frozenset(ow.owner_roles())
        diff = {"before": "old", "after": "new"}
        capture.v2_runner_on_ok(_Result("rocm_env", changed=True, diff=diff))
        capture.v2_runner_on_ok(_Result("cpu_governor", changed=False))
        capture.v2_runner_on_ok(_Result("platform_checks", changed=True, diff=diff))   # not an owner
        capture.v2_runner_on_ok(_Result("kernel_tuning", check_mode=False, changed=True))  # not a check run
        capture.v2_runner_on_ok(_Result(None, changed=True))
        capture.v2_playbook_on_task_start(None, False)
        with open(os.environ["TOPOTUNE_DRIFT_CAPTURE"], encoding="utf-8") as handle:
            hosts = json.load(handle)["hosts"]
        assert hosts["n1"]["checked"] == 2
        assert [(i["owner"], i["item"], i["expected"], i["observed"]) for i in hosts["n1"]["drifted"]] == [
            ("rocm_env", "rocm_env : Write the file", "new", "old")]
    finally:
        capture.v2_playbook_on_stats(None)
    assert not os.path.exists(capture.path)

    def broken():
        raise ow.OwnersError("role x has no meta/topotune.yml")
    monkeypatch.setattr(drift_capture, "owner_roles", broken)
    with pytest.raises(AnsibleError, match="drift_capture: role x has no meta/topotune.yml"):
        drift_capture.CallbackModule()
