"""Per-job run summaries (playbooks/summary.yml writes run/site/<job id>.json): the report's run status is their union,
each node taking the status of the latest job that ran it; and concurrent writers into one report directory."""

import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core import files
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.data import (
    load_report_dir,
    load_run_summaries,
    summarize,
    union_of_jobs,
)


def _job(job_id, finished, completed=(), failed=(), unreachable=(), check_mode=False, failures=None):
    doc = {"playbook": "site", "job_id": job_id, "finished": finished, "hosts": sorted(set(completed) | set(failed)),
           "completed_hosts": sorted(completed), "failed_hosts": sorted(failed), "failures": failures or {},
           "notes": {}, "check_mode": check_mode}
    if unreachable:
        doc["unreachable_hosts"] = sorted(unreachable)
        doc["hosts"] = sorted(set(doc["hosts"]) | set(unreachable))
    return doc


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


# (jobs, expected completed, failed, unreachable, job order)
CASES = [
    pytest.param(
        # four slices of one sliced job (host i in slice i mod 4), finishing in any order
        [_job("4103", "2026-12-01T10:00:03.000000Z", ["n3", "n7"]),
         _job("4101", "2026-12-01T10:00:01.000000Z", ["n1", "n5"]),
         _job("4104", "2026-12-01T10:00:02.000000Z", ["n4"], failed=["n8"]),
         _job("4102", "2026-12-01T10:00:04.000000Z", ["n2", "n6"])],
        ["n1", "n2", "n3", "n4", "n5", "n6", "n7"], ["n8"], [], ["4101", "4104", "4103", "4102"], id="four-slices"),
    pytest.param(
        # a later run on the failed node alone: it recovers, the others keep their status
        [_job("a", "2026-12-01T10:00:00.000000Z", ["n1", "n2"], failed=["n3"]),
         _job("b", "2026-12-01T11:00:00.000000Z", ["n3"])],
        ["n1", "n2", "n3"], [], [], ["a", "b"], id="rerun-on-one-node"),
    pytest.param(
        # a later run fails a node that had completed; unreachable is told apart from failed
        [_job("a", "2026-12-01T10:00:00.000000Z", ["n1", "n2", "n3"]),
         _job("b", "2026-12-01T11:00:00.000000Z", ["n2"], failed=["n1"], unreachable=["n3"])],
        ["n2"], ["n1"], ["n3"], ["a", "b"], id="later-failure-wins"),
    pytest.param(
        # a check run applies nothing: it does not change the status
        [_job("a", "2026-12-01T10:00:00.000000Z", ["n1"], failed=["n2"]),
         _job("b", "2026-12-01T11:00:00.000000Z", ["n1", "n2"], check_mode=True)],
        ["n1"], ["n2"], [], ["a"], id="check-run-ignored"),
    pytest.param(
        # same end time: the job id breaks the tie, so the result does not depend on the directory order
        [_job("b", "2026-12-01T10:00:00.000000Z", failed=["n1"]),
         _job("a", "2026-12-01T10:00:00.000000Z", ["n1"])],
        [], ["n1"], [], ["a", "b"], id="tie-by-job-id"),
]


@pytest.mark.parametrize(("jobs", "completed", "failed", "unreachable", "order"), CASES)
def test_union_of_jobs(jobs, completed, failed, unreachable, order):
    union = union_of_jobs(jobs)
    assert union["completed_hosts"] == completed
    assert union["failed_hosts"] == failed
    assert union["unreachable_hosts"] == unreachable
    assert union["jobs"] == order
    # every node exactly once
    assert sorted(completed + failed + unreachable) == union["hosts"]


def test_failure_lines_follow_the_latest_job():
    union = union_of_jobs([
        _job("a", "2026-12-01T10:00:00.000000Z", ["n2"], failed=["n1"], failures={"n1": "n1: disk full; free /etc"}),
        _job("b", "2026-12-01T11:00:00.000000Z", ["n1"], failed=["n2"], failures={"n2": "n2: unreachable"})])
    assert union["failures"] == {"n2": "n2: unreachable"}


def test_report_reads_the_union_not_the_latest_file(tmp_path):
    base = str(tmp_path)
    for job in CASES[0].values[0]:
        _write(os.path.join(base, "run", "site", job["job_id"] + ".json"), job)
    # the "latest" file holds one slice only: the report must not take it for the cluster
    _write(os.path.join(base, "run", "summary.json"), CASES[0].values[0][3])
    data = load_report_dir(base)
    assert sorted(data["hosts"]) == ["n%d" % i for i in range(1, 9)]
    counts = summarize(data)
    assert counts["nodes"] == 8 and counts["failed_hosts"] == ["n8"]
    assert data["run"]["state"] == "ok" and data["run"]["file"] == os.path.join(base, "run", "site")


def test_unreadable_job_is_named_and_the_others_count(tmp_path):
    base = str(tmp_path)
    _write(os.path.join(base, "run", "site", "1.json"), _job("1", "2026-12-01T10:00:00.000000Z", ["n1"]))
    _write(os.path.join(base, "run", "site", "2.json"), "{not json")
    run, _newest = load_run_summaries(base)
    assert run["state"] == "ok" and run["data"]["completed_hosts"] == ["n1"]
    assert "2.json is not valid JSON" in run["reason"]


@pytest.mark.parametrize(("files_written", "state", "hosts"), [
    ({}, "missing", None),
    ({"run/summary.json": {"playbook": "site", "completed_hosts": ["n1"], "failed_hosts": ["n2"]}}, "ok", ["n1"]),
    # only check runs under run/site/: the last real bring-up's run/summary.json still holds
    ({"run/site/c.json": _job("c", "2026-12-01T10:00:00.000000Z", ["n9"], check_mode=True),
      "run/summary.json": {"playbook": "site", "completed_hosts": ["n1"], "failed_hosts": []}}, "ok", ["n1"]),
    ({"run/site/x.json": "[]"}, "unreadable", None),
])
def test_fallbacks(tmp_path, files_written, state, hosts):
    for name, value in files_written.items():
        _write(str(tmp_path / name), value)
    run, _newest = load_run_summaries(str(tmp_path))
    assert run["state"] == state
    if hosts is not None:
        assert run["data"]["completed_hosts"] == hosts


def test_writer_tolerates_a_directory_created_concurrently(tmp_path, monkeypatch):
    """Two slices writing into a fresh report directory: the other one creates it between our check and makedirs."""
    target = tmp_path / "out" / "run" / "site"
    real_isdir = os.path.isdir
    raced = []

    def racing_isdir(path):
        if str(path) == str(target) and not raced:
            raced.append(path)
            os.makedirs(str(target))  # the other writer wins the race
            return False
        return real_isdir(path)

    monkeypatch.setattr(files.os.path, "isdir", racing_isdir)
    files.write_atomic(None, str(target / "1.json"), "{}\n", 0o644, root_owned=False)
    assert raced
    assert (target / "1.json").read_text() == "{}\n"
