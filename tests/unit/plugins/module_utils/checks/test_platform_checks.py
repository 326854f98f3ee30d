"""Platform check logic: table-driven on each generation's expected values (knowledge/gpu_generations.yml),
and the module's gathering on simulated sysroots (real-capture, synthetic and fault profiles)."""

import copy
import importlib.util
import os

import pytest

from ansible_collections.topotune.instinct.plugins.filter.checks_report import checks_report
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
KNOWLEDGE = load_knowledge("gpu_generations")
GENERATIONS = {g["name"]: g for g in KNOWLEDGE["generations"]}
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)


def _by_id(results):
    return {r["id"]: r for r in results}


def tuned_facts(gen, **over):
    """Facts of a correctly tuned node of generation ``gen`` (everything at its expected value)."""
    pcie = gen["pcie"]
    count = gen["devices_per_node"] or 4
    nps = gen["nps_allowed"][0]
    facts = {
        "gpus": [{"bdf": "0000:%02x:00.0" % (0x10 * (i + 1)), "device_id": gen["devices"][0]["id"],
                  "numa_node": i * 2 // count, "current_width": pcie["width"], "max_width": pcie["width"],
                  "current_speed_gts": pcie["speed_gts"], "max_speed_gts": pcie["speed_gts"]} for i in range(count)],
        "cmdline": "BOOT_IMAGE=/vmlinuz ro " + " ".join(gen["kernel_params"]["required"]) + " processor.max_cstate=1",
        "iommu_units": 4 if gen["iommu_bios"] == "enabled" else 0,
        "numa_nodes": 2 * nps, "packages": 2, "smt_active": "0", "numa_balancing": "0", "thp": "always",
        "bios_version": "1.2.3", "cpu_vendor": "AuthenticAMD", "cpus": list(range(128)),
        "governors": {"performance": list(range(128))}, "no_cpufreq": [],
        # IOMMU on: every GPU in its own group in the identity domain (passthrough in effect)
        "iommu_groups": {str(i): "identity" for i in range(count)} if gen["iommu_bios"] == "enabled" else None,
        "gpu_iommu_groups": {"0000:%02x:00.0" % (0x10 * (i + 1)): str(i) for i in range(count)}
        if gen["iommu_bios"] == "enabled" else {},
        "cpuidle": {"C1": {"enabled": list(range(128)), "disabled": []},
                    "C2": {"enabled": [], "disabled": list(range(128))}},
        # online memory at the generation's minimum of AMD's acceptance guide (check online_memory)
        "expected": {"online_memory_bytes": max(v or 0 for k, v in KNOWLEDGE["host"]["online_memory"]["generations"][
            gen["name"]].items() if k.endswith("_gib")) << 30, "offline_memory_bytes": 0},
    }
    facts.update(over)
    return facts


GEN_NAMES = sorted(GENERATIONS)


def test_knowledge_entries_are_complete_and_sourced():
    fields = ("name", "devices", "devices_source", "gfx", "pcie", "nps_allowed", "iommu_bios", "kernel_params", "smt",
              "companion_cpu", "source")
    seen = set()
    for gen in KNOWLEDGE["generations"]:
        for field in fields:
            assert field in gen, "%s lacks %s" % (gen.get("name"), field)
        assert gen["devices"][0]["kind"] in ("physical", "apu"), "%s: the main part comes first" % gen["name"]
        for dev in gen["devices"]:
            assert set(dev) == {"id", "name", "kind"} and dev["kind"] in ("physical", "hf", "vf", "apu"), dev
            assert dev["id"] == dev["id"].lower() and dev["id"].startswith("0x") and len(dev["id"]) == 6, dev
            assert dev["id"] not in seen, "device id %s in two generations" % dev["id"]
            seen.add(dev["id"])
        assert gen["gfx"].startswith("gfx")
        assert gen["kernel_params"]["source"]
    for name in ("MI210", "MI250X", "MI300X", "MI308X", "MI325X", "MI355X"):
        assert name in GENERATIONS


@pytest.mark.parametrize("name", GEN_NAMES)
def test_tuned_node_passes_every_observable_check(name):
    gen = GENERATIONS[name]
    results = pc.run_checks(tuned_facts(gen), KNOWLEDGE, {"gpu_count": gen["devices_per_node"] or 4})
    bad = [r for r in results if r["status"] != "pass" and not r["id"].startswith("bios_")]
    assert not bad, bad
    attest = [r for r in results if r["id"].startswith("bios_") and r["id"] != "bios_version"]
    assert (attest or not gen["bios_attest"]) and all(
        r["status"] == "unknown" and r["remediation"].startswith("attest") for r in attest)
    assert _by_id(results)["gpu_generation"]["observed"].startswith(name)


