#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name, in the controller process.

DOCUMENTATION = r"""
module: container_runtime
author: topotune contributors (@topotune)
short_description: Plan the Docker flags and device checks of ROCm containers for one node (the container_runtime role's decision)
description:
  - >-
    Checks the input, forms the launch groups (C(topotune.instinct.gpu_groups) of O(group_size); one group of all
    GPUs for 0), computes each group's C(docker run) flags and the compose fragment from the topology, the device
    facts and C(knowledge/container_flags.yml) (never C(--privileged), C(SYS_RAWIO) or C(ALL); what the profile adds
    comes from its data in C(knowledge/env_profiles.yml)), checks the device nodes, the users and the tooling, and
    returns the flag files' and the fragment's text as M(topotune.instinct.managed_files) entries, the users to add to
    the device groups and what the role manages. It writes nothing; it reads the device nodes with
    M(topotune.instinct.gpu_device_access).
  - >-
    The node's model is the first of O(topology), O(inventory_topology) and O(discovery) (the order of the
    C(topotune.instinct.node_topology) filter); only when none has one is the read-only
    M(topotune.instinct.gpu_topology) module run on the node.
  - >-
    Fails, before anything is read from the node, naming every wrong input with its value and the fix; and, with
    O(strict), naming every failed check with its remediation.
  - The decision is C(plugins/plugin_utils/env/container_plan.py) C(role_plan); the files start with the play's
    C(ansible_managed) as a comment (default C(Ansible managed)).
version_added: "0.3.0"
# BEGIN generated options: plugins/plugin_utils/env/container_plan.py (scripts/gen-options)
options:
  profile:
    description: >-
      Container profile, a profile of C(knowledge/env_profiles.yml) (C(xgmi-training), C(rdma-training), C(inference),
      C(debug)). What it adds comes from its data: C(fabric) C(rdma) (C(rdma-training)) adds C(/dev/infiniband), memlock
      C(-1) and the host network, C(debug) C(true) (C(debug)) adds C(SYS_PTRACE).
    type: str
    default: xgmi-training
  group_size:
    description: >-
      GPUs per launch group, an integer >= 0: C(0) gives one flag set with all GPUs (C(all.flags)), C(k > 0) the groups
      of C(topotune.instinct.gpu_groups(k)), one C(group-<i>.flags) each with only that group's render nodes.
    type: raw
    default: 0
  topology:
    description: The role's topology model; empty uses C(topotune_topology) (a model the inventory gives), else the
      play's C(topotune_discovery) (C(playbooks/topology.yml)), else runs M(topotune.instinct.gpu_topology).
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
    description: >-
      Root under which M(topotune.instinct.gpu_topology) and M(topotune.instinct.gpu_device_access) read (C(/dev) among
      them): C(/) on a real node; not C(/) means simulated device nodes (regular files) pass.
    type: str
    default: /
  users:
    description: Users who run GPU containers, checked for membership of the groups owning C(/dev/kfd) and the render
      nodes.
    type: list
    elements: str
    default: []
  manage_groups:
    description: >-
      Add the existing O(users) to the groups owning C(/dev/kfd) and the render nodes (append: their other groups stay);
      the checks count them as members.
    type: bool
    default: true
  seccomp_unconfined:
    description: >-
      Add C(--security-opt=seccomp=unconfined) (AMD: "optional ... recommended for containers running in HPC
      environments").
    type: bool
    default: false
  ipc_host:
    description: Add C(--ipc=host), for multi-process workers sharing memory.
    type: bool
    default: true
  shm_size:
    description: The C(--shm-size) value; empty omits it.
    type: str
    default: 64g
  cdi:
    description: >-
      CDI (C(--device amd.com/gpu=N)) through the AMD Container Toolkit: C(auto) (when C(amd-ctk) is installed), C(true)
      (require it) or C(false).
    type: raw
    default: auto
  env_file:
    description: Env file passed with C(--env-file) (the one role C(topotune.instinct.rocm_env) writes); empty omits it.
    type: str
    default: ""
  launch_dir:
    description: >-
      The launch directory of role C(topotune.instinct.launch_templates): each group's container gets its env file
      (C(--env-file), container-local GPU indices; C(launch_templates_sizes) must include O(group_size)) and, read-only,
      the wrapper and its table; empty gives none of them.
    type: raw
    default: ""
  launch_wrapper:
    description: Path of C(topotune-bind) on the node, mounted read-only into the containers with O(launch_dir).
    type: str
    default: ""
  numa_confine:
    description: >-
      C(--cpuset-cpus) and C(--cpuset-mems) of the NUMA nodes of the group's GPUs: the container runs and allocates
      there.
    type: bool
    default: true
  memory_binding:
    description: >-
      C(--cap-add=SYS_NICE), so C(numactl --membind) works in the container: Docker's default seccomp profile allows
      C(set_mempolicy) and C(mbind) only with it (the cpuset bounds what it can reach; the role's README says why
      nothing wider).
    type: bool
    default: true
  extra_caps:
    description: Extra capabilities; C(SYS_RAWIO) and C(ALL) are refused with the reason, C(SYS_PTRACE) is allowed only
      in a profile whose data says C(debug) C(true).
    type: list
    elements: str
    default: []
  privileged:
    description: "Declared only so that C(true) fails with the reason: topotune never emits C(--privileged)."
    type: bool
    default: false
  output_dir:
    description: Directory of the flag files and the compose fragment.
    type: raw
    default: /etc/topotune/container
  strict:
    description: Fail when a device or user check fails (false reports only).
    type: bool
    default: true
  daemon_json_manage:
    description: Merge O(daemon_json_settings) into O(daemon_json_path), keeping every other key (backup first); the
      owned keys are recorded as managed.
    type: bool
    default: false
  daemon_json_path:
    description: Docker daemon configuration file.
    type: raw
    default: /etc/docker/daemon.json
  daemon_json_settings:
    description: Keys topotune owns in C(daemon.json).
    type: dict
    default: {}
  docker_restart_ok:
    description: Restart dockerd after C(daemon.json) changed (running containers stop unless C(live-restore) is set);
      the plan's C(docker_restart) is true when it also exists.
    type: bool
    default: false
# END generated options
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
    details: It writes nothing; the gpu_topology and gpu_device_access reads run in check mode too.
  diff_mode:
    support: none
    details: The M(topotune.instinct.managed_files) call that writes the files shows the diff.
"""

