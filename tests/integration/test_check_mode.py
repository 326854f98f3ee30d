"""Check mode is exact: on fresh simulated nodes of every profile in sim/profiles whose role tasks differ (SAME_TASKS
names the others and the profile that stands for each), `site.yml --check` reports `changed` for exactly the (host,
task) pairs a real run then changes, and a second real run changes nothing.

One cluster holds a node of every profile. Three runs of playbooks/site.yml against it: --check, real, real. A
callback of this test's own records every task result per host (play, task name, check_mode, changed, failed,
skipped). Compared by host and task name, never by counts:

- check run vs first real run: the node-side tasks reported changed, and the tasks that failed (a real run also
  enforces the platform checks, which check mode only reports: the "would fail" message must name the same hosts);
- second real run: nothing changed, node-side or controller-side, and the same failures as the first;
- controller-side report writes (`report_files` tasks with `check_mode: false`) run for real in check mode too:
  they are listed apart, and no other kind of task may run for real in a check run (docs/drift.md, "Check mode").

Some nodes get non-default role variables (VARIANTS) so that every writing module and task of the roles runs: C2
disabling (cpuidle writes, a second unit), daemon.json merging into a file holding a user's key, a user added to the
device groups, several flag files, L3 launch binding.
"""

import collections
import json
import os
import re
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PREFIX = "tt-check"
ALL_PROFILES = sorted(f[:-4] for f in os.listdir(os.path.join(REPO, "sim", "profiles")) if f.endswith(".yml"))

# What a real site.yml run does on a fresh node of each profile: None = completes; else the task it fails at and
# what the failure message must say. Check mode never enforces the platform checks (playbooks/site.yml runs them
# last so they verify the tuned node); it reports what would fail instead.
ENFORCE = "topotune.instinct.platform_checks : Fail on check results at or above platform_checks_fail_on"
# in check mode the same task says what would fail (its message names the checks), and passes
WOULD_FAIL = ENFORCE
EXPECTED = {
    "cpu256": None,
    "fault-missing-gpu": (ENFORCE, "pci_accelerators"),
    "fault-numa-minus1": (ENFORCE, "iommu_state"),
    # degraded, not failed: the checks that need the missing KFD files say unknown
    "fault-truncated-kfd": None,
    "fault-x8-gen3": (ENFORCE, "gpu_pcie_speed_width"),
    "mi210-8gpu-2hive": None,
    "mi250x-8gcd": None,
    "mi300x-8gpu-2cpu": None,
    "mi300x-8gpu-cpx": None,
}

# Profiles that differ from one above only in what the roles write into the same files, through the same tasks: the
# task-by-task claims of this test hold for them by those (each file's content is tested by the roles' unit tests on
# every profile, and by molecule). Left out of the three site.yml runs to keep the suite within its budget
# (docs/performance.md, "Suite budget").
SAME_TASKS = {
    "cpu16": "cpu256 (the same GPUs; 16 CPUs instead of 256: only the governor's CPU list)",
    "mi300x-8gpu-spx": "cpu256 (the same GPUs, KFD and PCI; only the CPU count differs)",
    "mi300x-hf-8gpu-spx": "cpu256 (the same node with the MI300X HF device id)",
    "mi300x-8gpu-2cpu-minors": "mi300x-8gpu-2cpu (render minors in reverse order: the device lists' content)",
    "mi300x-8gpu-2cpu-2numa": "mi300x-8gpu-2cpu (two NUMA nodes: the bindings' content)",
    "mi300x-8gpu-cpx64": "mi300x-8gpu-cpx (64 partitions instead of 63: the groups' and device lists' content)",
    "mi308x-cpx": "mi300x-8gpu-cpx (MI308X CPX, 32 partitions: the groups' content; its checks are unknown where AMD "
                  "publishes no criterion, which the checks' unit tests cover)",
}