@pytest.mark.parametrize("name", GEN_NAMES)
def test_link_below_the_generations_speed_or_width_fails(name):
    gen = GENERATIONS[name]
    facts = tuned_facts(gen)
    facts["gpus"][1].update(current_width=8)
    facts["gpus"][2].update(current_speed_gts=gen["pcie"]["speed_gts"] / 2)
    res = _by_id(pc.run_checks(facts, KNOWLEDGE))["gpu_pcie_speed_width"]
    assert res["status"] == "fail"
    assert facts["gpus"][1]["bdf"] in res["observed"] and facts["gpus"][2]["bdf"] in res["observed"]
    assert "x%d" % gen["pcie"]["width"] in res["expected"] and res["remediation"]
    assert res["cvs"] == "test_check_gpu_pcie_speed_width"


@pytest.mark.parametrize("name", GEN_NAMES)
def test_nps_outside_allowed_values_is_reported_at_the_generations_level(name):
    gen = GENERATIONS[name]
    bad_nps = next(n for n in (1, 2, 4, 3) if n not in gen["nps_allowed"]) if gen["nps_allowed"] != [1, 2, 4] else 3
    res = _by_id(pc.run_checks(tuned_facts(gen, numa_nodes=2 * bad_nps), KNOWLEDGE))["numa_nps"]
    assert res["status"] == gen["nps_policy"]["outside_allowed"], res
    assert "NPS%d" % bad_nps in res["observed"] and "NUMA nodes per socket" in res["remediation"]


@pytest.mark.parametrize("name", GEN_NAMES)
def test_iommu_disabled(name):
    gen = GENERATIONS[name]
    res = _by_id(pc.run_checks(tuned_facts(gen, iommu_units=0), KNOWLEDGE))["iommu_state"]
    assert res["status"] == ("fail" if gen["iommu_bios"] == "enabled" else "pass")
    # X2APIC: >= 256 CPUs need the IOMMU whatever the generation
    res = _by_id(pc.run_checks(tuned_facts(gen, iommu_units=0, cpus=list(range(256))), KNOWLEDGE))["iommu_state"]
    assert res["status"] == "fail" and "X2APIC" in res["remediation"]
    # the failure itself leaves only 255 CPUs online: cpu/possible still counts the machine's 384
    res = _by_id(pc.run_checks(tuned_facts(gen, iommu_units=0, cpus=list(range(255)), cpus_possible=384),
                               KNOWLEDGE))["iommu_state"]
    assert res["status"] == "fail" and "384 CPUs" in res["observed"] + res["remediation"]


@pytest.mark.parametrize("param,check_id,cvs", [
    ("iommu=pt", "iommu_pt", "test_check_iommu_pt"),
    ("pci=realloc=off", "pci_realloc", "test_check_pci_realloc"),
    # "Required" for every Instinct generation (acceptance docs kernel-parameters.md), no CVS test
    ("pci=bfsort", "kernel_param_pci_bfsort", None),
])
@pytest.mark.parametrize("name", GEN_NAMES)
def test_missing_kernel_parameter_fails_with_cvs_name(name, param, check_id, cvs):
    gen = GENERATIONS[name]
    facts = tuned_facts(gen)
    facts["cmdline"] = facts["cmdline"].replace(param, "")
    res = _by_id(pc.run_checks(facts, KNOWLEDGE))[check_id]
    assert res["status"] == "fail" and res["cvs"] == cvs and param in res["remediation"]


@pytest.mark.parametrize("name", GEN_NAMES)
def test_configured_parameter_awaiting_reboot_warns(name):
    facts = tuned_facts(GENERATIONS[name])
    facts["cmdline"] = facts["cmdline"].replace("iommu=pt", "")
    results = _by_id(pc.run_checks(facts, KNOWLEDGE, {"pending_cmdline": ["iommu=pt"]}))
    assert results["iommu_pt"]["status"] == "warn"
    assert results["iommu_pt"]["observed"] == "configured, pending reboot" and "reboot" in results["iommu_pt"]["remediation"]
    assert results["pci_realloc"]["status"] == "pass"


@pytest.mark.parametrize("cmdline,ok", [
    ("ro iommu=pt pci=realloc=off", True),
    ("ro iommu=pt pci=bfsort,realloc=off", True),
    ("ro iommu=on pci=realloc=on", False),
    ('ro "iommu=pt" "pci=realloc=off"', True),
])
def test_cmdline_parsing(cmdline, ok):
    gen = GENERATIONS["MI300X"]
    results = _by_id(pc.run_checks(tuned_facts(gen, cmdline=cmdline), KNOWLEDGE))
    assert (results["iommu_pt"]["status"] == "pass" and results["pci_realloc"]["status"] == "pass") is ok


