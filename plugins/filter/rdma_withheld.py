# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the nodes of a run on which NCCL_IB_HCA is withheld because their rails differ from their class's."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rdma_withheld
author: topotune contributors (@topotune)
short_description: Nodes whose RDMA rails differ from the other nodes of their hardware class, with the reason
description:
  - >-
    Takes each host's C(topotune_discovery) (the M(topotune.instinct.gpu_topology) result: C(topology.identity) and
    C(rail_inventory)), compares rail i (the NIC of GPU i: device name, netdev, rate, firmware, IPv4 subnet) across the
    nodes of each hardware class as the C(rail_consistency) check does, and returns the nodes where it fails, each
    with the reason naming the rails.
  - >-
    RCCL pairs the ranks' NICs of two nodes by position, so on a node whose NICs are swapped or cabled to another leaf
    an C(NCCL_IB_HCA) in GPU order sends traffic across rails (slow, or timing out on rail-isolated fabrics): the
    launch_templates role leaves it unset there and writes the reason into the launch README.
  - >-
    A node that passes or cannot be judged (no rails read, the only node of its class in the play, no majority) is
    not listed; hosts without a discovery are left out of the comparison.
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
- name: Compare the play's rails once (run_once applies the fact to every host of the batch)
  ansible.builtin.set_fact:
    rails_withheld: "{{ ansible_play_hosts | topotune.instinct.rdma_withheld(hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Host name to the reason NCCL_IB_HCA is withheld there; hosts that are not withheld are absent.
  type: dict
  sample:
    node7: >-
      its rails differ from the other nodes of its hardware class in this run (rail_consistency: rail 0 (GPU 0's
      NIC): mlx5_1 ..., 15 other node(s): mlx5_0 ...), so RCCL's NIC by GPU position would cross rails
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import host_variables
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import rdma_withheld as withheld


def rail_inventory(discovery):
    """The consistency input of one gpu_topology result, or None when it carries no rails."""
    if not isinstance(discovery, dict) or not isinstance(discovery.get("rail_inventory"), dict):
        return None
    identity = (discovery.get("topology") or {}).get("identity")
    return dict(discovery["rail_inventory"], identity=identity if isinstance(identity, dict) else {})


def rdma_withheld(hosts, hostvars):
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rdma_withheld: input must be a list of host names, got %s" % type(hosts).__name__)
    inventories = {}
    for host in hosts:
        inventory = rail_inventory(host_variables(hostvars, host).get("topotune_discovery"))
        if inventory is not None:
            inventories[host] = inventory
    return withheld(inventories)


class FilterModule:
    def filters(self):
        return {"rdma_withheld": rdma_withheld}
