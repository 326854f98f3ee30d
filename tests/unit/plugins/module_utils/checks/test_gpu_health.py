"""GPU health checks (module_utils/checks/gpu_health.py) on amdgpu's documented formats, real kernel-log lines, unit files
laid out as systemd reads them, and the simulated fault profiles; the cross-node comparison
(plugin_utils/fleet/consistency.py) on per-node inventories."""

import copy
import importlib.util
import itertools
import os
import shutil

import pytest

from ansible_collections.topotune.instinct.plugins.filter.run_summary_lines import run_summary_lines
from ansible_collections.topotune.instinct.plugins.module_utils.checks import gpu_health as gh
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import recording
from ansible_collections.topotune.instinct.plugins.module_utils.topology.kfd import read_kfd
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import compare, lines

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def _load(name):
    return load_knowledge(name)


HEALTH = _load("gpu_health")
PAGES = HEALTH["retired_pages"]
KNOWLEDGE = dict(_load("gpu_generations"), gpu_health=HEALTH)
GENERATIONS = {g["name"]: g for g in KNOWLEDGE["generations"]}
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)


def _gpu(bdf="0000:0c:00.0", **over):
    # an MI300X in SPX/NPS1 as amdgpu shows it: the compute modes it accepts with NPS1 (8 XCCs), the NPS modes of GC
    # 9.4.3 (gmc_v9_0.c: NPS1, NPS4)
    gpu = {"bdf": bdf, "compute_partition": "SPX", "available_compute": "SPX, DPX, QPX, CPX",
           "memory_partition": "NPS1", "available_memory": "NPS1, NPS4", "vbios": "113-M3000100-102",
           "firmware": {"mec": "0x000000b1", "sos": "0x0036024b"}, "kfd_partitions": None,
           "ras": {"umc": {"ue": 0, "ce": 0, "de": 0}, "gfx": {"ue": 0, "ce": 0, "de": 0}}, "ras_unreadable": [],
           "bad_pages": {"R": 0, "P": 0, "F": 0}, "vram_bytes": 192 << 30, "drm_card": None,
           "driver_threshold": None}
    gpu.update(over)
    return gpu


DKMS = {"loaded": True, "version": "6.12.12", "taint": "O"}
UPSTREAM = {"loaded": True, "version": None, "taint": None}
UNKNOWN_DRIVER = {"loaded": False, "version": None, "taint": None}


