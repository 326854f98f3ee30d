"""Issue 24's node checks: ``os_supported`` (os_support.py: the OS and kernel against AMD's ROCm compatibility matrix,
knowledge/rocm_compatibility.yml), ``gpu_idle`` (gpu_health.py: utilization and temperatures of the GPUs no process
holds) and the driver-error filter of ``gpu_kernel_log`` (curated patterns with their levels, CVS's generic filter,
the known-benign lines). Each passes on every good simulated profile and trips on its own fault profile only; the
kernel-log layers run on real lines of public bug reports (tests/fixtures/kernel-log/, README there)."""

import copy
import os
import re
import tarfile

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import expected_values as ev
from ansible_collections.topotune.instinct.plugins.module_utils.checks import gpu_health as gh
from ansible_collections.topotune.instinct.plugins.module_utils.checks import os_support as osup
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.topology.snapshot import collect, write_archive
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import (
    CHECK_TABLES,
    cards,
    checks_knowledge,
    load_knowledge,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "kernel-log")
PROFILES = sorted(name[:-4] for name in os.listdir(os.path.join(REPO, "sim", "profiles")) if name.endswith(".yml"))
KNOWLEDGE = checks_knowledge()
HEALTH = KNOWLEDGE["gpu_health"]
MATRIX = KNOWLEDGE["rocm_compatibility"]
GENERATIONS = {g["name"]: g for g in KNOWLEDGE["generations"]}


def _by_id(results):
    return {r["id"]: r for r in results}


# ------------------------------------------------------------------------------------- every profile
# the check -> {profile: (status, what the observation starts with)}; every profile not named passes
OWN_FAULTS = {
    "os_supported": {
        "fault-os-unsupported": ("fail", "ubuntu 20.04 (Ubuntu 20.04.6 LTS), kernel 5.15.0-139-generic, ROCm "
                                         "6.4.1-112: the OS is not in the matrix for ROCm 6.4.1"),
    },
    "gpu_idle": {
        "fault-gpu-busy": ("fail", "GPU 3 (0000:5c:00.0): gpu_busy_percent 100 %, junction 91 °C, mem 78 °C, no "
                                   "process holds it"),
    },
    # the new generic filter: its own fault warns; the faults whose logs carry curated lines keep failing
    "gpu_kernel_log": {
        "fault-driver-error": ("warn", "amdgpu_fail_or_error x2 (first: [   21.304512] amdgpu 0000:5c:00.0: amdgpu: "
                                       "psp gfx command LOAD_TA(0x1) failed"),
        "fault-ecc-uncorrectable": ("fail", "ras_uncorrectable x1"),
        "fault-ecc-deferred": ("fail", "ras_deferred x2"),
        "fault-retired-pages": ("fail", "bad_pages_over_threshold x1"),
    },
}


def test_the_new_fault_profiles_exist():
    assert {"fault-gpu-busy", "fault-os-unsupported", "fault-driver-error"} <= set(PROFILES)


@pytest.mark.parametrize("profile", PROFILES)
def test_each_check_passes_everywhere_but_on_its_own_fault(profile, node_checks):
    _facts, results = node_checks(profile)
    for check_id, faults in OWN_FAULTS.items():
        result = results[check_id]
        if profile in faults:
            status, text = faults[profile]
            assert result["status"] == status and result["observed"].startswith(text), result
            assert result["remediation"] and result["source"]
        else:
            assert result["status"] == "pass", (check_id, result)


def test_good_profile_observations(node_checks):
    _facts, results = node_checks("mi300x-8gpu-spx")
    assert results["os_supported"]["observed"] == (
        "ubuntu 24.04 (Ubuntu 24.04.2 LTS), kernel 6.8.0-45-generic, ROCm 6.4.1-112: listed as Ubuntu 24.04.2, kernel "
        "line 6.8 (GA)")
    assert results["os_supported"]["expected"].startswith("ROCm 6.4.1 on MI300X: Ubuntu 24.04.2 (kernel 6.8, 6.11); ")
    assert "Oracle Linux 9 (kernel 5.15, 6.12)" in results["os_supported"]["expected"]  # an MI300X-only OS, allowed
    assert results["gpu_idle"]["observed"] == ("8 GPU(s) idle, no process holds them: gpu_busy 0 %, mem_busy 0 %, "
                                               "junction <= 55 °C, mem <= 43 °C")
    assert results["gpu_kernel_log"]["cvs"] == "test_check_dmesg_driver_errors"
    # MI250X: an OS AMD limits to MI300X is not offered to it
    _facts, mi250x = node_checks("mi250x-8gcd")
    assert "Oracle Linux" not in mi250x["os_supported"]["expected"] and "edge <= 50 °C" in mi250x["gpu_idle"]["observed"]


