# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: scale-out advice (the source article's decision flow) from a benchmark run and the topology."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_advice
author: topotune contributors (@topotune)
short_description: Scale-out advice from measured bus bandwidth, model size, step time and topology
description:
  - Walks the source article's decision flow kept as data in C(knowledge/advice.yml) - communication share
    of step time above 30% leads to checking xGMI hops, then cross-NUMA traffic above 40% leads to a
    network upgrade or topology rebuild, otherwise to tuning the environment; at or below 30% leads to adding
    GPUs - and ranks the article's cost/benefit table for the outcome.
  - Where collective traffic flows is modelled per GPU generation (C(fabrics) in C(knowledge/advice.yml)).
    On MI300X-class parts every GPU pair has a direct xGMI link (full mesh on an OAM baseboard), so
    intra-node collectives never count as cross-NUMA PCIe traffic, and a rebuild or re-cabling is never
    recommended on an OAM baseboard (the row is returned with C(applicable=false) and the reason).
  - A collective on a subset of a full-mesh node (2 or 4 of 8 MI300X GPUs, counted from the benchmark's
    ranks on one host or from O(gpus)) adds a warning, since AMD advises 1 or 8 GPUs per collective there.
    It is never a recommendation.
  - The communication share is O(comm_share) when given (measured), otherwise computed from the measured
    bus bandwidth, O(model_size_b) and O(step_time_ms) (gradients all-reduced once per step, no overlap),
    otherwise the article's own MI250 estimate from the model size.
  - The cross-NUMA share is O(cross_numa_share) when given, otherwise the fraction of GPU pairs of
    O(topology) (restricted to O(gpus)) on different NUMA nodes with no xGMI path between them (their
    traffic goes through the host over PCIe).
  - The thresholds and table are the article's figures (authors' 8x MI250 cluster, ROCm 5.7), not AMD's.
options:
  _input:
    description:
      - The registered result of M(topotune.instinct.rccl_bench), its C(result), or null. The busbw used is
        the run's C(peak_busbw) unless O(busbw_gbs) is given.
    type: raw
    required: true
  model_size_b:
    description: Model size in billions of parameters.
    type: float
  step_time_ms:
    description: Measured training step time in milliseconds.
    type: float
  comm_share:
    description: Measured communication share of step time, as a fraction (0.35 for 35%).
    type: float
  cross_numa_share:
    description: Measured cross-NUMA share of the communication, as a fraction.
    type: float
  busbw_gbs:
    description: Bus bandwidth in GB/s to use instead of the run's peak.
    type: float
  topology:
    description: The topology model (C(topotune_discovery.topology)).
    type: dict
  gpus:
    description: GPU indices of the allocation (default all GPUs of O(topology)).
    type: list
    elements: int
  bytes_per_param:
    description: Bytes per gradient element all-reduced (2 for fp16/bf16).
    type: int
    default: 2
  generation:
    description:
      - GPU generation (for example C(MI300X)) that selects the fabric model; default the generation of the
        benchmark's comparison, else the topology's device ids looked up in O(gpu_generations).
    type: str
  gpu_generations:
    description:
      - The knowledge file C(gpu_generations) (device ids to generations, aliases to names); default the collection's.
    type: dict
  collective_gpus:
    description:
      - GPUs per node taking part in the collective; default the benchmark's rank count when it ran on one
        host.
    type: int
  config:
    description: The advice data; default the collection's C(knowledge/advice.yml).
    type: dict
"""

EXAMPLES = r"""
- name: Advice from the benchmark, a 13B model and a 450 ms step
  ansible.builtin.debug:
    msg: "{{ __benchmark_rccl | topotune.instinct.cluster_advice(model_size_b=13, step_time_ms=450,
             topology=topotune_discovery.topology | default(none)) }}"
"""

RETURN = r"""
_value:
  description:
    - C(outcome) (V(add_compute), V(interconnect), V(tune_environment) or V(undetermined)),
      C(recommendation), C(path) (each decision with value, threshold, reason; the xGMI hop summary),
      C(inputs) (figures used and where they came from, and the C(fabric) model used), C(options) (the
      cost/benefit rows ranked, C(recommended) first; C(applicable=false) with C(not_applicable) for a row
      this node's fabric rules out), C(notes), C(warnings), C(source).
  type: dict
  sample: {outcome: add_compute, recommendation: "Communication is not the bottleneck: add compute (GPUs) first."}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.plugin_utils.bench.advice import AdviceError, advise
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge


def _run(bench):
    """The parsed run inside a registered module result, a bare result, or None."""
    if not isinstance(bench, dict):
        return None
    if isinstance(bench.get("result"), dict):
        return bench["result"]
    return bench if "rows" in bench else None


def _run_collective_gpus(run):
    """Ranks of the benchmark when it ran on one host (None when unknown or multi-node)."""
    hosts = run.get("hosts") or []
    if run.get("n_ranks") and len(hosts) == 1:
        return run["n_ranks"]
    return None


def cluster_advice(bench, model_size_b=None, step_time_ms=None, comm_share=None, cross_numa_share=None,
                   busbw_gbs=None, topology=None, gpus=None, bytes_per_param=2, config=None, generation=None,
                   gpu_generations=None, collective_gpus=None):
    run = _run(bench) or {}
    comparison = bench.get("comparison") if isinstance(bench, dict) and isinstance(bench.get("comparison"), dict) \
        else {}
    try:
        data = config if config is not None else load_knowledge("advice")
        # the generations name the node's (topology identity) and resolve a given alias to its name
        known = gpu_generations if gpu_generations is not None else load_knowledge("gpu_generations")
        generations = (known or {}).get("generations")
        return advise(data, comm_share=comm_share, model_size_b=model_size_b, step_time_ms=step_time_ms,
                      busbw_gbs=busbw_gbs if busbw_gbs is not None else run.get("peak_busbw"),
                      ranks=run.get("n_ranks"), cross_numa=cross_numa_share, topology=topology or None,
                      gpus=gpus, bytes_per_param=bytes_per_param,
                      generation=generation or comparison.get("generation"), generations=generations,
                      collective_gpus=collective_gpus if collective_gpus is not None else _run_collective_gpus(run))
    except (AdviceError, ValueError) as err:
        raise AnsibleFilterError("cluster_advice: %s" % err) from None


class FilterModule:
    def filters(self):
        return {"cluster_advice": cluster_advice}
