"""Drift drills on the converged cluster: every drill is detected by drift.yml fast and full, on its node and
nothing else; topotune_correct=true corrects every one, and a last fast run finds no drift while the user's own
daemon.json keys and group memberships survive.

The playbooks run once for the session (ansible-playbook against molecule's inventory); the tests read their
JSON reports. Timings land in <ephemeral>/drift-timings.json.
"""

import json
import os
import subprocess
import time

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
SCENARIO = os.path.join(PROJECT, "molecule", "cluster")
ENV_FILE = "/etc/topotune/env/xgmi-training.env"
GLOB = "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"

# node -> the (owner, kind, item) each of its drills must produce, and nothing else
EXPECTED = {
    "tt-cluster-mi250x": {
        ("cpu_governor", "value", GLOB),
        ("rocm_env", "file", ENV_FILE),
        ("container_runtime", "file", "/etc/topotune/container/all.flags"),
        ("kernel_tuning", "value", "proc/sys/kernel/numa_balancing"),
    },
    "tt-cluster-mi300x-spx": {
        ("rocm_env", "file", "/etc/profile.d/topotune-rocm.sh"),
        ("launch_templates", "file", "/usr/local/bin/topotune-bind"),
        ("container_runtime", "json_key", "/etc/docker/daemon.json#/default-ulimits/memlock/Soft"),
        ("cpu_governor", "unit", "topotune-cpu-governor.service enabled"),
    },
    "tt-cluster-mi210": {
        ("rocm_env", "file", ENV_FILE),
        ("container_runtime", "group", "trainer in render"),
    },
}


def playbook(name, report, *extra, env=None):
    cmd = ["ansible-playbook", "-i", INVENTORY, name, "-e", "topotune_report_dir=%s" % report, *extra]
    run_env = dict(os.environ, **(env or {}))
    run_env["ANSIBLE_CONFIG"] = os.path.join(PROJECT, "ansible.cfg")
    run_env["ANSIBLE_COLLECTIONS_PATH"] = "%s/.cache/collections:%s/.vendor/collections" % (PROJECT, PROJECT)
    run_env["PATH"] = "%s/.venv/bin:%s" % (PROJECT, run_env.get("PATH", ""))
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=PROJECT, env=run_env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, "%s failed (rc=%d)\n%s\n%s" % (name, proc.returncode, proc.stdout[-6000:], proc.stderr[-3000:])
    reports = {}
    for host in EXPECTED:
        path = os.path.join(report, "drift", "%s.json" % host)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                reports[host] = json.load(handle)
    return {"reports": reports, "seconds": round(elapsed, 1), "stdout": proc.stdout}


@pytest.fixture(scope="session")
def runs():
    base = os.path.join(EPHEMERAL, "drift-drills")
    out = {}
    out["clean"] = playbook("playbooks/drift.yml", os.path.join(base, "clean"))
    playbook(os.path.join(SCENARIO, "drills.yml"), os.path.join(base, "drills"))
    out["fast"] = playbook("playbooks/drift.yml", os.path.join(base, "fast"))
    out["full"] = playbook(
        "playbooks/drift.yml",
        os.path.join(base, "full"),
        "-e",
        "topotune_drift_mode=full",
        env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.profile_tasks,topotune.instinct.drift_capture"},
    )
    out["correct"] = playbook("playbooks/drift.yml", os.path.join(base, "correct"), "-e", "topotune_correct=true")
    out["after"] = playbook("playbooks/drift.yml", os.path.join(base, "after"))
    with open(os.path.join(EPHEMERAL, "drift-timings.json"), "w", encoding="utf-8") as handle:
        json.dump({k: v["seconds"] for k, v in out.items()}, handle)
    return out


def keys(report):
    return {(d["owner"], d["kind"], d["item"]) for d in report["drifted"]}


def test_report_shape(runs):
    for name in ("fast", "full", "correct"):
        for host, report in runs[name]["reports"].items():
            assert set(report) == {"host", "mode", "checked", "drifted"} and report["host"] == host
            assert report["mode"] == ("full" if name == "full" else "fast")
            assert isinstance(report["checked"], int) and report["checked"] > 0
            for item in report["drifted"]:
                assert set(item) == {"owner", "kind", "item", "expected", "observed", "corrected"}