def test_intel_host_needs_intel_iommu():
    results = _by_id(pc.run_checks(tuned_facts(GENERATIONS["MI300X"], cpu_vendor="GenuineIntel"), KNOWLEDGE))
    assert results["kernel_param_intel_iommu_on"]["status"] == "fail"


@pytest.mark.parametrize("over,check_id,status", [
    ({"numa_balancing": "1"}, "numa_balancing", "fail"),
    ({"numa_balancing": None}, "numa_balancing", "unknown"),
    ({"thp": "madvise"}, "transparent_hugepage", "warn"),
    ({"smt_active": "1"}, "smt", "warn"),
    ({"governors": {"schedutil": [0, 1], "performance": list(range(2, 128))}}, "cpu_governor", "warn"),
    ({"governors": {}, "no_cpufreq": list(range(128))}, "cpu_governor", "unknown"),
    ({"cmdline": "ro iommu=pt pci=realloc=off", "cpuidle": {"C2": {"enabled": [3], "disabled": [0, 1, 2]}}},
     "cstate_c2", "warn"),
    ({"cmdline": "ro iommu=pt pci=realloc=off", "cpuidle": None}, "cstate_c2", "unknown"),
    ({"bios_version": None}, "bios_version", "unknown"),
    ({"gpus": []}, "gpu_generation", "unknown"),
])
def test_single_deviation(over, check_id, status):
    res = _by_id(pc.run_checks(tuned_facts(GENERATIONS["MI300X"], **over), KNOWLEDGE))[check_id]
    assert res["status"] == status, res
    assert res["remediation"], res


def test_numa_minus1_is_harmless_on_a_single_numa_node():
    gen = GENERATIONS["MI210"]
    facts = tuned_facts(gen, numa_nodes=1, packages=1)
    facts["gpus"] = [dict(g, numa_node=-1) for g in facts["gpus"]]
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["gpu_numa_affinity"]["status"] == "pass"
    facts["numa_nodes"] = 2
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["gpu_numa_affinity"]["status"] == "warn"


def test_options_override_expectations():
    facts = tuned_facts(GENERATIONS["MI300X"], thp="madvise")
    opts = {"transparent_hugepage": "madvise", "expected": {"bios_version": "9.9"}, "gpu_count": 4, "skip": ["smt"]}
    results = _by_id(pc.run_checks(facts, KNOWLEDGE, opts))
    assert results["transparent_hugepage"]["status"] == "pass"
    assert results["bios_version"]["status"] == "fail"
    assert results["pci_accelerators"]["status"] == "fail" and "fix platform_checks_gpu_count" in \
        results["pci_accelerators"]["remediation"]
    assert "smt" not in results


def test_forced_unknown_generation_fails_clearly():
    res = _by_id(pc.run_checks(tuned_facts(GENERATIONS["MI300X"]), KNOWLEDGE, {"generation": "MI999"}))
    assert res["gpu_generation"]["status"] == "fail" and "platform_checks_generation" in res["gpu_generation"]["remediation"]


def test_generation_detection_by_alias_and_partitions():
    assert pc.node_identity({"gpus": []}, KNOWLEDGE, {"generation": "mi250"})["generation"] == "MI250X"
    gen = GENERATIONS["MI308X"]
    facts = tuned_facts(gen)
    # CPX: partitions are PCI functions .0-.3 of one GPU; the count is per physical GPU
    facts["gpus"] = [dict(g, bdf=g["bdf"][:-1] + str(f)) for g in facts["gpus"] for f in range(4)]
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["pci_accelerators"]["status"] == "pass"


def test_summary_and_report():
    results = pc.run_checks(tuned_facts(GENERATIONS["MI300X"], numa_balancing="1", thp="never"), KNOWLEDGE)
    summary = pc.summarize(results)
    assert summary["fail"] == 1 and summary["warn"] == 1 and summary["worst"] == "fail"
    assert summary["total"] == len(results) == sum(summary[s] for s in pc.STATUSES)
    lines = checks_report(results)
    assert lines[0].startswith("%d checks: 1 fail, 1 warn" % len(results))
    assert lines[1].startswith("FAIL    numa_balancing") and lines[2].strip().startswith("-> sysctl")
    problems = checks_report(results, only="problems")
    assert not [line for line in problems if line.startswith("PASS")]
    # a node's whole report (what the role prints for every node in one task) is headed by the node and generation
    titled = checks_report({"host": "node1", "generation": "MI300X", "results": results}, only="problems")
    assert titled == ["platform checks on node1 (MI300X)"] + problems
    assert checks_report({"host": "vm1", "generation": None, "results": []})[0] == "platform checks on vm1 (unknown generation)"


