"""Drift drills on the converged cluster, driven by ../drill_table.yml: for every round, the round's drills are
applied (drills.yml), then playbooks/drift.yml runs fast, full, with topotune_correct=true, and fast again. Every
report is compared with the table, node by node and item by item:

- fast and full report exactly the items the table gives for the node's drills of that round, nothing else, and
  never a drill on another node;
- the correction reports every fast item corrected, and the last fast run finds nothing on any node;
- a manifest that is missing or unreadable is reported as its own state (``manifest``) with the remedy.

The playbooks run once for the session (ansible-playbook against molecule's inventory); the tests read their JSON
reports. Per-drill results land in <ephemeral>/drift-drills.json (docs/drift.md lists them), timings in
<ephemeral>/drift-timings.json.
"""

import json
import os
import subprocess
import time

import pytest
import yaml

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
SCENARIO = os.path.join(PROJECT, "molecule", "cluster")
NODES = ("tt-cluster-mi250x", "tt-cluster-mi300x-spx", "tt-cluster-mi210")

with open(os.path.join(SCENARIO, "drill_table.yml"), encoding="utf-8") as _handle:
    DRILLS = yaml.safe_load(_handle)["drills"]
ROUNDS = sorted({drill["round"] for drill in DRILLS})
MODES = ("fast", "full", "correct", "after")


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
    for host in NODES:
        path = os.path.join(report, "drift", "%s.json" % host)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                reports[host] = json.load(handle)
    return {"reports": reports, "seconds": round(elapsed, 1), "stdout": proc.stdout}


def manifest_files(node):
    """{path: owner} of the files the node's manifest lists (read before a round changes it)."""
    text = subprocess.run(["docker", "exec", node, "cat", "/etc/topotune/manifest.json"], capture_output=True, text=True,
                          check=True).stdout
    return {path: owner for owner, spec in json.loads(text)["owners"].items() for path in spec["files"]}


@pytest.fixture(scope="session")
def runs():
    base = os.path.join(EPHEMERAL, "drift-drills")
    out = {"clean": playbook("playbooks/drift.yml", os.path.join(base, "clean")), "rounds": {}, "files": {}}
    for number in ROUNDS:
        here = os.path.join(base, "round-%d" % number)
        out["files"][number] = {node: manifest_files(node) for node in NODES}
        playbook(os.path.join(SCENARIO, "drills.yml"), os.path.join(here, "drills"), "-e", "topotune_drill_round=%d" % number)
        out["rounds"][number] = {
            "fast": playbook("playbooks/drift.yml", os.path.join(here, "fast")),
            "full": playbook("playbooks/drift.yml", os.path.join(here, "full"), "-e", "topotune_drift_mode=full",
                             env={"ANSIBLE_CALLBACKS_ENABLED":
                                  "ansible.builtin.profile_tasks,topotune.instinct.drift_capture,topotune.instinct.preload"}),
            "correct": playbook("playbooks/drift.yml", os.path.join(here, "correct"), "-e", "topotune_correct=true"),
            "after": playbook("playbooks/drift.yml", os.path.join(here, "after")),
        }
    with open(os.path.join(EPHEMERAL, "drift-timings.json"), "w", encoding="utf-8") as handle:
        json.dump({"clean": out["clean"]["seconds"],
                   **{"round-%d-%s" % (n, m): r[m]["seconds"] for n, r in out["rounds"].items() for m in MODES}}, handle)
    return out


def fast_expected(drill, files):
    """[(owner, kind, item, observed)] the fast check must report for a drill (``None`` observed: any)."""
    items = [tuple(entry) for entry in drill.get("fast") or []]
    if drill.get("fast_every_file"):
        items += [(owner, "file", path, "absent") for path, owner in files[drill["node"]].items()]
    return items


def observed_matches(expected, observed):
    if expected is None:
        return True
    if isinstance(expected, dict) and isinstance(observed, dict) and any(v is None for v in expected.values()):
        return set(expected) == set(observed) and all(v is None or observed[k] == v for k, v in expected.items())
    return expected == observed