# Fault profiles of mi300x-8gpu-spx that change only what the read-only health checks read (config space, AER, replay
# and RAS counters, memory blocks, firmware, VBIOS and partition files, the RDMA NICs' place, PCIe links, ports and
# GIDs, one xGMI link's io_links): the roles write what they write on their base profile, tested above, through the
# same tasks (the missing link changes only the launch groups' content, which the grouping's unit tests cover; a port
# down or without a routable GID only the NCCL_IB_HCA / NCCL_IB_GID_INDEX lines of its group's env file, which
# test_pcie_health.py's launch tests cover); the checks' unit tests run on every profile, molecule/health on the GPU
# faults (docs/health-checks.md).
HEALTH_FAULTS = {"fault-acs-enabled", "fault-aer-fatal", "fault-ecc-deferred", "fault-ecc-uncorrectable",
                 "fault-fw-mismatch", "fault-mixed-partitions", "fault-nic-far-numa", "fault-retired-pages",
                 "fault-vbios-odd", "fault-xgmi-link-down", "fault-pcie-replays", "fault-memory-offline",
                 "fault-nic-x8", "fault-rdma-port-down", "fault-gid-missing",
                 "fault-gpu-busy", "fault-os-unsupported", "fault-driver-error",
                 # two rails' NICs swapped: the NCCL_IB_HCA order of the env files only; rail_consistency in molecule/health
                 "fault-rail-swapped"}
PROFILES = [profile for profile in ALL_PROFILES if profile not in HEALTH_FAULTS and profile not in SAME_TASKS]

# The controller-side report writes that run for real in a check run (docs/drift.md, "Check mode"); the applied
# launch plan (out/launch/) is not rewritten by a run that applies nothing.
CONTROLLER_WRITES = {
    "Discover the GPU topology | Keep every node's model on the controller (topology/<host>.json)",
    "Platform checks (read-only verification) | topotune.instinct.platform_checks : Write the JSON reports on the "
    "controller (<platform_checks_report_dir>/<host>.json)",
    "Run summary | Record which nodes completed (run/<playbook>/<job id>.json)",
    "Run summary | Point run/<playbook>.json (and run/summary.json for a bring-up) at this job's summary",
}

# Non-default role variables per profile, so every writing task of the roles runs somewhere.
VARIANTS = {
    "mi250x-8gcd": {
        "kernel_tuning_c2_disable": True,
        "container_runtime_daemon_json_manage": True,
        "container_runtime_users": ["root"],
        "container_runtime_group_size": 2,
    },
    "mi300x-8gpu-2cpu": {"launch_templates_cpu_binding": "l3", "cpu_governor_cpus": "0"},
}
# Files a node already holds before the first run (a user's daemon.json key that must survive the merge).
PRESEED = {
    "mi250x-8gcd": {"/etc/docker/daemon.json": '{"log-driver": "journald"}\n'},
}

# Records every task result of a run as JSON rows in $TT_TASK_RESULTS.
CALLBACK = '''
import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tt_task_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self.rows = []
        self.play = None

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()

    def _row(self, result, status):
        task, res = result._task, result._result
        detail = {k: res[k] for k in ("msg", "changed_files", "removed_files", "changed_links", "changed_cpus",
                                      "changed_paths") if res.get(k)}
        self.rows.append({
            "host": result._host.get_name(), "play": self.play, "task": task.get_name(), "action": task.action,
            "check_mode": bool(task.check_mode), "handler": type(task).__name__ == "Handler", "status": status,
            "changed": bool(res.get("changed")), "detail": json.dumps(detail, default=str)[:600],
        })

    def v2_runner_on_ok(self, result):
        self._row(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._row(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._row(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._row(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        with open(os.environ["TT_TASK_RESULTS"], "w", encoding="utf-8") as handle:
            json.dump(self.rows, handle)
'''


def _host(profile):
    return "%s-%02d-%s" % (PREFIX, PROFILES.index(profile) + 1, profile)


def _profile(host):
    return host.split("-", 3)[3]


