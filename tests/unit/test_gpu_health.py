"""GPU health checks (module_utils/gpu_health.py) on amdgpu's documented formats, real kernel-log lines, unit files
laid out as systemd reads them, and the simulated fault profiles; the cross-node comparison
(plugin_utils/consistency.py) on per-node inventories."""

import copy
import importlib.util
import os

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils import gpu_health as gh
from ansible_collections.topotune.instinct.plugins.module_utils import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.plugin_utils.consistency import compare, lines

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name):
    with open(os.path.join(REPO, "knowledge", name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


HEALTH = _load("gpu_health")
KNOWLEDGE = dict(_load("gpu_generations"), gpu_health=HEALTH)
GENERATIONS = {g["name"]: g for g in KNOWLEDGE["generations"]}
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)


def _gpu(bdf="0000:0c:00.0", **over):
    gpu = {"bdf": bdf, "compute_partition": "SPX", "available_compute": "SPX, DPX, QPX, CPX",
           "memory_partition": "NPS1", "available_memory": "NPS1, NPS2, NPS4", "vbios": "113-M3000100-102",
           "firmware": {"mec": "0x000000b1", "sos": "0x0036024b"},
           "ras": {"umc": {"ue": 0, "ce": 0}, "gfx": {"ue": 0, "ce": 0}}, "ras_unreadable": [],
           "bad_pages": {"R": 0, "P": 0, "F": 0}, "vram_bytes": 192 << 30}
    gpu.update(over)
    return gpu


def _health(gpus=None, **over):
    health = {"gpus": gpus if gpus is not None else [_gpu("0000:%02x:00.0" % (0x10 * (i + 1))) for i in range(8)],
              "bad_page_threshold": -1, "rocm_version": "6.4.1-112", "kernel_release": "6.8.0-45-generic",
              "kernel_log": "", "kernel_log_origin": "test",
              "managers": {"tuned_profile": None, "units": {}}}
    health.update(over)
    return health


def _by_id(results):
    return {r["id"]: r for r in results}


def _run(health, gen="MI300X", facts=None, options=None):
    return _by_id(gh.run_checks(health, HEALTH, GENERATIONS.get(gen), facts or {"numa_nodes": 2, "packages": 2},
                                options, KNOWLEDGE["host"]))


# ------------------------------------------------------------------------------------------ parsers
@pytest.mark.parametrize("text,expected", [
    ("ue: 0\nce: 1\n", {"ue": 0, "ce": 1}),          # amdgpu_ras.c DOC "AMDGPU RAS sysfs Error Count Interface"
    ("ue: 12\nce: 0", {"ue": 12, "ce": 0}),
    ("Query currently inaccessible\n", None),       # amdgpu_ras_sysfs_read while recovery runs
    ("ue: 1\n", None),
    ("", None),
])
def test_parse_err_count(text, expected):
    assert gh.parse_err_count(text) == expected


@pytest.mark.parametrize("text,expected", [
    # amdgpu_ras.c DOC "gpu_vram_bad_pages Interface" example
    ("0x00000001 : 0x00001000 : R\n0x00000002 : 0x00001000 : P\n", {"R": 1, "P": 1, "F": 0}),
    ("", {"R": 0, "P": 0, "F": 0}),
    ("garbage\n", None),
])
def test_parse_bad_pages(text, expected):
    assert gh.parse_bad_pages(text) == expected


# ------------------------------------------------------------------------------------------- checks
@pytest.mark.parametrize("gen,modes,status", [
    ("MI300X", ["SPX/NPS1"] * 8, "pass"),
    ("MI300X", ["CPX/NPS4"] * 8, "pass"),            # validated (ROCm 6.4)
    ("MI300X", ["CPX/NPS1"] * 8, "pass"),
    ("MI300X", ["DPX/NPS1"] * 8, "warn"),            # allowed by the driver, not in AMD's matrix
    ("MI300X", ["SPX/NPS4"] * 8, "fail"),            # more memory than compute partitions: "NPS4 only with CPX"
    ("MI300X", ["SPX/NPS1"] * 7 + ["CPX/NPS1"], "fail"),
    ("MI325X", ["CPX/NPS1"] * 8, "warn"),            # MI325: SPX + NPS1 only
    ("MI355X", ["DPX/NPS2"] * 8, "pass"),
])
def test_partition_modes(gen, modes, status):
    gpus = [_gpu("0000:%02x:00.0" % (0x10 * (i + 1)), compute_partition=m.split("/")[0],
                 memory_partition=m.split("/")[1]) for i, m in enumerate(modes)]
    res = _run(_health(gpus), gen)["gpu_partition_mode"]
    assert res["status"] == status, res
    if len(set(modes)) > 1:
        assert "0000:80:00.0" in res["remediation"] and "SPX/NPS1" in res["remediation"]


def test_partitions_absent_on_a_generation_without_them_pass_and_else_unknown():
    gpus = [_gpu(compute_partition=None, memory_partition=None)]
    assert _run(_health(gpus), "MI250X")["gpu_partition_mode"]["status"] == "pass"
    assert _run(_health(gpus), "MI300X")["gpu_partition_mode"]["status"] == "unknown"


def test_apu_memory_partition_must_match_the_host_nps():
    gpus = [_gpu()]
    assert _run(_health(gpus), "MI300A", {"numa_nodes": 4, "packages": 1})["gpu_partition_mode"]["status"] == "fail"
    res = _run(_health(gpus), "MI300A", {"numa_nodes": 1, "packages": 1})["gpu_partition_mode"]
    assert res["status"] == "pass" and "host NPS1" in res["observed"]


@pytest.mark.parametrize("ras,status", [
    ({"umc": {"ue": 0, "ce": 3}}, "pass"),
    ({"umc": {"ue": 2, "ce": 0}}, "fail"),
    ({"umc": {"ue": 0, "ce": 101}}, "warn"),
    (None, "unknown"),
])
def test_ecc_counters(ras, status):
    gpus = [_gpu(), _gpu("0000:22:00.0", ras=ras)]
    if ras is None:
        gpus = [_gpu(ras=None)]
    res = _run(_health(gpus))["gpu_ecc_errors"]
    assert res["status"] == status and res["cvs"] is None
    if status == "fail":
        assert res["observed"] == "0000:22:00.0 ue umc=2"


def test_unreadable_counter_is_unknown():
    res = _run(_health([_gpu(ras={}, ras_unreadable=["umc"])]))["gpu_ecc_errors"]
    assert res["status"] == "unknown" and "0000:0c:00.0 umc" in res["observed"]


@pytest.mark.parametrize("pages,param,vram,status", [
    (0, -1, 192 << 30, "pass"),
    (900, -1, 192 << 30, "pass"),       # limit 192 GiB / 100 MiB = 1966
    (1000, -1, 192 << 30, "warn"),      # >= half of it
    (1967, -1, 192 << 30, "fail"),
    (12, 10, 192 << 30, "fail"),        # bad_page_threshold=10 set on the module
    (3, -1, None, "unknown"),           # VRAM size unknown
])
def test_retired_pages_against_the_threshold(pages, param, vram, status):
    gpus = [_gpu(bad_pages={"R": pages, "P": 0, "F": 0}, vram_bytes=vram)]
    res = _run(_health(gpus, bad_page_threshold=param))["gpu_retired_pages"]
    assert res["status"] == status, res


@pytest.mark.parametrize("line,status,key", [
    # lines as amdgpu prints them (public bug reports and amdgpu_ras.c / amdgpu_job.c format strings)
    ("amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=7073226, emitted seq=7073228", "warn",
     "ring_timeout"),
    ("amdgpu 0000:05:00.0: amdgpu: GPU reset begin!", "warn", "gpu_reset"),
    ("amdgpu 0000:03:00.0: amdgpu: GPU reset(1) failed with error -110", "fail", "gpu_reset_failed"),
    ("amdgpu 0000:38:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block", "fail",
     "ras_uncorrectable"),
    ("amdgpu 0000:38:00.0: amdgpu: RAS records:2100 exceed threshold:1966", "fail", "bad_pages_over_threshold"),
    ("amdgpu 0000:0c:00.0: amdgpu: 3 correctable hardware errors detected in umc block, no user action is needed.",
     "pass", None),
    ("amdgpu 0000:03:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)", "warn",
     "page_fault"),
])
def test_kernel_log_patterns(line, status, key):
    res = _run(_health(kernel_log="[    1.0] some boot line\n[   12.5] " + line + "\n"))["gpu_kernel_log"]
    assert res["status"] == status, res
    if key:
        assert res["observed"].startswith(key + " x1")


def test_kernel_log_missing_is_unknown(tmp_path):
    text, why = gh.kernel_log(str(tmp_path))
    assert text is None and gh.KERNEL_LOG_FILE in why
    assert _run(_health(kernel_log=None, kernel_log_origin=why))["gpu_kernel_log"]["status"] == "unknown"


def test_firmware_consistency_names_the_odd_gpu():
    gpus = [_gpu("0000:%02x:00.0" % (0x10 * (i + 1))) for i in range(4)]
    gpus[2] = _gpu("0000:30:00.0", firmware={"mec": "0x000000b0", "sos": "0x0036024b"})
    res = _run(_health(gpus))["gpu_firmware_consistency"]
    assert res["status"] == "fail"
    assert res["observed"] == "mec: 0x000000b0 on 0000:30:00.0, majority 0x000000b1"
    assert _run(_health())["gpu_firmware_consistency"]["status"] == "pass"


# ------------------------------------------------------------------------------------------ managers
def _unit_tree(root, enabled=(), profile=None):
    """Unit files as a package installs them and `systemctl enable` links them, under ``root``."""
    lib = root / "usr/lib/systemd/system"
    lib.mkdir(parents=True)
    for name in ("tuned.service", "power-profiles-daemon.service", "cpupower.service"):
        (lib / name).write_text("[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\n"
                                "WantedBy=multi-user.target\n")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True)
    for name in enabled:
        os.symlink("/usr/lib/systemd/system/" + name, str(wants / name))
    if profile:
        (root / "etc/tuned").mkdir(parents=True)
        (root / "etc/tuned/active_profile").write_text(profile + "\n")


