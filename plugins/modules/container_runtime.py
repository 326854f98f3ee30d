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
    M(topotune.instinct.gpu_device_access) unless O(device_facts) gives them.
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
options:
  device_facts:
    description:
      - The result of M(topotune.instinct.gpu_device_access) on the node; when omitted, that read-only module is run on
        the node with O(sysroot) and O(users), after the input check.
    type: dict
  profile:
    description: Container profile, a profile of C(knowledge/env_profiles.yml).
    type: str
    default: xgmi-training
  group_size:
    description: GPUs per launch group, an integer >= 0; 0 for one flag set with all GPUs.
    type: raw
    default: 0
  cdi:
    description: CDI through the AMD Container Toolkit, C(auto), C(true) (require amd-ctk) or C(false).
    type: raw
    default: auto
  seccomp_unconfined:
    description: Add C(--security-opt=seccomp=unconfined).
    type: bool
    default: false
  ipc_host:
    description: Add C(--ipc=host).
    type: bool
    default: true
  shm_size:
    description: C(--shm-size) value; empty omits it.
    type: str
    default: 64g
  env_file:
    description: Env file passed with C(--env-file); empty omits it.
    type: str
    default: ""
  launch_dir:
    description: launch_templates directory (group env files, read-only mounts); empty for none.
    type: raw
    default: ""
  launch_wrapper:
    description: Path of topotune-bind, mounted read-only with O(launch_dir).
    type: str
    default: ""
  numa_confine:
    description: C(--cpuset-cpus) and C(--cpuset-mems) of the NUMA nodes of the group's GPUs.
    type: bool
    default: true
  memory_binding:
    description: C(--cap-add=SYS_NICE), so C(numactl --membind) works in the container.
    type: bool
    default: true
  extra_caps:
    description: "Extra capabilities (C(SYS_RAWIO) and C(ALL) are refused; C(SYS_PTRACE) only in a profile with C(debug: true))."
    type: list
    elements: str
    default: []
  privileged:
    description: Declared only so that true fails with the reason; C(--privileged) is never emitted.
    type: bool
    default: false
  users:
    description: Users checked for membership of the groups owning the device nodes.
    type: list
    elements: str
    default: []
  manage_groups:
    description: The existing O(users) will be added to the device groups (they are checked as members of them).
    type: bool
    default: true
  sysroot:
    description: Root under which gpu_topology and gpu_device_access read; not C(/) means simulated device nodes (regular files) pass.
    type: str
    default: /
  output_dir:
    description: Directory of the flag files and the compose fragment.
    type: raw
    default: /etc/topotune/container
  strict:
    description: Fail when a device or user check fails.
    type: bool
    default: true
  daemon_json_manage:
    description: The owned O(daemon_json_settings) are merged into O(daemon_json_path) (recorded as managed keys).
    type: bool
    default: false
  daemon_json_path:
    description: Docker daemon configuration file.
    type: raw
    default: /etc/docker/daemon.json
  daemon_json_settings:
    description: Keys topotune owns in daemon.json.
    type: dict
    default: {}
  docker_restart_ok:
    description: dockerd may be restarted after daemon.json changed (C(docker_restart) is true when it also exists).
    type: bool
    default: false
  topology:
    description: The role's topology model (C(container_runtime_topology)); empty for none.
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
