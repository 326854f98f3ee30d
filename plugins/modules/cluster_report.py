#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write one self-contained HTML report of the cluster from the per-node JSON kept on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_report
author: topotune contributors (@topotune)
short_description: Write one self-contained HTML report of a GPU cluster from topotune's per-node JSON
description:
  - Reads the report directory the playbooks fill on the controller, C(topology/<host>.json)
    (playbooks/topology.yml), C(checks/<host>.json) (platform checks), C(drift/<host>.json),
    C(benchmark/<host>.json) (playbooks/benchmark.yml) and C(run/summary.json) (failed and unreachable hosts).
  - Writes one HTML file with a cluster overview and, per node, a topology diagram (inline SVG, NUMA nodes as
    boxes, GPUs inside their NUMA node, direct xGMI links with their width by link count or bandwidth;
    partitioned CPX nodes drawn as physical devices with their partition count), GPU groups of 2, 4 and 8
    with the per-rank NUMA binding, check results, drift, busbw and scale-out advice.
  - The page has no script and no external asset (inline CSS and SVG, a Content-Security-Policy that forbids
    any fetch); every value read from the nodes is HTML-escaped.
  - Every file is optional. A missing file shows as C(not collected), a malformed one as C(unreadable) with the
    reason (and a warning), never as a failure.
  - Run it on the controller (a play on localhost, or C(delegate_to=localhost)). The file is written atomically
    and only when its content changes, so a second run with the same inputs reports C(changed=false).
options:
  report_dir:
    description: Report directory on the controller (the playbooks' C(topotune_report_dir), by default C(out/)).
    type: path
    required: true
  dest:
    description: HTML file to write. Default C(<report_dir>/report.html).
    type: path
  title:
    description: Page title.
    type: str
    default: topotune cluster report
  mode:
    description: File mode of O(dest).
    type: raw
    default: "0644"
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: The diff shows the size and the hosts, not the HTML.
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Write the cluster report
  topotune.instinct.cluster_report:
    report_dir: "{{ playbook_dir }}/../out"
  delegate_to: localhost
  run_once: true
  register: report

- name: Where it is
  ansible.builtin.debug:
    msg: "{{ report.dest }}: {{ report.counts.nodes }} nodes, {{ report.counts.checks_failed }} failing checks"
"""

RETURN = r"""
dest:
  description: Path of the HTML report.
  returned: always
  type: str
  sample: /srv/topotune/out/report.html
hosts:
  description: Nodes in the report (every host with at least one JSON file or listed in C(run/summary.json)).
  returned: always
  type: list
  elements: str
  sample: [gpu-a01, gpu-a02]
counts:
  description: Cluster counts shown in the overview.
  returned: always
  type: dict
  sample: {nodes: 4, gpus: 87, checks_failed: 1, checks_warned: 3, drifted: 2, failed_hosts: [gpu-b02],
           unreachable_hosts: [], sections_missing: 6, sections_unreadable: 1}
size:
  description: Size of the report in bytes.
  returned: always
  type: int
  sample: 75433
unreadable:
  description: One line per file that could not be used (also given as warnings).
  returned: always
  type: list
  elements: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.report_html import (
    load_report_dir,
    render_report,
    summarize,
)


class ClusterReport:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def _current(self, dest):
        try:
            with open(dest, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def run(self):
        report_dir = self.params["report_dir"]
        if not os.path.isdir(report_dir):
            self.module.fail_json(msg="report_dir %s is not a directory: run playbooks/topology.yml first (it "
                                      "writes <report_dir>/topology/<host>.json) or set topotune_report_dir"
                                      % report_dir)
        dest = self.params["dest"] or os.path.join(report_dir, "report.html")
        if os.path.isdir(dest):
            self.module.fail_json(msg="dest %s is a directory: give the path of the HTML file" % dest)
        data = load_report_dir(report_dir)
        content = render_report(data, self.params["title"]).encode("utf-8")
        counts = summarize(data)
        unreadable = ["%s %s: %s" % (host, section, entry["reason"])
                      for host, sections in sorted(data["hosts"].items())
                      for section, entry in sorted(sections.items()) if entry["state"] == "unreadable"]
        if data["run"]["state"] == "unreadable":
            unreadable.append("run summary: %s" % data["run"]["reason"])
        for line in unreadable:
            self.module.warn(line)
        before = self._current(dest)
        changed = before != content
        result = {"changed": changed, "dest": dest, "hosts": sorted(data["hosts"]), "counts": counts,
                  "size": len(content), "unreadable": unreadable,
                  "diff": {"before": {"path": dest, "size": None if before is None else len(before)},
                           "after": {"path": dest, "size": len(content), "hosts": sorted(data["hosts"])}}}
        if changed and self.module.check_mode:
            result["msg"] = "would write %s (%d bytes, %d nodes)" % (dest, len(content), counts["nodes"])
        elif changed:
            self._write(dest, content)
            result["msg"] = "wrote %s (%d bytes, %d nodes)" % (dest, len(content), counts["nodes"])
        else:
            result["msg"] = "%s is up to date (%d nodes)" % (dest, counts["nodes"])
        if not self.module.check_mode:
            # mode is applied even when the content is unchanged
            file_args = self.module.load_file_common_arguments({"path": dest, "mode": self.params["mode"]})
            result["changed"] = self.module.set_fs_attributes_if_different(file_args, result["changed"])
        return result

    def _write(self, dest, content):
        folder = os.path.dirname(os.path.abspath(dest))
        try:
            os.makedirs(folder, exist_ok=True)
            handle, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=folder)
            with os.fdopen(handle, "wb") as out:
                out.write(content)
        except OSError as err:
            self.module.fail_json(msg="cannot write the report next to %s: %s; pick a writable dest"
                                      % (dest, err.strerror or err))
        self.module.atomic_move(tmp, dest)


def main():
    module = AnsibleModule(
        argument_spec={
            "report_dir": {"type": "path", "required": True},
            "dest": {"type": "path"},
            "title": {"type": "str", "default": "topotune cluster report"},
            "mode": {"type": "raw", "default": "0644"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**ClusterReport(module).run())


if __name__ == "__main__":
    main()
