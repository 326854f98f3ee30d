# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the terminal lines of a run summary (playbooks/summary.yml), from the summary alone."""

from __future__ import annotations

DOCUMENTATION = r"""
name: run_summary_lines
author: topotune contributors (@topotune)
short_description: The terminal lines of a topotune run summary
description:
  - >-
    Turns the run summary C(playbooks/summary.yml) writes to C(run/<playbook>/<job id>.json) into the lines the run
    prints: how many nodes completed and which failed, one line per failed node (the fault and the fix), the run
    lock's notes per node, and, when platform checks ran, the cluster consistency count and one line per item that
    differs or has no majority.
  - Reads the summary only (never C(hostvars)), so the lines say what the file says.
options:
  _input:
    description: >-
      The run summary: C(hosts), C(completed_hosts), C(failed_hosts), C(failures) (host to line), C(notes) (host to
      notes) and C(consistency) (the C(topotune.instinct.cluster_consistency) report).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Name the nodes that did not complete, and why
  ansible.builtin.debug:
    msg: "{{ __topotune_run_summary | topotune.instinct.run_summary_lines }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The lines, in that order.
  type: list
  elements: str
  sample:
    - "3 of 4 node(s) completed; failed or unreachable: node-3"
    - "node-3: node cannot take this run's writes, nothing was changed: /etc is mounted read-only (...)"
    - "node-1: waited 12.0s for run 3f9c2a71b0de (playbooks/site.yml, pid 4242, ...) to release the run lock"
    - "cluster consistency: 1 item(s) differ, 0 without a majority"
    - "MI300X SPX/NPS1 VBIOS: 113-M3000100-102 on 2 node(s); odd: node3 (113-M3000108-103)"
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import lines as consistency_lines


def run_summary_lines(summary):
    if not isinstance(summary, dict):
        raise AnsibleFilterError("run_summary_lines: input must be a run summary (a mapping), got %s"
                                 % type(summary).__name__)
    lost = list(summary.get("failed_hosts") or [])
    out = ["%d of %d node(s) completed; %s" % (
        len(summary.get("completed_hosts") or []), len(summary.get("hosts") or []),
        ("failed or unreachable: " + ", ".join(lost)) if lost else "none failed")]
    out += list((summary.get("failures") or {}).values())
    notes = summary.get("notes") or {}
    out += ["%s: %s" % (host, note) for host in notes for note in notes[host]]
    consistency = summary.get("consistency") or {}
    if consistency.get("nodes"):
        counts = consistency.get("summary") or {}
        out.append("cluster consistency: %s item(s) differ, %s without a majority"
                   % (counts.get("differing", 0), counts.get("no_majority", 0)))
        out += consistency_lines(consistency)
    return out


class FilterModule:
    def filters(self):
        return {"run_summary_lines": run_summary_lines}
