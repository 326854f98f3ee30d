#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only platform checks of an AMD Instinct node against its GPU generation's expected values."""

from __future__ import annotations

DOCUMENTATION = r"""
module: platform_checks
author: topotune contributors (@topotune)
short_description: Check an AMD Instinct node's platform settings against its GPU generation (read-only)
description:
  - Reads PCI GPU links, the kernel command line, IOMMU units, NUMA nodes per socket, SMT, NUMA balancing,
    transparent hugepages, cpuidle C2, the CPU governor and the BIOS version from sysfs/procfs under
    O(sysroot), and compares them with the expected values of the node's GPU generation.
  - The module reads the PCI link state itself (C(sys/bus/pci/devices/<bdf>/current_link_width) and
    friends) rather than taking the topology model, so it runs alone, on a snapshot, or before
    discovery.
  - Settings the OS cannot observe (memory interleaving, ARI enumeration and support, ten-bit tags, determinism
    slider, cTDP, xGMI, GMI folding, APBDIS, DF C-states, TSME, SR-IOV, ...) are reported C(unknown) with the value
    to attest in BIOS setup, never guessed. They come from AMD's table for the generation and, for MI3xx, its table
    for the node's role (O(virtualization_host)).
  - Changes nothing on the node but the record of its options (O(record)); C(changed) says whether the record
    changed.
  - Check ids follow ROCm CVS C(cvs/tests/platform/host_configs_cvs.py) (key C(cvs) names the CVS test).
  - Run as a task, the options are checked on the controller first, by the action of the same name with the module's
    own check, so a wrong one is named before anything reaches the node.
# BEGIN generated options: plugins/module_utils/checks/platform_checks.py (scripts/gen-options)
options:
  sysroot:
    description: Directory under which sysfs/procfs are read (C(/) on a real node, C(/sim) on a simulated one).
    type: path
    default: /
  knowledge:
    description:
      - The parsed C(knowledge/gpu_generations.yml) (keys C(generations) and C(host)), as
        C(lookup('topotune.instinct.knowledge', 'gpu_generations')) returns it. The module runs on the managed node,
        which does not have the collection's data files.
      - Omitted, the module's action passes the collection's own C(gpu_generations) with C(pcie_health), C(gpu_health)
        and C(rocm_compatibility) (and leaves it out of the returned C(invocation)); give it to check against other
        data.
      - Optional key C(pcie_health), the parsed C(knowledge/pcie_health.yml), gives the PCIe and RDMA checks
        (C(pci_acs), C(rdma_gpu_nic_affinity), C(pcie_aspm), C(pcie_10bit_tags), C(pcie_ari_forwarding),
        C(gpu_large_bar), C(pcie_aer), C(pcie_replay)) and the RDMA NIC checks (C(rdma_nic_pcie_link),
        C(rdma_port_state), C(rdma_gid)) their levels, thresholds and sources, and C(iommu_state) the IOMMU group types
        that mean passthrough; without it they run with built-in defaults and no source.
      - Optional key C(gpu_health), the parsed C(knowledge/gpu_health.yml) (partition combinations, RAS thresholds,
        kernel log patterns and known-benign lines, power managers, the xGMI layouts, idle limits); without it the GPU
        health checks (C(gpu_partition_mode), C(gpu_ecc_errors), C(gpu_retired_pages), C(gpu_kernel_log),
        C(gpu_firmware_consistency), C(power_managers), C(xgmi_links), C(gpu_idle)) are left out.
      - >-
        Optional key C(rocm_compatibility), the parsed C(knowledge/rocm_compatibility.yml) (AMD's ROCm compatibility
        matrix: the OS versions and kernels per ROCm release); without it check C(os_supported) is left out.
      - The kernel log is C(journalctl -k -b) when O(sysroot) is C(/) (else C(/dev/kmsg), else C(dmesg)), and the file
        C(var/log/topotune/kernel-boot.log) under any other O(sysroot) (a simulated node, a snapshot).
    type: dict
  fail_on:
    description:
      - >-
        The level at or above which a check result stops the play: C(fail) (fail results only), C(warn) (warn or fail)
        or C(never).
      - The module names those results in RV(blocking) and never fails on a result itself; the role's enforcement fails
        the play on them (not in check mode, which only reports them).
    type: str
    default: fail
    choices: [fail, warn, never]
  generation:
    description: Force the GPU generation by name (a name in C(knowledge/gpu_generations.yml), for example C(MI300X))
      instead of identifying it from the PCI device ids; empty identifies it.
    type: str
  gpu_count:
    description: GPUs (physical PCI devices; partitions count once) the node must show; C(0) uses the generation's
      C(devices_per_node).
    type: int
    default: 0
  expected:
    description:
      - What every node of the group must run, so that a uniformly wrong fleet fails (cross-node consistency only finds
        the odd node). Keys left out are not checked; each key set is a check of its own.
      - C(rocm_version) (check C(expected_rocm_version)), C(kernel_release) (C(expected_kernel_release)), C(os_release)
        (C(expected_os_release), C(ID VERSION_ID) of C(etc/os-release), for example C(ubuntu 22.04)), C(bios_version)
        (C(bios_version), which otherwise reports the version and accepts any), C(vbios) (C(expected_vbios), every GPU),
        C(firmware) (C(expected_firmware), a mapping of amdgpu C(fw_version) file names such as C(mec) or C(sos) to
        versions, every GPU), each a string (an C(fnmatch) pattern such as C(6.4.*)) or a list of accepted strings;
        C(min_online_memory_gib), the online system memory in GiB the node must have, which replaces the generation's
        minimum of check C(online_memory) (AMD's acceptance figure).
    type: dict
    default: {}
  cpu_governor:
    description: Expected CPU frequency governor; empty uses the one of C(knowledge/gpu_generations.yml)
      (C(performance)).
    type: str
    default: ""
  transparent_hugepage:
    description: Expected transparent hugepage mode; empty uses the one of C(knowledge/gpu_generations.yml) (C(always)).
    type: str
    default: ""
  virtualization_host:
    description:
      - The node is a virtualization host (SR-IOV virtual functions handed to VMs). AMD publishes two BIOS tables in
        ROCm/system-acceptance-docs C(docs/common/bios-settings.md). For a virtualization host SR-IOV, Resizable BAR,
        SVM, IOMMU and ACS are Enabled; for bare metal SR-IOV and ACS are Disabled.
      - With C(true) the BIOS items to attest follow the virtualization table, C(iommu_state) requires the IOMMU on
        whatever the generation, and C(pci_acs) expects ACS enabled (ACS off warns) instead of failing on it.
    type: bool
    default: false
  rdma_gid_index:
    description:
      - The GID index the node's jobs use on RoCE ports (the C(NCCL_IB_GID_INDEX) you set; ROCm CVS checks index C(3) by
        default). Check C(rdma_gid) then requires a C(RoCE v2) GID with a netdev at this index on every Ethernet RDMA
        port (fails where there is none, warns where it is link-local).
      - >-
        Unset (C(null)), C(rdma_gid) checks the index RCCL picks itself when C(NCCL_IB_GID_INDEX) is unset (RCCL >=
        2.21: the first RoCE v2 GID with a netdev and a routable address, IPv4 first), the one role
        C(topotune.instinct.launch_templates) writes.
    type: int
  pending_cmdline:
    description: Kernel parameters already configured for the next boot but not yet in C(/proc/cmdline), typically
      C(kernel_tuning_cmdline_pending) as it is (its C(+param) entries are configured parameters, its C(-param) ones
      removals and ignored here). A required parameter listed here is reported C(warn) (pending reboot) instead of
      C(fail).
    type: list
    elements: str
    default: []
  skip:
    description: Check ids to leave out of the results (for example C([smt]) when SMT is on on purpose).
    type: list
    elements: str
    default: []
  report_dir:
    description:
      - Controller directory of the per-node JSON report C(<inventory_hostname>.json) (the layout
        C(playbooks/report.yml) reads under C(out/checks/)); empty writes no file. It must be empty or an absolute
        controller path (C(~) is the controller user's home).
      - >-
        The role writes the report; the module only checks the directory, with the other options, before it reads the
        node. The role's default, C(null), means C(checks/) under the report directory of the run: the one the
        collection's playbooks resolve (C(topotune_report_dir), else C(out/)), else C(topotune_report_dir) when the role
        runs in a play of your own; no file when neither is there. The module's action resolves it on the controller and
        returns the directory as RV(report_dir).
    type: str
    default: ""
  record:
    description: Also record the options the checks ran with (O(generation), O(gpu_count), O(expected), O(cpu_governor),
      O(transparent_hugepage), O(virtualization_host), O(skip)) in C(/etc/topotune/platform-checks.json) (atomically,
      root-owned C(0644), only when they differ; check mode and diff), where the node-local drift check of role
      C(topotune.instinct.drift_exporter) reads them.
    type: bool
    default: false
# END generated options
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The record of the options (O(record)).
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Check the node's platform settings
  topotune.instinct.platform_checks:
    sysroot: "{{ topotune_sysroot | default('/') }}"
    # knowledge left out: the collection's generations, PCIe/RDMA and GPU health tables
    gpu_count: 8
  register: checks

- name: Show failed checks
  ansible.builtin.debug:
    msg: "{{ checks.results | selectattr('status', 'equalto', 'fail') | list }}"
"""

