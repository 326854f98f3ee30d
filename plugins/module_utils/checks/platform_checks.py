"""Platform checks of an AMD Instinct node: observed kernel/sysfs facts against per-generation expectations.

Public API (standard library only, Python 3.8+):

``gather(sysroot, unit_root="/")``
    Read-only: the facts the checks need, from sysfs/procfs under ``sysroot`` (PCI GPU links, cmdline,
    IOMMU units and the GPUs' IOMMU groups, CPU packages and NUMA nodes, SMT, NUMA balancing, THP, cpuidle, cpufreq,
    DMI BIOS).
    Missing files become ``None`` (the check then reports ``unknown``), never an exception.
``node_identity(facts, knowledge, options=None)``
    The node's GPU identity (``module_utils/topology/identity.py``: generation, product, kind physical/hf/vf/apu) from
    the PCI device ids ``gather`` read; option ``generation`` forces the generation by name.
``run_checks(facts, knowledge, options=None)``
    Pure: list of results ``{id, status, observed, expected, remediation, source, cvs}``; ``status`` is
    one of ``pass``, ``warn``, ``fail``, ``unknown``. ``options`` overrides expectations
    (``generation``, ``gpu_count``, ``expected`` (``module_utils/checks/expected_values.py``), ``cpu_governor``,
    ``transparent_hugepage``, ``pending_cmdline``, ``virtualization_host`` (AMD's BIOS table for a virtualization
    host: SR-IOV, IOMMU and ACS enabled), ``rdma_gid_index`` (the GID index the jobs use on RoCE ports), ``skip``).
``summarize(results)``
    ``{pass, warn, fail, unknown, total, worst}``.
``PlatformChecksError(TopotuneError)``, ``check_role_options(options, prefix="platform_checks_")``
    What a type cannot say about the options of role ``platform_checks`` (and of ``drift_exporter``, which takes
    the same with its own prefix): raises naming each wrong variable (``<prefix><option>``), its value and the fix;
    ``role_option_problems`` returns the messages.
``FAIL_ON``, ``blocking(results, fail_on)``
    The ids of the results at or above ``fail_on`` (``fail``, ``warn`` or ``never``): what stops the play.
``OPTIONS``, ``CHECK_OPTIONS``
    The module's options and the role's variables, declared once (``module_utils/core/options.py``); the names of
    those ``run_checks`` takes (the flags of ``bin/topotune checks``).
``RECORD``, ``RECORDED``, ``record_text(options)``, ``read_record(path=RECORD)``
    The node-side record of the options the checks ran with (``RECORDED``: ``CHECK_OPTIONS`` but the pending kernel
    parameters), which the node-local drift check reads: its text, and its options (None without a record).

Check ids follow ROCm/cvs ``cvs/tests/platform/host_configs_cvs.py`` (``test_check_<id>``) where CVS has
the check; the ``cvs`` key names the CVS test.
"""

import json
import os
import re

from ..core.cpulist import CpulistError, format_cpulist, parse
from ..core.errors import TopotuneError
from ..core.sysroot import amd_gpu_functions, is_dir, join, list_dir, read_text, real_path
from ..state.kernel_settings import has_param, tokens
from ..topology.identity import generation_entry, identify
from . import expected_values, gpu_health, os_support, pcie_health, rdma_health
from .expected_values import check_expected

STATUSES = ("pass", "warn", "fail", "unknown")
# The node-side record of the options the checks ran with (module option ``record``; the role sets it): the node-local
# drift check (role drift_exporter, ``module_utils/state/drift_metrics.py``) judges the node by what bring-up used.
RECORD = "/etc/topotune/platform-checks.json"
# The statuses that stop the play for each platform_checks_fail_on value.
FAIL_ON = {"fail": ("fail",), "warn": ("warn", "fail"), "never": ()}

