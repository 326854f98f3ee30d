"""playbooks/site.yml run as AWX/AAP runs a sliced job template: 4 concurrent slices through ansible-runner (what AWX
runs underneath), all writing one report directory, then the report step (playbooks/report.yml) over the union.

Slicing as AWX does it (awx/main/models/inventory.py, ``get_script_data``): the hosts sorted by name, slice k of N
holds ``hosts[k-1::N]``, i.e. host i goes to slice i mod N. Each slice is its own ``ansible-runner run`` with its own
private data directory (inventory, extra variables) and ident. Slices 1 and 2 get AWX's ``awx_job_id`` extra
variable (AWX sets it on every job, ``awx_meta_vars``); slices 3 and 4 get none, so their summaries are named by
ansible-runner's ident: both sources of the job id are exercised.

8 nodes of the lightest GPU profile (cpu16: 8 MI300X GPUs, 16 CPUs), 2 per slice, so each slice's controller-side
writes (run_once, all hosts of the slice in one task) carry more than one host: what one slice writes must not
replace what another wrote, in the shared directories and in the run summaries (docs/fleet-awx.md).
"""

import glob
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PREFIX = "tt-slice"
NODES = 8
SLICES = 4
PROFILE = "cpu16"
# slice number (1-based) -> the job id AWX would pass, or None: named by ansible-runner's ident
AWX_JOB_IDS = {1: 5101, 2: 5102, 3: None, 4: None}


def _cluster(*args):
    subprocess.run([sys.executable, os.path.join(REPO, "sim", "cluster.py"), *args], check=True, capture_output=True,
                   text=True)


