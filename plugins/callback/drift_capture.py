# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: drift_capture
type: aggregate
short_description: Capture what the topotune roles would change in check mode, for playbooks/drift.yml full mode
version_added: "0.1.0"
description:
  - >-
    Records, per host, every task of a topotune role that runs in check mode and reports C(changed) (or fails),
    with its diff, as a drift item C({owner, kind: task, item: "role : task", expected, observed, corrected}).
    C(expected) is the diff's C(after), C(observed) its C(before) (long texts are cut at 2000 characters).
  - Counts, per host, the role tasks that ran in check mode (C(checked)).
  - The capture is a JSON file in the temporary directory, rewritten before each task starts; its path is
    exported to the play as the environment variable C(TOPOTUNE_DRIFT_CAPTURE), where C(playbooks/drift.yml)
    reads it and writes C(drift/<host>.json). The file is removed when the run ends.
  - >-
    The roles it records are the owner roles, those whose C(meta/topotune.yml) says C(owner: true) (the
    C(topotune.instinct.owner_roles) lookup, which the playbooks read too).
  - >-
    Inert outside check mode and outside the owner roles, so it can stay enabled in C(callbacks_enabled) (the
    topotune repository's ansible.cfg does); or enable it for one run, e.g.
    C(ANSIBLE_CALLBACKS_ENABLED=topotune.instinct.drift_capture ansible-playbook playbooks/drift.yml -e topotune_drift_mode=full).
requirements:
  - enabled through C(ANSIBLE_CALLBACKS_ENABLED) (or C(callbacks_enabled) in ansible.cfg)
"""

import json
import os
import tempfile

from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.owners import OwnersError, owner_roles

_LIMIT = 2000


def _cut(value):
    if isinstance(value, str) and len(value) > _LIMIT:
        return value[:_LIMIT] + "... (%d more characters)" % (len(value) - _LIMIT)
    return value


def _diffs(result):
    diffs = []
    for res in [result] + [r for r in result.get("results") or [] if isinstance(r, dict)]:
        diff = res.get("diff")
        for one in diff if isinstance(diff, list) else [diff]:
            if isinstance(one, dict) and ("before" in one or "after" in one):
                diffs.append(one)
    return diffs


def drift_item(role, task_name, result):
    """The drift item of one changed (or failed) check-mode task result."""
    diffs = _diffs(result)
    if result.get("failed"):
        expected, observed = "task succeeds", "failed: %s" % _cut(str(result.get("msg", "")))
    elif not diffs:
        expected, observed = "no change", "changed"
    elif len(diffs) == 1:
        expected, observed = _cut(diffs[0].get("after")), _cut(diffs[0].get("before"))
    else:
        expected = [_cut(d.get("after")) for d in diffs]
        observed = [_cut(d.get("before")) for d in diffs]
    item = "%s : %s" % (role, task_name)
    return {"owner": role, "kind": "task", "item": item, "expected": expected, "observed": observed, "corrected": False}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "topotune.instinct.drift_capture"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        try:
            # read here, in the process the workers fork from: the owner_roles lookup they run finds it parsed
            self.owners = frozenset(owner_roles())
        except OwnersError as err:
            # a capture that silently recorded no role would report a drifted node clean
            raise AnsibleError("topotune.instinct.drift_capture: %s" % err) from None
        fd, self.path = tempfile.mkstemp(prefix="topotune-drift-", suffix=".json")
        os.close(fd)
        # workers fork from this process, so the play's lookup('env') sees the path
        os.environ["TOPOTUNE_DRIFT_CAPTURE"] = self.path
        self.hosts = {}
        self.dirty = True
        self._flush()

    def _flush(self):
        if not self.dirty:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"hosts": self.hosts}, handle)
        os.replace(tmp, self.path)
        self.dirty = False

    def _record(self, result, failed=False):
        task = result._task
        role = task._role.get_name(include_role_fqcn=False) if task._role else None
        if role not in self.owners or not task.check_mode:
            return
        host = self.hosts.setdefault(result._host.get_name(), {"checked": 0, "drifted": []})
        host["checked"] += 1
        res = result._result
        if failed or res.get("changed"):
            host["drifted"].append(drift_item(role, task.get_name(include_role_fqcn=False).split(" : ", 1)[-1], dict(res, failed=failed)))
        self.dirty = True

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=not ignore_errors)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._flush()

    def v2_playbook_on_handler_task_start(self, task):
        self._flush()

    def v2_playbook_on_stats(self, stats):
        for path in (self.path, self.path + ".tmp"):
            if os.path.exists(path):
                os.unlink(path)