def node_expectation(number, node, mode, files):
    drills = [d for d in DRILLS if d["round"] == number and d["node"] == node]
    if mode == "full":
        return {("task", item) for d in drills for item in d.get("full") or []}
    return {(e[1], e[2]) for d in drills for e in fast_expected(d, files)}


def test_table_is_well_formed():
    assert len(DRILLS) >= 20 and len({d["id"] for d in DRILLS}) == len(DRILLS)
    for drill in DRILLS:
        assert drill["node"] in NODES and drill["round"] in ROUNDS and drill["what"] and drill["shell"], drill["id"]
        assert drill.get("fast") or drill.get("fast_every_file"), drill["id"]
        assert drill.get("full") or drill.get("blind"), "%s: full mode sees nothing and the table says not why" % drill["id"]
    # the drills of a round and node are told apart by their fast items; in full mode a role's one plan call is one
    # task, so two drills of the same role on a node share that task's item
    for number in ROUNDS:
        for node in NODES:
            items = [tuple(e[:3]) for d in DRILLS if d["round"] == number and d["node"] == node for e in d.get("fast") or []]
            assert len(items) == len(set(items)), (number, node)


def test_converged_cluster_has_no_drift(runs):
    assert set(runs["clean"]["reports"]) == set(NODES)
    for host, report in runs["clean"]["reports"].items():
        assert report["drifted"] == [] and report["checked"] > 0 and report["manifest"] == "ok", host


@pytest.mark.parametrize("number", ROUNDS)
@pytest.mark.parametrize("mode", ["fast", "full"])
def test_each_node_reports_exactly_its_drills(runs, number, mode):
    files = runs["files"][number]
    for node in NODES:
        report = runs["rounds"][number][mode]["reports"][node]
        assert report["mode"] == mode
        got = {(d["kind"], d["item"]) for d in report["drifted"]}
        assert got == node_expectation(number, node, mode, files), (node, report["drifted"])
        assert not any(d["corrected"] for d in report["drifted"])


@pytest.mark.parametrize("drill", DRILLS, ids=[d["id"] for d in DRILLS])
def test_drill(runs, drill):
    rounds = runs["rounds"][drill["round"]]
    node = drill["node"]
    fast = {(d["owner"], d["kind"], d["item"]): d for d in rounds["fast"]["reports"][node]["drifted"]}
    for owner, kind, item, observed in fast_expected(drill, runs["files"][drill["round"]]):
        found = fast.get((owner, kind, item))
        assert found is not None, "fast missed %s %s %s: %s" % (owner, kind, item, list(fast))
        assert observed_matches(observed, found["observed"]), (item, found)
    assert rounds["fast"]["reports"][node]["manifest"] == drill.get("manifest", "ok")
    if drill.get("manifest"):
        # reported as its own state, with the remedy, not as a generic failure
        assert "nothing verified" in rounds["fast"]["stdout"] and "playbooks/site.yml" in rounds["fast"]["stdout"]
    full = {d["item"] for d in rounds["full"]["reports"][node]["drifted"]}
    assert set(drill.get("full") or []) <= full
    corrected = {(d["owner"], d["kind"], d["item"]): d for d in rounds["correct"]["reports"][node]["drifted"]}
    for owner, kind, item, _observed in fast_expected(drill, runs["files"][drill["round"]]):
        assert corrected[(owner, kind, item)]["corrected"] is True, corrected.get((owner, kind, item))


@pytest.mark.parametrize("number", ROUNDS)
def test_correction_fixes_everything_and_nothing_else(runs, number):
    rounds = runs["rounds"][number]
    for node in NODES:
        fast = {(d["owner"], d["kind"], d["item"]) for d in rounds["fast"]["reports"][node]["drifted"]}
        correct = rounds["correct"]["reports"][node]["drifted"]
        assert {(d["owner"], d["kind"], d["item"]) for d in correct} == fast, (node, correct)
        assert all(d["corrected"] for d in correct), (node, correct)
        after = rounds["after"]["reports"][node]
        assert after["drifted"] == [] and after["manifest"] == "ok", (node, after)