def test_the_knowledge_reaches_every_caller():
    """The loader's one list: the module's action, bin/topotune and the drift exporter pass it."""
    from ansible_collections.topotune.instinct.plugins.action.platform_checks import KNOWLEDGE_TABLES, collection_knowledge

    assert "rocm_compatibility" in CHECK_TABLES and KNOWLEDGE_TABLES == CHECK_TABLES
    assert collection_knowledge()["rocm_compatibility"] == load_knowledge("rocm_compatibility")
    with open(os.path.join(REPO, "roles", "drift_exporter", "tasks", "install.yml"), encoding="utf-8") as handle:
        install = handle.read()
    assert all("lookup('topotune.instinct.knowledge', '%s')" % name in install for name in CHECK_TABLES)
    with open(os.path.join(REPO, "bin", "topotune"), encoding="utf-8") as handle:
        assert "checks_knowledge" in handle.read()


def test_without_the_matrix_the_check_is_left_out(node_checks):
    facts, _results = node_checks("mi300x-8gpu-spx")
    knowledge = {k: v for k, v in KNOWLEDGE.items() if k != "rocm_compatibility"}
    assert "os_supported" not in _by_id(pc.run_checks(facts, knowledge))


# -------------------------------------------------------------------------------------- os_supported
def _facts(rocm="6.4.1-112", os_id="ubuntu", version_id="24.04", version=None, kernel="6.8.0-45-generic"):
    fields = None if os_id is None else {"ID": os_id, "VERSION_ID": version_id}
    if fields is not None and version:
        fields["VERSION"] = version
    return {"health": {"rocm_version": rocm, "kernel_release": kernel}, "expected": {"os_release_fields": fields}}


def _os(facts, gen="MI300X", spec=MATRIX):
    return osup.run_checks(facts, spec, GENERATIONS.get(gen))[0]


@pytest.mark.parametrize("rocm,os_id,version_id,kernel,gen,status,text", [
    # ROCm 6.2: MI300X except Ubuntu 22.04.5 [6.8 HWE] and 22.04.4 [6.5 HWE] (footnote mi300_62x)
    ("6.2.4", "ubuntu", "22.04", "6.8.0-40-generic", "MI300X", "warn", "kernel line 6.8 not among 5.15 GA"),
    ("6.2.4", "ubuntu", "22.04", "6.8.0-40-generic", "MI250X", "pass", "kernel line 6.8 (HWE)"),
    ("6.2.4", "ubuntu", "22.04", "5.15.0-119-generic", "MI300X", "pass", "kernel line 5.15 (GA)"),
    ("6.2.0", "ubuntu", "20.04", "5.15.0-119-generic", "MI300X", "fail", "not in the matrix for ROCm 6.2.0"),
    # ROCm 6.3: Debian 12 from 6.3.1, MI300X only
    ("6.3.0", "debian", "12", "6.1.0-28-amd64", "MI300X", "fail", "not in the matrix for ROCm 6.3.0"),
    ("6.3.1", "debian", "12", "6.1.0-28-amd64", "MI300X", "pass", "listed as Debian 12"),
    ("6.3.1", "debian", "12", "6.1.0-28-amd64", "MI210", "fail", "Debian 12 is supported only on MI300X"),
    # SLES: VERSION_ID 15.6 is 15 SP6; RHEL 9.6 from 6.4.1 (the later revision), SP7 from 6.4.2
    ("6.4.0", "sles", "15.6", "6.4.0-150600.23.25-default", "MI300X", "pass", "listed as SLES 15 SP6"),
    ("6.4.0", "rhel", "9.6", "5.14.0-570.12.1.el9_6.x86_64", "MI300X", "fail", "not in the matrix for ROCm 6.4.0"),
    ("6.4.1", "rhel", "9.6", "5.14.0-570.12.1.el9_6.x86_64", "MI300X", "pass", "kernel line 5.14"),
    ("6.4.1", "sles", "15.7", "6.4.0-150700.51-default", "MI300X", "fail", "not in the matrix"),
    ("6.4.3", "sles", "15.7", "6.4.0-150700.51-default", "MI300X", "pass", "listed as SLES 15 SP7"),
    # Oracle Linux "9" matches VERSION_ID 9.4; MI308X answers to MI300X's footnotes
    ("6.4.1", "ol", "9.4", "5.15.0-300.163.18.el9uek.x86_64", "MI308X", "pass", "listed as Oracle Linux 9"),
    ("6.4.1", "ol", "9.4", "5.15.0-300.163.18.el9uek.x86_64", "MI250X", "fail", "supported only on MI300X"),
    ("6.4.1", "ol", "9.4", "5.14.0-427.13.1.el9_4.x86_64", "MI300X", "warn", "kernel line 5.14 not among"),
    # ROCm 7.0: RHEL 8.10 not on MI355X; MI325X only on Ubuntu and RHEL 9.x; RHEL 10.0 only from 7.0.2
    ("7.0.2", "rhel", "8.10", "4.18.0-553.el8_10.x86_64", "MI355X", "fail", "RHEL 8.10 is supported only on"),
    ("7.0.2", "rhel", "8.10", "4.18.0-553.el8_10.x86_64", "MI300X", "pass", "listed as RHEL 8.10"),
    ("7.0.1", "debian", "12", "6.1.0-28-amd64", "MI325X", "fail", "Debian 12 is supported only on MI300X, MI300A"),
    ("7.0.0", "rhel", "9.6", "5.14.0-570.el9_6.x86_64", "MI325X", "pass", "listed as RHEL 9.6"),
    ("7.0.0", "rhel", "10.0", "6.12.0-55.el10.x86_64", "MI355X", "fail", "not in the matrix for ROCm 7.0.0"),
    ("7.1.0", "rhel", "10.0", "6.12.0-55.el10.x86_64", "MI355X", "pass", "kernel line 6.12"),
    ("7.1.0", "ol", "10.0", "6.12.0-100.28.2.el10uek.x86_64", "MI355X", "pass", "listed as Oracle Linux 10"),
    ("7.0.0", "ol", "9.6", "6.12.0-1.el9uek.x86_64", "MI325X", "fail", "Oracle Linux 9 is supported only on"),
    # a GPU footnote ("MI300A ... supported only on"): Azure Linux is MI300X's
    ("7.0.2", "azurelinux", "3.0", "6.6.92.2-1.azl3", "MI300A", "fail", "Azure Linux 3.0 is supported only on MI300X"),
])
def test_matrix_verdicts(rocm, os_id, version_id, kernel, gen, status, text):
    result = _os(_facts(rocm=rocm + "-1", os_id=os_id, version_id=version_id, kernel=kernel), gen)
    assert result["status"] == status and text in result["observed"], result
    if status != "pass":
        assert result["remediation"]
    assert "compatibility-matrix" in result["source"] and "Check OS Distribution" in result["source"]