@pytest.mark.parametrize("enabled,profile,status,text", [
    ((), None, "pass", "none of tuned"),
    (("tuned.service",), "accelerator-performance", "pass", "agrees with topotune"),
    (("tuned.service",), "balanced", "warn", "sets governor ondemand, topotune performance"),
    (("tuned.service",), "my-site", "warn", "not in the knowledge table"),
    (("power-profiles-daemon.service",), None, "warn", "power-profiles-daemon.service enabled"),
    ((), "balanced", "pass", "none of tuned"),   # a profile file without the service enabled re-applies nothing
])
def test_power_managers(tmp_path, enabled, profile, status, text):
    _unit_tree(tmp_path, enabled, profile)
    managers = gh._gather_managers(str(tmp_path), gh.MANAGER_UNITS)
    res = _run(_health(managers=managers))["power_managers"]
    assert res["status"] == status and text in res["observed"], res
    if status == "warn":
        assert "systemctl disable --now" in res["remediation"]


def test_knowledge_unit_list_is_what_gather_reads():
    assert [u["name"] for u in HEALTH["managers"]["units"]] == list(gh.MANAGER_UNITS)
    for table in ("partitions", "ras", "kernel_log", "managers"):
        assert HEALTH[table]["source"].strip()


def test_checks_stay_out_without_knowledge():
    assert gh.run_checks(_health(), None) == [] and gh.run_checks(None, HEALTH) == []