# The options of the platform_checks module and the variables of role platform_checks, declared once
# (``module_utils/core/options.py``): the module's argument spec and the flags of `bin/topotune checks` are built from
# here, the module's documentation and the role's argument specs, defaults and README table generated from here
# (scripts/gen-options). The options with ``cli`` are the ones ``run_checks`` takes (``CHECK_OPTIONS``).
OPTIONS = {
    "sysroot": {
        "type": "path", "default": "/",
        "description": "Directory under which sysfs/procfs are read (C(/) on a real node, C(/sim) on a simulated one).",
        "role": {"type": "str", "default": "{{ topotune_sysroot | default('/') }}"},
    },
    "knowledge": {
        "type": "dict", "role": False,
        "description": [
            "The parsed C(knowledge/gpu_generations.yml) (keys C(generations) and C(host)), as "
            "C(lookup('topotune.instinct.knowledge', 'gpu_generations')) returns it. The module runs on the managed "
            "node, which does not have the collection's data files.",
            "Omitted, the module's action passes the collection's own C(gpu_generations) with C(pcie_health), "
            "C(gpu_health) and C(rocm_compatibility) (and leaves it out of the returned C(invocation)); give it to "
            "check against other data.",
            "Optional key C(pcie_health), the parsed C(knowledge/pcie_health.yml), gives the PCIe and RDMA checks "
            "(C(pci_acs), C(rdma_gpu_nic_affinity), C(pcie_aspm), C(pcie_10bit_tags), C(pcie_ari_forwarding), "
            "C(gpu_large_bar), C(pcie_aer), C(pcie_replay)) and the RDMA NIC checks (C(rdma_nic_pcie_link), "
            "C(rdma_port_state), C(rdma_gid)) their levels, thresholds and sources, and C(iommu_state) the IOMMU group "
            "types that mean passthrough; without it they run with built-in defaults and no source.",
            "Optional key C(gpu_health), the parsed C(knowledge/gpu_health.yml) (partition combinations, RAS "
            "thresholds, kernel log patterns and known-benign lines, power managers, the xGMI layouts, idle "
            "limits); without it the GPU health checks (C(gpu_partition_mode), C(gpu_ecc_errors), "
            "C(gpu_retired_pages), C(gpu_kernel_log), C(gpu_firmware_consistency), C(power_managers), "
            "C(xgmi_links), C(gpu_idle)) are left out.",
            "Optional key C(rocm_compatibility), the parsed C(knowledge/rocm_compatibility.yml) (AMD's ROCm "
            "compatibility matrix: the OS versions and kernels per ROCm release); without it check "
            "C(os_supported) is left out.",
            "The kernel log is C(journalctl -k -b) when O(sysroot) is C(/) (else C(/dev/kmsg), else C(dmesg)), and "
            "the file C(var/log/topotune/kernel-boot.log) under any other O(sysroot) (a simulated node, a snapshot).",
        ],
    },
    "fail_on": {
        "type": "str", "default": "fail", "choices": list(FAIL_ON),
        "description": [
            "The level at or above which a check result stops the play: C(fail) (fail results only), C(warn) (warn "
            "or fail) or C(never).",
            "The module names those results in RV(blocking) and never fails on a result itself; the role's "
            "enforcement fails the play on them (not in check mode, which only reports them).",
        ],
    },
    "generation": {
        "type": "str", "default": None,
        "description": "Force the GPU generation by name (a name in C(knowledge/gpu_generations.yml), for example "
                       "C(MI300X)) instead of identifying it from the PCI device ids; empty identifies it.",
        "cli": {"help": "force the GPU generation by name (e.g. MI300X); default: identified from PCI device ids"},
        "role": {"default": "", "arg": "{{ platform_checks_generation | default(omit, true) }}"},
    },
    "gpu_count": {
        "type": "int", "default": 0,
        "description": "GPUs (physical PCI devices; partitions count once) the node must show; C(0) uses the "
                       "generation's C(devices_per_node).",
        "cli": {"help": "GPUs (physical devices) the node must show; 0: the generation's devices_per_node"},
    },
    "expected": {
        "type": "dict", "default": {},
        "description": [
            "What every node of the group must run, so that a uniformly wrong fleet fails (cross-node consistency "
            "only finds the odd node). Keys left out are not checked; each key set is a check of its own.",
            "C(rocm_version) (check C(expected_rocm_version)), C(kernel_release) (C(expected_kernel_release)), "
            "C(os_release) (C(expected_os_release), C(ID VERSION_ID) of C(etc/os-release), for example "
            "C(ubuntu 22.04)), C(bios_version) (C(bios_version), which otherwise reports the version and accepts "
            "any), C(vbios) (C(expected_vbios), every GPU), C(firmware) (C(expected_firmware), a mapping of amdgpu "
            "C(fw_version) file names such as C(mec) or C(sos) to versions, every GPU), each a string (an "
            "C(fnmatch) pattern such as C(6.4.*)) or a list of accepted strings; C(min_online_memory_gib), the "
            "online system memory in GiB the node must have, which replaces the generation's minimum of check "
            "C(online_memory) (AMD's acceptance figure).",
        ],
        "cli": {"help": "pinned versions and sizes, a JSON or YAML file of platform_checks_expected's keys"},
    },
    "cpu_governor": {
        "type": "str", "default": "",
        "description": "Expected CPU frequency governor; empty uses the one of C(knowledge/gpu_generations.yml) "
                       "(C(performance)).",
        "cli": {"help": "expected CPU governor; empty: the knowledge file's"},
    },
    "transparent_hugepage": {
        "type": "str", "default": "",
        "description": "Expected transparent hugepage mode; empty uses the one of C(knowledge/gpu_generations.yml) "
                       "(C(always)).",
        "cli": {"help": "expected transparent hugepage mode; empty: the knowledge file's"},
    },
    "virtualization_host": {
        "type": "bool", "default": False,
        "description": [
            "The node is a virtualization host (SR-IOV virtual functions handed to VMs). AMD publishes two BIOS "
            "tables in ROCm/system-acceptance-docs C(docs/common/bios-settings.md). For a virtualization host "
            "SR-IOV, Resizable BAR, SVM, IOMMU and ACS are Enabled; for bare metal SR-IOV and ACS are Disabled.",
            "With C(true) the BIOS items to attest follow the virtualization table, C(iommu_state) requires the IOMMU "
            "on whatever the generation, and C(pci_acs) expects ACS enabled (ACS off warns) instead of failing on it.",
        ],
        "cli": {"help": "judge by AMD's BIOS table for a virtualization host (SR-IOV, IOMMU and ACS on)"},
    },
    "rdma_gid_index": {
        "type": "int", "default": None,
        "description": [
            "The GID index the node's jobs use on RoCE ports (the C(NCCL_IB_GID_INDEX) you set; ROCm CVS checks index "
            "C(3) by default). Check C(rdma_gid) then requires a C(RoCE v2) GID with a netdev at this index on every "
            "Ethernet RDMA port (fails where there is none, warns where it is link-local).",
            "Unset (C(null)), C(rdma_gid) checks the index RCCL picks itself when C(NCCL_IB_GID_INDEX) is unset (RCCL "
            ">= 2.21: the first RoCE v2 GID with a netdev and a routable address, IPv4 first), the one role "
            "C(topotune.instinct.launch_templates) writes.",
        ],
        "cli": {"help": "the GID index the jobs use on RoCE ports (NCCL_IB_GID_INDEX); default: the one RCCL picks",
                "metavar": "INDEX"},
        "role": {"arg": "{{ omit if platform_checks_rdma_gid_index is none else platform_checks_rdma_gid_index }}"},
    },
    "pending_cmdline": {
        "type": "list", "elements": "str", "default": [], "role": False,
        "description": "Kernel parameters already configured for the next boot but not yet in C(/proc/cmdline), "
                       "typically C(kernel_tuning_cmdline_pending) as it is (its C(+param) entries are configured "
                       "parameters, its C(-param) ones removals and ignored here). A required parameter listed here "
                       "is reported C(warn) (pending reboot) instead of C(fail).",
        "cli": {"help": "kernel parameters configured but not yet booted (reported as pending, not missing); "
                        "kernel_tuning's +param/-param entries are taken as they are"},
    },
    "skip": {
        "type": "list", "elements": "str", "default": [],
        "description": "Check ids to leave out of the results (for example C([smt]) when SMT is on on purpose).",
        "cli": {"help": "a check id to leave out (repeatable)"},
    },
    "show": {
        "type": "str", "default": "all", "choices": ["all", "problems"], "role_only": True,
        "description": "What the role prints per node: C(all) checks, or only the C(problems) (warn, fail and "
                       "unknown results).",
    },
    "report_dir": {
        "type": "str", "default": "",
        "description": [
            "Controller directory of the per-node JSON report C(<inventory_hostname>.json) (the layout "
            "C(playbooks/report.yml) reads under C(out/checks/)); empty writes no file. It must be empty or an "
            "absolute controller path (C(~) is the controller user's home).",
            "The role writes the report; the module only checks the directory, with the other options, before it "
            "reads the node. The role's default, C(null), means C(checks/) under the report directory of the run: "
            "the one the collection's playbooks resolve (C(topotune_report_dir), else C(out/)), else "
            "C(topotune_report_dir) when the role runs in a play of your own; no file when neither is there. The "
            "module's action resolves it on the controller and returns the directory as RV(report_dir).",
        ],
        "role": {"default": None, "default_doc": "C(checks/) under the run's report directory"},
    },
    "record": {
        "type": "bool", "default": False,
        "description": "Also record the options the checks ran with (O(generation), O(gpu_count), O(expected), "
                       "O(cpu_governor), O(transparent_hugepage), O(virtualization_host), O(skip)) in "
                       "C(/etc/topotune/platform-checks.json) (atomically, root-owned C(0644), only when they differ; "
                       "check mode and diff), where the node-local drift check of role "
                       "C(topotune.instinct.drift_exporter) reads them.",
        "role": {"default": True,
                 "description": "Record the options the checks ran with in C(/etc/topotune/platform-checks.json), "
                                "where the node-local drift check of role C(topotune.instinct.drift_exporter) reads "
                                "them (the node's only change; check mode and diff). Set C(false) for a one-off run "
                                "with other options (an enforcing run, a different O(skip)) so that the record of "
                                "bring-up stays."},
    },
}
# The options run_checks takes (the CLI's flags), and those the record keeps: not the pending kernel parameters, node
# state that whoever reads the record reads again.
CHECK_OPTIONS = tuple(name for name, option in OPTIONS.items() if "cli" in option)
RECORDED = tuple(name for name in CHECK_OPTIONS if name != "pending_cmdline")