def _cluster(*args):
    subprocess.run([sys.executable, os.path.join(REPO, "sim", "cluster.py"), *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The task results of `site.yml --check`, then two real runs, on fresh nodes of every profile."""
    assert set(EXPECTED) | HEALTH_FAULTS | set(SAME_TASKS) == set(ALL_PROFILES), (
        "state the expected outcome of every profile in EXPECTED, or why it is left out")
    work = tmp_path_factory.mktemp("check")
    inventory = work / "hosts.yml"
    (work / "group_vars").mkdir()
    (work / "host_vars").mkdir()
    (work / "callbacks").mkdir()
    (work / "callbacks" / "tt_task_results.py").write_text(CALLBACK)
    with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
        settings = handle.read()
    (work / "group_vars" / "all.yml").write_text(settings + "\ntopotune_report_dir: %s\n" % (work / "out"))
    for profile, values in VARIANTS.items():
        (work / "host_vars" / (_host(profile) + ".yml")).write_text(json.dumps(values) + "\n")
    started = time.monotonic()
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join(PROFILES), "--inventory", str(inventory))
    try:
        for profile, files in PRESEED.items():
            for path, text in files.items():
                subprocess.run(["docker", "exec", "-i", _host(profile), "sh", "-c",
                                "mkdir -p %s && cat > %s" % (os.path.dirname(path), path)],
                               input=text, check=True, capture_output=True, text=True)
        results = {}
        for name, extra in (("check", ["--check"]), ("real", []), ("again", [])):
            results[name] = _site(work, inventory, name, extra)
        results["seconds"] = time.monotonic() - started
        yield results
    finally:
        _cluster("down", "--prefix", PREFIX)


def _site(work, inventory, name, extra):
    out = work / ("%s.json" % name)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_PLUGINS=str(work / "callbacks"), ANSIBLE_CALLBACKS_ENABLED="tt_task_results,topotune.instinct.preload",
               TT_TASK_RESULTS=str(out))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), *extra,
                           os.path.join(REPO, "playbooks", "site.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    (work / ("%s.log" % name)).write_text(proc.stdout + proc.stderr)
    assert out.exists(), "%s run wrote no results (rc=%d): %s" % (name, proc.returncode, (proc.stdout + proc.stderr)[-3000:])
    return {"rc": proc.returncode, "rows": json.loads(out.read_text()), "log": proc.stdout[-3000:]}


def _label(row):
    return "%s | %s%s" % (row["play"], "handler " if row["handler"] else "", row["task"])


def _pairs(rows, status=None, changed=None, exclude=()):
    """Counter of (host, task label) over the rows matching status / changed, leaving out the labels in exclude."""
    return collections.Counter(
        (row["host"], _label(row)) for row in rows
        if (status is None or row["status"] == status) and (changed is None or row["changed"] == changed)
        and _label(row) not in exclude)


def _show(counter, rows):
    details = {(row["host"], _label(row)): row["detail"] for row in rows}
    return "\n".join("  %s  %s  %s" % (host, label, details.get((host, label), "")) for host, label in sorted(counter))


def _check_ids(detail):
    """The check ids a platform_checks failure or check-mode message names ("...=fail: a, b. Fix" / "(a, b) would")."""
    msg = json.loads(detail).get("msg", "")
    found = re.search(r"platform_checks_fail_on=\w+(?:: ([\w, ]+)\.| \(([\w, ]+)\) would)", msg)
    return set(filter(None, re.split(r",\s*", (found.group(1) or found.group(2)) if found else "")))


def _controller(runs):
    """Labels of the tasks that run for real in a check run."""
    return {_label(row) for row in runs["check"]["rows"] if not row["check_mode"]}


def test_check_mode_changes_what_a_real_run_changes(runs):
    check, real = runs["check"]["rows"], runs["real"]["rows"]
    controller = _controller(runs)
    predicted = _pairs(check, changed=True, exclude=controller)
    applied = _pairs(real, changed=True, exclude=controller)
    assert predicted == applied, "check mode said changed, a real run did not:\n%s\nreal run changed, check mode did not:\n%s" % (
        _show(predicted - applied, check), _show(applied - predicted, real))
    # not vacuous: every fresh node has work, in every tuning role
    for host in {row["host"] for row in check}:
        roles = {label.split(" : ")[0].split(" | ")[-1] for h, label in predicted if h == host}
        assert {"topotune.instinct.kernel_tuning", "topotune.instinct.rocm_env", "topotune.instinct.container_runtime",
                "topotune.instinct.launch_templates"} <= roles, (host, sorted(roles))


def test_check_mode_fails_where_a_real_run_fails(runs):
    check, real = runs["check"]["rows"], runs["real"]["rows"]
    failed_check = _pairs(check, status="failed")
    failed_real = _pairs(real, status="failed")
    assert failed_check == failed_real - _pairs(real, status="failed", exclude={_label(r) for r in real if r["task"] != ENFORCE}), (
        "failures differ:\ncheck run:\n%s\nreal run:\n%s" % (_show(failed_check, check), _show(failed_real, real)))
    # Check mode runs the checks on the node as it is (untuned: e.g. NUMA balancing still on), so it announces at
    # least the checks a real run then enforces on the tuned node, host by host, by check id.
    announced = {row["host"]: _check_ids(row["detail"]) for row in check if row["task"] == WOULD_FAIL and row["status"] == "ok"}
    enforced = {row["host"]: _check_ids(row["detail"]) for row in real if row["task"] == ENFORCE and row["status"] == "failed"}
    assert enforced and set(enforced) <= set(announced), (enforced, announced)
    for host, ids in enforced.items():
        assert ids and ids <= announced[host], (host, ids, announced[host])
    assert {row["host"] for row in check} == {_host(p) for p in PROFILES}, "every node ran the check run"


def test_real_run_outcome_per_profile(runs):
    for name in ("real", "again"):
        rows = runs[name]["rows"]
        for profile, expected in EXPECTED.items():
            host = _host(profile)
            failed = [row for row in rows if row["host"] == host and row["status"] in ("failed", "unreachable")]
            if expected is None:
                assert not failed, (name, host, failed)
            else:
                task, words = expected
                assert [row["task"] for row in failed] == [task], (name, host, failed)
                assert words in failed[0]["detail"], (name, host, failed[0]["detail"])
        assert runs[name]["rc"] == (2 if any(EXPECTED.values()) else 0), runs[name]["log"]


def test_second_real_run_changes_nothing(runs):
    again = runs["again"]["rows"]
    changed = _pairs(again, changed=True)
    assert not changed, "changed on the second run:\n%s" % _show(changed, again)
    assert _pairs(again, status="failed") == _pairs(runs["real"]["rows"], status="failed")


def test_only_controller_reports_run_for_real_in_check_mode(runs):
    check = runs["check"]["rows"]
    real_in_check = {(row["action"], _label(row)) for row in check if not row["check_mode"] and row["status"] != "skipped"}
    # the report writes and the summary's message; nothing that reaches a node
    assert {action for action, _label in real_in_check} <= {"topotune.instinct.report_files", "ansible.builtin.debug"}, real_in_check
    assert {label for action, label in real_in_check if action == "topotune.instinct.report_files"} == CONTROLLER_WRITES, real_in_check


def test_result_table(runs, capsys):
    """Per profile: tasks changed by check mode / by the real run / by the second run, and the outcome."""
    controller = _controller(runs)
    lines = ["%-22s %6s %6s %6s  %s" % ("profile", "check", "real", "again", "real-run outcome")]
    for profile in PROFILES:
        host = _host(profile)
        counts = [sum(1 for h, _label in _pairs(runs[name]["rows"], changed=True, exclude=controller if name != "again" else ())
                      if h == host) for name in ("check", "real", "again")]
        expected = EXPECTED[profile]
        outcome = "completes" if expected is None else "fails (%s): %s" % (expected[1], expected[0].split(" : ")[1])
        lines.append("%-22s %6d %6d %6d  %s" % (profile, *counts, outcome))
    lines.append("three runs on %d nodes, cluster up and down: %.0f s" % (len(PROFILES), runs["seconds"]))
    with capsys.disabled():
        print("\n" + "\n".join(lines))