# ------------------------------------------------------------------------------- simulated profiles
@pytest.fixture(scope="module")
def profile_root(sim_tree):
    # the session's shared trees (tests/conftest.py): every test here only reads them (one proves it)
    return sim_tree


@pytest.mark.parametrize("profile,generation,gpus", [
    ("mi210-8gpu-2hive", "MI210", 8),
    ("mi300x-8gpu-cpx", "MI300X", 8),
    ("mi308x-cpx", "MI308X", 8),
    ("mi250x-8gcd", "MI250X", 8),
    ("mi300x-8gpu-spx", "MI300X", 8),
])
def test_profiles_detect_generation_and_links(profile_root, profile, generation, gpus):
    facts = pc.gather(profile_root(profile))
    results = _by_id(pc.run_checks(facts, KNOWLEDGE, {"gpu_count": gpus}))
    assert results["gpu_generation"]["observed"].startswith(generation)
    assert results["pci_accelerators"]["status"] == "pass"
    assert results["gpu_pcie_speed_width"]["status"] == "pass"
    assert results["numa_nps"]["status"] == "pass", results["numa_nps"]
    # the simulated nodes are untuned: these must be reported
    assert results["numa_balancing"]["status"] == "fail"
    assert results["iommu_pt"]["status"] == "fail"


def test_fault_x8_gen3_fails_the_link(profile_root):
    res = _by_id(pc.run_checks(pc.gather(profile_root("fault-x8-gen3")), KNOWLEDGE))["gpu_pcie_speed_width"]
    assert res["status"] == "fail"
    assert res["observed"] == "0000:5c:00.0 x8 8.0 GT/s (max x16 32.0 GT/s)"
    assert "reseat" in res["remediation"]


def test_fault_missing_gpu_fails_the_count(profile_root):
    res = _by_id(pc.run_checks(pc.gather(profile_root("fault-missing-gpu")), KNOWLEDGE))["pci_accelerators"]
    assert res["status"] == "fail" and res["observed"] == "7 GPU device(s)" and "missing" in res["remediation"]


def test_fault_numa_minus1_vm(profile_root):
    facts = pc.gather(profile_root("fault-numa-minus1"))
    results = _by_id(pc.run_checks(facts, KNOWLEDGE))
    assert results["gpu_numa_affinity"]["status"] == "warn" and "-1" in results["gpu_numa_affinity"]["observed"]
    assert results["cpu_governor"]["status"] == "unknown"
    assert results["iommu_state"]["status"] == "fail"


def test_gather_on_empty_sysroot_degrades_to_unknown(tmp_path):
    results = pc.run_checks(pc.gather(str(tmp_path)), KNOWLEDGE)
    statuses = {r["id"]: r["status"] for r in results}
    assert statuses["numa_balancing"] == "unknown" and statuses["gpu_generation"] == "unknown"
    assert statuses["iommu_pt"] == "unknown"


def test_knowledge_roundtrip_is_not_mutated():
    before = copy.deepcopy(KNOWLEDGE)
    pc.run_checks(tuned_facts(GENERATIONS["MI250X"]), KNOWLEDGE)
    assert KNOWLEDGE == before


class _FakeModule:
    def __init__(self, **params):
        from ansible_collections.topotune.instinct.plugins.module_utils.core.options import defaults

        # the module's defaults, as its argument spec gives them (declared once: platform_checks.OPTIONS)
        self.params = dict(defaults(pc.OPTIONS), **params)
        self.check_mode = True

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs["msg"])


def test_module_class_on_a_profile_is_read_only(profile_root):
    from ansible_collections.topotune.instinct.plugins.modules.platform_checks import PlatformChecks

    root = profile_root("mi250x-8gcd")
    before = {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns for d, _unused, fs in os.walk(root) for f in fs}
    out = PlatformChecks(_FakeModule(sysroot=root, knowledge=KNOWLEDGE, skip=["smt"])).run()
    assert out["changed"] is False and out["generation"] == "MI250X"
    assert out["summary"]["total"] == len(out["results"]) and "smt" not in {r["id"] for r in out["results"]}
    after = {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns for d, _unused, fs in os.walk(root) for f in fs}
    assert before == after


def test_module_class_refuses_a_knowledge_without_generations(tmp_path):
    from ansible_collections.topotune.instinct.plugins.modules.platform_checks import PlatformChecks

    with pytest.raises(AssertionError, match="gpu_generations"):
        PlatformChecks(_FakeModule(sysroot=str(tmp_path), knowledge={})).run()


