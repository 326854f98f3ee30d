# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: render the cluster report (plugins/plugin_utils/report_*) and write it, in the controller process."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import differs, parse_mode, write_atomic
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.render import (
    load_report_dir,
    render_report,
    summarize,
)

ARGUMENT_SPEC = {
    "report_dir": {"type": "path", "required": True},
    "dest": {"type": "path"},
    "title": {"type": "str", "default": "topotune cluster report"},
    "mode": {"type": "raw", "default": "0644"},
}


def read_bytes(path):
    """The file's bytes, or None when it does not exist or cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        report_dir = os.path.abspath(args["report_dir"])
        if not os.path.isdir(report_dir):
            raise AnsibleActionFail("report_dir %s is not a directory: run playbooks/topology.yml first (it writes "
                                    "<report_dir>/topology/<host>.json) or set topotune_report_dir" % report_dir)
        dest = os.path.abspath(args["dest"] or os.path.join(report_dir, "report.html"))
        if os.path.isdir(dest):
            raise AnsibleActionFail("dest %s is a directory: give the path of the HTML file" % dest)
        try:
            mode = parse_mode(args["mode"], "cluster_report: mode")
        except TopotuneError as err:
            raise AnsibleActionFail(str(err)) from None
        data = load_report_dir(args["report_dir"])
        content = render_report(data, args["title"]).encode("utf-8")
        counts = summarize(data)
        unreadable = ["%s %s: %s" % (host, section, entry["reason"])
                      for host, sections in sorted(data["hosts"].items())
                      for section, entry in sorted(sections.items()) if entry["state"] == "unreadable"]
        if data["run"]["reason"]:
            unreadable.append("run summary: %s" % data["run"]["reason"])
        before = read_bytes(dest)
        changed = differs(dest, content, mode, root_owned=False)
        hosts = sorted(data["hosts"])
        run = data["run"]["data"] or {}
        result.update(changed=changed, dest=dest, hosts=hosts, counts=counts, size=len(content), unreadable=unreadable,
                      jobs=[str(j) for j in run.get("jobs") or []] if isinstance(run.get("jobs"), list) else [],
                      diff={"before": {"path": dest, "size": None if before is None else len(before)},
                            "after": {"path": dest, "size": len(content), "hosts": hosts}})
        if unreadable:
            result["warnings"] = list(unreadable)
        if not changed:
            result["msg"] = "%s is up to date (%d nodes)" % (dest, counts["nodes"])
        elif self._task.check_mode:
            result["msg"] = "would write %s (%d bytes, %d nodes)" % (dest, len(content), counts["nodes"])
        else:
            try:
                write_atomic(None, dest, content, mode, root_owned=False)
            except OSError as err:
                raise AnsibleActionFail("cannot write the report next to %s: %s; pick a writable dest"
                                        % (dest, err.strerror or err)) from err
            result["msg"] = "wrote %s (%d bytes, %d nodes)" % (dest, len(content), counts["nodes"])
        return result
