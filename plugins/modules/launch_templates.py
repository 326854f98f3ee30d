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
# BEGIN generated options: plugins/module_utils/launch/render.py (scripts/gen-options)
options:
  sizes:
    description: >-
      Group sizes to generate: GPUs grouped so collectives stay on the fastest xGMI links. Each size should divide the
      node's GPU count (1, 2, 4, 8 are typical); sizes that do not are skipped with a warning (63-partition nodes, for
      example).
    type: list
    elements: int
    default: [2, 4, 8]
  default_size:
    description: Size the wrapper uses without C(--size) or C(TOPOTUNE_GROUP_SIZE); null takes the smallest generated
      size.
    type: int
  visible_devices_env:
    description: >-
      Variable restricting the GPUs a rank sees: C(ROCR_VISIBLE_DEVICES) (AMD's advice on Linux),
      C(HIP_VISIBLE_DEVICES), or C(none) (sets and unsets nothing). Only one is set, since HIP indexes apply after the
      ROCR filter: the wrapper unsets the others, Slurm's C(CUDA_VISIBLE_DEVICES) and C(GPU_DEVICE_ORDINAL) included.
    type: str
    default: ROCR_VISIBLE_DEVICES
    choices: [ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, none]
  visible_devices_scope:
    description: C(group) makes all GPUs of the rank's group (or step) visible in group order and the rank uses device
      C(LOCAL_RANK) (torchrun style; peers stay visible for RCCL IPC); C(rank) makes only the rank's GPU visible, as
      device 0 (LUMI's C(select_gpu) style).
    type: str
    default: group
    choices: [group, rank]
  cpu_binding:
    description: C(numa) binds each rank to the CPUs of its GPU's NUMA node and memory to that node; C(l3) binds CPUs to
      the GPU's L3 domain(s) (each NUMA node's L3 domains shared out among its GPUs in index order, as Frontier's table;
      O(cpu_map) overrides), memory to the NUMA node; C(none) only sets the environment.
    type: str
    default: numa
    choices: [numa, l3, none]
  cpu_map:
    description: >-
      GPU index to a cpulist overriding the derived L3 set of that GPU with O(cpu_binding=l3), for example C({4:
      "1-7,65-71"}).
    type: dict
    default: {}
  reserved_cpus:
    description:
      - CPUs no rank is bound to (system or low-noise cores), a cpulist such as C(0,8,16); Frontier's core
        specialization keeps the first core of every L3 region (C(0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120)).
      - >-
        Slurm core specialization (C(CoreSpecCount), C(CpuSpecList)) needs nothing here: the wrapper keeps within the
        job's CPUs anyway.
    type: str
    default: ""
  membind:
    description: Also bind memory to the GPU's NUMA node (C(numactl --membind)).
    type: bool
    default: true
  extra_env:
    description: >-
      Extra variables C({NAME: "value"}) for the wrapper's table and every env file (values limited to
      C([A-Za-z0-9_,.:/=+@%-])); one set here wins over the C(NCCL_IB_HCA) and C(NCCL_IB_GID_INDEX) found from the
      node's NICs.
    type: dict
    default: {}
  rdma_withheld:
    description:
      - >-
        Why C(NCCL_IB_HCA) and C(NCCL_IB_GID_INDEX) are left unset on this node, whatever NICs it has; the README says
        it. Empty (the default): the node's own NIC pairing decides (O(sysroot)).
      - >-
        The role sets it itself where the node's rails differ from the other nodes of its hardware class in the play
        (filter C(topotune.instinct.rdma_withheld) over the play's C(topotune_discovery), as the C(rail_consistency)
        check compares them): RCCL pairs two nodes' NICs by position, so with two NICs swapped or cabled to another
        leaf, NICs in GPU order would send the traffic across rails. A value set here wins; the nodes are compared only
        when the play discovered them (C(playbooks/topology.yml)).
    type: str
    default: ""
  gres:
    description: Write the Slurm C(gres.conf) fragment (C(gres.conf) in O(dest)).
    type: bool
    default: true
  gres_type:
    description: >-
      Slurm GRES C(Type=) of every GPU line: C(auto) is the node's GPU generation in lower case (C(mi300x), C(mi250x),
      ...; the model's C(identity), from C(knowledge/gpu_generations.yml)), empty for none, or a name of your own;
      slurm.conf's C(Gres=) must use the same type.
    type: str
    default: ""
  dest:
    description: Directory of the wrapper's table, the env files, C(gres.conf) and C(README).
    type: path
    default: /etc/topotune/launch
  wrapper_path:
    description: Path of the binding wrapper.
    type: path
    default: /usr/local/bin/topotune-bind
  wrapper_content:
    description: Content of the binding wrapper (the role's C(files/topotune-bind)); its default table path is pointed
      at O(dest). Without it the wrapper is not written (only its table and the other files).
    type: str
  dev_dir:
    description:
      - Directory holding C(dri/renderD*) on the node, used for the C(File=) of gres.conf and where the wrapper tests
        which GPUs the process can open.
      - Default C(<sysroot>/dev), so C(/dev) on a real node and the profile's C(dev) on a simulated one.
    type: path
  node_name:
    description: Slurm node name of the gres.conf lines (C(NodeName=<name> AutoDetect=off ...); slurmd skips lines of
      other names) and of the C(slurm.conf) line in its comments; default the short host name.
    type: str
  header:
    description: First comment line of every file.
    type: str
    default: "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten."
  topology:
    description:
      - The topology model of M(topotune.instinct.gpu_topology) (C(topotune_discovery.topology) after
        C(playbooks/topology.yml)); its C(cpu_topology) gives Slurm core indices and L3 domains.
      - >-
        Empty, the node's model is discovered in the same task (M(topotune.instinct.gpu_topology) under O(sysroot), C(/)
        when that is empty), after every other option is checked. The role passes the first model of its chain: this
        variable, else C(topotune_topology) (a model the inventory gives), else the play's C(topotune_discovery) (the
        C(topotune.instinct.node_topology) filter).
    type: dict
    default: {}
  sysroot:
    description:
      - >-
        Root under which the node's sysfs is read (C(/) on a real node, C(/sim) on a simulated one): its topology when
        none is given, and the RDMA NICs with the PCIe switch each sits below (C(sys/class/infiniband/*/device)).
      - When every GPU has exactly one NIC below its own PCIe switch or root port, each group's env file gets
        C(NCCL_IB_HCA) = C(=) and its GPUs' NICs in GPU order with their ACTIVE ports (RCCL reads it), and
        C(NCCL_IB_GID_INDEX) = the index of those ports' RoCE v2 GID when they agree; otherwise none is written and the
        README says why. A value in O(extra_env) always wins. An empty string skips the NIC lookup.
    type: path
    default: /
# END generated options
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

from ansible_collections.topotune.instinct.plugins.module_utils.checks.rdma_health import launch_rdma_options
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import commit_all, diff_entry, differs, read_text, stage_all
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import join
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import ENV_FILE, OPTIONS, render, validate_options


class LaunchTemplates:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.as_root = os.geteuid() == 0

    def run(self):
        # the renderer's options: all but the node's model and root
        options = {k: v for k, v in self.params.items() if k in OPTIONS and k not in ("topology", "sysroot")}
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
        argument_spec=argument_spec(OPTIONS),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**LaunchTemplates(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg="launch_templates: %s" % err)


if __name__ == "__main__":
    main()
