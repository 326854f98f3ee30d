# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter computing Docker flags, a compose fragment and access checks for ROCm containers."""

from __future__ import annotations

DOCUMENTATION = r"""
name: container_flags
author: topotune contributors (@topotune)
short_description: Docker flags for ROCm containers from the topology, launch groups and device facts
description:
  - Per launch group, the C(--device) flags for C(/dev/kfd) and the group's render nodes (or CDI
    C(amd.com/gpu=<index>) when the AMD Container Toolkit is present), C(--group-add) by GID for the groups
    owning the devices, and the options (C(--ipc=host), C(--shm-size)); what the profile adds comes from its data
    in C(knowledge/env_profiles.yml) (C(fabric) C(rdma) adds C(/dev/infiniband), C(--ulimit memlock=-1:-1),
    C(--network=host); C(debug) C(true) adds C(SYS_PTRACE), refused elsewhere), as C(knowledge/container_flags.yml)
    C(profile) says.
  - Never emits C(--privileged), C(SYS_RAWIO) or C(ALL); asking for them fails with the reason (no AMD
    document requires SYS_RAWIO).
  - Also returns structured checks of the device nodes, the users' groups, the Docker engine and amd-ctk, and
    the groups owning the device nodes with the users that exist (what C(manage_groups) adds them to).
options:
  _input:
    description: The topology model (C(topotune_discovery.topology)).
    type: dict
    required: true
  groups:
    description: Launch groups as lists of GPU indices (C(gpu_groups(k).groups)); empty for one group of all GPUs.
    type: list
    elements: list
    default: []
  device_facts:
    description: The result of C(topotune.instinct.gpu_device_access).
    type: dict
    default: {}
  options:
    description:
      - profile, cdi, seccomp_unconfined, ipc_host, shm_size, env_file, extra_caps, privileged, users, simulated,
        manage_groups.
      - With C(manage_groups) true the existing O(options.users) are checked as members of the groups owning the
        device nodes, since the role adds them to those groups (C(append)) before anything else uses them.
    type: dict
    default: {}
"""

EXAMPLES = r"""
# The flags one container of all the node's GPUs would get (the container_runtime role computes them, with its
# files, in its own action: topotune.instinct.container_runtime)
- name: Read the device nodes
  topotune.instinct.gpu_device_access:
    users: [alice]
  register: devices

- name: Show the flags
  ansible.builtin.debug:
    msg: >-
      {{ (topotune_discovery.topology | topotune.instinct.container_flags(groups=[], device_facts=devices,
          options={'profile': 'xgmi-training', 'ipc_host': true, 'users': ['alice'], 'manage_groups': true})).groups[0].flags }}
"""

RETURN = r"""
_value:
  description: >-
    groups ([{name, gpus, render_minors, flags, compose}]), compose ({services}), checks, warnings, cdi, gids,
    device_groups (names of the groups owning the existing device nodes, root excluded), member_users (the
    options.users that exist on the node), report (one line per check, "status | id | observed | remediation",
    then the warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.container_plan import FlagError, access, plan

_KNOWLEDGE = {}


def _knowledge(name):
    """load_knowledge() once per process. The knowledge files do not change during a run; nothing here mutates them."""
    if name not in _KNOWLEDGE:
        _KNOWLEDGE[name] = load_knowledge(name)
    return _KNOWLEDGE[name]


def container_flags(topology, groups=None, device_facts=None, options=None):
    if not isinstance(topology, dict):
        raise AnsibleFilterError("container_flags: input must be the topology model (a dict, topotune_discovery.topology), got %s"
                                 % type(topology).__name__)
    options = dict(options or {})
    facts = dict(device_facts or {})
    try:
        result = plan(topology, groups or [], facts, options, _knowledge("container_flags"), _knowledge("env_profiles"))
    except (FlagError, ValueError) as err:
        raise AnsibleFilterError(str(err)) from err
    result.update(access(facts, options.get("users"), bool(options.get("manage_groups")), bool(options.get("simulated"))))
    result["report"] = result["report"] + result["warnings"]
    return result


class FilterModule:
    def filters(self):
        return {"container_flags": container_flags}
