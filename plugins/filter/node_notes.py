# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: what the run lock noted on each node (waited for another run, took a dead run's lock over, clock skew)."""

from __future__ import annotations

from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import host_variables

DOCUMENTATION = r"""
name: node_notes
author: topotune contributors (@topotune)
short_description: What the run lock noted on each node
description:
  - >-
    The warnings of each host's run lock (the registered C(__topotune_run_lock) of
    M(topotune.instinct.run_lock)): it waited for another run, took over the lock of a run that ended without
    releasing it, broke a lock, or found the node's clock far from the controller's. Hosts without any are left out.
options:
  _input:
    description: Host names, e.g. C(ansible_play_hosts).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Show what the run lock noted on each node
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | topotune.instinct.node_notes(hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Host name to its notes (C(topotune.instinct.run_summary_lines) prints them).
  type: dict
  sample: {node-7: ["waited 12.0s for run 3f9c2a71b0de (playbooks/site.yml, pid 4242, ...) to release the run lock"]}
"""


def node_notes(hosts, hostvars):
    notes = {}
    for host in hosts or []:
        result = host_variables(hostvars, host).get("__topotune_run_lock")
        found = [str(n) for n in (result.get("notes") or []) if n] if isinstance(result, dict) else []
        if found:
            notes[host] = found
    return notes


class FilterModule:
    def filters(self):
        return {"node_notes": node_notes}