# ------------------------------------------------------------------------------- simulated profiles
@pytest.fixture(scope="module")
def profile_facts(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            dest = str(tmp_path_factory.mktemp(name))
            sim.build(name, dest, force=True)
            cache[name] = pc.gather(dest)
        return cache[name]
    return get


HEALTH_IDS = ("gpu_partition_mode", "gpu_ecc_errors", "gpu_retired_pages", "gpu_kernel_log", "gpu_firmware_consistency")


@pytest.mark.parametrize("profile,mode", [
    ("mi300x-8gpu-spx", "SPX/NPS1"), ("mi300x-8gpu-cpx", "CPX/NPS1"), ("mi250x-8gcd", None)])
def test_good_profiles_pass(profile_facts, profile, mode):
    results = _by_id(pc.run_checks(profile_facts(profile), KNOWLEDGE))
    for check_id in HEALTH_IDS:
        assert results[check_id]["status"] in ("pass", "unknown"), results[check_id]
    assert results["gpu_partition_mode"]["status"] == "pass"
    if mode:
        assert results["gpu_partition_mode"]["observed"].startswith(mode + " on ")
    if profile == "mi300x-8gpu-spx":  # the profile with RAS counters and a full firmware set
        assert results["gpu_ecc_errors"]["status"] == "pass"
        assert results["gpu_firmware_consistency"]["status"] == "pass"


@pytest.mark.parametrize("profile,check_id,observed", [
    ("fault-ecc-uncorrectable", "gpu_ecc_errors", "0000:38:00.0 ue umc=2"),
    ("fault-ecc-uncorrectable", "gpu_kernel_log", "ras_uncorrectable x1"),
    ("fault-fw-mismatch", "gpu_firmware_consistency", "0000:bf:00.0"),
    ("fault-mixed-partitions", "gpu_partition_mode", "CPX/NPS1 on 0000:9f:00.0"),
])
def test_fault_profiles_fail_their_check(profile_facts, profile, check_id, observed):
    res = _by_id(pc.run_checks(profile_facts(profile), KNOWLEDGE))[check_id]
    assert res["status"] == "fail" and observed in res["observed"], res
    assert res["remediation"]


def test_retired_pages_of_the_ecc_fault_are_counted_below_the_threshold(profile_facts):
    res = _by_id(pc.run_checks(profile_facts("fault-ecc-uncorrectable"), KNOWLEDGE))["gpu_retired_pages"]
    assert res["status"] == "pass" and res["observed"] == "0000:38:00.0 12 page(s) of 1966"


def test_inventory_of_a_profile(profile_facts):
    facts = profile_facts("fault-vbios-odd")
    inv = gh.inventory(facts["health"], facts)
    assert {g["vbios"] for g in inv["gpus"]} == {"113-M3000108-103"} and len(inv["gpus"]) == 8
    assert inv["gpus"][0]["firmware"]["sos"] == "0x0036024b" and inv["kernel_release"] == "6.8.0-45-generic"
    assert inv["bios_version"] == "1.0.0" and inv["rocm_version"] is None


# -------------------------------------------------------------------------------------- consistency
def _inv(vbios="113-M3000100-102", rocm="6.4.1-112", gpus=2, product="MI300X", **gpu_over):
    return {"gpus": [dict({"bdf": "0000:%02x:00.0" % i, "vbios": vbios, "firmware": {"mec": "0x000000b1"},
                           "compute_partition": "SPX", "memory_partition": "NPS1"}, **gpu_over) for i in range(gpus)],
            "rocm_version": rocm, "kernel_release": "6.8.0-45-generic", "bios_version": "1.0.0",
            "identity": {"generation": product.split()[0], "product": product, "kind": "physical"}}


def _row(report, item):
    return next(r for r in report["items"] if r["item"] == item)


def test_consistency_names_the_odd_node():
    report = compare({"n1": _inv(), "n2": _inv(), "n3": _inv(vbios="113-M3000108-103")})
    vbios = _row(report, "vbios")
    assert (vbios["status"], vbios["majority"], vbios["odd"]) == ("differs", "113-M3000100-102", ["n3"])
    assert report["odd_nodes"] == {"n3": ["vbios"]}
    assert _row(report, "rocm_version")["status"] == "consistent"
    assert lines(report) == ["MI300X SPX/NPS1 VBIOS: 113-M3000100-102 on 2 node(s); odd: n3 (113-M3000108-103)"]


def test_consistency_without_majority_says_so():
    report = compare({"n1": _inv(rocm="6.4.1"), "n2": _inv(rocm="7.0.2")})
    row = _row(report, "rocm_version")
    assert row["status"] == "no_majority" and row["majority"] is None and row["odd"] == []
    assert lines(report) == ["MI300X SPX/NPS1 ROCm: no majority: 6.4.1 on n1; 7.0.2 on n2"]


def test_consistency_mixed_gpus_and_unknown_values():
    mixed = _inv()
    mixed["gpus"][1] = dict(mixed["gpus"][1], compute_partition="CPX")
    odd_fw = _inv()
    odd_fw["gpus"][1]["firmware"] = {"mec": "0x000000a9"}
    report = compare({"n1": _inv(), "n2": _inv(), "n3": mixed, "n4": _inv(rocm=None), "n5": odd_fw})
    # a node whose GPUs disagree on their partition mode is a class of its own (its node-level check fails it)
    assert report["classes"]["MI300X mixed: CPX/NPS1 | SPX/NPS1"] == ["n3"]
    assert _row(report, "firmware:mec")["values"]["mixed: 0x000000a9 | 0x000000b1"] == ["n5"]
    # unknown on a node is "unknown there", never "differs"
    rocm = _row(report, "rocm_version")
    assert (rocm["status"], rocm["odd"], rocm["unknown"]) == ("consistent", [], ["n4"])
    assert compare({})["items"] == [] and compare({})["summary"]["differing"] == 0


def test_consistency_compares_within_a_hardware_class():
    # the demo's cluster: MI300X and MI308X nodes on their own firmware, MI250X/MI210 nodes with no such files
    mi250x = _inv(product="MI250X", vbios=None, compute_partition=None, memory_partition=None)
    for gpu in mi250x["gpus"]:
        gpu["firmware"] = {}
    nodes = {"x1": _inv(), "x2": _inv(), "x3": _inv(vbios="113-M3000108-103"),
             "m1": _inv(product="MI308X", vbios="113-M3080100-100"), "m2": _inv(product="MI308X", vbios="113-M3080100-100"),
             "m3": _inv(product="MI308X", vbios="113-M3080100-100"), "r1": mi250x, "r2": copy.deepcopy(mi250x)}
    report = compare(nodes)
    assert report["classes"] == {"MI250X": ["r1", "r2"], "MI300X SPX/NPS1": ["x1", "x2", "x3"],
                                 "MI308X SPX/NPS1": ["m1", "m2", "m3"]}
    # a healthy MI300X node is not the odd one out against MI308X firmware; the MI300X on another VBIOS is
    assert report["odd_nodes"] == {"x3": ["vbios"]}
    # the MI250X nodes have no VBIOS/fw_version files: not listed as differing, not listed at all for their class
    assert not [r for r in report["items"] if r["class"] == "MI250X" and r["item"].startswith(("vbios", "firmware"))]
    assert report["summary"]["differing"] == 1
