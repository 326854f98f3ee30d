# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: firmware and software consistency across the nodes of a run, naming the odd node out per item."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_consistency
author: topotune contributors (@topotune)
short_description: Compare GPU firmware, VBIOS, ROCm, kernel and BIOS versions across the nodes of a hardware class
description:
  - >-
    Takes the per-node C(inventory) that M(topotune.instinct.platform_checks) returns (in C(platform_checks_report)),
    groups the nodes by hardware class (GPU product and partition mode, e.g. C(MI300X SPX/NPS1): an MI300X node is
    never judged against MI308X firmware) and, per class and item, finds the value most nodes have and names the
    nodes that differ; when no value is held by more than half of the nodes it says so instead of picking one.
  - >-
    A node whose GPUs disagree among themselves gets the value C(mixed: a | b) (the node's own
    C(gpu_firmware_consistency) check names the GPU); a value a node could not read leaves that node under
    C(unknown) for the item, never among the nodes that differ; items no node of a class has are not listed.
options:
  _input:
    description: Host names, e.g. C(ansible_play_hosts).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable; hosts without C(platform_checks_report.inventory) are left out.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Name the odd node out per firmware/software item
  ansible.builtin.debug:
    msg: "{{ (ansible_play_hosts | topotune.instinct.cluster_consistency(hostvars)).odd_nodes }}"
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - C(nodes), C(classes) (class to hosts), C(items) (C(item), C(label), C(class), C(status)
      consistent/differs/no_majority/unknown, C(majority), C(odd), C(unknown) hosts, C(values) value to hosts),
      C(odd_nodes) (host to items), C(summary). C(topotune.instinct.run_summary_lines) prints it.
  type: raw
  sample:
    nodes: [node1, node2, node3]
    classes: {MI300X SPX/NPS1: [node1, node2, node3]}
    items:
      - {item: vbios, label: VBIOS, class: MI300X SPX/NPS1, status: differs, majority: 113-M3000100-102, odd: [node3],
         unknown: [], values: {113-M3000100-102: [node1, node2], 113-M3000108-103: [node3]}}
    odd_nodes: {node3: [vbios]}
    summary: {items: 12, differing: 1, no_majority: 0, unknown: 0}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import host_variables
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import compare


def cluster_consistency(hosts, hostvars):
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("cluster_consistency: input must be a list of host names, got %s" % type(hosts).__name__)
    inventories = {}
    for host in hosts:
        report = host_variables(hostvars, host).get("platform_checks_report")
        if isinstance(report, dict) and isinstance(report.get("inventory"), dict):
            inventories[host] = report["inventory"]
    return compare(inventories)


class FilterModule:
    def filters(self):
        return {"cluster_consistency": cluster_consistency}