def _runner(private, ident, playbook):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    start = time.monotonic()
    proc = subprocess.run([os.path.join(BIN, "ansible-runner"), "run", str(private), "--ident", ident,
                           "--project-dir", REPO, "-p", playbook],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    return {"rc": proc.returncode, "out": proc.stdout + proc.stderr, "seconds": time.monotonic() - start,
            "artifacts": os.path.join(str(private), "artifacts", ident)}


def _private_dir(base, hosts, extravars):
    """An ansible-runner private data directory: inventory/ (the slice's hosts, the simulated nodes' settings),
    env/extravars."""
    (base / "inventory").mkdir(parents=True)
    (base / "env").mkdir()
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {h: {"topotune_sim_profile": PROFILE} for h in hosts}}}}}
    (base / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (base / "inventory" / "group_vars").mkdir()
    with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
        (base / "inventory" / "group_vars" / "all.yml").write_text(handle.read())
    (base / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    return base


def _stats(artifacts):
    """The artifact_data (set_stats) of a runner job: its playbook_on_stats event."""
    for path in glob.glob(os.path.join(artifacts, "job_events", "*.json")):
        with open(path) as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            return event["event_data"].get("artifact_data")
    return None


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    work = tmp_path_factory.mktemp("slicing")
    out = work / "out"
    up_start = time.monotonic()
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join([PROFILE] * NODES), "--inventory",
             str(work / "cluster.yml"))
    up_seconds = time.monotonic() - up_start
    try:
        hosts = sorted("%s-%02d-%s" % (PREFIX, i + 1, PROFILE) for i in range(NODES))
        slices = {k: hosts[k - 1::SLICES] for k in range(1, SLICES + 1)}
        jobs = {}
        for k, members in slices.items():
            extravars = {"topotune_report_dir": str(out)}
            if AWX_JOB_IDS[k] is not None:
                extravars.update(awx_job_id=AWX_JOB_IDS[k], tower_job_id=AWX_JOB_IDS[k], awx_workflow_job_id=5100)
            jobs[k] = {"hosts": members, "ident": "slice-%d" % k,
                       "job_id": str(AWX_JOB_IDS[k] or "slice-%d" % k),
                       "private": _private_dir(work / ("slice-%d" % k), members, extravars)}
        start = time.monotonic()

        def run_slice(k):
            return _runner(jobs[k]["private"], jobs[k]["ident"], "playbooks/site.yml")

        # the 4 slices at once, as AWX starts the jobs of a sliced job template
        with ThreadPoolExecutor(max_workers=SLICES) as pool:
            results = dict(zip(jobs, pool.map(run_slice, jobs)))
        sliced_seconds = time.monotonic() - start
        report_private = _private_dir(work / "report", [], {"topotune_report_dir": str(out)})
        report = _runner(report_private, "report", "playbooks/report.yml")
        yield {"out": out, "hosts": hosts, "jobs": jobs, "results": results, "report": report,
               "seconds": sliced_seconds, "up_seconds": up_seconds}
    finally:
        _cluster("down", "--prefix", PREFIX)


def test_every_slice_succeeds(sliced):
    for k, result in sliced["results"].items():
        assert result["rc"] == 0, (k, result["out"][-3000:])
        with open(os.path.join(result["artifacts"], "status")) as handle:
            assert handle.read().strip() == "successful"
    assert sliced["report"]["rc"] == 0, sliced["report"]["out"][-3000:]
    print("\n%d nodes up in %.0f s; 4 concurrent slices in %.0f s (each %s s); report step %.0f s" % (
        NODES, sliced["up_seconds"], sliced["seconds"],
        "/".join("%.0f" % r["seconds"] for r in sliced["results"].values()), sliced["report"]["seconds"]))


def test_no_summary_overwritten(sliced):
    """One summary per job under run/site/, each naming its own slice's hosts and job id."""
    site = sliced["out"] / "run" / "site"
    assert sorted(os.listdir(str(site))) == sorted(j["job_id"] + ".json" for j in sliced["jobs"].values())
    for job in sliced["jobs"].values():
        summary = json.loads((site / (job["job_id"] + ".json")).read_text())
        assert summary["job_id"] == job["job_id"]
        assert summary["hosts"] == summary["completed_hosts"] == job["hosts"]
        assert summary["failed_hosts"] == [] and summary["check_mode"] is False
    # the latest summary is one whole slice's, never a mix of two
    latest = json.loads((sliced["out"] / "run" / "site.json").read_text())
    assert latest["hosts"] in [j["hosts"] for j in sliced["jobs"].values()]
    assert latest == json.loads((site / (latest["job_id"] + ".json")).read_text())


def test_union_names_every_node_exactly_once(sliced):
    union = [h for j in sliced["jobs"].values()
             for h in json.loads((sliced["out"] / "run" / "site" / (j["job_id"] + ".json")).read_text())["hosts"]]
    assert sorted(union) == sliced["hosts"]
    page = (sliced["out"] / "report.html").read_text()
    headings = re.findall(r'<section class="node" id="node-\d+"><h2>([^ <]+) ', page)
    assert sorted(headings) == sliced["hosts"]
    assert "node status from 4 job(s)" in page
    stats = _stats(sliced["report"]["artifacts"])
    assert stats["topotune_report_nodes"] == sliced["hosts"]
    assert sorted(stats["topotune_report_jobs"]) == sorted(j["job_id"] for j in sliced["jobs"].values())
    assert stats["topotune_failed_hosts"] == []


def test_set_stats_in_every_runner_artifact(sliced):
    for k, job in sliced["jobs"].items():
        stats = _stats(sliced["results"][k]["artifacts"])
        assert stats is not None, "no playbook_on_stats event in %s" % sliced["results"][k]["artifacts"]
        assert stats["topotune_job_id"] == job["job_id"]
        assert stats["topotune_completed_hosts"] == job["hosts"]
        assert stats["topotune_failed_hosts"] == []
        assert stats["topotune_report_dir"] == str(sliced["out"])
        assert stats["topotune_summary"] == str(sliced["out"] / "run" / "site" / (job["job_id"] + ".json"))


@pytest.mark.parametrize("section", ["topology", "launch", "checks"])
def test_every_node_has_its_per_host_files(sliced, section):
    folder = sliced["out"] / section
    assert sorted(n[:-5] for n in os.listdir(str(folder)) if n.endswith(".json")) == sliced["hosts"]
    # nothing half-written left behind by the concurrent writers
    assert not [n for n in os.listdir(str(folder)) if n.startswith(".topotune-")]
    for host in sliced["hosts"]:
        json.loads((folder / (host + ".json")).read_text())