RETURN = r"""
results:
  description: One entry per check.
  returned: always
  type: list
  elements: dict
  sample:
    - id: gpu_pcie_speed_width
      status: fail
      observed: "0000:5c:00.0 x8 8.0 GT/s (max x16 32.0 GT/s)"
      expected: "x16 at 32.0 GT/s (Gen5)"
      remediation: "a GPU link trained below spec: reseat the GPU/riser/cable ..."
      source: "system-acceptance-docs health-checks.md (LnkSta Speed/Width)"
      cvs: test_check_gpu_pcie_speed_width
blocking:
  description: Ids of the results at or above O(fail_on), in result order.
  returned: always
  type: list
  elements: str
  sample: [gpu_pcie_speed_width]
report_dir:
  description: >-
    The controller directory of the JSON report: O(report_dir), or, for C(null) (the role's default), C(checks/) under
    the run's report directory; empty for no file. Set by the module's action on the controller.
  returned: always
  type: str
  sample: /srv/topotune/out/checks
summary:
  description: Counts per status, total and the worst status.
  returned: always
  type: dict
  sample: {pass: 12, warn: 3, fail: 1, unknown: 6, total: 22, worst: fail}
rdma_affinity:
  description:
    - Closest RDMA NIC per physical GPU (C(pairs) with C(gpu), C(nic), C(nic_bdf), C(level) = switch, root_port,
      numa or far), the C(NCCL_IB_HCA) suggestion (NICs in GPU order) when every GPU has exactly one NIC below
      its own PCIe switch or root port, else null with C(reason), and C(problems) found.
  returned: always
  type: dict
  sample: {pairs: [{gpu: "0000:0c:00.0", nic: mlx5_0, nic_bdf: "0000:0d:00.0", level: switch}],
           nccl_ib_hca: "mlx5_0", reason: null, problems: []}
inventory:
  description:
    - What the cross-node consistency comparison (filter C(topotune.instinct.cluster_consistency)) needs from this
      node, per physical GPU its VBIOS, C(fw_version) files and partition modes, the ROCm, kernel and BIOS
      versions (null when unreadable), and the GPU C(identity) (generation, product, kind) whose product and
      partition mode make the hardware class nodes are compared within.
    - C(rails), per physical GPU in PCI address order (C(rail) i is the i-th GPU), the RDMA NIC paired with it
      (RV(rdma_affinity)) and that NIC's first port (C(port), C(link_layer), C(state), C(phys_state), C(rate),
      C(rate_gbps)), its netdev, firmware (C(fw_ver)) and the netdev's connected IPv4 subnet (C(ipv4_subnet), from
      C(/proc/net/route)); null where the node does not show a value, every NIC field null for a GPU without a NIC
      (C(module_utils/checks/rdma_health.py) C(rails)). The cluster-wide rail comparison reads it.
  returned: always
  type: dict
  sample:
    gpus:
      - bdf: "0000:0c:00.0"
        vbios: 113-M3000100-102
        firmware: {mec: "0x000000b1"}
        compute_partition: SPX
        memory_partition: NPS1
    rocm_version: 6.4.1-112
    kernel_release: 6.8.0-45-generic
    bios_version: "1.0.0"
    identity: {generation: MI300X, product: MI300X, kind: physical}
    rails:
      - {rail: 0, gpu: "0000:0c:00.0", nic: mlx5_0, nic_bdf: "0000:0d:00.0", level: switch, port: 1,
         link_layer: Ethernet, state: ACTIVE, phys_state: LinkUp, rate: 400 Gb/sec (4X NDR), rate_gbps: 400.0,
         netdev: enp13s0np0, fw_ver: 28.39.1002, ipv4_subnet: 10.0.0.0/24}
generation:
  description: >-
    Name of the GPU generation the expectations came from (the C(generation) of RV(identity)), or null when none
    matched.
  returned: always
  type: str
  sample: MI300X
identity:
  description:
    - The node's GPU identity, decided by one function (C(module_utils/topology/identity.py)) from the PCI device ids over
      the C(devices) of C(knowledge/gpu_generations.yml); the topology model carries the same dict.
    - C(kind) is C(physical), C(hf) (a product variant with the same expectations), C(vf) (an SR-IOV guest, whose host-level
      checks are C(unknown) there) or C(apu); C(reason) says why C(generation) is null.
  returned: always
  type: dict
  sample:
    generation: MI300X
    product: MI300X HF
    kind: hf
    device_id: "0x74a9"
    gfx: gfx942
    device_ids: ["0x74a9"]
    other_device_ids: []
    how: device id
    reason: null
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.checks.gpu_health import inventory
from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import (
    CHECK_OPTIONS,
    OPTIONS,
    RECORD,
    PlatformChecksError,
    blocking,
    check_role_options,
    gather,
    inventory_rails,
    node_identity,
    rdma_affinity,
    record_text,
    run_checks,
    summarize,
)
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.module_utils.state.file_set import converge


class PlatformChecks:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self):
        knowledge = self.params["knowledge"] or {}
        if not isinstance(knowledge.get("generations"), list):
            self.module.fail_json(msg="knowledge has no 'generations' list: pass "
                                  "lookup('topotune.instinct.knowledge', 'gpu_generations')")
        options = {key: self.params[key] for key in CHECK_OPTIONS}
        # what a type cannot say, before the node is read (the message names the role variables)
        check_role_options(dict(options, **{key: self.params[key] for key in ("sysroot", "report_dir", "fail_on")}))
        facts = gather(self.params["sysroot"])
        results = run_checks(facts, knowledge, options)
        identity = node_identity(facts, knowledge, options)
        record = {"changed": False, "diff": []}
        if self.params["record"]:
            try:
                record = converge(self.module, [{"path": RECORD, "content": record_text(options), "mode": "0644"}],
                                  check_mode=self.module.check_mode)
            except OSError as err:
                raise PlatformChecksError("cannot record the options in %s: %s (the checks ran: fix the file system, "
                                          "or run without record)" % (RECORD, err.strerror or err)) from None
        return {
            "changed": record["changed"],
            "diff": record["diff"],
            "results": results,
            "summary": summarize(results),
            "blocking": blocking(results, self.params["fail_on"]),
            "generation": identity["generation"],
            "identity": identity,
            "rdma_affinity": rdma_affinity(facts),
            "inventory": dict(inventory(facts.get("health"), facts),
                              identity={key: identity[key] for key in ("generation", "product", "kind")},
                              rails=inventory_rails(facts)),
        }


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(OPTIONS),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**PlatformChecks(module).run())
    except TopotuneError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
