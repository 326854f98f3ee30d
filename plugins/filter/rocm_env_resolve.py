# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter resolving a ROCm environment profile plus user overrides against knowledge/env_vars.yml."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rocm_env_resolve
author: topotune contributors (@topotune)
short_description: Resolve and validate a ROCm environment profile for one node
description:
  - Merges the named profile of C(knowledge/env_profiles.yml) with O(overrides), validates every variable
    against C(knowledge/env_vars.yml) for the node's GPUs (from O(topology)), ROCm version and fabric, and
    returns what to render plus every refusal, warning, drop and note with its reason and source.
  - Values that would break a shell profile or an env file (newline, NUL, C($), backtick, quotes, blanks,
    shell operators) are refused naming the variable.
options:
  _input:
    description:
      - Profile name (C(xgmi-training), C(rdma-training), C(inference), C(debug)), or C(none) for overrides only.
    type: str
    required: true
  overrides:
    description:
      - 'User variables C({NAME: value}); C(null) removes a profile variable.'
    type: dict
    default: {}
  allow:
    description:
      - 'Per-variable escape hatch C({NAME: written reason}) for rules marked allowable.'
    type: dict
    default: {}
  topology:
    description:
      - The topology model (C(topotune_discovery.topology)); omit when unknown.
      - Read from it are the GPUs' gfx targets, whether every GPU pair has a direct xGMI link (C(links[]) type and
        hops) and the lowest MEC firmware version (C(gpus[].firmware.mec)); the rules of
        C(HSA_FORCE_FINE_GRAIN_PCIE) and C(HSA_NO_SCRATCH_RECLAIM) depend on the last two.
    type: dict
  rocm_version:
    description: ROCm version of the node (C(6.2.1)); empty when unknown (version-gated drops are skipped).
    type: str
  fabric:
    description: Inter-node fabric (C(rdma), C(socket), C(none)); defaults to the profile's C(fabric) data.
    type: str
"""

EXAMPLES = r"""
# What the xgmi-training profile would render on a node, and why (the rocm_env role resolves it, with its files,
# in its own action: topotune.instinct.rocm_env)
- name: Show the findings
  ansible.builtin.debug:
    msg: >-
      {{ ('xgmi-training' | topotune.instinct.rocm_env_resolve(overrides={'NCCL_DEBUG': 'INFO'},
          topology=topotune_discovery.topology, rocm_version='6.2.1')).report }}
"""

RETURN = r"""
_value:
  description: >-
    rendered ({NAME: value}), shell_lines, env_lines, refusals, warnings, drops, notes (each
    {variable, value, rule, reason, source, origin}), report (one line per finding), profile, fabric, and
    context (gfx, rocm, xgmi, all_peers_xgmi, mec_fw, fabric, profile, debug: the node facts the rules saw, and
    the profile's data; None when unknown).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env import rules as env_rules
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.rules import context_from_topology, format_report, resolve

_KNOWLEDGE = {}


def _knowledge(name):
    """load_knowledge() once per process. The knowledge files do not change during a run; nothing here mutates them."""
    if name not in _KNOWLEDGE:
        _KNOWLEDGE[name] = load_knowledge(name)
    return _KNOWLEDGE[name]


def native_gfx_targets(env_knowledge):
    """gfx targets of knowledge/env_vars.yml native_gfx plus those of knowledge/gpu_generations.yml."""
    try:
        generations = _knowledge("gpu_generations") or {}
    except ValueError:
        generations = {}
    return env_rules.native_gfx_targets(env_knowledge, generations)


def rocm_env_resolve(profile, overrides=None, allow=None, topology=None, rocm_version=None, fabric=None):
    for label, value in (("overrides", overrides), ("allow", allow)):
        if value is not None and not isinstance(value, dict):
            raise AnsibleFilterError("rocm_env_resolve: %s must be a dict of NAME: value, got %s" % (label, type(value).__name__))
    try:
        knowledge = _knowledge("env_vars")
        profiles = _knowledge("env_profiles")
        name = None if profile in (None, "", "none") else str(profile)
        context = context_from_topology(topology, rocm_version or None, fabric or None, name, native_gfx_targets(knowledge))
        result = resolve(name, dict(overrides or {}), dict(allow or {}), context, knowledge, profiles)
    except ValueError as err:
        raise AnsibleFilterError("rocm_env_resolve: %s" % err) from err
    result["report"] = format_report(result)
    return result


class FilterModule:
    def filters(self):
        return {"rocm_env_resolve": rocm_env_resolve}