def test_ubuntu_point_releases_share_their_version_id_and_pool_the_kernels():
    # 7.0.2 lists 24.04.3 (6.8 GA, 6.14 HWE): a node still saying 24.04.1 is 24.04; 24.04.2's HWE 6.11 is not listed
    ok = _os(_facts(rocm="7.0.2", version="24.04.1 LTS (Noble Numbat)", kernel="6.8.0-79-generic"))
    assert ok["status"] == "pass" and "listed as Ubuntu 24.04.3" in ok["observed"]
    old_hwe = _os(_facts(rocm="7.0.2", kernel="6.11.0-29-generic"))
    assert old_hwe["status"] == "warn" and "kernel line 6.11 not among 6.8 GA, 6.14 HWE" in old_hwe["observed"]
    # 6.2 lists 22.04.5 and 22.04.4: their kernels pool (5.15, 6.5, 6.8) for an MI250X
    pooled = _os(_facts(rocm="6.2.4", version_id="22.04", kernel="6.5.0-45-generic"), "MI250X")
    assert pooled["status"] == "pass" and "listed as Ubuntu 22.04.5, Ubuntu 22.04.4" in pooled["observed"]


def test_a_patch_release_the_matrix_lacks_is_judged_by_the_newest_listed_one_of_its_series():
    result = _os(_facts(rocm="6.4.4-129", os_id="sles", version_id="15.7", kernel="6.4.0-150700.53-default"))
    assert result["status"] == "pass"
    assert "ROCm 6.4.4 is not in the matrix: judged by 6.4.3, the newest listed 6.4 release" in result["observed"]
    assert result["expected"].startswith("ROCm 6.4.3 on MI300X")


@pytest.mark.parametrize("facts,gen,text", [
    (_facts(rocm=None), "MI300X", "no ROCm installed (opt/rocm/.info/version missing)"),
    (_facts(rocm="rocm"), "MI300X", "ROCm version 'rocm' (opt/rocm/.info/version) is not X.Y.Z"),
    (_facts(rocm="7.2.0"), "MI300X", "ROCm 7.2.0 is not in the matrix data (knowledge/rocm_compatibility.yml has 6.2.0"),
    (_facts(rocm="6.1.3"), "MI300X", "ROCm 6.1.3 is not in the matrix data"),
    (_facts(os_id=None), "MI300X", "etc/os-release unreadable"),
    (_facts(version_id=""), "MI300X", "etc/os-release has no ID or VERSION_ID"),
    (_facts(kernel=None), "MI300X", "kernel release unreadable"),
    (_facts(kernel="unknown"), "MI300X", "kernel release 'unknown' not understood"),
    # an OS AMD limits to some GPUs, the generation unknown: not judged
    (_facts(os_id="debian", version_id="12", kernel="6.1.0-28-amd64"), None,
     "Debian 12 is supported only on MI300X, and the node's GPU generation is unknown"),
])
def test_unknown_with_the_reason(facts, gen, text):
    result = _os(facts, gen)
    assert result["status"] == "unknown" and text in result["observed"], result
    assert result["remediation"]