def test_converged_cluster_has_no_drift(runs):
    assert set(runs["clean"]["reports"]) == set(EXPECTED)
    for host, report in runs["clean"]["reports"].items():
        assert report["drifted"] == [], host


def test_fast_detects_every_drill_and_nothing_else(runs):
    for host, expected in EXPECTED.items():
        report = runs["fast"]["reports"][host]
        assert keys(report) == expected, (host, report["drifted"])
        assert not any(d["corrected"] for d in report["drifted"])
    by_item = {(h, d["item"]): d for h, r in runs["fast"]["reports"].items() for d in r["drifted"]}
    governor = by_item[("tt-cluster-mi250x", GLOB)]
    assert governor["expected"] == "performance" and len(governor["observed"]["powersave"]) == 4
    assert by_item[("tt-cluster-mi250x", "/etc/topotune/container/all.flags")]["observed"] == {"mode": "0666"}
    assert by_item[("tt-cluster-mi250x", "proc/sys/kernel/numa_balancing")]["observed"] == "1"
    assert by_item[("tt-cluster-mi210", ENV_FILE)]["observed"] == "absent"
    assert by_item[("tt-cluster-mi300x-spx", "/etc/docker/daemon.json#/default-ulimits/memlock/Soft")]["observed"] == 1024
    assert "drifted" in runs["fast"]["stdout"] and "cpu_governor" in runs["fast"]["stdout"]


def test_full_detects_every_drill_in_its_owner_role(runs):
    for host, expected in EXPECTED.items():
        report = runs["full"]["reports"][host]
        assert {d["kind"] for d in report["drifted"]} == {"task"}
        assert {d["owner"] for d in report["drifted"]} == {owner for owner, _unused, _unused in expected}, (host, report["drifted"])
    items = {(h, d["item"]) for h, r in runs["full"]["reports"].items() for d in r["drifted"]}
    assert ("tt-cluster-mi300x-spx", "cpu_governor : Install and enable the boot-time governor unit") in items
    assert ("tt-cluster-mi300x-spx", "container_runtime : Merge the owned settings into daemon.json") in items
    assert ("tt-cluster-mi210", "container_runtime : Add the container users to the groups owning /dev/kfd and the render nodes") in items
    assert ("tt-cluster-mi250x", "kernel_tuning : Apply the sysctl and C2 settings now") in items


def test_correct_fixes_every_drill(runs):
    for host, expected in EXPECTED.items():
        report = runs["correct"]["reports"][host]
        assert keys(report) == expected, (host, report["drifted"])
        assert all(d["corrected"] for d in report["drifted"]), report["drifted"]


def test_no_drift_after_correction(runs):
    for host, report in runs["after"]["reports"].items():
        assert report["drifted"] == [], host


def test_user_content_survived(runs, host):
    name = host.backend.get_hostname()
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["log-driver"] == "journald" and daemon["live-restore"] is True
    assert daemon["default-ulimits"]["nofile"]["Soft"] == 65536
    assert daemon["default-ulimits"]["memlock"] == {"Name": "memlock", "Soft": -1, "Hard": -1}
    if name == "tt-cluster-mi300x-spx":
        assert daemon["debug"] is True  # the user's key, added with the drill, survived the correction
    groups = host.user("trainer").groups
    assert "render" in groups and "users" in groups


def test_corrected_state_on_the_node(runs, host):
    assert host.check_output("cat /sim/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort -u") == "performance"
    assert host.file("/sim/proc/sys/kernel/numa_balancing").content_string.strip() == "0"
    assert host.file("/etc/topotune/container/all.flags").mode == 0o644
    assert host.file(ENV_FILE).exists and "NCCL_DEBUG" not in host.file(ENV_FILE).content_string
    assert "# edited by hand" not in host.file("/usr/local/bin/topotune-bind").content_string
    assert host.service("topotune-cpu-governor.service").is_enabled
    manifest = json.loads(host.file("/etc/topotune/manifest.json").content_string)
    assert set(manifest["owners"]) == {"cpu_governor", "kernel_tuning", "rocm_env", "container_runtime", "launch_templates"}
    assert host.file("/etc/topotune/manifest.json").mode == 0o644