@pytest.mark.parametrize("name,numa_nodes,status", [
    ("MI300X", 8, "warn"),     # NPS4: "should not be used ... subject to change", not a failure
    ("MI300X", 1, "fail"),     # NPS0: "not allowed"
    ("MI355X", 4, "warn"),
    ("MI250X", 4, "pass"),     # NPS2 on MI200 hosts is allowed
    ("MI250X", 1, "fail"),
])
def test_nps_outside_the_recommended_value_follows_amds_wording(name, numa_nodes, status):
    res = _by_id(pc.run_checks(tuned_facts(GENERATIONS[name], numa_nodes=numa_nodes), KNOWLEDGE))["numa_nps"]
    assert res["status"] == status
    if status == "warn":
        # the acceptance docs v1.2 wording; amdgpu-docs' "should not be used" is the other document
        assert "some workloads may have performance improvements" in res["remediation"] and "NPS1" in res["remediation"]
        assert "bios-settings.md at commit 23e7312" in res["source"]


# Device ids of ROCm/gpu-operator's NFD rule (commit 33e9097), read by hand: HF variants and SR-IOV functions.
@pytest.mark.parametrize("device_id,name,kind", [
    ("0x74a9", "MI300X", "hf"), ("0x74b5", "MI300X", "vf"), ("0x74bd", "MI300X", "vf"),
    ("0x74a8", "MI308X", "hf"), ("0x74b6", "MI308X", "vf"), ("0x74bc", "MI308X", "vf"),
    ("0x74b9", "MI325X", "vf"), ("0x75b0", "MI355X", "vf"), ("0x75b3", "MI355X", "vf"), ("0x7410", "MI210", "vf"),
    ("0x74a0", "MI300A", "apu"), ("0x740f", "MI210", "physical"), ("0x75a0", "MI355X", "physical"),
])
def test_variants_and_mi300a_are_recognised(device_id, name, kind):
    gen = GENERATIONS[name]
    facts = tuned_facts(gen)
    facts["gpus"] = [dict(g, device_id=device_id) for g in facts["gpus"]]
    results = _by_id(pc.run_checks(facts, KNOWLEDGE))
    assert results["gpu_generation"]["status"] == "pass" and name in results["gpu_generation"]["observed"]
    assert pc.node_identity(facts, KNOWLEDGE)["kind"] == kind
    # every variant counts as a GPU of its generation (an 8x MI300X-HF node shows 8 GPUs, not 0)
    assert results["pci_accelerators"]["observed"] == "%d GPU device(s)" % len(facts["gpus"])
    assert results["pci_accelerators"]["status"] == ("pass" if gen["devices_per_node"] else "unknown")
    host_level = [results[i]["status"] for i in pc.HOST_ONLY]
    if kind == "vf":
        # a guest cannot see the host's link, NUMA, IOMMU or BIOS: asked to check them there, not failed
        assert set(host_level) == {"unknown"} and "SR-IOV virtual function" in results["iommu_state"]["observed"]
        assert "on the host" in results["gpu_pcie_speed_width"]["remediation"]
    else:
        assert "unknown" not in host_level


def test_mi300a_requires_its_own_kernel_parameters():
    gen = GENERATIONS["MI300A"]
    assert {"pci=realloc=off", "transparent_hugepage=always", "numa_balancing=disable"} <= set(gen["kernel_params"]["required"])
    facts = tuned_facts(gen)
    facts["cmdline"] = facts["cmdline"].replace("transparent_hugepage=always", "")
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["kernel_param_transparent_hugepage_always"]["status"] == "fail"


# ------------------------------------------------------------------------------ IOMMU passthrough in effect
PCIE = load_knowledge("pcie_health")
WITH_PCIE = dict(KNOWLEDGE, pcie_health=PCIE)
TSME_LINE = "[    0.401223] iommu: Memory encryption detected - Disabling default IOMMU Passthrough\n"


@pytest.mark.parametrize("over,status,text", [
    # the kernel translates the GPUs' DMA (iommu=pt missing, or dropped): today only the command line is read
    ({"iommu_groups": {str(i): "DMA-FQ" for i in range(8)}}, "fail", "group 0 DMA-FQ"),
    ({"iommu_groups": {"0": "DMA", **{str(i): "identity" for i in range(1, 8)}}}, "fail", "0000:10:00.0 (group 0 DMA)"),
    ({"iommu_groups": {str(i): "unmanaged" for i in range(8)}}, "pass", "unmanaged"),   # VFIO: assigned to VMs
    # no groups: the kernel's boot line (drivers/iommu/iommu.c iommu_subsys_init)
    ({"iommu_groups": None, "health": {"kernel_log": "[    0.4] iommu: Default domain type: Passthrough \n"}},
     "pass", "kernel: Default domain type: Passthrough"),
    ({"iommu_groups": None, "health": {"kernel_log": "[    0.4] iommu: Default domain type: Translated\n"}},
     "fail", "Default domain type: Translated"),
    ({"iommu_groups": None}, "unknown", "no 'Default domain type' line"),
])
def test_iommu_passthrough_must_be_in_effect(over, status, text):
    facts = tuned_facts(GENERATIONS["MI300X"], **over)
    res = _by_id(pc.run_checks(facts, WITH_PCIE))["iommu_state"]
    assert res["status"] == status and text in res["observed"], res
    assert "iommu_groups" in res["source"] and "iommu.c" in res["source"]