def _health(gpus=None, **over):
    health = {"gpus": gpus if gpus is not None else [_gpu("0000:%02x:00.0" % (0x10 * (i + 1))) for i in range(8)],
              "bad_page_threshold": -1, "driver": DKMS, "rocm_version": "6.4.1-112",
              "kernel_release": "6.8.0-45-generic", "kernel_log": "", "kernel_log_origin": "test",
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
    ("ue: 0\nce: 1\n", {"ue": 0, "ce": 1, "de": 0}),  # amdgpu_ras.c DOC "AMDGPU RAS sysfs Error Count Interface"
    ("ue: 12\nce: 0", {"ue": 12, "ce": 0, "de": 0}),
    # the UMC block and the ACA path (MI300/MI350): amdgpu_ras_sysfs_read / amdgpu_ras_aca_sysfs_read print
    # "%s: %lu\n%s: %lu\n%s: %lu\n" with "ue", "ce", "de"
    ("ue: 0\nce: 3\nde: 2\n", {"ue": 0, "ce": 3, "de": 2}),
    ("ue: 1\nce: 0\nde: 0\n", {"ue": 1, "ce": 0, "de": 0}),
    ("Query currently inaccessible\n", None),       # amdgpu_ras_sysfs_read while recovery runs
    ("ue: 1\n", None),
    ("de: 1\n", None),
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
# gpu-partitioning/index.rst matrix (MI300X: SPX+NPS1, CPX+NPS4 validated; CPX+NPS1 blank) and the driver
# (aqua_vanjaram.c __aqua_vanjaram_get_px_mode_info, gmc_v9_0.c: GC 9.4.3/9.4.4 offer NPS1 and NPS4 only). Without the
# device's available_* lists the generation's driver table decides.
@pytest.mark.parametrize("gen,modes,status", [
    ("MI300X", ["SPX/NPS1"] * 8, "pass"),
    ("MI300X", ["CPX/NPS4"] * 8, "pass"),            # validated (ROCm 6.4)
    ("MI300X", ["CPX/NPS1"] * 8, "warn"),            # runs, the matrix leaves it blank
    ("MI300X", ["DPX/NPS1"] * 8, "warn"),            # the driver accepts it, not in AMD's matrix
    ("MI300X", ["QPX/NPS4"] * 8, "warn"),
    ("MI300X", ["DPX/NPS2"] * 8, "fail"),            # amdgpu offers no NPS2 on GC 9.4.3
    ("MI300X", ["SPX/NPS4"] * 8, "fail"),            # SPX accepts NPS1 only
    ("MI300X", ["SPX/NPS1"] * 7 + ["CPX/NPS1"], "fail"),
    ("MI308X", ["CPX/NPS4"] * 8, "pass"),            # judged by the MI300X row
    ("MI308X", ["QPX/NPS1"] * 8, "fail"),            # 4 XCCs: SPX, DPX, CPX
    ("MI325X", ["CPX/NPS1"] * 8, "warn"),
    ("MI325X", ["CPX/NPS4"] * 8, "pass"),
    ("MI355X", ["SPX/NPS1"] * 8, "pass"),
    ("MI355X", ["DPX/NPS2"] * 8, "pass"),
    ("MI355X", ["CPX/NPS2"] * 8, "pass"),
    ("MI355X", ["QPX/NPS2"] * 8, "pass"),
    ("MI355X", ["DPX/NPS1"] * 8, "warn"),
    ("MI355X", ["CPX/NPS4"] * 8, "fail"),            # MI350 offers NPS1 and NPS2
    ("MI355X", ["SPX/NPS2"] * 8, "fail"),
])
def test_partition_modes(gen, modes, status):
    gpus = [_gpu("0000:%02x:00.0" % (0x10 * (i + 1)), compute_partition=m.split("/")[0],
                 memory_partition=m.split("/")[1], available_compute=None, available_memory=None)
            for i, m in enumerate(modes)]
    res = _run(_health(gpus), gen)["gpu_partition_mode"]
    assert res["status"] == status, res
    if len(set(modes)) > 1:
        assert "0000:80:00.0" in res["remediation"] and "SPX/NPS1" in res["remediation"]
    if status == "warn":
        assert "compatibility matrix does not list" in res["remediation"]
    if status == "fail" and len(set(modes)) == 1:
        assert res["remediation"].startswith("amdgpu does not")


@pytest.mark.parametrize("compute,available_compute,available_memory,status,text", [
    # the device's own lists (what amdgpu prints in available_*_partition) decide first
    ("SPX", "QPX, CPX", "NPS1, NPS4", "fail", "accepts QPX, CPX"),       # SPX with NPS4: not accepted
    ("CPX", "QPX, CPX", "NPS1, NPS4", "pass", ""),
    ("CPX", "QPX, CPX", "NPS1", "fail", "does not offer NPS4"),
])
def test_partition_modes_follow_the_devices_lists(compute, available_compute, available_memory, status, text):
    gpus = [_gpu(compute_partition=compute, memory_partition="NPS4", available_compute=available_compute,
                 available_memory=available_memory)]
    res = _run(_health(gpus), "MI300X")["gpu_partition_mode"]
    assert res["status"] == status and text in res["remediation"], res


@pytest.mark.parametrize("gen,kfd,count,how", [
    ("MI308X", 4, 4, "KFD nodes"),          # the device: tests/fixtures/kfd/mi308x-cpx has 4 nodes per GPU
    ("MI308X", None, 4, "one per XCD"),     # no KFD tree: the generation's XCDs, not a constant 8
    ("MI300X", None, 8, "one per XCD"),
])
def test_cpx_partitions_come_from_the_device(gen, kfd, count, how):
    gpus = [_gpu("0000:%02x:00.0" % (0x10 * (i + 1)), compute_partition="CPX", memory_partition="NPS4",
                 available_compute=None, available_memory=None, kfd_partitions=kfd) for i in range(8)]
    res = _run(_health(gpus), gen)["gpu_partition_mode"]
    assert res["status"] == "pass" and "%d compute partition(s) per GPU (%s)" % (count, how) in res["observed"], res


@pytest.mark.parametrize("compute,host,status", [
    ("SPX", 1, "pass"), ("TPX", 1, "pass"), ("CPX", 1, "pass"),    # AMD's matrix, MI300A row (ROCm 6.3 / 6.4)
    ("DPX", 1, "fail"),                                            # 6 XCCs: no DPX
    ("CPX", 4, "fail"),                                            # memory partition != host NPS
])
def test_mi300a_partitions(compute, host, status):
    gpus = [_gpu(compute_partition=compute, memory_partition="NPS1", available_compute=None, available_memory=None)]
    res = _run(_health(gpus), "MI300A", {"numa_nodes": host, "packages": 1})["gpu_partition_mode"]
    assert res["status"] == status, res
    if compute == "CPX" and status == "pass":
        assert "6 compute partition(s) per GPU" in res["observed"]


def test_partitions_absent_on_a_generation_without_them_pass_and_else_unknown():
    gpus = [_gpu(compute_partition=None, memory_partition=None)]
    assert _run(_health(gpus), "MI250X")["gpu_partition_mode"]["status"] == "pass"
    assert _run(_health(gpus), "MI300X")["gpu_partition_mode"]["status"] == "unknown"


def test_apu_memory_partition_must_match_the_host_nps():
    gpus = [_gpu(available_compute=None, available_memory=None)]
    assert _run(_health(gpus), "MI300A", {"numa_nodes": 4, "packages": 1})["gpu_partition_mode"]["status"] == "fail"
    res = _run(_health(gpus), "MI300A", {"numa_nodes": 1, "packages": 1})["gpu_partition_mode"]
    assert res["status"] == "pass" and "host NPS1" in res["observed"]


@pytest.mark.parametrize("ras,status,observed", [
    ({"umc": {"ue": 0, "ce": 3, "de": 0}}, "pass", None),
    ({"umc": {"ue": 2, "ce": 0, "de": 0}}, "fail", "0000:22:00.0 ue umc=2"),
    # a deferred (poisoned) error is judged like an uncorrectable one
    ({"umc": {"ue": 0, "ce": 0, "de": 2}, "gfx": {"ue": 0, "ce": 0, "de": 1}}, "fail", "0000:22:00.0 de gfx=1, umc=2"),
    ({"umc": {"ue": 0, "ce": 101, "de": 0}}, "warn", None),
    (None, "unknown", None),
])
def test_ecc_counters(ras, status, observed):
    gpus = [_gpu(), _gpu("0000:22:00.0", ras=ras)]
    if ras is None:
        gpus = [_gpu(ras=None)]
    res = _run(_health(gpus))["gpu_ecc_errors"]
    assert res["status"] == status and res["cvs"] is None
    if observed:
        assert res["observed"] == observed


def test_unreadable_counter_is_unknown():
    res = _run(_health([_gpu(ras={}, ras_unreadable=["umc"])]))["gpu_ecc_errors"]
    assert res["status"] == "unknown" and "0000:0c:00.0 umc" in res["observed"]


# The threshold of the running driver (ROCm/amdgpu amdgpu_ras.c amdgpu_ras_validate_threshold and
# amdgpu_ras_init_reserved_vram_size): AMD's amdgpu with -1 uses the reserved VRAM, 16 MiB -> 128 pages on MI300X, 32 MiB
# -> 256 on MI355X; the in-tree driver of older kernels 1 page per 100 MiB (192 GiB -> 1966); -2 that formula on both.
@pytest.mark.parametrize("pages,param,driver,gen,status,limit", [
    (0, -1, DKMS, "MI300X", "pass", None),
    (115, -1, DKMS, "MI300X", "pass", 128),
    (116, -1, DKMS, "MI300X", "warn", 128),       # amdgpu warns from 90 % ("exceeds 90% of threshold")
    (128, -1, DKMS, "MI300X", "warn", 128),
    (129, -1, DKMS, "MI300X", "fail", 128),       # today's code: 1 page per 100 MiB, so "pass"
    (129, None, DKMS, "MI300X", "fail", 128),     # parameter unreadable: the default, -1
    (200, -1, DKMS, "MI355X", "pass", 256),
    (257, -1, DKMS, "MI355X", "fail", 256),
    (129, -1, UNKNOWN_DRIVER, "MI300X", "fail", 128),   # not told apart: AMD's driver
    (100, -1, UPSTREAM, "MI300X", "pass", 1966),
    (200, -1, UPSTREAM, "MI300X", "warn", 1966),  # below the in-tree threshold, over AMD's RMA threshold
    (1967, -1, UPSTREAM, "MI300X", "fail", 1966),
    (1000, -2, DKMS, "MI300X", "pass", 1966),
    (1967, -2, DKMS, "MI300X", "fail", 1966),
    (12, 10, DKMS, "MI300X", "fail", 10),         # user-defined bad_page_threshold=10
    (3, 0, DKMS, "MI300X", "warn", None),         # retirement disabled
    (3, -1, DKMS, "MI355X", "pass", 256),
])
def test_retired_pages_against_the_running_drivers_threshold(pages, param, driver, gen, status, limit):
    gpus = [_gpu(bad_pages={"R": pages, "P": 0, "F": 0})]
    res = _run(_health(gpus, bad_page_threshold=param, driver=driver), gen)["gpu_retired_pages"]
    assert res["status"] == status, res
    if limit is not None and pages:
        assert res["observed"].startswith("0000:0c:00.0 %d page(s) of %d" % (pages, limit)), res
    if status == "fail":
        assert "refuses" not in res["remediation"] and "Service Action Guide" in res["remediation"]
    if driver is UNKNOWN_DRIVER:
        assert "judged by AMD's amdgpu" in res["expected"]
    if param == 10:
        assert "halts its runtime services" in res["remediation"]
    if param == 0:
        assert "retirement disabled" in res["expected"] and "bad_page_threshold=0" in res["remediation"]


def test_retired_pages_not_applicable_on_the_apu():
    """amdgpu turns bad page retirement off on MI300A (an APP APU with UMC 12.0: amdgpu_bad_page_threshold = 0), so
    the parameter reading 0 there is the driver's own setting, not a debugging one."""
    res = _run(_health([_gpu(bad_pages={"R": 0, "P": 0, "F": 0})], bad_page_threshold=0), "MI300A",
               {"numa_nodes": 1, "packages": 1})["gpu_retired_pages"]
    assert res["status"] == "pass" and "not applicable on MI300A" in res["observed"]
    gpu = _gpu(bad_pages={"R": 3, "P": 0, "F": 0})
    assert gh.retired_page_threshold(gpu, _health([gpu]), PAGES, "MI300A")["mode"] == "unknown"


def test_retired_pages_prefer_what_the_driver_states():
    # debugfs ras/bad_page_cnt_threshold (what amd-smi bad-pages reports) over the rule
    gpus = [_gpu(bad_pages={"R": 300, "P": 0, "F": 0}, driver_threshold=500)]
    res = _run(_health(gpus))["gpu_retired_pages"]
    assert res["status"] == "pass" and "300 page(s) of 500" in res["observed"] and "debugfs" in res["expected"]
    # the driver's kernel line for that GPU (amdgpu_ras_eeprom.c "RAS records:%d exceed threshold:%d")
    log = ("[   14.2] amdgpu 0000:0c:00.0: amdgpu: RAS records:90 exceed threshold:80\n"
           "[   14.3] amdgpu 0000:22:00.0: amdgpu: RAS records:12 exceeds 90% of threshold:13\n")
    gpus = [_gpu(bad_pages={"R": 90, "P": 0, "F": 0}), _gpu("0000:22:00.0", bad_pages={"R": 12, "P": 0, "F": 0})]
    res = _run(_health(gpus, kernel_log=log, driver=UPSTREAM))["gpu_retired_pages"]
    assert res["status"] == "fail" and "0000:0c:00.0 90 page(s) of 80" in res["observed"]
    assert "0000:22:00.0 12 page(s) of 13" in res["observed"] and "kernel log" in res["expected"]
    assert gh.stated_thresholds(log, PAGES["statements"]) == {"0000:0c:00.0": 80, "0000:22:00.0": 13}
    # the older wording "Saved bad pages(%d) reaches threshold value(%d)" and the current one
    assert gh.stated_thresholds("amdgpu 0000:38:00.0: Saved bad pages(130) reaches threshold value(128)\n"
                                "amdgpu 0000:5c:00.0: amdgpu: Saved bad pages 40 reaches threshold value 32",
                                PAGES["statements"]) == {"0000:38:00.0": 128, "0000:5c:00.0": 32}


@pytest.mark.parametrize("driver,kind", [
    ({"loaded": True, "version": "6.12.12", "taint": "O"}, "amd"),
    ({"loaded": True, "version": None, "taint": "O"}, "amd"),
    ({"loaded": True, "version": None, "taint": ""}, "upstream"),
    ({"loaded": False, "version": None, "taint": None}, None),
    (None, None),
])
def test_driver_kind(driver, kind):
    assert gh.driver_kind(driver) == kind


def test_gather_reads_the_drivers_threshold_and_version(tmp_path):
    """A hand-made tree as sysfs and debugfs lay it out: sys/class/drm/card1 -> the GPU, debugfs dri/1/ras."""
    dev = tmp_path / "sys/bus/pci/devices/0000:0c:00.0"
    (dev / "ras").mkdir(parents=True)
    for name, text in (("vendor", "0x1002"), ("class", "0x120000"), ("mem_info_vram_total", str(192 << 30))):
        (dev / name).write_text(text + "\n")
    (dev / "ras/umc_err_count").write_text("ue: 0\nce: 1\nde: 0\n")
    (dev / "ras/gpu_vram_bad_pages").write_text("0x00001000 : 0x00001000 : R\n")
    (tmp_path / "sys/class/drm/card1").mkdir(parents=True)
    os.symlink("../../../bus/pci/devices/0000:0c:00.0", str(tmp_path / "sys/class/drm/card1/device"))
    (tmp_path / "sys/kernel/debug/dri/1/ras").mkdir(parents=True)
    (tmp_path / "sys/kernel/debug/dri/1/ras/bad_page_cnt_threshold").write_text("128\n")
    (tmp_path / "sys/module/amdgpu/parameters").mkdir(parents=True)
    (tmp_path / "sys/module/amdgpu/parameters/bad_page_threshold").write_text("-1\n")
    (tmp_path / "sys/module/amdgpu/version").write_text("6.12.12\n")
    health = gh.gather(str(tmp_path), unit_root=str(tmp_path))
    gpu = health["gpus"][0]
    assert (gpu["drm_card"], gpu["driver_threshold"], gpu["ras"]["umc"]) == (1, 128, {"ue": 0, "ce": 1, "de": 0})
    assert gh.driver_kind(health["driver"]) == "amd" and health["bad_page_threshold"] == -1


@pytest.mark.parametrize("line,status,key", [
    # lines as amdgpu prints them (public bug reports and amdgpu_ras.c / amdgpu_job.c format strings)
    ("amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=7073226, emitted seq=7073228", "warn",
     "ring_timeout"),
    ("amdgpu 0000:05:00.0: amdgpu: GPU reset begin!", "warn", "gpu_reset"),
    ("amdgpu 0000:03:00.0: amdgpu: GPU reset(1) failed with error -110", "fail", "gpu_reset_failed"),
    ("amdgpu 0000:38:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block", "fail",
     "ras_uncorrectable"),
    ("amdgpu 0000:38:00.0: amdgpu: RAS records:2100 exceed threshold:1966", "fail", "bad_pages_over_threshold"),
    ("amdgpu 0000:38:00.0: amdgpu: Saved bad pages 130 reaches threshold value 128", "fail",
     "bad_pages_over_threshold"),
    ("amdgpu 0000:38:00.0: amdgpu: RAS records:116 exceeds 90% of threshold:128", "warn", "bad_pages_near_threshold"),
    # amdgpu's current wording (RAS_EVENT_LOG with the event id, the MCM socket/die form; amdgpu_ras.c
    # amdgpu_ras_error_print_error_data / amdgpu_ras_error_generate_report)
    ("amdgpu 0000:38:00.0: amdgpu: {12}socket: 0, die: 1, 2 new uncorrectable hardware errors detected in umc block",
     "fail", "ras_uncorrectable"),
    ("amdgpu 0000:38:00.0: amdgpu: {12}socket: 0, die: 1, 2 uncorrectable hardware errors detected in total in umc "
     "block", "fail", "ras_uncorrectable"),
    ("amdgpu 0000:38:00.0: amdgpu: socket: 0, die: 0 3 uncorrectable hardware errors detected in gfx block", "fail",
     "ras_uncorrectable"),
    ("amdgpu 0000:38:00.0: amdgpu: {12}socket: 0, die: 0, 0 uncorrectable hardware errors detected in total in umc "
     "block", "pass", None),
    ("amdgpu 0000:38:00.0: amdgpu: {7}socket: 0, die: 1, 2 new deferred hardware errors detected in umc block", "fail",
     "ras_deferred"),
    ("amdgpu 0000:38:00.0: amdgpu: 1 deferred hardware errors detected in total in umc block", "fail", "ras_deferred"),
    ("amdgpu 0000:38:00.0: amdgpu: {7}socket: 0, die: 1, 4 new correctable hardware errors detected in umc block",
     "pass", None),
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
    for table in ("partitions", "ras", "retired_pages", "kernel_log", "managers"):
        assert HEALTH[table]["source"].strip()


def test_checks_stay_out_without_knowledge():
    assert gh.run_checks(_health(), None) == [] and gh.run_checks(None, HEALTH) == []


# ------------------------------------------------------------------------------- simulated profiles
@pytest.fixture(scope="module")
def profile_facts(sim_tree):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = pc.gather(sim_tree(name))
        return cache[name]
    return get


HEALTH_IDS = ("gpu_partition_mode", "gpu_ecc_errors", "gpu_retired_pages", "gpu_kernel_log", "gpu_firmware_consistency")


@pytest.mark.parametrize("profile,mode,status", [
    ("mi300x-8gpu-spx", "SPX/NPS1", "pass"), ("mi250x-8gcd", None, "pass"),
    # CPX/NPS1 runs but AMD's matrix leaves it blank for MI300X: a warning, the CPX count from the device
    ("mi300x-8gpu-cpx", "CPX/NPS1", "warn"), ("mi308x-cpx", "CPX/NPS1", "warn")])
def test_good_profiles_pass(profile_facts, profile, mode, status):
    results = _by_id(pc.run_checks(profile_facts(profile), KNOWLEDGE))
    for check_id in HEALTH_IDS:
        if check_id != "gpu_partition_mode":
            assert results[check_id]["status"] in ("pass", "unknown"), results[check_id]
    assert results["gpu_partition_mode"]["status"] == status, results["gpu_partition_mode"]
    if mode:
        assert results["gpu_partition_mode"]["observed"].startswith(mode + " on ")
    if profile == "mi308x-cpx":  # 4 KFD nodes per GPU in the capture: 4 partitions, not 8
        assert "4 compute partition(s) per GPU (KFD nodes)" in results["gpu_partition_mode"]["observed"]
    if profile == "mi300x-8gpu-spx":  # the profile with RAS counters and a full firmware set
        assert results["gpu_ecc_errors"]["status"] == "pass"
        assert results["gpu_firmware_consistency"]["status"] == "pass"


@pytest.mark.parametrize("profile,check_id,observed", [
    ("fault-ecc-uncorrectable", "gpu_ecc_errors", "0000:38:00.0 ue umc=2"),
    ("fault-ecc-uncorrectable", "gpu_kernel_log", "ras_uncorrectable x1"),
    ("fault-ecc-deferred", "gpu_ecc_errors", "0000:38:00.0 de umc=2"),
    ("fault-ecc-deferred", "gpu_kernel_log", "ras_deferred x2"),
    ("fault-retired-pages", "gpu_retired_pages", "0000:bf:00.0 130 page(s) of 128"),
    ("fault-retired-pages", "gpu_kernel_log", "bad_pages_over_threshold x1"),
    ("fault-fw-mismatch", "gpu_firmware_consistency", "0000:bf:00.0"),
    ("fault-mixed-partitions", "gpu_partition_mode", "CPX/NPS1 on 0000:9f:00.0"),
])
def test_fault_profiles_fail_their_check(profile_facts, profile, check_id, observed):
    res = _by_id(pc.run_checks(profile_facts(profile), KNOWLEDGE))[check_id]
    assert res["status"] == "fail" and observed in res["observed"], res
    assert res["remediation"]


def test_retired_pages_of_the_ecc_fault_are_counted_below_the_threshold(profile_facts):
    res = _by_id(pc.run_checks(profile_facts("fault-ecc-uncorrectable"), KNOWLEDGE))["gpu_retired_pages"]
    assert res["status"] == "pass" and res["observed"] == "0000:38:00.0 12 page(s) of 128"
    assert "AMD's amdgpu 6.12.12, bad_page_threshold=-1: 16 MiB reserved VRAM = 128 pages" in res["expected"]


def test_fault_profiles_fail_only_their_checks(profile_facts):
    """The deferred-ECC node fails gpu_ecc_errors and the kernel log, not its retired pages (2 of 128); the
    retired-pages node fails retired pages and the kernel log, not the counters (this boot's counters are 0)."""
    deferred = _by_id(pc.run_checks(profile_facts("fault-ecc-deferred"), KNOWLEDGE))
    assert deferred["gpu_retired_pages"]["status"] == "pass"
    pages = _by_id(pc.run_checks(profile_facts("fault-retired-pages"), KNOWLEDGE))
    assert pages["gpu_ecc_errors"]["status"] == "pass"
    assert pages["gpu_retired_pages"]["expected"].endswith("stated by the driver in the kernel log")
    assert "Service Action Guide" in pages["gpu_retired_pages"]["remediation"]


def test_inventory_of_a_profile(profile_facts):
    facts = profile_facts("fault-vbios-odd")
    inv = gh.inventory(facts["health"], facts)
    assert {g["vbios"] for g in inv["gpus"]} == {"113-M3000108-103"} and len(inv["gpus"]) == 8
    assert inv["gpus"][0]["firmware"]["sos"] == "0x0036024b" and inv["kernel_release"] == "6.8.0-45-generic"
    assert inv["bios_version"] == "1.0.0" and inv["rocm_version"] == "6.4.1-112"  # opt/rocm/.info/version


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
    # the run summary prints the count and the same lines (playbooks/summary.yml)
    summary = {"hosts": ["n1", "n2", "n3"], "completed_hosts": ["n1", "n2", "n3"], "consistency": report}
    assert run_summary_lines(summary) == ["3 of 3 node(s) completed; none failed",
                                          "cluster consistency: 1 item(s) differ, 0 without a majority"] + lines(report)


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


# -------------------------------------------------------------------------------------------- xgmi_links
XGMI = HEALTH["xgmi"]
KFD_CAPTURES = os.path.join(REPO, "tests", "fixtures", "kfd")
PROFILES = sorted(name[:-4] for name in os.listdir(os.path.join(REPO, "sim", "profiles")) if name.endswith(".yml"))


def _xgmi_facts(count=8, missing=(), hives=None):
    """What gather's ``xgmi`` holds for ``count`` physical GPUs, every pair linked but ``missing``."""
    gpus = [{"index": i, "bdf": "0000:%02x:00.0" % (0x10 * (i + 1)), "partitions": 1,
             "hive_id": (hives[i] if hives else "7")} for i in range(count)]
    pairs = [[a, b] for a, b in itertools.combinations(range(count), 2) if (a, b) not in missing]
    return {"error": None, "gpus": gpus, "pairs": pairs, "warnings": []}


def _wafl(gpu, ue=0, ce=0):
    return dict(gpu, ras=dict(gpu["ras"], xgmi_wafl={"ue": ue, "ce": ce, "de": 0}))


def _xgmi_health(xgmi, wafl=None, count=8):
    """Health of ``count`` GPUs whose ras/xgmi_wafl_err_count reads ``wafl[i]`` (``(ue, ce)``, default 0, 0)."""
    gpus = [_wafl(_gpu("0000:%02x:00.0" % (0x10 * (i + 1))), *(wafl or {}).get(i, (0, 0))) for i in range(count)]
    return _health(gpus, xgmi=xgmi)


def _xgmi(health, gen="MI300X", spec=None):
    return gh._check_xgmi(health, spec or XGMI, GENERATIONS.get(gen))


def test_xgmi_full_mesh_passes_and_a_missing_pair_fails_naming_it():
    res = _xgmi(_xgmi_health(_xgmi_facts()))
    assert res["status"] == "pass" and res["remediation"] == ""
    assert res["observed"] == "28 of 28 expected GPU pair(s) linked; xgmi_wafl_err_count 0 on 8 GPU(s)"
    assert res["expected"].startswith("full mesh: a direct xGMI link between every pair of the 8 GPUs (7 peers")
    res = _xgmi(_xgmi_health(_xgmi_facts(missing={(2, 5), (0, 7)})))
    assert res["status"] == "fail"
    assert res["observed"].startswith("missing xGMI link(s): GPU 0 (0000:10:00.0) <-> GPU 7 (0000:80:00.0), "
                                      "GPU 2 (0000:30:00.0) <-> GPU 5 (0000:60:00.0); ")
    assert res["observed"].count("<->") == 2 and "amd-smi topology" in res["remediation"]


@pytest.mark.parametrize("wafl,level,status,text", [
    ({3: (0, 4)}, "fail", "fail", "xgmi_wafl_err_count: 0000:40:00.0 ce 4"),
    ({1: (2, 0), 6: (0, 1)}, "fail", "fail", "xgmi_wafl_err_count: 0000:20:00.0 ue 2; 0000:70:00.0 ce 1"),
    ({3: (0, 4)}, "warn", "warn", "xgmi_wafl_err_count: 0000:40:00.0 ce 4"),   # the level is data
])
def test_xgmi_wafl_errors_give_the_level_of_the_data(wafl, level, status, text):
    spec = copy.deepcopy(XGMI)
    spec["wafl"]["level"] = level
    res = _xgmi(_xgmi_health(_xgmi_facts(), wafl), spec=spec)
    assert res["status"] == status and text in res["observed"], res
    assert "28 of 28 expected GPU pair(s) linked" in res["observed"] and "xGMI/WAFL errors" in res["remediation"]


def test_xgmi_counters_that_cannot_be_read_are_unknown_with_the_reason():
    health = _xgmi_health(_xgmi_facts())
    health["gpus"][2] = dict(health["gpus"][2], ras={"umc": {"ue": 0, "ce": 0, "de": 0}})  # no xgmi_wafl file
    health["gpus"][4] = dict(health["gpus"][4], ras_unreadable=["xgmi_wafl"],
                             ras={k: v for k, v in health["gpus"][4]["ras"].items() if k != "xgmi_wafl"})
    res = _xgmi(health)
    assert res["status"] == "unknown"
    assert res["observed"] == ("28 of 28 expected GPU pair(s) linked; xGMI/WAFL counters not known: "
                               "no ras/xgmi_wafl_err_count on 0000:30:00.0; ras/xgmi_wafl_err_count unreadable on "
                               "0000:50:00.0")
    assert "amdgpu.ras_enable=0" in res["remediation"]
    no_ras = _health([_gpu("0000:%02x:00.0" % (0x10 * (i + 1)), ras=None) for i in range(8)], xgmi=_xgmi_facts())
    res = _xgmi(no_ras)
    assert res["status"] == "unknown" and res["observed"].endswith("no ras/ directory on all 8 GPU(s)")
    # a missing link still fails when the counters are unknown
    no_ras["xgmi"] = _xgmi_facts(missing={(1, 2)})
    assert _xgmi(no_ras)["status"] == "fail"


def test_xgmi_unknown_generation_layout_or_kfd_is_unknown_and_not_applicable_passes():
    health = _xgmi_health(_xgmi_facts())
    res = _xgmi(health, gen=None)
    assert res["status"] == "unknown" and res["observed"].startswith("GPU generation unknown")
    spec = copy.deepcopy(XGMI)
    spec["generations"]["MI300X"] = {"unknown": "no baseboard document read", "source": "none"}
    res = _xgmi(health, spec=spec)
    assert res["status"] == "unknown" and res["observed"] == "xGMI layout of MI300X unknown: no baseboard document read"
    spec["generations"]["MI300X"] = {"not_applicable": "PCIe cards without a bridge", "source": "none"}
    res = _xgmi(health, spec=spec)
    assert res["status"] == "pass" and res["observed"] == "no xGMI on MI300X: PCIe cards without a bridge"
    spec["generations"].pop("MI300X")
    assert _xgmi(health, spec=spec)["status"] == "unknown"
    res = _xgmi(_health(xgmi={"error": "KFD topology not found: /x does not exist", "gpus": [], "pairs": []}))
    assert res["status"] == "unknown" and res["observed"] == "KFD topology not readable: KFD topology not found: /x does not exist"


def _mi250x_layout():
    return [tuple(p[:2]) for p in XGMI["generations"]["MI250X"]["pairs"]]


@pytest.mark.parametrize("perm", [(0, 1, 2, 3, 4, 5, 6, 7), (4, 5, 2, 3, 6, 7, 0, 1), (7, 3, 1, 5, 0, 2, 6, 4)])
def test_mi250x_package_layout_is_matched_up_to_gcd_numbering(perm):
    """The 12 linked GCD pairs of the card, renumbered as another platform may number its GCDs: all there pass; one
    link removed fails naming that pair in the node's numbering, and no other."""
    pairs = {tuple(sorted((perm[a], perm[b]))) for a, b in _mi250x_layout()}
    facts = _xgmi_facts()
    facts["pairs"] = [list(p) for p in sorted(pairs)]
    res = _xgmi(_xgmi_health(facts), gen="MI250X")
    assert res["status"] == "pass" and res["observed"].startswith("12 of 12 expected GPU pair(s) linked"), res
    gone = tuple(sorted((perm[2], perm[4])))  # the 2-link pair between packages 2-3 and 4-5
    facts["pairs"] = [list(p) for p in sorted(pairs - {gone})]
    res = _xgmi(_xgmi_health(facts), gen="MI250X")
    assert res["status"] == "fail" and res["observed"].count("<->") == 1
    assert "GPU %d (0000:%02x:00.0) <-> GPU %d (0000:%02x:00.0)" % (
        gone[0], 0x10 * (gone[0] + 1), gone[1], 0x10 * (gone[1] + 1)) in res["observed"]


def test_mi250x_layout_on_another_gcd_count_is_unknown():
    facts = _xgmi_facts(count=6)
    res = _xgmi(_xgmi_health(facts, count=6), gen="MI250X")
    assert res["status"] == "unknown" and "the layout is for 8 GPUs, the node shows 6" in res["observed"]


def test_mi210_hives_are_full_meshes_and_cards_without_a_bridge_expect_nothing():
    hives = ["a"] * 4 + ["b"] * 4
    cross = {(a, b) for a in range(4) for b in range(4, 8)}
    res = _xgmi(_xgmi_health(_xgmi_facts(missing=cross, hives=hives)), gen="MI210")
    assert res["status"] == "pass" and res["observed"].startswith("12 of 12 expected GPU pair(s) linked")
    res = _xgmi(_xgmi_health(_xgmi_facts(missing=cross | {(5, 6)}, hives=hives)), gen="MI210")
    assert res["status"] == "fail" and "GPU 5 (0000:60:00.0) <-> GPU 6 (0000:70:00.0)" in res["observed"]
    alone = _xgmi_facts(missing=set(itertools.combinations(range(8), 2)), hives=[None] * 8)
    res = _xgmi(_health(xgmi=alone), gen="MI210")  # no ras files either: nothing to judge
    assert res["status"] == "pass" and res["observed"].startswith("no xGMI link expected (8 GPU(s)")


def _capture_health(facts):
    """Health of the capture's physical GPUs with zero xGMI/WAFL counters (captures hold no amdgpu sysfs)."""
    return _health([_wafl(_gpu(g["bdf"])) for g in facts["gpus"]], xgmi=facts)


@pytest.mark.parametrize("capture,gen,pairs,partitions", [
    ("mi210-8gpu-2hive", "MI210", 12, {1}),      # two bridged hives of 4 PCIe cards
    ("mi300x-8gpu-cpx", "MI300X", 28, {8, 7}),   # CPX: 63 KFD nodes (one partition missing from the capture)
    ("mi308x-cpx", "MI308X", 28, {4}),
])
def test_real_kfd_captures_give_the_generations_layout(capture, gen, pairs, partitions):
    facts = gh.xgmi_facts(read_kfd(path=os.path.join(KFD_CAPTURES, capture)).to_dict())
    assert len(facts["gpus"]) == 8 and {g["partitions"] for g in facts["gpus"]} == partitions
    assert len(facts["pairs"]) == pairs
    res = _xgmi(_capture_health(facts), gen=gen)
    assert res["status"] == "pass", res
    assert res["observed"] == "%d of %d expected GPU pair(s) linked; xgmi_wafl_err_count 0 on 8 GPU(s)" % (pairs, pairs)


def _drop_xgmi(nodes, between):
    """Remove the type-11 io_links between the KFD nodes of ``between`` (two sets of node numbers), both ways."""
    for node in os.listdir(nodes):
        links = os.path.join(nodes, node, "io_links")
        for link in os.listdir(links) if os.path.isdir(links) else []:
            with open(os.path.join(links, link, "properties")) as handle:
                props = dict(line.split() for line in handle if line.strip())
            ends = {int(node), int(props["node_to"])}
            if props["type"] == "11" and any(ends & side and ends - side and ends - side <= other
                                             for side, other in (between, between[::-1])):
                shutil.rmtree(os.path.join(links, link))


def test_cpx_capture_with_a_dead_link_names_the_physical_pair(tmp_path):
    """A copy of the real MI300X CPX capture without the xGMI io_links between every partition of GPU 0 and GPU 3:
    one missing physical pair, named once; without them between one partition of each only, still linked (the
    physical GPUs are the peers, any partition's link joins them)."""
    root = str(tmp_path / "cpx")
    shutil.copytree(os.path.join(KFD_CAPTURES, "mi300x-8gpu-cpx"), root)
    model = read_kfd(path=root).to_dict()
    kfd_of = {}
    for gpu in model["gpus"]:
        kfd_of.setdefault(gpu["physical_index"], set()).add(gpu["kfd_node"])
    nodes = os.path.join(root, "topology", "nodes") if os.path.isdir(os.path.join(root, "topology")) else \
        os.path.join(root, "nodes")
    _drop_xgmi(nodes, ({min(kfd_of[1])}, {min(kfd_of[2])}))
    facts = gh.xgmi_facts(read_kfd(path=root).to_dict())
    assert _xgmi(_capture_health(facts))["status"] == "pass"
    _drop_xgmi(nodes, (kfd_of[0], kfd_of[3]))
    facts = gh.xgmi_facts(read_kfd(path=root).to_dict())
    res = _xgmi(_capture_health(facts))
    bdf = {g["index"]: g["bdf"] for g in facts["gpus"]}
    assert res["status"] == "fail" and res["observed"].count("<->") == 1
    assert res["observed"].startswith("missing xGMI link(s): GPU 0 (%s) <-> GPU 3 (%s); " % (bdf[0], bdf[3]))


def test_xgmi_links_fails_on_the_link_down_profile_only(profile_facts):
    """Every simulated profile (each of a generation with xGMI: MI300X, MI308X, MI250X, MI210) passes but
    fault-xgmi-link-down, which fails naming the one pair its tree lacks."""
    assert "fault-xgmi-link-down" in PROFILES and "mi300x-8gpu-cpx" in PROFILES and "mi250x-8gcd" in PROFILES
    results = {name: _by_id(pc.run_checks(profile_facts(name), KNOWLEDGE))["xgmi_links"] for name in PROFILES}
    down = results.pop("fault-xgmi-link-down")
    assert down["status"] == "fail" and down["observed"] == (
        "missing xGMI link(s): GPU 2 (0000:38:00.0) <-> GPU 5 (0000:af:00.0); xgmi_wafl_err_count 0 on 8 GPU(s)")
    assert {name: r["status"] for name, r in results.items() if r["status"] != "pass"} == {}
    assert results["mi300x-8gpu-cpx"]["observed"].startswith("28 of 28 expected GPU pair(s) linked")
    assert results["mi300x-8gpu-cpx64"]["observed"].startswith("28 of 28 expected GPU pair(s) linked")
    assert results["mi250x-8gcd"]["observed"].startswith("12 of 12 expected GPU pair(s) linked")
    assert results["mi210-8gpu-2hive"]["observed"].startswith("12 of 12 expected GPU pair(s) linked")


def test_xgmi_reads_go_through_sysroot(sim_tree):
    """The counters are read through core/sysroot.py, so a node snapshot records them (the KFD tree it keeps whole)."""
    root = sim_tree("mi300x-8gpu-spx")
    with recording() as reads:
        health = gh.gather(root)
    assert len(health["xgmi"]["pairs"]) == 28
    wafl = {path for path in reads.files if path.endswith("/ras/xgmi_wafl_err_count")}
    assert len(wafl) == 8