def record_text(options):
    """The record of ``options`` (the ``RECORDED`` ones), as the module writes it to ``RECORD``."""
    return json.dumps({name: options.get(name) for name in RECORDED}, indent=2, sort_keys=True) + "\n"


def read_record(path=RECORD):
    """The options recorded in ``path`` (``RECORDED`` keys only), or None when there is no record; raises
    ``PlatformChecksError`` naming the file when it cannot be read or is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise PlatformChecksError("cannot read the platform checks' record %s: %s" % (path, err.strerror)) from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise PlatformChecksError("%s is not JSON (%s): run role topotune.instinct.platform_checks again to record "
                                  "it" % (path, err)) from None
    if not isinstance(data, dict):
        raise PlatformChecksError("%s is not a JSON object: run role topotune.instinct.platform_checks again to "
                                  "record it" % path)
    return {name: data[name] for name in RECORDED if name in data}


_RANK = {"pass": 0, "unknown": 1, "warn": 2, "fail": 3}
_SPEED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s")
_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
_STATE_DIR = re.compile(r"^state([0-9]+)$")
_NODE_DIR = re.compile(r"^node([0-9]+)$")
# BIOS settings AMD prints per platform (used when the generation data names none)
_BIOS_SOURCE = "ROCm/amdgpu-docs docs/system-optimization/mi300x.rst and mi200.md; system-acceptance-docs docs/common/bios-settings.md"
_CVS_SOURCE = "ROCm/cvs cvs/tests/platform/host_configs_cvs.py"


# ------------------------------------------------------------------------------------------------ gather
def _speed_gts(text):
    """``"32.0 GT/s PCIe"`` -> 32.0; ``None`` when unreadable or unknown."""
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _gather_gpus(sysroot):
    base = join(sysroot, "sys/bus/pci/devices")
    gpus = []
    for bdf in amd_gpu_functions(sysroot):
        dev = os.path.join(base, bdf)
        gpus.append({
            "bdf": bdf,
            "device_id": read_text(os.path.join(dev, "device"), "").lower(),
            "numa_node": _int_or_none(read_text(os.path.join(dev, "numa_node"), None)),
            "current_width": _int_or_none(read_text(os.path.join(dev, "current_link_width"), None)),
            "max_width": _int_or_none(read_text(os.path.join(dev, "max_link_width"), None)),
            "current_speed_gts": _speed_gts(read_text(os.path.join(dev, "current_link_speed"), None)),
            "max_speed_gts": _speed_gts(read_text(os.path.join(dev, "max_link_speed"), None)),
        })
    return gpus


def _gather_cpus(sysroot):
    """Per-CPU cpufreq governors and cpuidle state switches, plus CPU packages."""
    base = join(sysroot, "sys/devices/system/cpu")
    cpus, packages = [], set()
    governors, no_cpufreq, idle = {}, [], {}
    for name in list_dir(base):
        match = _CPU_DIR.match(name)
        if not match:
            continue
        cpu = int(match.group(1))
        cpus.append(cpu)
        cdir = os.path.join(base, name)
        pkg = read_text(os.path.join(cdir, "topology", "physical_package_id"), None)
        if pkg is not None:
            packages.add(pkg)
        gov = read_text(os.path.join(cdir, "cpufreq", "scaling_governor"), None)
        if gov is None:
            no_cpufreq.append(cpu)
        else:
            governors.setdefault(gov, []).append(cpu)
        for state in list_dir(os.path.join(cdir, "cpuidle")):
            if not _STATE_DIR.match(state):
                continue
            sdir = os.path.join(cdir, "cpuidle", state)
            sname = read_text(os.path.join(sdir, "name"), None)
            disabled = read_text(os.path.join(sdir, "disable"), None)
            if sname is None or disabled is None:
                continue
            entry = idle.setdefault(sname, {"disabled": [], "enabled": []})
            entry["disabled" if disabled == "1" else "enabled"].append(cpu)
    cpus.sort()
    return {
        "cpus": cpus,
        "packages": len(packages) if packages else None,
        "governors": {k: sorted(v) for k, v in governors.items()},
        "no_cpufreq": sorted(no_cpufreq),
        "cpuidle": idle or None,
    }


def _gather_numa(sysroot):
    base = join(sysroot, "sys/devices/system/node")
    nodes = 0
    seen = False
    for name in list_dir(base):
        if not _NODE_DIR.match(name):
            continue
        seen = True
        # memory-only nodes (CXL, HBM exposed as NUMA) do not count towards NPS
        if read_text(os.path.join(base, name, "cpulist"), ""):
            nodes += 1
    return nodes if seen else None


def _selected(text):
    """THP ``always [madvise] never`` -> ``madvise``."""
    if text is None:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.strip() or None


def _cpu_vendor(sysroot):
    text = read_text(join(sysroot, "proc/cpuinfo"), "")
    match = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


def _possible_cpus(sysroot):
    """How many CPUs the firmware describes (``cpu/possible``): unlike the online CPUs, not capped at 255 when
    Linux had to turn X2APIC off, so the X2APIC check can see the machine it is about."""
    try:
        return len(parse(read_text(join(sysroot, "sys/devices/system/cpu/possible"), "")) or []) or None
    except CpulistError:
        return None


def _gather_iommu_groups(sysroot, gpus):
    """``(groups, gpu_groups)``: ``{group: type}`` of ``sys/kernel/iommu_groups`` (None without the directory) and
    ``{bdf: group}`` of each GPU function (its ``iommu_group`` link; None without one)."""
    base = join(sysroot, "sys/kernel/iommu_groups")
    if not is_dir(base):
        return None, {}
    groups = {name: read_text(os.path.join(base, name, "type"), None) for name in list_dir(base)}
    gpu_groups = {}
    for gpu in gpus:
        link = join(sysroot, os.path.join("sys/bus/pci/devices", gpu["bdf"], "iommu_group"))
        gpu_groups[gpu["bdf"]] = os.path.basename(real_path(link)) if os.path.lexists(link) else None
    return groups, gpu_groups


def gather(sysroot="/", unit_root="/"):
    """Return the observed facts under ``sysroot`` (read-only); systemd unit files are read under ``unit_root`` (their
    real paths on a node, the snapshot's directory offline)."""
    iommu_dir = join(sysroot, "sys/class/iommu")
    gpus = _gather_gpus(sysroot)
    groups, gpu_groups = _gather_iommu_groups(sysroot, gpus)
    facts = {
        "gpus": gpus,
        "iommu_groups": groups,
        "gpu_iommu_groups": gpu_groups,
        "cmdline": read_text(join(sysroot, "proc/cmdline"), None),
        "iommu_units": len(list_dir(iommu_dir)) if is_dir(iommu_dir) else None,
        "numa_nodes": _gather_numa(sysroot),
        "smt_active": read_text(join(sysroot, "sys/devices/system/cpu/smt/active"), None),
        "numa_balancing": read_text(join(sysroot, "proc/sys/kernel/numa_balancing"), None),
        "thp": _selected(read_text(join(sysroot, "sys/kernel/mm/transparent_hugepage/enabled"), None)),
        "bios_version": read_text(join(sysroot, "sys/class/dmi/id/bios_version"), None),
        "cpu_vendor": _cpu_vendor(sysroot),
        "cpus_possible": _possible_cpus(sysroot),
    }
    facts.update(_gather_cpus(sysroot))
    # PCIe and RDMA health (module_utils/checks/pcie_health.py): bridges, NICs, config space, AER counters
    facts["pcie"] = pcie_health.gather(sysroot)
    # the RDMA NICs' links, ports, GIDs and netdevs (module_utils/checks/rdma_health.py)
    facts["rdma"] = rdma_health.gather(sysroot)
    # GPU health (partitions, RAS, kernel log, firmware, power managers): module_utils/checks/gpu_health.py
    facts["health"] = gpu_health.gather(sysroot, unit_root=unit_root)
    # what only the pinned expectations read (OS release, online memory): module_utils/checks/expected_values.py
    facts["expected"] = expected_values.gather(sysroot)
    return facts


# ---------------------------------------------------------------------------------------------- helpers
def _result(check_id, status, observed, expected, remediation="", source="", cvs=None):
    return {
        "id": check_id,
        "status": status,
        "observed": observed,
        "expected": expected,
        "remediation": remediation if status != "pass" else "",
        "source": source,
        "cvs": cvs,
    }


# the command line's tokens and the parameter test are kernel_settings.py's (role kernel_tuning's plan uses the same)
cmdline_params = tokens
_has_param = has_param


def _slot(bdf):
    """``0000:0c:00.3`` -> ``0000:0c:00``: partitions appear as functions of one physical GPU."""
    return bdf.rsplit(".", 1)[0]


def node_identity(facts, knowledge, options=None):
    """The node's GPU identity (``gpu_identity.identify``) from the PCI functions ``gather`` found; the option
    ``generation`` forces the generation by name."""
    return identify([g["device_id"] for g in facts["gpus"]], (knowledge or {}).get("generations") or [],
                    (options or {}).get("generation"))


def rdma_affinity(facts):
    """``pcie_health.nic_affinity`` of the gathered PCIe facts (which NIC each GPU is paired with), None without them."""
    return pcie_health.nic_affinity(facts["pcie"]) if facts.get("pcie") else None


def inventory_rails(facts):
    """The node's rails (``rdma_health.rails``): per physical GPU, in BDF order, its NIC, netdev, rate, firmware and IPv4
    subnet; ``[]`` without the RDMA facts."""
    return rdma_health.rails(facts.get("rdma"), rdma_affinity(facts)) if facts.get("rdma") else []


# Settings of the physical host: an SR-IOV guest sees a virtual link, the VM's NUMA and IOMMU, not the host's BIOS.
HOST_ONLY = ("gpu_pcie_speed_width", "iommu_state", "numa_nps", "smt")


def _as_guest(results, identity, gen):
    """Host-level results of a virtual-function guest become unknown, naming where to check them."""
    out = []
    attest = {item["id"] for item in (gen or {}).get("bios_attest") or []}
    for res in results:
        if res["id"] in HOST_ONLY or res["id"] in attest or res["id"] in pcie_health.HOST_ONLY + rdma_health.HOST_ONLY:
            res = dict(res, status="unknown", observed="%s (SR-IOV virtual function %s): %s" % (
                identity["product"], identity["device_id"], res["observed"]),
                remediation="a guest sees the hypervisor's virtual link, NUMA and IOMMU: check %s on the host"
                % res["id"])
        out.append(res)
    return out


class PlatformChecksError(TopotuneError):
    """Options the checks cannot run with."""


_ABSOLUTE = re.compile(r"^/\S*$")


def role_option_problems(options, prefix="platform_checks_"):
    """One message per option of ``options`` a type cannot refuse: ``gpu_count`` below 0, ``sysroot`` not an absolute
    path without spaces, ``report_dir`` (a controller directory) neither empty nor absolute (``~`` for the controller
    user's home is fine), ``fail_on`` not in ``FAIL_ON``, ``rdma_gid_index`` below 0. Options not given are not
    checked."""
    problems = []
    if "gpu_count" in options:
        count = options["gpu_count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append("%sgpu_count must be an integer >= 0 (0: the generation's devices_per_node), got %s"
                            % (prefix, count))
    if "sysroot" in options and not (isinstance(options["sysroot"], str) and _ABSOLUTE.match(options["sysroot"])):
        problems.append("%ssysroot must be an absolute path without spaces, got %s" % (prefix, options["sysroot"]))
    report_dir = options.get("report_dir")
    if report_dir and not (isinstance(report_dir, str) and report_dir.startswith(("/", "~"))):
        problems.append("%sreport_dir must be empty (no file) or an absolute controller path, got %s"
                        % (prefix, report_dir))
    if "fail_on" in options and options["fail_on"] not in FAIL_ON:
        problems.append("%sfail_on must be one of %s, got %s" % (prefix, ", ".join(FAIL_ON), options["fail_on"]))
    index = options.get("rdma_gid_index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        problems.append("%srdma_gid_index must be a GID index >= 0 (null: the index RCCL picks), got %s"
                        % (prefix, index))
    return problems


def default_report_dir(run_report_dir):
    """The role's report directory when its variable is ``None`` (its default): ``checks`` under the run's report
    directory ``run_report_dir``, ``""`` (no file) when the run has none."""
    return run_report_dir + "/checks" if run_report_dir else ""


def check_role_options(options, prefix="platform_checks_"):
    """Raise ``PlatformChecksError`` naming every problem ``role_option_problems`` finds."""
    problems = role_option_problems(options, prefix)
    if problems:
        raise PlatformChecksError("%s: invalid input. %s" % (prefix.rstrip("_"), "; ".join(problems)))


def blocking(results, fail_on):
    """Ids of the results whose status stops the play at ``fail_on``."""
    return [res["id"] for res in results if res["status"] in FAIL_ON[fail_on]]


def summarize(results):
    """Counts per status and the worst status."""
    summary = {status: 0 for status in STATUSES}
    for res in results:
        summary[res["status"]] += 1
    summary["total"] = len(results)
    worst = "pass"
    for res in results:
        if _RANK[res["status"]] > _RANK[worst]:
            worst = res["status"]
    summary["worst"] = worst
    return summary


# ----------------------------------------------------------------------------------------------- checks
def _check_generation(identity, gen):
    source = (gen or {}).get("devices_source") or "knowledge/gpu_generations.yml"
    if gen is None:
        if identity["how"] == "given":
            return _result("gpu_generation", "fail", identity["reason"], "a known generation",
                           "set platform_checks_generation to one of the names in knowledge/gpu_generations.yml, or "
                           "leave it empty to identify the GPUs by PCI device id", source)
        return _result("gpu_generation", "unknown", identity["reason"], "a device id listed in knowledge/gpu_generations.yml",
                       "check that amdgpu sees the GPUs (lspci -d 1002:), or set platform_checks_generation; "
                       "GPU expectations fall back to each device's own maximum link", source)
    names = {str(d.get("id")).lower(): d.get("name") for d in gen.get("devices") or []}
    observed = "%s (%s)" % (gen["name"], ", ".join("%s %s" % (d, names[d]) for d in identity["device_ids"])
                            or "forced by platform_checks_generation")
    if identity["other_device_ids"]:
        return _result("gpu_generation", "warn", observed + "; other AMD devices: " + ", ".join(identity["other_device_ids"]),
                       "one GPU generation per node", "mixed GPU generations: check the node's inventory group",
                       source)
    return _result("gpu_generation", "pass", observed, gen["name"], source=source)


def _check_gpu_count(facts, identity, gen, options):
    # every device id of the identified generation counts (HF variants and VFs included); unknown: every AMD GPU
    ids = set(identity["device_ids"]) if gen is not None else None
    slots = sorted({_slot(g["bdf"]) for g in facts["gpus"] if ids is None or g["device_id"] in ids})
    expected = options.get("gpu_count") or (gen or {}).get("devices_per_node")
    observed = "%d GPU device(s)" % len(slots)
    source = "system-acceptance-docs docs/common/health-checks.md (lspci -d 1002:74a1 = 8); " + _CVS_SOURCE
    if not expected:
        return _result("pci_accelerators", "unknown", observed, "not set",
                       "set platform_checks_gpu_count to the GPUs this node should show", source,
                       "test_check_pci_accelerators")
    if len(slots) == expected:
        return _result("pci_accelerators", "pass", observed, "%d" % expected, source=source,
                       cvs="test_check_pci_accelerators")
    return _result("pci_accelerators", "fail", observed, "%d" % expected,
                   "%d GPU(s) missing from PCI: reseat or check the GPU/riser, look for amdgpu or PCIe AER errors "
                   "in dmesg, check 'Above 4G decoding' and pci=realloc=off" % (expected - len(slots))
                   if len(slots) < expected else
                   "more GPUs than expected: fix platform_checks_gpu_count for this node",
                   source, "test_check_pci_accelerators")


def _check_pcie(facts, gen):
    gpus = [g for g in facts["gpus"] if g["current_width"] is not None]
    source = "system-acceptance-docs health-checks.md (LnkSta Speed/Width); " + _CVS_SOURCE
    cvs = "test_check_gpu_pcie_speed_width"
    if not gpus:
        return _result("gpu_pcie_speed_width", "unknown", "no GPU PCIe link attributes", "x16 at the generation's speed",
                       "run on the node itself (sysfs current_link_width/current_link_speed)", source, cvs)
    want = (gen or {}).get("pcie") or {}
    bad = []
    for g in gpus:
        width = want.get("width") or g["max_width"]
        speed = want.get("speed_gts") or g["max_speed_gts"]
        low_w = width is not None and (g["current_width"] or 0) < width
        low_s = speed is not None and g["current_speed_gts"] is not None and g["current_speed_gts"] < speed
        if low_w or low_s:
            bad.append("%s x%s %s GT/s (max x%s %s GT/s)"
                       % (g["bdf"], g["current_width"], g["current_speed_gts"], g["max_width"], g["max_speed_gts"]))
    expected = "x%s at %s GT/s (Gen%s)" % (want.get("width", "max"), want.get("speed_gts", "max"), want.get("gen", "?"))
    if bad:
        return _result("gpu_pcie_speed_width", "fail", "; ".join(bad), expected,
                       "a GPU link trained below spec: reseat the GPU/riser/cable, check the slot's PCIe "
                       "Generation in BIOS (Gen%s) and 'lspci -vvv -s <bdf>' LnkSta for '(downgraded)'; "
                       "then reboot" % want.get("gen", "max"), source, cvs)
    return _result("gpu_pcie_speed_width", "pass", "%d link(s) at %s" % (len(gpus), expected), expected,
                   source=source, cvs=cvs)


def _check_gpu_numa(facts):
    minus = [g["bdf"] for g in facts["gpus"] if g["numa_node"] is not None and g["numa_node"] < 0]
    if not facts["gpus"]:
        return _result("gpu_numa_affinity", "unknown", "no GPU", "numa_node >= 0 for every GPU",
                       "no AMD GPU found under sys/bus/pci/devices", "Linux PCI sysfs ABI (numa_node)")
    if minus and facts.get("numa_nodes") == 1:
        # one NUMA node: firmware need not give proximity, every CPU is local anyway
        return _result("gpu_numa_affinity", "pass", "numa_node -1 on %s (single NUMA node: harmless)" % ", ".join(minus),
                       "numa_node >= 0 for every GPU, or a single NUMA node", source="Linux PCI sysfs ABI (numa_node)")
    if minus:
        return _result("gpu_numa_affinity", "warn", "numa_node -1 on %s" % ", ".join(minus),
                       "numa_node >= 0 for every GPU",
                       "firmware gives no NUMA proximity for these GPUs (ACPI _PXM/SRAT missing, or a VM): "
                       "GPU-to-CPU binding cannot be derived; update the BIOS or pin with an explicit map",
                       "Linux PCI sysfs ABI (numa_node)")
    return _result("gpu_numa_affinity", "pass", "all %d GPU(s) report a NUMA node" % len(facts["gpus"]),
                   "numa_node >= 0 for every GPU", source="Linux PCI sysfs ABI (numa_node)")


def _check_cmdline(facts, gen, pending=(), common=None):
    # the generation's parameters, else (generation unknown) those common to every Instinct GPU: both from knowledge
    kernel_params = (gen or {}).get("kernel_params") or common or {}
    params = list(kernel_params.get("required") or [])
    if facts.get("cpu_vendor") == "GenuineIntel" and "intel_iommu=on" not in params:
        params.append("intel_iommu=on")
    source = kernel_params.get("source") or "system-acceptance-docs kernel-parameters.md"
    names = {"iommu=pt": ("iommu_pt", "test_check_iommu_pt"), "pci=realloc=off": ("pci_realloc", "test_check_pci_realloc")}
    tokens = cmdline_params(facts["cmdline"])
    results = []
    for param in params:
        check_id, cvs = names.get(param, ("kernel_param_" + re.sub(r"[^a-z0-9]+", "_", param.lower()).strip("_"), None))
        if facts["cmdline"] is None:
            results.append(_result(check_id, "unknown", "proc/cmdline unreadable", param,
                                   "run on the node itself", source, cvs))
        elif _has_param(tokens, param):
            results.append(_result(check_id, "pass", param, param, source=source, cvs=cvs))
        elif param in pending:
            # configured (kernel_tuning's boot loader drop-in) but the running kernel predates it
            results.append(_result(check_id, "warn", "configured, pending reboot", param,
                                   "reboot the node to apply %s (kernel_tuning_reboot_ok: true lets the "
                                   "role do it)" % param, source, cvs))
        else:
            results.append(_result(check_id, "fail", "missing from /proc/cmdline", param,
                                   "add %s to the kernel command line (role topotune.instinct.kernel_tuning, "
                                   "kernel_tuning_cmdline) and reboot" % param, source, cvs))
    return results


def _passthrough(facts, spec):
    """Whether IOMMU passthrough is in effect for the GPUs: ``(state, detail)``, ``state`` one of ``identity``,
    ``translated`` or None (not readable). The GPUs' groups first, then the kernel's "Default domain type" line."""
    groups, gpu_groups = facts.get("iommu_groups"), facts.get("gpu_iommu_groups") or {}
    identity = set(spec.get("identity_types") or ["identity"])
    translated = set(spec.get("translated_types") or ["DMA", "DMA-FQ", "DMA-SQ"])
    assigned = set(spec.get("assigned_types") or ["unmanaged", "blocked"])
    by_slot = {}
    for gpu in facts.get("gpus") or []:
        group = gpu_groups.get(gpu["bdf"])
        if group is not None and groups and groups.get(group) is not None:
            by_slot.setdefault(_slot(gpu["bdf"]), (gpu["bdf"], group, groups[group]))
    if by_slot:
        types = sorted({kind for _unused, _unused, kind in by_slot.values()})
        dma = ["%s (group %s %s)" % (bdf, group, kind) for bdf, group, kind in sorted(by_slot.values())
               if kind in translated]
        other = [bdf for bdf, _unused, kind in sorted(by_slot.values()) if kind not in translated | identity | assigned]
        if dma:
            return "translated", "IOMMU translating the GPUs' DMA: " + ", ".join(dma[:4]) + (
                " and %d more" % (len(dma) - 4) if len(dma) > 4 else "")
        if other:
            return None, "GPU IOMMU group type(s) %s not understood" % ", ".join(types)
        if not set(types) & identity:
            return "identity", "the GPUs are assigned to VMs or blocked (IOMMU groups: %s): the host's DMA path does " \
                               "not carry them" % ", ".join(types)
        return "identity", "passthrough in effect (GPU IOMMU groups: %s)" % ", ".join(types)
    text = ((facts.get("health") or {}).get("kernel_log")) or ""
    matches = re.findall(spec.get("default_domain_pattern") or r"Default domain type: (\w+)", text)
    if matches:
        kind = matches[-1]
        line = "kernel: Default domain type: %s" % kind
        return ("identity" if kind == "Passthrough" else "translated"), line
    return None, "no sys/kernel/iommu_groups/*/type for the GPUs and no 'Default domain type' line in the kernel log"


def _check_iommu(facts, gen, host, options=None, spec=None):
    options, spec = options or {}, spec or {}
    units = facts["iommu_units"]
    virt = bool(options.get("virtualization_host"))
    # the CPUs the machine has, not the online ones: X2APIC off leaves at most 255 of them online
    cpus = max(len(facts["cpus"]), facts.get("cpus_possible") or 0)
    limit = int((host.get("x2apic_cpu_limit") or {}).get("cpus", 256))
    bios = "enabled" if virt else (gen or {}).get("iommu_bios")
    source = (gen or {}).get("bios_source") or _BIOS_SOURCE
    if spec.get("source"):
        source = "%s; %s" % (source, spec["source"])
    if units is None:
        return _result("iommu_state", "unknown", "sys/class/iommu not readable", "IOMMU %s" % (bios or "enabled"),
                       "run on the node itself", source)
    enabled = units > 0
    observed = "enabled (%d unit(s))" % units if enabled else "disabled (no IOMMU unit)"
    if enabled:
        expected = "enabled, passthrough in effect (iommu=pt: the GPUs' groups in the identity domain)"
        state, detail = _passthrough(facts, spec)
        observed = "%s; %s" % (observed, detail)
        if state == "identity":
            return _result("iommu_state", "pass", observed, expected, source=source)
        if state is None:
            return _result("iommu_state", "unknown", observed, expected,
                           "read sys/kernel/iommu_groups/<group>/type of a GPU (identity = passthrough) or "
                           "'journalctl -k -b | grep \"Default domain type\"' on the node", source)
        text = ((facts.get("health") or {}).get("kernel_log")) or ""
        encrypted = spec.get("encryption_pattern") and re.search(spec["encryption_pattern"], text)
        tokens = cmdline_params(facts.get("cmdline"))
        if "iommu=pt" in (options.get("pending_cmdline") or ()) and not _has_param(tokens, "iommu=pt"):
            return _result("iommu_state", "warn", observed + "; iommu=pt configured, pending reboot", expected,
                           "reboot the node so iommu=pt takes effect (kernel_tuning_reboot_ok: true lets the role do it)",
                           source)
        if encrypted:
            fix = ("the kernel dropped passthrough: 'Memory encryption detected - Disabling default IOMMU "
                   "Passthrough' (SME/TSME on): set BIOS AMD CBS > security > TSME = Disabled (AMD's BIOS table) and "
                   "remove mem_encrypt=on, then reboot")
        elif _has_param(tokens, "iommu=pt"):
            fix = ("iommu=pt is on the command line but the GPUs' DMA is translated: look for the kernel's reason "
                   "('journalctl -k -b | grep -i iommu'), e.g. memory encryption or iommu.passthrough=0")
        else:
            fix = ("boot with iommu=pt (role topotune.instinct.kernel_tuning, kernel_tuning_cmdline) and reboot: "
                   "translated DMA costs RCCL and HIP host copies bandwidth")
        return _result("iommu_state", "fail", observed, expected, fix, source)
    if bios == "enabled":
        x2apic = "; with %d CPUs Linux also turns X2APIC off and uses at most 255 of them" % cpus if cpus >= limit else ""
        what = "a virtualization host (SR-IOV VFs need it; AMD's virtualization table: IOMMU Enabled)" if virt else ""
        return _result("iommu_state", "fail", observed, "enabled" + (" (%s)" % what if what else ""),
                       "enable IOMMU in BIOS (AMD CBS > NBIO Common Options > IOMMU = Enabled) and keep iommu=pt "
                       "on the kernel command line" + x2apic, source)
    if cpus >= limit:
        return _result("iommu_state", "fail", observed + ", %d CPUs" % cpus, "enabled with >= %d CPUs" % limit,
                       "with >= 256 logical CPUs and IOMMU disabled Linux turns X2APIC off and uses at most 255 "
                       "CPUs: enable IOMMU in BIOS and boot with iommu=pt", source)
    return _result("iommu_state", "pass", observed, "disabled or enabled with iommu=pt", source=source)


def _check_nps(facts, gen):
    allowed = (gen or {}).get("nps_allowed")
    policy = (gen or {}).get("nps_policy") or {}
    source = policy.get("source") or (gen or {}).get("bios_source") or _BIOS_SOURCE
    nodes, packages = facts["numa_nodes"], facts["packages"]
    fix = ("set BIOS AMD CBS > DF Common Options > Memory Addressing > NUMA nodes per socket to NPS%s"
           % (allowed[0] if allowed else 1))
    if nodes is None or not packages:
        return _result("numa_nps", "unknown", "NUMA nodes %s, sockets %s" % (nodes, packages),
                       "NPS in %s" % (allowed or "?"), "run on the node itself (sys/devices/system/node, "
                       "cpu*/topology/physical_package_id)", source)
    if nodes < packages:
        # one NUMA node over several sockets: NPS0
        amd = "; AMD: %s" % " ".join(policy["wording"].split()) if policy.get("wording") else ""
        return _result("numa_nps", policy.get("nps0", "fail"), "NPS0 (%d NUMA node(s), %d sockets)" % (nodes, packages),
                       "NPS in %s" % (allowed or "?"), fix + amd, source)
    if nodes % packages:
        return _result("numa_nps", "warn", "%d NUMA nodes with CPUs over %d sockets" % (nodes, packages),
                       "NPS in %s" % (allowed or "?"), "uneven NUMA nodes per socket: check NPS and offline CPUs",
                       source)
    nps = nodes // packages
    observed = "NPS%d (%d NUMA nodes, %d sockets)" % (nps, nodes, packages)
    if not allowed:
        return _result("numa_nps", "unknown", observed, "generation unknown", "set platform_checks_generation", source)
    expected = "NPS " + "/".join(str(a) for a in allowed)
    if nps in allowed:
        return _result("numa_nps", "pass", observed, expected, source=source)
    wording = " (AMD: %s)" % " ".join(policy["wording"].split()) if policy.get("wording") else ""
    return _result("numa_nps", policy.get("outside_allowed", "fail"), observed, expected, fix + wording, source)


def _check_smt(facts, gen):
    want = (gen or {}).get("smt", "disabled")
    source = (gen or {}).get("bios_source") or _BIOS_SOURCE
    active = facts["smt_active"]
    if active is None:
        return _result("smt", "unknown", "sys/devices/system/cpu/smt/active missing", "SMT %s" % want,
                       "run on the node itself", source)
    observed = "active" if active == "1" else "inactive"
    if want != "disabled" or active != "1":
        return _result("smt", "pass", observed, "SMT %s" % want, source=source)
    return _result("smt", "warn", observed, "SMT %s (compute-bound workloads)" % want,
                   "set BIOS AMD CBS > CPU Common Options > SMT Control = Disable (AMD: Auto if the workload "
                   "is not compute-bound), or 'echo off > /sys/devices/system/cpu/smt/control'", source)


def _check_numa_balancing(facts, host):
    spec = host.get("numa_balancing") or {}
    want = str(spec.get("expected", "0"))
    value = facts["numa_balancing"]
    source = spec.get("source", "")
    cvs = "test_check_numa_balancing"
    if value is None:
        return _result("numa_balancing", "unknown", "proc/sys/kernel/numa_balancing missing", want,
                       "kernel without NUMA balancing support, or not readable", source, cvs)
    if value == want:
        return _result("numa_balancing", "pass", value, want, source=source, cvs=cvs)
    return _result("numa_balancing", "fail", value, want,
                   "sysctl kernel.numa_balancing=0, persisted in /etc/sysctl.d (role topotune.instinct.kernel_tuning, "
                   "kernel_tuning_numa_balancing_disable: true)", source, cvs)


def _check_thp(facts, host, options):
    spec = host.get("transparent_hugepage") or {}
    want = options.get("transparent_hugepage") or spec.get("expected", "always")
    value = facts["thp"]
    source = spec.get("source", "")
    if value is None:
        return _result("transparent_hugepage", "unknown", "sys/kernel/mm/transparent_hugepage/enabled missing", want,
                       "kernel without THP, or not readable", source)
    if value == want:
        return _result("transparent_hugepage", "pass", value, want, source=source)
    return _result("transparent_hugepage", spec.get("level", "warn"), value, want,
                   "set transparent_hugepage=%s on the kernel command line (kernel_tuning_cmdline) or "
                   "echo %s > /sys/kernel/mm/transparent_hugepage/enabled" % (want, want), source)


def _check_cstate(facts, host):
    spec = host.get("cstate_c2") or {}
    source = spec.get("source", "")
    tokens = cmdline_params(facts["cmdline"])
    for tok in tokens:
        if tok.startswith("processor.max_cstate="):
            limit = _int_or_none(tok.split("=", 1)[1])
            if limit is not None and limit < 2:
                return _result("cstate_c2", "pass", tok, "C2 disabled", source=source)
    idle = facts["cpuidle"]
    if not idle:
        return _result("cstate_c2", "unknown", "no cpuidle states exposed (VM or cpuidle off)", "C2 disabled",
                       "nothing to do if the hypervisor owns C-states; otherwise check the cpuidle driver", source)
    c2 = idle.get("C2")
    if c2 is None:
        return _result("cstate_c2", "pass", "no C2 state (states: %s)" % ", ".join(sorted(idle)), "C2 disabled",
                       source=source)
    if not c2["enabled"]:
        return _result("cstate_c2", "pass", "C2 disabled on %d CPU(s)" % len(c2["disabled"]), "C2 disabled",
                       source=source)
    return _result("cstate_c2", spec.get("level", "warn"), "C2 enabled on CPUs %s" % format_cpulist(c2["enabled"]),
                   "C2 disabled", "cpupower idle-set -d 2, persisted by role topotune.instinct.kernel_tuning "
                   "(kernel_tuning_c2_disable: true)", source)


def _check_governor(facts, host, options):
    spec = host.get("cpu_governor") or {}
    want = options.get("cpu_governor") or spec.get("expected", "performance")
    source = spec.get("source", "")
    govs = facts["governors"]
    if not govs:
        return _result("cpu_governor", "unknown", "no cpufreq on this node (VM or driver missing)", want,
                       "nothing to set: the hypervisor or firmware owns CPU frequency", source)
    observed = "; ".join("%s on %s" % (g, format_cpulist(c)) for g, c in sorted(govs.items()))
    if list(govs) == [want]:
        return _result("cpu_governor", "pass", observed, want, source=source)
    return _result("cpu_governor", spec.get("level", "warn"), observed, want,
                   "role topotune.instinct.cpu_governor (cpu_governor_governor: %s)" % want, source)


def _gib(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def _check_online_memory(facts, gen, host, options):
    """Online system memory (memory blocks x block_size_bytes, what lsmem sums) against the generation's minimum of
    its card (``host.online_memory.generations``), or ``platform_checks_expected.min_online_memory_gib``, which
    replaces it: one owner of the minimum, one check (CVS ``test_check_online_memory``)."""
    spec = host.get("online_memory") or {}
    cvs = "test_check_online_memory"
    name = (gen or {}).get("name")
    pinned = (options.get("expected") or {}).get("min_online_memory_gib")
    entry = ((spec.get("generations") or {}).get(name) or {}) if name else {}
    sources = ["%s %s (%s)" % (item.get("document", ""), item.get("section", ""), str(item.get("commit", ""))[:7])
               for item in entry.get("sources") or []]
    if pinned:
        levels = [(float(pinned), "fail", "platform_checks_expected.min_online_memory_gib")]
        source = "platform_checks_expected.min_online_memory_gib; " + spec.get("source", "")
    else:
        levels = [(float(entry[key]), spec.get(level, default), "%s's %s" % (name, key))
                  for key, level, default in (("min_gib", "below_min", "fail"),
                                              ("recommended_gib", "below_recommended", "warn"))
                  if entry.get(key)]
        source = "; ".join(sources + [spec.get("source", "")])
    expected = "; ".join(">= %s GiB online (%s below: %s)" % (_gib(gib), level, what) for gib, level, what in levels)
    have = (facts.get("expected") or {}).get("online_memory_bytes")
    offline = (facts.get("expected") or {}).get("offline_memory_bytes") or 0
    if not levels:
        why = entry.get("unknown") or ("no minimum for %s" % name if name else "GPU generation unknown")
        expected = "a minimum: %s" % why
    if have is None:
        return _result("online_memory", "unknown", "no online memory blocks under sys/devices/system/memory "
                       "(block_size_bytes, memory*/online or state)", expected,
                       "run on the node itself, or read 'lsmem' there (a kernel without memory hotplug sysfs has no "
                       "memory blocks)", source, cvs)
    gib = have / float(1 << 30)
    observed = "%s GiB online" % _gib(gib)
    if offline:
        observed += ", %s GiB in offline blocks" % _gib(offline / float(1 << 30))
    if not levels:
        return _result("online_memory", "unknown", observed, expected,
                       "set platform_checks_expected.min_online_memory_gib (or platform_checks_generation)", source,
                       cvs)
    status, below = "pass", None
    for minimum, level, what in levels:
        if gib < minimum and _RANK[level] > _RANK[status]:
            status, below = level, (minimum, what)
    if status == "pass":
        return _result("online_memory", "pass", observed, expected, source=source, cvs=cvs)
    fix = ("below %s GiB (%s): " % (_gib(below[0]), below[1]) +
           ("bring the offline blocks online (lsmem -o RANGE,STATE; chmem -e, or echo online > "
            "/sys/devices/system/memory/memoryN/state) and find why they went offline; " if offline else "") +
           "check DIMM population and failed DIMMs or channels in the BIOS/BMC (the installed memory against the "
           "platform's configuration)")
    return _result("online_memory", status, observed, expected, fix, source, cvs)


def _check_bios_version(facts):
    """The BIOS version reported when no version is pinned (platform_checks_expected.bios_version checks it)."""
    value = facts["bios_version"]
    source = "sys/class/dmi/id/bios_version (dmidecode -s bios-version); " + _CVS_SOURCE
    cvs = "test_check_bios_version"
    if value is None:
        return _result("bios_version", "unknown", "sys/class/dmi/id/bios_version missing", "any",
                       "no DMI on this platform (VM or ARM): attest the BIOS version by hand", source, cvs)
    return _result("bios_version", "pass", value, "any (set platform_checks_expected.bios_version to pin)",
                   source=source, cvs=cvs)


def attest_items(gen, tables, options=None):
    """The BIOS settings to attest on this node: the generation's table, with the items of AMD's table for the node's
    role (``bios_attest_roles``: bare metal, or a virtualization host) replacing those of the same id."""
    role = "virtualization_host" if (options or {}).get("virtualization_host") else "bare_metal"
    items = [dict(item, source=(gen or {}).get("bios_source", "")) for item in (gen or {}).get("bios_attest") or []]
    spec = ((tables or {}).get("bios_attest_roles") or {}).get(role) or {}
    if (gen or {}).get("name") in (spec.get("generations") or []):
        index = {item["id"]: pos for pos, item in enumerate(items)}
        for item in spec.get("items") or []:
            item = dict(item, source=spec.get("source", ""))
            if item["id"] in index:
                items[index[item["id"]]] = item
            else:
                items.append(item)
    return items


def _check_attest(gen, tables=None, options=None):
    results = []
    role = "virtualization host" if (options or {}).get("virtualization_host") else "bare metal"
    for item in attest_items(gen, tables, options):
        results.append(_result(item["id"], "unknown", "not observable from the OS (%s)" % role, item["expected"],
                               "attest in BIOS setup: %s = %s" % (item["setting"], item["expected"]),
                               item.get("source", "")))
    return results


def pending_parameters(entries):
    """The parameters configured for the next boot in ``entries``: plain ones, and kernel_tuning's
    ``kernel_tuning_cmdline_pending`` form, where ``+param`` is to be added (configured) and ``-param`` to be removed
    (not a configured parameter)."""
    return [entry[1:] if entry.startswith("+") else entry for entry in entries or () if not entry.startswith("-")]


def run_checks(facts, knowledge, options=None):
    """Return the list of check results for ``facts`` (from ``gather``) against ``knowledge``."""
    options = dict(options or {})
    options["pending_cmdline"] = pending_parameters(options.get("pending_cmdline"))
    host = (knowledge or {}).get("host") or {}
    identity = node_identity(facts, knowledge, options)
    gen = generation_entry((knowledge or {}).get("generations"), identity)
    results = [
        _check_generation(identity, gen),
        _check_gpu_count(facts, identity, gen, options),
        _check_pcie(facts, gen),
        _check_gpu_numa(facts),
    ]
    results.extend(_check_cmdline(facts, gen, options.get("pending_cmdline") or (),
                                  ((knowledge or {}).get("tables") or {}).get("kernel_params_common")))
    results.extend([
        _check_iommu(facts, gen, host, options,
                     ((knowledge or {}).get("pcie_health") or {}).get("iommu_passthrough") or {}),
        _check_nps(facts, gen),
        _check_smt(facts, gen),
        _check_numa_balancing(facts, host),
        _check_thp(facts, host, options),
        _check_cstate(facts, host),
        _check_governor(facts, host, options),
        _check_online_memory(facts, gen, host, options),
    ])
    # pinned versions and sizes (platform_checks_expected): a uniformly wrong fleet fails
    expected = check_expected(options.get("expected"))
    if "bios_version" not in expected:
        results.append(_check_bios_version(facts))
    results.extend(expected_values.run_checks(facts, expected))
    # AMD's ROCm compatibility matrix (knowledge/rocm_compatibility.yml, knowledge key rocm_compatibility): the OS and
    # kernel for the installed ROCm release; left out without the key
    results.extend(os_support.run_checks(facts, (knowledge or {}).get("rocm_compatibility"), gen))
    results.extend(_check_attest(gen, (knowledge or {}).get("tables"), options))
    # PCIe and RDMA health: knowledge/pcie_health.yml arrives as the knowledge's pcie_health key
    results.extend(pcie_health.run_checks(facts.get("pcie"), (knowledge or {}).get("pcie_health") or {}, gen, options))
    # the RDMA NICs (same knowledge file); the rate is judged on the NICs paired with a GPU (the rails)
    results.extend(rdma_health.run_checks(facts.get("rdma"), (knowledge or {}).get("pcie_health") or {}, options,
                                          rdma_affinity(facts)))
    # GPU health: only when gathered and knowledge/gpu_health.yml is passed (knowledge key gpu_health)
    results.extend(gpu_health.run_checks(facts.get("health"), (knowledge or {}).get("gpu_health"), gen, facts,
                                         options, host))
    if identity["kind"] == "vf":
        results = _as_guest(results, identity, gen)
    skip = set(options.get("skip") or [])
    return [r for r in results if r["id"] not in skip]
