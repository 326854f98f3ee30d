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
    owning the devices, and the profile's options (C(--ipc=host), C(--shm-size), RDMA C(/dev/infiniband),
    C(--ulimit memlock=-1:-1), C(--network=host); C(SYS_PTRACE) only for the debug profile).
  - Never emits C(--privileged), C(SYS_RAWIO) or C(ALL); asking for them fails with the reason (no AMD
    document requires SYS_RAWIO).
  - Also returns structured checks of the device nodes, the users' groups, the Docker engine and amd-ctk.
options:
  _input:
    description: The C(topotune_topology) fact.
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
    description: profile, cdi, seccomp_unconfined, ipc_host, shm_size, env_file, extra_caps, privileged, users, simulated.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Compute the container flags
  ansible.builtin.set_fact:
    __container_runtime_plan: >-
      {{ topotune_topology | topotune.instinct.container_flags(groups=[], device_facts=__access,
         options={'profile': 'xgmi-training', 'ipc_host': true}) }}
"""

RETURN = r"""
_value:
  description: groups ([{name, gpus, render_minors, flags, compose}]), compose ({services}), checks, warnings, cdi, gids.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.lookup.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.module_utils.container_flags import FlagError, access_checks, plan


def container_flags(topology, groups=None, device_facts=None, options=None):
    if not isinstance(topology, dict):
        raise AnsibleFilterError("container_flags: input must be the topotune_topology dict, got %s" % type(topology).__name__)
    options = dict(options or {})
    try:
        result = plan(topology, groups or [], device_facts or {}, options, load_knowledge("container_flags"))
    except (FlagError, ValueError) as err:
        raise AnsibleFilterError(str(err)) from err
    result["checks"] = access_checks(device_facts or {}, options.get("users") or [], simulated=bool(options.get("simulated")))
    return result


class FilterModule:
    def filters(self):
        return {"container_flags": container_flags}
