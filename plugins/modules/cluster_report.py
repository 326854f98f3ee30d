#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name, in the controller process.

DOCUMENTATION = r"""
module: cluster_report
author: topotune contributors (@topotune)
short_description: Write one self-contained HTML report of a GPU cluster from topotune's per-node JSON
description:
  - Reads the report directory the playbooks fill on the controller, C(topology/<host>.json)
    (playbooks/topology.yml), C(checks/<host>.json) (platform checks), C(drift/<host>.json),
    C(benchmark/<host>.json) (playbooks/benchmark.yml) and the bring-up summaries C(run/site/<job id>.json), one
    per job (playbooks/summary.yml), else C(run/summary.json) (failed and unreachable hosts).
  - Each node's run status is the one of the latest bring-up job that ran it, so the slices of a job sliced by
    AWX/AAP, each of which writes its own summary into the same directory, add up to the whole cluster.
  - Writes one HTML file with a cluster overview and, per node, a topology diagram (inline SVG, NUMA nodes as
    boxes, GPUs inside their NUMA node, direct xGMI links with their width by link count or bandwidth;
    partitioned CPX nodes drawn as physical devices with their partition count), GPU groups of 2, 4 and 8
    with the per-rank NUMA binding, check results, drift, busbw and scale-out advice.
  - The page has no script and no external asset (inline CSS and SVG, a Content-Security-Policy that forbids
    any fetch); every value read from the nodes is HTML-escaped.
  - Every file is optional. A missing file shows as C(not collected), a malformed one as C(unreadable) with the
    reason (and a warning), never as a failure.
  - >-
    Runs in the controller process, like M(ansible.builtin.debug): no module is shipped or run and no host is
    contacted, so O(report_dir) and O(dest) are always controller paths. The page is rendered with the jinja2
    templates shipped in the collection (C(plugins/plugin_utils/report/templates/)), autoescaped.
  - The file is written atomically (temporary file, then rename) and only when its content or mode changes, so a
    second run with the same inputs reports C(changed=false).
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
    description: File mode of O(dest), octal (V("0644") or V(0o644)).
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
  description: Nodes in the report (every host with at least one JSON file or named in a run summary).
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
jobs:
  description: The bring-up jobs (C(run/site/<job id>.json), check runs left out) whose union gives the run status,
    oldest first; empty when the status comes from C(run/summary.json) or is missing.
  returned: always
  type: list
  elements: str
  sample: ['4101', '4102', '4103', '4104']
unreadable:
  description: One line per file that could not be used (also given as warnings).
  returned: always
  type: list
  elements: str
"""