def test_iommu_passthrough_dropped_by_memory_encryption_or_pending():
    translated = {str(i): "DMA-FQ" for i in range(8)}
    res = _by_id(pc.run_checks(tuned_facts(GENERATIONS["MI300X"], iommu_groups=translated,
                                           health={"kernel_log": TSME_LINE}), WITH_PCIE))["iommu_state"]
    assert res["status"] == "fail" and "TSME = Disabled" in res["remediation"]
    # configured for the next boot (kernel_tuning's pending list): a warning, as iommu_pt says
    facts = tuned_facts(GENERATIONS["MI300X"], iommu_groups=translated)
    facts["cmdline"] = facts["cmdline"].replace("iommu=pt", "")
    res = _by_id(pc.run_checks(facts, WITH_PCIE, {"pending_cmdline": ["iommu=pt"]}))["iommu_state"]
    assert res["status"] == "warn" and "pending reboot" in res["observed"]


@pytest.mark.parametrize("virt,status", [(False, "pass"), (True, "fail")])
def test_virtualization_host_needs_the_iommu(virt, status):
    """MI200's table sets IOMMU Disabled (bare metal); AMD's virtualization table: IOMMU Enabled."""
    res = _by_id(pc.run_checks(tuned_facts(GENERATIONS["MI210"]), KNOWLEDGE,
                               {"virtualization_host": virt}))["iommu_state"]
    assert res["status"] == status, res


def test_profiles_show_passthrough_in_effect(profile_root):
    results = _by_id(pc.run_checks(pc.gather(profile_root("mi300x-8gpu-spx")), WITH_PCIE, {"gpu_count": 8}))
    assert results["iommu_state"]["status"] == "pass" and "identity" in results["iommu_state"]["observed"]


# ------------------------------------------------------------------------------------ BIOS tables by role
def _attest(name, virt=False):
    results = pc.run_checks(tuned_facts(GENERATIONS[name]), KNOWLEDGE, {"virtualization_host": virt})
    return {r["id"]: r for r in results if r["id"].startswith("bios_") and r["id"] != "bios_version"}


def test_bios_attest_follows_the_acceptance_docs_and_the_role():
    bare = _attest("MI300X")
    # "Required BIOS Settings" and "Optimal Performance" of docs/common/bios-settings.md v1.2
    assert bare["bios_ari_enumeration"]["expected"] == "Enabled (required)"
    assert bare["bios_ari_support"]["expected"] == "Enabled (required)"
    assert bare["bios_ten_bit_tag"]["expected"] == "Enabled (required)"
    assert bare["bios_gmi_folding"]["expected"] == "Disabled"
    assert bare["bios_df_cstates"]["expected"] == "Disabled"
    assert bare["bios_sriov"]["expected"].startswith("Disabled") and "pci=realloc=off" in bare["bios_sriov"]["expected"]
    assert "Without Virtualization" in bare["bios_sriov"]["source"] and "bare metal" in bare["bios_sriov"]["observed"]
    assert "bios_svm" not in bare
    virt = _attest("MI300X", virt=True)
    assert virt["bios_sriov"]["expected"] == "Enabled" and virt["bios_svm"]["expected"] == "Enabled"
    assert virt["bios_resizable_bar"]["expected"] == "Enabled" and "for Virtualization" in virt["bios_sriov"]["source"]
    assert set(virt) == set(bare) | {"bios_svm", "bios_resizable_bar"}
    # MI200: its own table (SR-IOV Disabled, ten-bit tag Auto, DF C-states Enabled); a virtualization host takes
    # AMD's virtualization table, the only one there is
    mi210 = _attest("MI210")
    assert mi210["bios_sriov"]["expected"] == "Disabled" and mi210["bios_ten_bit_tag"]["expected"] == "Auto"
    assert mi210["bios_df_cstates"]["expected"] == "Enabled" and "bios_gmi_folding" not in mi210
    assert _attest("MI210", virt=True)["bios_sriov"]["expected"] == "Enabled"
    for item in list(bare.values()) + list(mi210.values()):
        assert item["status"] == "unknown" and item["remediation"].startswith("attest in BIOS setup")
        assert "system-acceptance-docs" in item["source"] and "23e7312" in item["source"], item


