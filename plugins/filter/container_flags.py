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
# roles/container_runtime/vars/main.yml: a lazy role variable, computed where the role's tasks use it
__container_runtime_plan: >-
  {{ topotune_discovery.topology | topotune.instinct.container_flags(groups=[], device_facts=__container_runtime_access,
     options={'profile': 'xgmi-training', 'ipc_host': true, 'users': ['alice'], 'manage_groups': true}) }}
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

from ansible_collections.topotune.instinct.plugins.plugin_utils.container_flags import FlagError, access_checks, plan
from ansible_collections.topotune.instinct.plugins.plugin_utils.knowledge import load_knowledge

_KNOWLEDGE = {}


def _knowledge(name):
    """load_knowledge() once per process: the role keeps the plan as a lazy variable, templated again by each task
    that uses it. The knowledge files do not change during a run; nothing here mutates them."""
    if name not in _KNOWLEDGE:
        _KNOWLEDGE[name] = load_knowledge(name)
    return _KNOWLEDGE[name]


def device_groups(device_facts):
    """Names of the groups owning the existing /dev/kfd and render nodes, group root excluded, sorted."""
    nodes = [device_facts.get("kfd") or {}] + list(device_facts.get("render_nodes") or [])
    return sorted({n["group"] for n in nodes if n.get("exists") and isinstance(n.get("group"), str) and n["group"] != "root"})


def with_memberships(device_facts, users, groups):
    """device_facts with ``users`` (those that exist) also in ``groups``: what adding them with append gives."""
    facts = dict(device_facts)
    facts["users"] = dict(facts.get("users") or {})
    for user in users:
        info = facts["users"][user]
        facts["users"][user] = dict(info, groups=sorted(set(info.get("groups") or []) | set(groups)))
    return facts


def container_flags(topology, groups=None, device_facts=None, options=None):
    if not isinstance(topology, dict):
        raise AnsibleFilterError("container_flags: input must be the topology model (a dict, topotune_discovery.topology), got %s"
                                 % type(topology).__name__)
    options = dict(options or {})
    facts = dict(device_facts or {})
    users = [str(u) for u in options.get("users") or []]
    try:
        result = plan(topology, groups or [], facts, options, _knowledge("container_flags"))
    except (FlagError, ValueError) as err:
        raise AnsibleFilterError(str(err)) from err
    result["device_groups"] = device_groups(facts)
    result["member_users"] = [u for u in users if ((facts.get("users") or {}).get(u) or {}).get("exists")]
    if options.get("manage_groups") and result["device_groups"]:
        facts = with_memberships(facts, result["member_users"], result["device_groups"])
    result["checks"] = access_checks(facts, users, simulated=bool(options.get("simulated")))
    result["report"] = ["%(status)s | %(id)s | %(observed)s | %(remediation)s" % c for c in result["checks"]] + result["warnings"]
    return result


class FilterModule:
    def filters(self):
        return {"container_flags": container_flags}