def test_without_a_generation_an_unrestricted_os_is_judged():
    result = _os(_facts(), None)
    assert result["status"] == "pass" and result["expected"].endswith(
        "(GPU generation unknown: OS versions AMD limits to some GPUs not judged)")
    assert "Debian" not in result["expected"]


def test_levels_and_rows_are_the_datas():
    spec = copy.deepcopy(MATRIX)
    spec["policy"].update(os_not_listed="warn", kernel_not_listed="fail")
    assert _os(_facts(version_id="20.04"), spec=spec)["status"] == "warn"
    assert _os(_facts(kernel="6.14.0-27-generic"), spec=spec)["status"] == "fail"
    release = next(r for r in spec["releases"] if "6.4.1" in r["rocm"])
    release["os"] = [e for e in release["os"] if e["name"] != "Ubuntu 24.04.2"]
    assert _os(_facts(), spec=spec)["status"] == "warn"  # Ubuntu 24.04 left the (edited) row: os_not_listed


@pytest.mark.parametrize("spec", [
    {"releases": [{"rocm": ["6.4.1"], "os": [{"id": "ubuntu", "version_id": "24.04"}]}]},   # no name, no kernels
    {"releases": [{"rocm": ["6.4.1"], "os": ["Ubuntu 24.04"], "gpu_only_on": [None]}]},
    {"releases": ["6.4.1", {"rocm": ["x"]}], "products": ["MI308X"]},
    {"policy": None, "releases": [{"rocm": ["6.4.1"], "os": [{"name": "U", "id": "ubuntu", "version_id": "24.04",
                                                              "kernels": ["6.8"], "kernel_not_for": ["x"]}]}]},
])
def test_malformed_knowledge_gives_a_verdict_not_a_traceback(spec):
    for gen in ("MI300X", "MI308X", None):
        result = _os(_facts(), gen, spec)
        assert result["status"] in ("pass", "warn", "fail", "unknown") and result["observed"]


