#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: gpu_topology
short_description: Discover the AMD Instinct GPU topology of a node
version_added: "0.1.0"
description:
  - Reads the GPU topology of the managed node into one normalized model (GPUs, links, NUMA nodes,
    xGMI hives and cliques, physical devices) and returns it as C(topology).
  - Also returns the installed ROCm version (C(opt/rocm/.info/version) under O(sysroot)) as C(rocm_version),
    so roles that need both read the node once.
  - Register the result (C(playbooks/topology.yml) registers it as C(topotune_discovery), which the topotune
    roles read). The model is deliberately not returned as a fact - Ansible deep-copies every fact of a host
    for every later task, and a 64-partition model (2016 links) costs about 20 ms per task and host on the
    controller that way; a registered result is not copied.
  - KFD sysfs (C(/sys/class/kfd/kfd/topology)) needs no ROCm user space and is read in milliseconds;
    PCI sysfs gives each GPU's NUMA node, local CPUs and PCIe link width/speed, and
    C(/sys/devices/system/node) the CPU list of every NUMA node.
  - C(amd-smi) (both C(topology --json) schemas) and C(rocm-smi) (C(--showtopo --json)) are alternative
    sources and cross-check sources. They run without a shell, with C(LC_ALL=C) and a timeout.
  - Read-only; check mode runs the same reads and returns the same result.
  - Incomplete input (a truncated KFD tree, a GPU without PCI NUMA information, a duplicated KFD node)
    gives a partial model and one C(warnings) entry per problem; input that cannot give a model fails
    with a one-line message naming the file or section.
author:
  - topotune contributors (@topotune)
options:
  source:
    description:
      - Where the topology comes from.
      - C(auto) takes the first that works of C(kfd), C(amd-smi), C(rocm-smi).
    type: str
    choices: [auto, kfd, amd-smi, rocm-smi]
    default: auto
  sysroot:
    description:
      - Directory under which C(sys/) and C(opt/rocm/.info/version) are read (C(/) on a real node, C(/sim) on
        a simulated node, or an unpacked node snapshot).
    type: path
    default: /
  cross_check:
    description:
      - Also consult the other available sources and report where they disagree with the chosen one in
        C(topology.discrepancies). Unavailable sources add a warning, not a failure.
    type: bool
    default: false
  amd_smi_path:
    description: Path or name of the C(amd-smi) executable.
    type: str
    default: amd-smi
  rocm_smi_path:
    description: Path or name of the C(rocm-smi) executable.
    type: str
    default: rocm-smi
  command_timeout:
    description:
      - Seconds after which an C(amd-smi) or C(rocm-smi) call is abandoned (C(amd-smi) can hang when the
        driver is wedged).
    type: int
    default: 30
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - KFD numbers link types 2 (PCIe) and 11 (xGMI); rocm-smi's own enum says 1 and 2. The model uses
    the words C(pcie) and C(xgmi).
  - Hops follow rocm-smi, 1 = direct xGMI, 2 = PCIe under one CPU socket or xGMI through another GPU
    of the same hive, 3 = PCIe across sockets.
seealso:
  - name: KFD topology in sysfs
    description: Node and link properties of the amdkfd driver.
    link: https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c
"""

EXAMPLES = r"""
- name: Discover the GPU topology (the name the topotune roles read)
  topotune.instinct.gpu_topology:
  register: topotune_discovery

- name: Show the GPUs of NUMA node 0
  ansible.builtin.debug:
    msg: "{{ (topotune_discovery.topology.numa_nodes | selectattr('node', 'equalto', 0) | first).gpus }}"

- name: Read a simulated node and cross-check with amd-smi
  topotune.instinct.gpu_topology:
    sysroot: /sim
    cross_check: true
    command_timeout: 10
