# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: partition a node's GPUs into groups of k on the fastest xGMI links."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_groups
author: topotune contributors (@topotune)
short_description: Group a node's GPUs so collectives stay on the fastest xGMI links
description:
  - Partitions the GPUs of a topotune topology model into groups of O(size) maximizing intra-group link
    quality (xGMI link count or bandwidth, then xGMI over PCIe, fewer hops, lower weight), tie-broken by
    NUMA locality (fewest NUMA nodes per group), then by GPU index.
  - Exact (provably optimal) for up to 16 GPUs; partitioned nodes (CPX) are grouped hierarchically, keeping
    the partitions of one physical GPU and of one hive together.
  - Each group comes with an explanation of why these GPUs belong together.
options:
  _input:
    description: The topology model returned by M(topotune.instinct.gpu_topology) (C(topotune_discovery.topology)).
    type: dict
    required: true
  size:
    description: GPUs per group; must divide the GPU count.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Groups of 4
  ansible.builtin.debug:
    msg: "{{ (topotune_discovery.topology | topotune.instinct.gpu_groups(4)).groups }}"
"""

RETURN = r"""
_value:
  description:
    - C(size); C(groups) (lists of GPU indices as in the model); C(score) (summed link strength with its
      C(metric), xGMI pairs, hops, weight, NUMA spread); C(explanations) (one line per group); C(exact)
      (proven optimal); C(method) (exact, trivial, hierarchical, chunked); C(warnings).
  type: dict
  sample: {size: 2, groups: [[0, 1], [2, 3], [4, 5], [6, 7]], exact: true, method: exact}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.launch.grouping import GroupingError, group_gpus


def gpu_groups(topology, size):
    try:
        return group_gpus(topology, int(size))
    except (GroupingError, TypeError, ValueError) as err:
        raise AnsibleFilterError("gpu_groups(%r): %s" % (size, err)) from err


class FilterModule:
    def filters(self):
        return {"gpu_groups": gpu_groups}