def test_module_takes_the_virtualization_host_option(run_module, profile_root):
    from ansible_collections.topotune.instinct.plugins.modules import platform_checks as module

    knowledge = dict(WITH_PCIE)
    rc, out = run_module(module, sysroot=profile_root("fault-acs-enabled"), knowledge=knowledge, gpu_count=8,
                         virtualization_host=True)
    by_id = {r["id"]: r for r in out["results"]}
    assert rc == 0 and by_id["pci_acs"]["status"] == "pass" and by_id["bios_svm"]["expected"] == "Enabled"
    rc, out = run_module(module, sysroot=profile_root("fault-acs-enabled"), knowledge=knowledge, gpu_count=8)
    assert {r["id"]: r for r in out["results"]}["pci_acs"]["status"] == "fail"


def test_kernel_tunings_pending_entries_are_taken_as_they_are():
    assert pc.pending_parameters(["+iommu=pt", "-nokaslr", "pci=bfsort"]) == ["iommu=pt", "pci=bfsort"]
    facts = tuned_facts(GENERATIONS["MI300X"])
    facts["cmdline"] = facts["cmdline"].replace("iommu=pt", "")
    results = _by_id(pc.run_checks(facts, KNOWLEDGE, {"pending_cmdline": ["+iommu=pt", "-nokaslr"]}))
    assert results["iommu_pt"]["observed"] == "configured, pending reboot"


@pytest.mark.parametrize("options,words", [
    ({"gpu_count": -1}, "platform_checks_gpu_count must be an integer >= 0"),
    ({"sysroot": "sim"}, "platform_checks_sysroot must be an absolute path"),
    ({"report_dir": "reports"}, "platform_checks_report_dir must be empty (no file) or an absolute controller path"),
    ({"fail_on": "error"}, "platform_checks_fail_on must be one of fail, warn, never"),
])
def test_role_options_a_type_cannot_refuse_are_named(options, words):
    with pytest.raises(pc.PlatformChecksError) as info:
        pc.check_role_options(options)
    assert str(info.value).startswith("platform_checks: invalid input. ") and words in str(info.value)


def test_role_options_accept_the_defaults_and_take_a_prefix():
    pc.check_role_options({"gpu_count": 0, "sysroot": "/", "report_dir": "", "fail_on": "fail"})
    pc.check_role_options({"report_dir": "~/out/checks"})
    with pytest.raises(pc.PlatformChecksError, match="^drift_exporter: invalid input. drift_exporter_gpu_count"):
        pc.check_role_options({"gpu_count": -2}, prefix="drift_exporter_")


@pytest.mark.parametrize("fail_on,ids", [("fail", ["c"]), ("warn", ["b", "c"]), ("never", [])])
def test_blocking_results_follow_fail_on(fail_on, ids):
    results = [{"id": "a", "status": "pass"}, {"id": "b", "status": "warn"}, {"id": "c", "status": "fail"},
               {"id": "d", "status": "unknown"}]
    assert pc.blocking(results, fail_on) == ids


def test_module_checks_the_options_before_reading_the_node(run_module, tmp_path):
    from ansible_collections.topotune.instinct.plugins.modules import platform_checks as module

    rc, out = run_module(module, sysroot=str(tmp_path), knowledge=KNOWLEDGE, gpu_count=-1, report_dir="rel/checks")
    assert rc == 1 and "platform_checks_gpu_count" in out["msg"] and "platform_checks_report_dir" in out["msg"]
    rc, out = run_module(module, sysroot=str(tmp_path), knowledge=KNOWLEDGE, fail_on="warn")
    assert rc == 0 and out["blocking"] == [r["id"] for r in out["results"] if r["status"] in ("warn", "fail")]


def test_the_action_names_a_wrong_variable_before_the_module_runs():
    from unittest.mock import MagicMock

    from ansible_collections.topotune.instinct.plugins.action.platform_checks import ActionModule

    def action(args):
        task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
        plugin = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
        plugin.calls = []
        plugin._execute_module = lambda module_name=None, module_args=None, task_vars=None: plugin.calls.append(module_name) or {}
        return plugin

    plugin = action({"sysroot": "/", "gpu_count": "-1", "report_dir": "reports", "knowledge": {}})
    result = plugin.run(task_vars={})
    assert result["failed"] and "platform_checks_gpu_count" in result["msg"] and "platform_checks_report_dir" in result["msg"]
    assert plugin.calls == []
    plugin = action({"sysroot": "/sim", "gpu_count": 8, "knowledge": {}})
    plugin.run(task_vars={})
    assert plugin.calls == ["topotune.instinct.platform_checks"]