def test_gather_keeps_the_os_release_fields(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text(
        'NAME="Oracle Linux Server"\nVERSION="9.4"\nID="ol"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n'
        'PRETTY_NAME="Oracle Linux Server 9.4"\nANSI_COLOR="0;31"\n')
    gathered = ev.gather(str(tmp_path))
    assert gathered["os_release"] == "ol 9.4"
    assert gathered["os_release_fields"] == {"VERSION": "9.4", "ID": "ol", "ID_LIKE": "fedora", "VERSION_ID": "9.4",
                                             "PRETTY_NAME": "Oracle Linux Server 9.4"}


def test_the_matrix_data_holds_together():
    """Every release cites its sources; every OS entry is an os-release ID of the file's table with a version and
    major.minor kernel lines; footnote products are AMD products or the generations' names and aliases; every OS a GPU
    footnote names is an OS of that release; no release twice; 6.2, 6.3, 6.4, 7.0 and 7.1 all there."""
    problems, seen = [], []
    ids = set(MATRIX["os_release_ids"].values())
    amd_products = {"MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI350X", "MI355X"}
    known = amd_products | {card["name"] for card in cards()}
    for release in MATRIX["releases"]:
        label = "/".join(release["rocm"])
        seen.extend(release["rocm"])
        if not release.get("sources") or not set(release["sources"]) <= set(MATRIX["sources"]):
            problems.append("%s: sources %s" % (label, release.get("sources")))
        names = [entry["name"] for entry in release["os"]]
        for entry in release["os"]:
            prefix = next((k for k in MATRIX["os_release_ids"] if entry["name"].startswith(k + " ")), None)
            if entry["id"] not in ids or MATRIX["os_release_ids"].get(prefix) != entry["id"]:
                problems.append("%s %s: id %s" % (label, entry["name"], entry["id"]))
            if not re.match(r"^\d+(\.\d+)?$", str(entry["version_id"])) or not entry.get("listed"):
                problems.append("%s %s: version_id or listed" % (label, entry["name"]))
            if not entry["kernels"] or not all(re.match(r"^\d+\.\d+$", k) for k in entry["kernels"]):
                problems.append("%s %s: kernels %s" % (label, entry["name"], entry["kernels"]))
            products = set(entry.get("only_for") or []) | {p for v in (entry.get("kernel_not_for") or {}).values()
                                                           for p in v}
            if products - known:
                problems.append("%s %s: products %s" % (label, entry["name"], sorted(products - known)))
        for limit in release.get("gpu_only_on") or []:
            if set(limit["products"]) - known or set(limit["os"]) - set(names) - {"RHEL 10.0"}:
                problems.append("%s gpu_only_on %s" % (label, limit))
    for item in MATRIX["products"]:
        if item["generation"] not in {card["name"] for card in cards()} or item["product"] not in amd_products:
            problems.append("products %s" % item)
    assert not problems, problems
    assert len(seen) == len(set(seen))
    assert {v.rsplit(".", 1)[0] for v in seen} >= {"6.2", "6.3", "6.4", "7.0", "7.1"}
    for source in MATRIX["sources"].values():
        assert len(source["commit"]) == 40 and source["document"].strip()
    assert MATRIX["policy"]["os_not_listed"] == "fail" and MATRIX["policy"]["kernel_not_listed"] == "warn"


# --------------------------------------------------------------------------------------------- gpu_idle
def _gpu(bdf, busy=0, mem=0, temps=(("junction", 55000), ("mem", 43000))):
    return {"bdf": bdf, "gpu_busy_percent": busy, "mem_busy_percent": mem,
            "temperatures": [{"label": label, "millidegrees": value} for label, value in temps]}


def _idle_health(gpus=None, users=None, error=None, unreadable=0):
    gpus = gpus if gpus is not None else [_gpu("0000:%02x:00.0" % (0x10 * (i + 1))) for i in range(4)]
    return {"gpus": gpus, "render_nodes": [{"minor": 128 + i, "bdf": g["bdf"]} for i, g in enumerate(gpus)],
            "gpu_users": {"error": error, "processes": 300, "unreadable": unreadable, "users": users or []}}


def _idle(health, spec=None):
    return gh._check_idle(health, HEALTH["idle"] if spec is None else spec)


@pytest.mark.parametrize("gpu,status,text", [
    (_gpu("0000:10:00.0"), "pass", None),
    (_gpu("0000:10:00.0", busy=3), "warn", "gpu_busy_percent 3 %"),
    (_gpu("0000:10:00.0", busy=10), "warn", "gpu_busy_percent 10 %"),
    (_gpu("0000:10:00.0", busy=11), "fail", "gpu_busy_percent 11 %"),
    (_gpu("0000:10:00.0", mem=40), "fail", "mem_busy_percent 40 %"),
    (_gpu("0000:10:00.0", temps=(("junction", 70000),)), "pass", None),
    (_gpu("0000:10:00.0", temps=(("junction", 70001),)), "warn", "junction 70 °C"),
    (_gpu("0000:10:00.0", temps=(("edge", 40000), ("mem", 85000))), "fail", "mem 85 °C"),
    (_gpu("0000:10:00.0", busy=None), "unknown", "gpu_busy_percent unreadable"),
    (dict(_gpu("0000:10:00.0"), mem_busy_percent=None), "pass", None),  # APUs have no mem_busy_percent
    (_gpu("0000:10:00.0", temps=()), "unknown", "no hwmon temperature"),
    (_gpu("0000:10:00.0", temps=(("junction", None),)), "unknown", "junction temperature unreadable"),
])
def test_idle_limits(gpu, status, text):
    result = _idle(_idle_health([gpu]))
    assert result["status"] == status, result
    if text:
        assert result["observed"] == "GPU 0 (0000:10:00.0): %s, no process holds it" % text
        assert result["remediation"]
    else:
        assert result["observed"].startswith("1 GPU(s) idle, no process holds them: ")


def test_a_gpu_in_use_is_not_judged_and_the_others_are():
    gpus = [_gpu("0000:10:00.0", busy=100), _gpu("0000:20:00.0", busy=100), _gpu("0000:30:00.0")]
    render = [{"pid": 4242, "comm": "python3", "devices": ["/dev/dri/renderD128"]}]
    result = _idle(_idle_health(gpus, render))
    assert result["status"] == "fail"  # GPU 1 is busy with nobody holding it
    assert result["observed"] == ("GPU 1 (0000:20:00.0): gpu_busy_percent 100 %, no process holds it; not judged: GPU 0 "
                                  "(0000:10:00.0) in use: pid 4242 (python3) holds /dev/dri/renderD128")
    quiet = _idle(_idle_health(gpus[:1] + gpus[2:], render))
    assert quiet["status"] == "unknown" and quiet["observed"].startswith("not judged: GPU 0 (0000:10:00.0) in use")
    assert "drain the node" in quiet["remediation"]


def test_a_kfd_user_leaves_every_gpu_unjudged():
    users = [{"pid": 7, "comm": "rccl-tests", "devices": ["/dev/dri/renderD129", "/dev/kfd"]}]
    result = _idle(_idle_health([_gpu("0000:10:00.0", busy=100), _gpu("0000:20:00.0", busy=100)], users))
    assert result["status"] == "unknown"
    assert result["observed"].startswith("not idle, not judged: pid 7 (rccl-tests) holds /dev/kfd (a KFD user may run "
                                         "on any GPU); gpu_busy 100 %")


@pytest.mark.parametrize("health,text", [
    (_idle_health(error="no process directories under /x/proc (not a procfs)"), "processes not known: no process "
     "directories under /x/proc"),
    (_idle_health(unreadable=12), "processes not known: the open files of 12 process(es) are not readable (not "
                                  "root)"),
    ({"gpus": [_gpu("0000:10:00.0")]}, "processes not known: process table not gathered"),
    (_idle_health(gpus=[]), "no AMD GPU"),
])
def test_unknown_when_the_processes_or_gpus_are_not_known(health, text):
    result = _idle(health)
    assert result["status"] == "unknown" and result["observed"].startswith(text), result
    assert result["remediation"]


def test_the_idle_limits_are_the_datas():
    spec = copy.deepcopy(HEALTH["idle"])
    spec["busy"].update(warn_above=5, fail_above=50, fail_level="warn")
    spec["temperature"].update(warn_above_c=50, fail_at_c=60)
    assert _idle(_idle_health([_gpu("0000:10:00.0", busy=4, temps=(("mem", 50000),))]), spec)["status"] == "pass"
    assert _idle(_idle_health([_gpu("0000:10:00.0", busy=90, temps=(("mem", 40000),))]), spec)["status"] == "warn"
    assert _idle(_idle_health([_gpu("0000:10:00.0", temps=(("mem", 55000),))]), spec)["status"] == "warn"
    assert _idle(_idle_health([_gpu("0000:10:00.0", temps=(("mem", 60000),))]), spec)["status"] == "fail"
    assert "well under 85°C" in HEALTH["idle"]["temperature"]["source"] and HEALTH["idle"]["busy"]["level_source"]


def _gpu_tree(root, holders=(), unreadable=()):
    """A GPU (0000:0c:00.0, renderD128) with amdgpu's busy files and hwmon, and a process table: PID 1 on
    /dev/null, then ``holders`` {pid: [device paths]} (as /proc shows them: absolute host paths)."""
    dev = root / "sys/bus/pci/devices/0000:0c:00.0"
    (dev / "hwmon/hwmon4").mkdir(parents=True)
    for name, value in (("vendor", "0x1002"), ("class", "0x120000"), ("gpu_busy_percent", "0"),
                        ("mem_busy_percent", "0"), ("hwmon/hwmon4/temp2_input", "41000"),
                        ("hwmon/hwmon4/temp2_label", "junction"), ("hwmon/hwmon4/temp3_input", "36000"),
                        ("hwmon/hwmon4/temp3_label", "mem"), ("hwmon/hwmon4/temp9_input", "30000")):
        (dev / name).write_text(value + "\n")
    (root / "sys/class/drm/renderD128").mkdir(parents=True)
    os.symlink("../../../bus/pci/devices/0000:0c:00.0", str(root / "sys/class/drm/renderD128/device"))
    for pid, devices in [(1, ["/dev/null"])] + list(holders):
        (root / "proc" / str(pid) / "fd").mkdir(parents=True)
        (root / "proc" / str(pid) / "comm").write_text("proc%d\n" % pid)
        for fd, target in enumerate(devices):
            os.symlink(target, str(root / "proc" / str(pid) / "fd" / str(fd)))
    (root / "proc" / "cmdline").write_text("ro\n")
    return str(root)


def test_gather_reads_busy_hwmon_renders_and_the_holders(tmp_path):
    root = _gpu_tree(tmp_path, holders=[(500, ["/dev/dri/renderD128", "/dev/null", "socket:[77]"]),
                                        (600, ["/dev/kfd", "/dev/kfd"])])
    health = gh.gather(root, unit_root=root)
    gpu = health["gpus"][0]
    assert (gpu["gpu_busy_percent"], gpu["mem_busy_percent"]) == (0, 0)
    assert gpu["temperatures"] == [{"label": "junction", "millidegrees": 41000}, {"label": "mem", "millidegrees": 36000},
                                   {"label": "temp9", "millidegrees": 30000}]
    assert health["render_nodes"] == [{"minor": 128, "bdf": "0000:0c:00.0"}]
    assert health["gpu_users"] == {"error": None, "processes": 3, "unreadable": 0, "users": [
        {"pid": 500, "comm": "proc500", "devices": ["/dev/dri/renderD128"]},
        {"pid": 600, "comm": "proc600", "devices": ["/dev/kfd"]}]}
    result = gh._check_idle(health, HEALTH["idle"])
    assert result["status"] == "unknown" and "pid 600 (proc600) holds /dev/kfd" in result["observed"]


def test_gather_without_a_process_table_or_with_unreadable_fds(tmp_path, monkeypatch):
    assert gh.gpu_users(str(tmp_path))["error"] == "no process directories under %s (not a procfs)" % (tmp_path / "proc")
    root = _gpu_tree(tmp_path, holders=[(700, ["/dev/null"])])
    real = os.listdir

    def listdir(path):
        if str(path).endswith("/proc/700/fd"):
            raise PermissionError(13, "Permission denied")
        return real(path)
    monkeypatch.setattr(gh.os, "listdir", listdir)
    users = gh.gpu_users(root)
    assert (users["error"], users["processes"], users["unreadable"], users["users"]) == (None, 2, 1, [])


def test_a_snapshot_keeps_the_holders_links_and_judges_alike(tmp_path):
    """The node snapshot keeps what the readers read: the fd links that hold a GPU (laid out inside the tree, so
    relative), not every open file; the extracted snapshot gives the same holders."""
    node = tmp_path / "node"
    node.mkdir()
    root = _gpu_tree(node, holders=[(500, ["/dev/dri/renderD128", "/dev/null"])])
    (node / "dev/dri").mkdir(parents=True)
    (node / "dev/dri/renderD128").write_text("")
    files, meta = collect(root)
    assert "proc/500/fd/0" in meta["links"] and "proc/500/fd/1" not in meta["links"] and "proc/1/fd/0" not in meta["links"]
    archive = tmp_path / "snap.tar.gz"
    write_archive(str(archive), files, meta)
    extracted = tmp_path / "extracted"
    with tarfile.open(str(archive)) as tar:
        tar.extractall(str(extracted))
    assert gh.gpu_users(str(extracted)) == gh.gpu_users(root)


# ------------------------------------------------------------------------------------- gpu_kernel_log
def _log(text):
    health = {"kernel_log": text, "kernel_log_origin": "test"}
    return gh._check_kernel_log(health, HEALTH["kernel_log"])


def _fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("name,status,found,benign", [
    # an MI300X whose IP discovery binary was invalid (ROCm/ROCm issue 3856): three init patterns fail
    ("mi300x-discovery-init-failure__rocm-issue-3856.txt", "fail",
     {"init_discovery_failed": 2, "init_fatal": 1, "init_probe_failed": 1}, {}),
    # the gpu_info firmware missing (issue 1357): its firmware lines are generic (not the benign _ta.bin)
    ("mi100-gpu-info-firmware-missing__rocm-issue-1357.txt", "fail",
     {"init_fatal": 1, "init_probe_failed": 1, "amdgpu_fail_or_error": 2}, {}),
    ("psp-hw-init-failure__rocm-issue-2995.txt", "fail", {"init_ip_block_failed": 1, "amdgpu_fail_or_error": 1}, {}),
    # a normal boot: the reset at driver load is benign, the optional RAS TA notice matches nothing
    ("lucienne-boot__nixos-hardware-pr-755.txt", "pass", {}, {"asic_reset_at_init": 1}),
    ("vega20-ta-missing__rocm-issue-912.txt", "pass", {}, {"optional_ta_firmware_missing": 2}),
    ("renoir-securedisplay__kachick-dotfiles-issue-970.txt", "pass", {}, {"securedisplay_ta_query": 2}),
])
def test_kernel_log_on_real_captures(name, status, found, benign):
    text = _fixture(name)
    got, ignored = gh.kernel_log_findings(text, HEALTH["kernel_log"])
    assert {key: len(lines) for key, (_level, lines) in got.items()} == found
    assert ignored == benign
    result = _log(text)
    assert result["status"] == status and result["cvs"] == "test_check_dmesg_driver_errors"
    if benign and status == "pass":
        assert result["observed"].endswith("known-benign line(s) left out (%s)" % ", ".join(sorted(benign)))


@pytest.mark.parametrize("line,status,key", [
    # CVS's _KERNEL_FAILURE_RE alternatives, as amdgpu prints them (case-insensitive, as CVS reads them)
    ("amdgpu 0000:04:00.0: early_init of IP block <psp> failed -19", "fail", "init_ip_block_failed"),
    ("[drm:amdgpu_device_ip_init] *ERROR* sw_init of IP block <psp> failed -2", "fail", "init_ip_block_failed"),
    ("amdgpu 0000:05:00.0: probe with driver amdgpu failed with error -22", "fail", "init_probe_failed"),
    ("amdgpu 0000:05:00.0: amdgpu: invalid ip discovery binary checksum", "fail", "init_discovery_failed"),
    ("amdgpu 0000:05:00.0: amdgpu: memory training failed", "fail", "init_memory_training_failed"),
    ("amdgpu 0000:05:00.0: amdgpu: HBM stack 2 test failed", "fail", "init_memory_training_failed"),
    ("amdgpu 0000:05:00.0: amdgpu: XGMI: link training failed on port 3", "fail", "init_link_training_failed"),
    ("amdgpu 0000:05:00.0: amdgpu: psp: fw_status 0xFFFFFFFF", "fail", "init_firmware_status"),
    # the generic filter: the first line named, warn
    ("amdgpu 0000:5c:00.0: amdgpu: RAS: Failed to initialize RAS", "warn", "amdgpu_fail_or_error"),
    ("amdgpu 0000:5c:00.0: amdgpu: GPU hang detected on ring comp_1.0.0", "warn", "amdgpu_reset_or_hang"),
    ("amdgpu 0000:5c:00.0: amdgpu: GPU reset(2) succeeded!", "warn", "amdgpu_reset_or_hang"),
    # curated lines keep their levels; the generic filter does not add to them
    ("amdgpu 0000:05:00.0: amdgpu: GPU reset begin!", "warn", "gpu_reset"),
    ("amdgpu 0000:03:00.0: amdgpu: GPU reset(1) failed with error -110", "fail", "gpu_reset_failed"),
    # not driver errors: another driver's line, a word that only contains "hang", benign lines
    ("mlx5_core 0000:9e:00.0: is_dpll_supported:213:(pid 1313): Missing SyncE capability failed", "pass", None),
    ("amdgpu 0000:0c:00.0: amdgpu: pp_od_clk_voltage changed", "pass", None),
    ("amdgpu 0000:0c:00.0: amdgpu: RAS: optional ras ta ucode is not available", "pass", None),
    ("amdgpu 0000:0c:00.0: amdgpu: MODE1 reset", "pass", None),
    ("amdgpu 0000:38:00.0: amdgpu: {7}socket: 0, die: 1, 4 new correctable hardware errors detected in umc block",
     "pass", None),
])
def test_kernel_log_layers_on_cited_lines(line, status, key):
    result = _log("[    1.0] some boot line\n[   12.5] " + line + "\n")
    assert result["status"] == status, result
    if key:
        assert result["observed"].startswith(key + " x1 (first: [   12.5] " + line[:40])
        assert result["remediation"]


def test_the_fix_says_how_to_add_a_benign_line_only_for_generic_findings():
    generic = _log("amdgpu 0000:5c:00.0: amdgpu: RAS: Failed to initialize RAS\n")
    assert "kernel_log.benign" in generic["remediation"]
    curated = _log("amdgpu 0000:05:00.0: amdgpu: Fatal error during GPU init\n")
    assert curated["status"] == "fail" and "kernel_log.benign" not in curated["remediation"]


def test_knowledge_edits_change_the_verdicts():
    spec = copy.deepcopy(HEALTH["kernel_log"])
    line = "amdgpu 0000:5c:00.0: amdgpu: RAS: Failed to initialize RAS\n"
    spec["generic"]["level"] = "fail"
    assert gh._check_kernel_log({"kernel_log": line}, spec)["status"] == "fail"
    spec["benign"].append({"id": "site", "pattern": "Failed to initialize RAS", "why": "x", "source": "x"})
    assert gh._check_kernel_log({"kernel_log": line}, spec)["status"] == "pass"
    # a broken pattern is left out, never a traceback on the node
    spec["patterns"].append({"id": "broken", "level": "fail", "pattern": "(unclosed"})
    spec["generic"]["filters"].append({"id": "also", "pattern": "[z-a]"})
    assert gh._check_kernel_log({"kernel_log": line + "garbage \x00 line\n"}, spec)["status"] == "pass"


def test_every_kernel_log_entry_cites_its_source():
    spec = HEALTH["kernel_log"]
    for pattern in spec["patterns"]:
        assert pattern["level"] in ("warn", "fail")
        if pattern["id"].startswith("init_"):
            assert pattern["level"] == "fail" and "CVS _KERNEL_FAILURE_RE" in pattern["source"]
    for item in spec["benign"]:
        assert item["why"].strip() and item["source"].strip(), item["id"]
    assert spec["generic"]["level"] == "warn" and "test_check_dmesg_driver_errors" in spec["generic"]["source"]
    assert spec["generic"]["level_source"].strip()
