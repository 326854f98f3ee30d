#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a node's topology-aware launch configuration (binding wrapper, env files, gres.conf) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: launch_templates
author: topotune contributors (@topotune)
short_description: Write xGMI/NUMA-aware launch files for a GPU node in one call
description:
  - Groups the node's GPUs for every size in O(sizes) so collectives stay on the fastest xGMI links
    (exact optimum up to 16 GPUs, hierarchical for partitioned CPX nodes), works out each GPU's CPU set (its NUMA
    node, or its L3 domain with O(cpu_binding=l3)), then writes, atomically and only where the content, mode or
    owner differs
  - the table C(<dest>/bind.table) read by the binding wrapper, and the wrapper itself when O(wrapper_content)
    holds it (the role passes its static C(files/topotune-bind)). The wrapper runs each local rank on its GPU
    within the GPUs Slurm or the container gives the process, and under C(numactl --physcpubind) of the GPU's
    CPUs intersected with the CPUs the process may use, plus C(--membind) of its NUMA node;
  - one C(KEY=VALUE) env file per group (C(<dest>/size<K>-group<G>.env)) for a container given only that
    group's devices (visible-device indices as ROCm numbers them inside it);
  - a Slurm C(gres.conf) fragment (logical core indices in C(Cores=), C(Type=), C(Links=) from the xGMI model,
    C(Flags=amd_gpu_env), the socket-alignment parameter and the matching node line); a readable C(<dest>/README).
  - Env files of sizes no longer configured are removed. GPUs whose NUMA node is unknown (C(numa_node -1))
    are left unbound with a warning rather than bound to a guessed node. Sizes that do not divide the GPU
    count are skipped with a warning.
