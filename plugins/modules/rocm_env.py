#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name, in the controller process.

DOCUMENTATION = r"""
module: rocm_env
author: topotune contributors (@topotune)
short_description: Plan a validated ROCm environment profile for one node (the rocm_env role's decision)
description:
  - >-
    Checks the input, merges the named profile of C(knowledge/env_profiles.yml) with O(overrides), validates every
    variable against C(knowledge/env_vars.yml) for the node's GPUs, ROCm version, GPU firmware and fabric, and returns
    the findings, the text of C(<env_dir>/<profile>.env) and C(/etc/profile.d/topotune-rocm.sh) as
    M(topotune.instinct.managed_files) entries, and what the role manages. It writes nothing.
  - >-
    The node's model is the first of O(topology), O(inventory_topology) and O(discovery) (the order of the
    C(topotune.instinct.node_topology) filter), its ROCm version O(rocm_version), else the one in O(discovery); only
    when one of them is missing is the read-only M(topotune.instinct.gpu_topology) module run on the node. When only
    the version was missing, a node whose topology cannot be read has an unknown version instead of failing.
  - >-
    Fails, before anything is read from the node, naming every wrong input with its value and the fix; and, with
    O(fail_on_refusal), naming every refused variable with the reason and the other findings.
  - The decision is C(plugins/plugin_utils/env/rules.py) C(role_plan); the files start with the play's
    C(ansible_managed) as a comment (default C(Ansible managed)).
version_added: "0.3.0"
# BEGIN generated options: plugins/plugin_utils/env/rules.py (scripts/gen-options)
options:
  profile:
    description: Named profile of C(knowledge/env_profiles.yml) (C(xgmi-training), C(rdma-training), C(inference),
      C(debug)); its data (C(fabric), C(debug)) decides how it behaves.
    type: str
    required: true
  overrides:
    description: >-
      Extra or changed variables C({NAME: "value"}); C(null) removes a profile variable. Every one is validated
      (C(knowledge/env_vars.yml)): harmful ones are refused, outdated or misapplied ones warned about.
    type: dict
    default: {}
  allow:
    description: >-
      Per-variable escape hatch C({NAME: "why you need it"}) for rules marked allowable, each reason a non-empty string:
      a refusal becomes a warning, a warning a note. Values that would break a shell or env file are never allowed.
    type: dict
    default: {}
  rocm_version:
    description: ROCm version of the node (C(6.2.1)); empty takes the one of the play's C(topotune_discovery), else the
      one M(topotune.instinct.gpu_topology) reads from C(/opt/rocm/.info/version) under O(sysroot); when that is missing
      too, the version-gated drops (C(HIP_FORCE_DEV_KERNARG) >= 6.2, MSCCL knobs >= 7.13) are skipped with a note.
    type: str
    default: ""
  fabric:
    description: >-
      Inter-node fabric, C(rdma), C(socket) or C(none); empty takes the profile's C(fabric) data
      (C(knowledge/env_profiles.yml); C(rdma-training): C(rdma)).
    type: str
    default: ""
  topology:
    description: The role's topology model (the C(gpu_topology) shape); empty uses C(topotune_topology) (a model the
      inventory gives), else the play's C(topotune_discovery) (C(playbooks/topology.yml)), else runs
      M(topotune.instinct.gpu_topology). Rules read its GPUs' gfx targets, its links (C(HSA_FORCE_FINE_GRAIN_PCIE) is
      warned about only where every GPU pair has a direct xGMI link) and the lowest MEC firmware version
      (C(HSA_NO_SCRATCH_RECLAIM)).
    type: dict
    default: {}
  inventory_topology:
    description: C(topotune_topology), a model the inventory gives; empty for none.
    type: dict
    default: {}
  discovery:
    description: The play's C(topotune_discovery) (a gpu_topology result); empty for none.
    type: dict
    default: {}
  sysroot:
    description: Root under which M(topotune.instinct.gpu_topology) reads sysfs and C(/opt/rocm/.info/version) (C(/) on
      a real node, C(/sim) on a simulated one).
    type: str
    default: /
  profile_d:
    description: Write C(/etc/profile.d/topotune-rocm.sh) for login shells (false plans its removal).
    type: bool
    default: true
  env_dir:
    description: Directory of the C(KEY=VALUE) env file (for C(docker --env-file) and systemd C(EnvironmentFile=)), an
      absolute path of C([A-Za-z0-9_./-]).
    type: raw
    default: /etc/topotune/env
  fail_on_refusal:
    description: Fail when a variable is refused (false reports the refusals and renders the rest).
    type: bool
    default: true
# END generated options
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
    details: It writes nothing; the gpu_topology read runs in check mode too.
  diff_mode:
    support: none
    details: The M(topotune.instinct.managed_files) call that writes the files shows the diff.
"""

EXAMPLES = r"""
- name: Plan the xgmi-training profile for the node
  topotune.instinct.rocm_env:
    profile: xgmi-training
    overrides: {NCCL_DEBUG: INFO}
    discovery: "{{ topotune_discovery }}"
  register: plan

- name: Write the two files
  topotune.instinct.managed_files:
    files: "{{ plan.files }}"
"""

RETURN = r"""
report:
  description: One line per finding (REFUSED, WARNING, DROPPED, NOTE), with its reason and source.
  returned: success
  type: list
  elements: str
files:
  description: M(topotune.instinct.managed_files) entries (path, content, mode; the profile's state and its C(sh -n) check).
  returned: success
  type: list
  elements: dict
managed:
  description: What the role manages, for the node's manifest (C(owner), C(files)).
  returned: success
  type: dict
  sample: {owner: rocm_env, files: [/etc/topotune/env/xgmi-training.env, /etc/profile.d/topotune-rocm.sh]}
resolved:
  description: >-
    The resolution (filter C(topotune.instinct.rocm_env_resolve)'s result): rendered, shell_lines, env_lines,
    refusals, warnings, drops, notes, profile, fabric and context (the node facts the rules saw).
  returned: success
  type: dict
"""