def test_docs_list_every_drill():
    with open(os.path.join(PROJECT, "docs", "drift.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert [d["id"] for d in DRILLS if "`%s`" % d["id"] not in text] == []


def test_results_recorded(runs, capsys):
    """The per-drill table docs/drift.md shows: what fast and full reported, corrected, clean after."""
    rows = []
    for drill in DRILLS:
        rounds = runs["rounds"][drill["round"]]
        node = drill["node"]
        keys = {(e[0], e[1], e[2]) for e in fast_expected(drill, runs["files"][drill["round"]])}
        fast = [d for d in rounds["fast"]["reports"][node]["drifted"] if (d["owner"], d["kind"], d["item"]) in keys]
        full = [d for d in rounds["full"]["reports"][node]["drifted"] if d["item"] in (drill.get("full") or [])]
        rows.append({"id": drill["id"], "node": node, "fast": len(fast), "full": len(full),
                     "corrected": sum(1 for d in rounds["correct"]["reports"][node]["drifted"]
                                      if (d["owner"], d["kind"], d["item"]) in keys and d["corrected"]),
                     "clean_after": rounds["after"]["reports"][node]["drifted"] == []})
    with open(os.path.join(EPHEMERAL, "drift-drills.json"), "w", encoding="utf-8") as handle:
        json.dump(rows, handle, indent=1)
    passed = [row for row in rows if row["fast"] and row["corrected"] == row["fast"] and row["clean_after"]]
    with capsys.disabled():
        print("\ndrift drills: %d of %d passed (fast, full, corrected, clean after); playbook seconds: %s"
              % (len(passed), len(rows), json.dumps({"clean": runs["clean"]["seconds"], **{
                  "round %d" % n: [r[m]["seconds"] for m in MODES] for n, r in runs["rounds"].items()}})))
    assert passed == rows


def test_user_content_survived(runs, host):
    name = host.backend.get_hostname()
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["live-restore"] is True and daemon["default-ulimits"]["nofile"]["Soft"] == 65536
    assert daemon["default-ulimits"]["memlock"] == {"Name": "memlock", "Soft": -1, "Hard": -1}
    if name == "tt-cluster-mi250x":
        # the user's edits made with the daemon-json drill survived the correction
        assert daemon["log-driver"] == "json-file" and daemon["debug"] is True
    else:
        assert daemon["log-driver"] == "journald"
    groups = host.user("trainer").groups
    assert "render" in groups and "users" in groups


def test_corrected_state_on_the_node(runs, host):
    assert host.check_output("cat /sim/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort -u") == "performance"
    assert host.file("/sim/proc/sys/kernel/numa_balancing").content_string.strip() == "0"
    assert host.file("/etc/topotune/container/all.flags").mode == 0o644
    assert host.file("/etc/topotune/container/compose.gpu.yml").is_file
    assert not host.file("/etc/topotune/container/retired.flags").exists
    assert not host.file("/etc/topotune/env/old-profile.env").exists
    assert host.file("/etc/topotune/launch/bind.table").user == "root"
    wrapper = host.file("/usr/local/bin/topotune-bind")
    assert wrapper.is_file and not wrapper.is_symlink
    assert "iommu=pt" in host.file("/etc/default/grub.d/90-topotune.cfg").content_string
    assert host.service("topotune-cpu-governor.service").is_enabled
    assert host.file("/etc/systemd/system/multi-user.target.wants/topotune-cpu-governor.service").is_symlink
    manifest = json.loads(host.file("/etc/topotune/manifest.json").content_string)
    assert set(manifest["owners"]) == {"cpu_governor", "kernel_tuning", "rocm_env", "container_runtime", "launch_templates"}
    assert host.file("/etc/topotune/manifest.json").mode == 0o644