options:
  topology:
    description:
      - The topology model returned by M(topotune.instinct.gpu_topology) (C(topotune_discovery.topology) after
        C(playbooks/topology.yml)). Its C(cpu_topology) gives Slurm core indices and L3 domains.
      - Empty, the node's model is discovered in the same task (M(topotune.instinct.gpu_topology) under O(sysroot),
        C(/) when that is empty), after every other option is checked.
    type: dict
    default: {}
  sysroot:
    description:
      - Root of the node's sysfs, read for the RDMA NICs and the PCIe switch each sits below
        (C(sys/class/infiniband/*/device)). When every GPU has exactly one NIC below its own PCIe switch or root
        port, each group's env file gets C(NCCL_IB_HCA) = C(=) and its GPUs' NICs in GPU order with their ACTIVE
        ports (RCCL reads it), and C(NCCL_IB_GID_INDEX) = the index of those ports' RoCE v2 GID when they agree;
        otherwise none is written and the README says why. A value in O(extra_env) always wins.
      - Set to an empty string to skip the NIC lookup.
    type: path
    default: /
  sizes:
    description: Group sizes to generate (each should divide the GPU count; 1, 2, 4, 8 are typical).
    type: list
    elements: int
    default: [2, 4, 8]
  default_size:
    description: Size the wrapper uses without C(--size)/C(TOPOTUNE_GROUP_SIZE); default the smallest size.
    type: int
  dest:
    description: Directory for the table, the env files, C(gres.conf) and C(README).
    type: path
    default: /etc/topotune/launch
  wrapper_path:
    description: Path of the binding wrapper.
    type: path
    default: /usr/local/bin/topotune-bind
  wrapper_content:
    description:
      - Content of the binding wrapper (the role's C(files/topotune-bind)); its default table path is pointed at
        O(dest). Without it the wrapper is not written (only its table and the other files).
    type: str
  dev_dir:
    description:
      - Directory holding C(dri/renderD*) on the node, used for the C(File=) of gres.conf and where the wrapper tests
        which GPUs the process can open.
      - Default C(<sysroot>/dev), so C(/dev) on a real node and the profile's C(dev) on a simulated one.
    type: path
  visible_devices_env:
    description:
      - Variable that restricts the GPUs a rank sees. AMD documents C(ROCR_VISIBLE_DEVICES) for Linux;
        C(HIP_VISIBLE_DEVICES) indexes are applied after it, so only one is set (the wrapper unsets the others,
        Slurm's C(CUDA_VISIBLE_DEVICES) and C(GPU_DEVICE_ORDINAL) included). C(none) sets and unsets nothing.
    type: str
    choices: [ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, none]
    default: ROCR_VISIBLE_DEVICES
  visible_devices_scope:
    description:
      - C(group) makes all GPUs of the rank's group (or step) visible in group order (the application selects
        device C(LOCAL_RANK); peers stay visible for RCCL IPC); C(rank) makes only the rank's GPU visible (device 0).
    type: str
    choices: [group, rank]
    default: group
  cpu_binding:
    description:
      - C(numa) binds CPUs and memory to the GPU's NUMA node; C(l3) binds CPUs to the GPU's L3 domain(s) (the
        NUMA node's L3 domains shared out among its GPUs in index order; O(cpu_map) overrides), memory to the
        NUMA node; C(none) only sets the environment.
    type: str
    choices: [numa, l3, none]
    default: numa
  cpu_map:
    description: GPU index to cpulist, overriding the derived L3 set of that GPU with O(cpu_binding=l3).
    type: dict
    default: {}
  reserved_cpus:
    description:
      - CPUs no rank is bound to (system or low-noise cores, e.g. Frontier's first core of every L3 region).
        Slurm core specialization needs nothing here, since the wrapper keeps within the job's CPUs anyway.
    type: str
    default: ""
  membind:
    description: Also bind memory (C(--membind)) to the GPU's NUMA node.
    type: bool
    default: true
  extra_env:
    description: Extra variables added to the wrapper's table and every env file (values limited to C([A-Za-z0-9_,.:/=+@%-])).
    type: dict
    default: {}
  gres:
    description: Write the Slurm C(gres.conf) fragment C(<dest>/gres.conf).
    type: bool
    default: true
  gres_type:
    description:
      - Slurm GRES C(Type=) for every GPU line; C(auto) is the node's GPU generation in lower case (C(mi300x), from the
        model's C(identity)), empty for none.
    type: str
    default: ""
  node_name:
    description:
      - Slurm node name of the gres.conf lines (C(NodeName=<name> AutoDetect=off ...); slurmd skips lines of other
        names) and of the C(slurm.conf) line in its comments; default the short host name.
    type: str
  header:
    description: First comment line of every file (the role passes C(ansible_managed)).
    type: str
    default: "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten."
notes:
  - Every option is checked before the node is read or written (discovery included), the message naming the option
    and the variable of role C(topotune.instinct.launch_templates) it comes from.
  - Every file is staged before the first is renamed into place, each by one rename with its mode and owner already
    set, so a run interrupted at any point leaves each file old or new. The next run completes the set and first
    removes the temp files (C(.topotune-*.tmp)) that an interrupted run left in the directories it writes.
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
seealso:
  - module: topotune.instinct.gpu_topology
"""

EXAMPLES = r"""
- name: Write the launch files from the gathered topology
  topotune.instinct.launch_templates:
    topology: "{{ topotune_discovery.topology }}"
    wrapper_content: "{{ lookup('ansible.builtin.file', 'topotune-bind') }}"
    sizes: [2, 4, 8]
    gres_type: mi300x

- name: Frontier-style L3 binding, first core of every L3 region kept for the system
  topotune.instinct.launch_templates:
    topology: "{{ topotune_discovery.topology }}"
    cpu_binding: l3
    reserved_cpus: "0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120"
"""

RETURN = r"""
files:
  description: Every file managed by this call.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/topotune-bind, /etc/topotune/launch/bind.table, /etc/topotune/launch/size4-group0.env]
changed_files:
  description: Files written (or, in check mode, that would be written).
  returned: always
  type: list
  elements: str
removed_files:
  description: Stale env files removed (or that would be).
  returned: always
  type: list
  elements: str
plan:
  description:
    - What was applied, the record the HTML report shows. Groups per size (with score, explanations, rank order,
      whole-group recipes), per-GPU bindings (C(cpus), C(numa_node), C(l3), nominal C(numactl)), the options
      that shaped them, and the gres.conf summary (C(socket_parameter), C(node_line), per-GPU C(cores), C(links)).
  returned: always
  type: dict
  sample: {default_size: 2, sizes: [{size: 2, groups: [[0, 1], [2, 3]], exact: true}], bindings: [], gres: {}}
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.checks.pcie_health import launch_rdma_options
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import commit_all, diff_entry, differs, read_text, stage_all
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import join
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import (
    CPU_BINDINGS,
    ENV_FILE,
    SCOPES,
    VISIBLE_ENVS,
    render,
    validate_options,
)


class LaunchTemplates:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.as_root = os.geteuid() == 0

    def run(self):
        options = {k: self.params[k] for k in (
            "sizes", "default_size", "dest", "wrapper_path", "wrapper_content", "dev_dir", "visible_devices_env",
            "visible_devices_scope", "cpu_binding", "cpu_map", "reserved_cpus", "membind", "extra_env", "gres",
            "gres_type", "node_name", "header")}
        if not options["node_name"]:
            options["node_name"] = socket.gethostname().split(".")[0] or "NODE"
        if not options["dev_dir"]:
            options["dev_dir"] = join(self.params["sysroot"] or "/", "dev")
        # every option checked before the node is read (render checks them again with the NICs found)
        validate_options(options)
        if self.params["sysroot"]:
            options.update(launch_rdma_options(self.params["sysroot"]))
        result = render(self.params["topology"], options)
        for warning in result["warnings"]:
            self.module.warn(warning)
        dest = self.params["dest"]
        wanted = {f["path"] for f in result["files"]}
        todo, diffs = [], []
        for f in result["files"]:
            mode = int(f["mode"], 8)
            if differs(f["path"], f["content"], mode, self.as_root):
                todo.append((f["path"], f["content"], mode))
                diffs.append(diff_entry(f["path"], read_text(f["path"]), f["content"]))
        stale = []
        if os.path.isdir(dest):
            stale = sorted(os.path.join(dest, name) for name in os.listdir(dest)
                           if (ENV_FILE.match(name) or name == "gres.conf") and os.path.join(dest, name) not in wanted)
        for path in stale:
            diffs.append(diff_entry(path, read_text(path), "", " (removed)"))
        if not self.module.check_mode:
            # every file staged before any is renamed: a failed write leaves the whole set as it was; then one
            # rename per file, so a run killed anywhere leaves each file old or new (and the wrapper names a
            # table of another format). The next run finishes the set and removes the temp files a kill left.
            staged = stage_all(self.module, [t + (None,) for t in todo], self.as_root, sweep=sorted(wanted))
            commit_all(self.module, staged)
            for path in stale:
                os.unlink(path)
        return {
            "changed": bool(todo or stale),
            # the topology and the wrapper (hundreds of kB on a CPX node) are not echoed back: every result is
            # post-processed on the controller, and the caller already holds them
            "invocation": {"module_args": dict(
                self.params, topology="(not echoed: %d GPUs)" % len(self.params["topology"].get("gpus") or []),
                wrapper_content="(not echoed)" if self.params["wrapper_content"] else None)},
            "files": [f["path"] for f in result["files"]],
            "changed_files": [t[0] for t in todo],
            "removed_files": stale,
            "plan": result["plan"],
            "diff": diffs,
        }


def main():
    module = AnsibleModule(
        argument_spec={
            "topology": {"type": "dict", "default": {}},
            "sysroot": {"type": "path", "default": "/"},
            "sizes": {"type": "list", "elements": "int", "default": [2, 4, 8]},
            "default_size": {"type": "int"},
            "dest": {"type": "path", "default": "/etc/topotune/launch"},
            "wrapper_path": {"type": "path", "default": "/usr/local/bin/topotune-bind"},
            "wrapper_content": {"type": "str"},
            "dev_dir": {"type": "path"},
            # the choices are launch_render's (tests/unit/roles/test_argument_specs.py: the role's argument_specs match)
            "visible_devices_env": {"type": "str", "default": "ROCR_VISIBLE_DEVICES", "choices": list(VISIBLE_ENVS)},
            "visible_devices_scope": {"type": "str", "default": "group", "choices": list(SCOPES)},
            "cpu_binding": {"type": "str", "default": "numa", "choices": list(CPU_BINDINGS)},
            "cpu_map": {"type": "dict", "default": {}},
            "reserved_cpus": {"type": "str", "default": ""},
            "membind": {"type": "bool", "default": True},
            "extra_env": {"type": "dict", "default": {}},
            "gres": {"type": "bool", "default": True},
            "gres_type": {"type": "str", "default": ""},
            "node_name": {"type": "str"},
            "header": {"type": "str",
                       "default": "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten."},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**LaunchTemplates(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg="launch_templates: %s" % err)


if __name__ == "__main__":
    main()