def test_the_action_passes_the_collections_knowledge_and_does_not_echo_it():
    """Without a knowledge argument the node gets the collection's generations with the PCIe and GPU health tables (the
    role passes none), and the registered result does not carry that data back; a knowledge given is passed as is."""
    from unittest.mock import MagicMock

    from ansible_collections.topotune.instinct.plugins.action.platform_checks import ActionModule

    def run(args):
        """(the module's arguments, the action's result)"""
        task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
        plugin = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
        sent = []

        def execute(module_name=None, module_args=None, task_vars=None):
            sent.append(module_args)
            return {"results": [], "invocation": {"module_args": dict(module_args)}}

        plugin._execute_module = execute
        result = plugin.run(task_vars={})
        return sent[0], result

    sent, result = run({"sysroot": "/sim"})
    assert sent["knowledge"]["generations"] == KNOWLEDGE["generations"]
    assert sent["knowledge"]["pcie_health"] == PCIE and sent["knowledge"]["gpu_health"] == load_knowledge("gpu_health")
    echoed = result["invocation"]["module_args"]["knowledge"]
    assert isinstance(echoed, str) and "gpu_generations" in echoed
    own = {"generations": [], "host": {}}
    sent, result = run({"sysroot": "/sim", "knowledge": own})
    assert sent["knowledge"] is own and result["invocation"]["module_args"]["knowledge"] is own


@pytest.mark.parametrize("report_dir,task_vars,expected", [
    # the role's default (null): checks/ under the run's directory, the playbooks' resolved one first
    (None, {"__topotune_report_dir": "/srv/topotune/out", "topotune_report_dir": "/data/out"}, "/srv/topotune/out/checks"),
    (None, {"__topotune_report_dir": "{{ topotune_report_dir | default(base ~ '/out') }}", "base": "/srv/topotune"},
     "/srv/topotune/out/checks"),
    (None, {"topotune_report_dir": "/data/out"}, "/data/out/checks"),
    (None, {}, ""),
    # a value set is taken as it is, empty for no file
    ("", {"topotune_report_dir": "/data/out"}, ""),
    ("/srv/reports", {"topotune_report_dir": "/data/out"}, "/srv/reports"),
])
def test_the_action_resolves_the_roles_default_report_dir(report_dir, task_vars, expected):
    from unittest.mock import MagicMock

    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from ansible_collections.topotune.instinct.plugins.action.platform_checks import ActionModule

    task_vars = {name: trust_as_template(value) for name, value in task_vars.items()}
    task = MagicMock(args={"sysroot": "/", "report_dir": report_dir, "knowledge": {}}, check_mode=True, diff=False,
                     async_val=0)
    plugin = ActionModule(task, MagicMock(), MagicMock(), loader=None, shared_loader_obj=None,
                          templar=Templar(loader=DataLoader(), variables=task_vars))
    sent = []
    plugin._execute_module = lambda module_name=None, module_args=None, task_vars=None: sent.append(module_args) or {}
    result = plugin.run(task_vars=task_vars)
    assert sent[0]["report_dir"] == expected and result["report_dir"] == expected


# ------------------------------------------------------------------------- every check has its documentation
def test_every_check_id_has_its_row_in_docs_health_checks(profile_root, health_checks_doc):
    """docs/health-checks.md is where a check is described (what it reads, levels, remediation, sources): every id the
    engines return, on simulated nodes of several kinds with every expectation pinned, has its row there (the check
    tables: ``health_checks_doc`` in conftest.py parses them)."""
    documented = health_checks_doc().documented_ids
    patterns = tuple(name[:-1] for name in documented if name.endswith("*"))
    knowledge = dict(KNOWLEDGE, pcie_health=PCIE, gpu_health=load_knowledge("gpu_health"),
                     rocm_compatibility=load_knowledge("rocm_compatibility"))
    expected = {"rocm_version": "6.4.*", "kernel_release": "6.8.*", "os_release": "ubuntu 22.04", "bios_version": "1.*",
                "vbios": "113-*", "firmware": {"mec": "177"}, "min_online_memory_gib": 64}
    emitted = set()
    for profile in ("mi300x-8gpu-spx", "mi250x-8gcd", "mi210-8gpu-2hive", "mi300x-hf-8gpu-spx", "fault-numa-minus1"):
        facts = pc.gather(profile_root(profile))
        emitted.update(r["id"] for r in pc.run_checks(facts, knowledge, {"expected": expected}))
    assert len(emitted) > 40 and {"os_supported", "gpu_idle"} <= emitted
    undocumented = sorted(i for i in emitted if i not in documented and not i.startswith(patterns))
    assert not undocumented, "checks without a row in docs/health-checks.md: %s" % ", ".join(undocumented)