EXAMPLES = r"""
- name: Plan the flags of 4-GPU launch groups
  topotune.instinct.container_runtime:
    group_size: 4
    users: [trainer]
    discovery: "{{ topotune_discovery }}"
  register: plan

- name: Write the flag files and the compose fragment
  topotune.instinct.managed_files:
    files: "{{ plan.files }}"
    prune: "{{ plan.prune }}"
"""

RETURN = r"""
groups:
  description: Per launch group C({name, gpus, render_minors, flags, compose}).
  returned: success
  type: list
  elements: dict
compose:
  description: The compose fragment, C({services}).
  returned: success
  type: dict
checks:
  description: Structured checks C({id, status, observed, expected, remediation, source}) of the device nodes, users, docker and amd-ctk.
  returned: success
  type: list
  elements: dict
report:
  description: One line per check, C(status | id | observed | remediation), then the flag warnings.
  returned: success
  type: list
  elements: str
flag_warnings:
  description: Why a device node's group is not added (e.g. owned by group root).
  returned: success
  type: list
  elements: str
files:
  description: M(topotune.instinct.managed_files) entries, one flag file per group and the compose fragment.
  returned: success
  type: list
  elements: dict
prune:
  description: M(topotune.instinct.managed_files) C(prune) entries (stale C(*.flags) of groups that no longer exist).
  returned: success
  type: list
  elements: dict
device_groups:
  description: Names of the groups owning the existing device nodes, root excluded.
  returned: success
  type: list
  elements: str
member_users:
  description: The O(users) that exist on the node.
  returned: success
  type: list
  elements: str
users_to_add:
  description: The users to add to the groups of RV(device_groups) (with O(manage_groups), when a group owns the device nodes).
  returned: success
  type: list
  elements: str
docker_restart:
  description: dockerd may be restarted after a daemon.json change (O(docker_restart_ok) and an engine on the node).
  returned: success
  type: bool
managed:
  description: What the role manages, for the node's manifest (C(owner), C(files), C(json_keys), C(groups)).
  returned: success
  type: dict
cdi:
  description: CDI devices are used.
  returned: success
  type: bool
gids:
  description: GIDs added with C(--group-add).
  returned: success
  type: list
  elements: int
profile:
  description: The profile the flags are for.
  returned: success
  type: str
"""
