# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the kernel parameters AMD requires for a node's GPU generation, as kernel_tuning_cmdline entries."""

from __future__ import annotations

DOCUMENTATION = r"""
name: kernel_params
author: topotune contributors (@topotune)
short_description: Required kernel parameters of a node's GPU generation, as kernel_tuning_cmdline entries
description:
  - Returns the C(kernel_params.required) list of the node's GPU generation in C(knowledge/gpu_generations.yml)
    (the model's C(identity), which M(topotune.instinct.gpu_topology) adds at discovery) as C({name, value})
    entries, in the knowledge file's order.
  - A topology without known GPUs gets the parameters common to every AMD Instinct GPU
    (C(tables.kernel_params_common)); MI300A, for example, adds C(transparent_hugepage=always) and
    C(numa_balancing=disable).
options:
  _input:
    description: The topology model (M(topotune.instinct.gpu_topology) shape); empty for unknown.
    type: dict
    required: true
  generations:
    description: The content of C(knowledge/gpu_generations.yml) (C(lookup('topotune.instinct.knowledge', 'gpu_generations'))).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Show the parameters kernel_tuning would require on this node
  ansible.builtin.debug:
    msg: "{{ topotune_discovery.topology | topotune.instinct.kernel_params(lookup('topotune.instinct.knowledge', 'gpu_generations')) }}"
"""

RETURN = r"""
_value:
  description: >-
    C({name, value}) entries (C(value) omitted for a bare flag), e.g.
    C([{name: iommu, value: pt}, {name: pci, value: realloc=off}]).
  type: list
  elements: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import generation_entry, model_identity


def _entry(param):
    name, sep, value = str(param).partition("=")
    return {"name": name, "value": value} if sep else {"name": name}


def kernel_params(topology, generations):
    if not isinstance(generations, Mapping) or not isinstance(generations.get("generations"), list):
        raise AnsibleFilterError("kernel_params: generations must be knowledge/gpu_generations.yml "
                                 "(lookup('topotune.instinct.knowledge', 'gpu_generations')), got %s"
                                 % type(generations).__name__)
    gen = generation_entry(generations["generations"], model_identity(topology, generations["generations"]))
    params = ((gen or {}).get("kernel_params") or ((generations.get("tables") or {}).get("kernel_params_common")) or {})
    return [_entry(p) for p in params.get("required") or []]


class FilterModule:
    def filters(self):
        return {"kernel_params": kernel_params}