"""

RETURN = r"""
topology:
  description: The topology model. Schema version 1.
  returned: success
  type: dict
  contains:
    schema:
      description: Model schema version.
      type: int
      sample: 1
    source:
      description: Source of the model, C(kfd), C(amd-smi) or C(rocm-smi).
      type: str
      sample: kfd
    sources:
      description: Every source consulted (the model's first, then cross-check sources).
      type: list
      elements: str
      sample: [kfd, amd-smi]
    gpus:
      description:
        - One entry per logical GPU as ROCm enumerates it (a CPX partition is one GPU), ordered by index.
        - From KFD the index is the order of the GPU nodes by KFD node number; from an smi tool, its own index.
        - Keys C(index), C(kfd_node), C(gpu_id), C(bdf), C(physical_index), C(partition) (C(index),
          C(count), or null), C(gfx), C(gfx_target_version), C(device_id), C(vendor_id), C(render_minor),
          C(hive_id) (decimal string, null when none), C(numa_node) (Linux NUMA node, null when unknown),
          C(numa_source) (C(pci), C(kfd), C(smi) or null), C(cpus) (cpulist of the local CPUs),
          C(pcie) (C(current_width), C(max_width), C(current_speed_gts), C(max_speed_gts), or null),
          C(simd_count), C(num_xcc), C(unique_id), C(name), C(firmware) (firmware versions from the PCI
          device's C(fw_version/), e.g. C(mec), or null). Unknown values are null.
      type: list
      elements: dict
      sample:
        - index: 0
          kfd_node: 2
          gpu_id: null
          bdf: "0000:63:00.0"
          physical_index: 0
          partition: null
          gfx: gfx90a
          gfx_target_version: 90010
          device_id: "0x740f"
          vendor_id: "0x1002"
          render_minor: 128
          hive_id: "12609507387757274807"
          numa_node: 0
          numa_source: kfd
          cpus: "0-63"
          pcie: null
          simd_count: 416
          num_xcc: 1
          unique_id: "1801979520617338022"
          name: null
          firmware: null
    links:
      description:
        - Exactly one entry per unordered GPU pair, C(a) < C(b), when the source gives links.
        - C(type) is C(xgmi) or C(pcie); C(hops) 1 = direct xGMI, 2 = PCIe on one socket or xGMI through
          one GPU of the same hive, 3 = PCIe across sockets; C(weight) is the KFD/rocm-smi weight (null
          when unknown); C(xgmi_links) the number of xGMI links (null when unknown); C(bandwidth_mbps)
          C(min)/C(max) in MB/s or null; C(p2p_access) true/false when the source says whether peer-to-peer
          access is enabled (amd-smi ACCESS table), else null.
      type: list
      elements: dict
      sample:
        - {a: 0, b: 1, type: xgmi, hops: 1, weight: 15, xgmi_links: null, bandwidth_mbps: {min: 50000, max: 50000},
           p2p_access: null}
    numa_nodes:
      description: NUMA nodes with their CPU list (C(cpus), null when unknown) and local GPU indices (C(gpus)).
      type: list
      elements: dict
      sample:
        - {node: 0, cpus: "0-63,128-191", gpus: [0, 1, 2, 3]}
    hives:
      description: xGMI hives (C(hive_id), C(gpus)).
      type: list
      elements: dict
      sample:
        - {hive_id: "12609507387757274807", gpus: [0, 1, 2, 3]}
    xgmi_cliques:
      description: Maximal sets (two GPUs or more) of GPUs pairwise joined by direct xGMI links.
      type: list
      elements: list
      sample: [[0, 1, 2, 3], [4, 5, 6, 7]]
    physical_devices:
      description: Physical devices (PCI device / OAM) with the function-0 C(bdf) and their logical GPUs.
      type: list
      elements: dict
      sample:
        - {physical_index: 0, bdf: "0000:05:00.0", gpus: [0, 1, 2, 3, 4, 5, 6, 7]}
    cpu_topology:
      description:
        - The node's CPUs read from sysfs under the sysroot (null without per-CPU C(topology/)), C(packages)
          (C(id), C(cpus), C(cores)), C(cores) (the CPU list of each core, list index = logical core index in
          slurmd's order, which gres.conf C(Cores=) uses), C(threads_per_core), C(cpus), C(l3) (C(cpus), C(cores),
          C(numa_node), C(package) per L3 domain), C(numa_nodes) (C(node), C(cpus), C(cores)), C(allowed_cpus)
          (what this process's cgroup cpuset allows) and C(offline_cpus).
      type: dict
      sample: {source: sysfs, cpus: 128, threads_per_core: 2, packages: [{id: 0, cpus: "0-127", cores: "0-63"}],
               cores: ["0,64", "1,65"], l3: [{cpus: "0-7,64-71", cores: "0-7", numa_node: 0, package: 0}]}
    warnings:
      description: Everything that made the model partial or uncertain, one sentence each.
      type: list
      elements: str
    discrepancies:
      description: Disagreements between sources (C(what), C(gpu) index or null, C(values) per source).
      type: list
      elements: dict
      sample:
        - {what: numa_node, gpu: 3, values: {kfd: 0, amd-smi: 1}}
rocm_version:
  description:
    - Content of C(opt/rocm/.info/version) under O(sysroot), stripped (C(6.2.1-112)); empty when ROCm is not
      installed there or the file cannot be read.
  returned: success
  type: str
  sample: "6.2.1-112"
device_access:
  description:
    - >-
      Who can open the ROCm device nodes and which container tooling the node has, as
      M(topotune.instinct.gpu_device_access) returns them (without users) plus the C(sysroot) they were read under:
      C(kfd), C(render_nodes), C(docker), C(amd_ctk). The container_runtime action reads them from the discovery
      instead of a round trip of its own.
  returned: success
  type: dict
  sample: {sysroot: /, kfd: {path: /dev/kfd, exists: true, char_device: true, owner: root, group: render, gid: 110,
           mode: "0660"}, render_nodes: [], users: {}, docker: {present: true, path: /usr/sbin/dockerd},
           amd_ctk: {present: false, path: null}}
rail_inventory:
  description:
    - >-
      The node's part of the cross-node rail comparison, with the keys of the C(inventory) that
      M(topotune.instinct.platform_checks) returns: C(gpus) (per physical GPU its C(bdf), C(compute_partition) and
      C(memory_partition), null where amdgpu has no such file) and C(rails) (per physical GPU in PCI order, rail i
      being GPU i: the RDMA NIC below its PCIe switch, that NIC's first port, netdev, rate, firmware and IPv4
      subnet; an empty list without RDMA NICs).
    - The launch_templates role compares them across the play's nodes (filter C(topotune.instinct.rdma_withheld))
      and leaves C(NCCL_IB_HCA) unset on a node whose rails differ from its hardware class's.
  returned: success
  type: dict
  sample: {gpus: [{bdf: "0000:0c:00.0", compute_partition: SPX, memory_partition: NPS1}],
           rails: [{rail: 0, gpu: "0000:0c:00.0", nic: mlx5_0, nic_bdf: "0000:0d:00.0", level: switch, port: 1,
                    link_layer: Ethernet, state: ACTIVE, phys_state: LinkUp, rate: "400 Gb/sec (4X NDR)",
                    rate_gbps: 400.0, netdev: enp13s0np0, fw_ver: "28.39.1002", ipv4_subnet: "10.0.0.0/24"}]}

"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.checks.gpu_health import partition_modes
from ansible_collections.topotune.instinct.plugins.module_utils.checks.rdma_health import node_rails
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import join, read_text
from ansible_collections.topotune.instinct.plugins.module_utils.topology.devices import device_access
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import discover, run_command

# Written by the ROCm packages; topotune.instinct.rocm_env gates variables on the version.
ROCM_VERSION_FILE = "/opt/rocm/.info/version"


class GpuTopology:
    """Reads the topology, the ROCm version and the device nodes' access; there is nothing to write."""

    def __init__(self, module):
        self.module = module
        self.params = module.params

    def _runner(self, argv):
        return run_command(argv, timeout=self.params["command_timeout"])

    def run(self):
        try:
            model = discover(
                source=self.params["source"],
                sysroot=self.params["sysroot"],
                cross_check=self.params["cross_check"],
                amd_smi=self.params["amd_smi_path"],
                rocm_smi=self.params["rocm_smi_path"],
                runner=self._runner,
            )
        except TopotuneError as err:
            self.module.fail_json(msg="gpu_topology: %s" % err)
        for warning in model["warnings"]:
            self.module.warn(warning)
        version = self.rocm_version()
        return {
            "changed": False,
            "topology": model,
            "rocm_version": version,
            # read here too: the container_runtime action needs them, and this is the node's one read-only round trip
            "device_access": device_access(self.params["sysroot"]),
            # the launch_templates role compares the play's nodes' rails before it suggests NCCL_IB_HCA
            "rail_inventory": {"gpus": partition_modes(self.params["sysroot"]), "rails": node_rails(self.params["sysroot"])},
        }

    def rocm_version(self):
        """The installed ROCm version, or "" when there is none (unknown: callers skip version-gated rules)."""
        return read_text(join(self.params["sysroot"], ROCM_VERSION_FILE), "")


def main():
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "default": "auto", "choices": ["auto", "kfd", "amd-smi", "rocm-smi"]},
            "sysroot": {"type": "path", "default": "/"},
            "cross_check": {"type": "bool", "default": False},
            "amd_smi_path": {"type": "str", "default": "amd-smi"},
            "rocm_smi_path": {"type": "str", "default": "rocm-smi"},
            "command_timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    if module.params["command_timeout"] < 1:
        module.fail_json(msg="gpu_topology: command_timeout must be at least 1 second, got %d"
                         % module.params["command_timeout"])
    module.exit_json(**GpuTopology(module).run())


if __name__ == "__main__":
    main()
