"""A node's acceptance verdicts and the cluster's view of them (plugin_utils/acceptance/verdicts.py), and the runs
on the node (module_utils/acceptance/run.py) with stand-in programs named as such."""

import os
import stat
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import measurement, new_result
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.run import run_spec
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import parse_perf
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.verdicts import (
    AcceptanceError,
    blocking,
    cluster,
    junit,
    lines,
    node_report,
    plan_runs,
)
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ACCEPTANCE = os.path.join(REPO, "tests", "fixtures", "acceptance")
SOURCES = [{"document": "ROCm/system-acceptance-docs docs/gpus/mi300x.md", "section": "Performance Benchmarks",
            "commit": "e42af240cdbfdeae12d018b3df44d3af81cfc50b", "says": "Pass: >= 32.9 GB/s"}]
A2A = {"id": "a2a", "test": "a2a", "case": None, "metric": "avg_bandwidth", "unit": "GB/s", "min": 32.9,
       "per": "node", "command": "TransferBench a2a", "sources": SOURCES}
GST = {"id": "gst", "test": "gst", "case": None, "metric": "met", "unit": "bool", "equals": True, "per": "each",
       "command": "rvs -c ${RVS_CONF}/MI300X/gst_single.conf", "sources": SOURCES}
MEM = {"id": "mem", "test": "mem", "case": None, "metric": "met", "unit": "bool", "equals": True,
       "command": "rvs -c ${RVS_CONF}/mem.conf -l mem.txt", "sources": SOURCES}
KNOWLEDGE = {
    "acceptance": {
        "generations": [{"name": "MI300X", "transferbench": [A2A], "rvs": [GST, MEM]}],
        "tools": {"transferbench": {"binaries": ["TransferBench"], "files": {"example.cfg": ["/nonexistent"]}},
                  "rvs": {"binaries": ["rvs"], "variables": {"RVS_CONF": ["/opt/rocm/share/rocm-validation-suite/conf"]},
                          "drop_options": ["-l"]}},
    },
    "rccl_expectations": load_knowledge("rccl_expectations"),
}
MI300X = {"generation": "MI300X", "product": "MI300X"}


def _a2a(value):
    result = new_result("transferbench", "a2a", "out")
    result["measurements"] = [measurement("avg_bandwidth", "GB/s", value)]
    return {"id": "transferbench.a2a", "tool": "transferbench", "test": "a2a", "status": "parsed", "reason": "",
            "cmd": [], "rc": 0, "source": "out", "result": result}


def test_one_run_per_distinct_amd_command_as_the_tools_table_says():
    specs = {s["id"]: s for s in plan_runs(KNOWLEDGE, MI300X)}
    assert sorted(specs) == ["rccl-tests.all_reduce_perf", "rvs.gst", "rvs.mem", "transferbench.a2a"]
    assert specs["rvs.gst"]["argv"] == ["-c", "{var:RVS_CONF}/MI300X/gst_single.conf"]
    assert specs["rvs.mem"]["argv"] == ["-c", "{var:RVS_CONF}/mem.conf"]  # AMD's log file left out
    assert specs["rccl-tests.all_reduce_perf"]["argv"] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"]
    assert specs["rccl-tests.all_reduce_perf"]["binaries"] == ["all_reduce_perf"]
    saved = {s["id"]: s for s in plan_runs(KNOWLEDGE, MI300X, {"transferbench.a2a": "/tmp/a2a.txt"})}
    assert saved["transferbench.a2a"]["output_file"] == "/tmp/a2a.txt"
    with pytest.raises(AcceptanceError, match=r"topotune_acceptance_outputs: rvs\.gst_ext is no acceptance run of "
                                              r"MI300X: use one of rccl-tests.all_reduce_perf, rvs.gst"):
        plan_runs(KNOWLEDGE, MI300X, {"rvs.gst_ext": "/x"})
    assert plan_runs(KNOWLEDGE, {"generation": "MI308X"}) == []


def test_node_report_judges_every_criterion_and_says_why_when_it_cannot():
    records = [_a2a(35.1),
               {"id": "rvs.gst", "tool": "rvs", "test": "gst", "status": "missing",
                "reason": "rvs not installed (looked for rvs ...)", "cmd": [], "rc": None, "source": None, "result": None}]
    report = node_report("n1", MI300X, records, KNOWLEDGE)
    verdicts = {v["id"]: v for v in report["verdicts"]}
    assert report["schema_version"] == 1 and report["generation"] == "MI300X"
    assert verdicts["transferbench.a2a"]["status"] == "pass" and verdicts["transferbench.a2a"]["margin_pct"] == 6.69
    assert verdicts["rvs.gst"]["status"] == "unknown" and verdicts["rvs.gst"]["observed"].startswith("rvs not installed")
    assert verdicts["rvs.mem"]["observed"] == "no rvs mem output"
    assert verdicts["rccl-tests.all_reduce_perf"]["status"] == "unknown"
    assert report["summary"] == {"pass": 1, "warn": 0, "fail": 0, "unknown": 3}
    none = node_report("n2", {"generation": None}, [], KNOWLEDGE)
    assert none["verdicts"][0]["status"] == "unknown" and "an unidentified GPU generation" in none["verdicts"][0]["observed"]


def test_the_rccl_criterion_is_judged_by_compare_busbw_on_a_real_run():
    """A real 8 x MI210 run (MI210's criterion: AMD's average over its sweep)."""
    path = os.path.join(ACCEPTANCE, "rccl-tests_all_reduce_perf-1node-healthy__mi210-8gpu-node-006__mhilgema-core42.txt")
    with open(path) as handle:
        result = dict(parse_perf(handle.read(), path), tool="rccl-tests", test="all_reduce_perf")
    record = {"id": "rccl-tests.all_reduce_perf", "tool": "rccl-tests", "test": "all_reduce_perf", "status": "parsed",
              "reason": "", "cmd": [], "rc": 0, "source": path, "result": result}
    verdict = node_report("n1", {"generation": "MI210"}, [record], KNOWLEDGE)["verdicts"][-1]
    assert verdict["id"] == "rccl-tests.all_reduce_perf" and verdict["status"] in ("pass", "fail", "warn")
    assert verdict["observed"] and verdict["expected"].startswith("all_reduce_perf busbw: >= ")


def test_a_node_5_percent_under_its_class_median_warns_and_the_gates_follow_fail_on():
    reports = {h: node_report(h, MI300X, [_a2a(v)], KNOWLEDGE) for h, v in
               (("n1", 40.0), ("n2", 40.4), ("n3", 39.6), ("n4", 37.9), ("n5", 30.0))}
    cluster(reports, {h: "MI300X" for h in reports})
    a2a = {h: next(v for v in r["verdicts"] if v["id"] == "transferbench.a2a") for h, r in reports.items()}
    assert a2a["n1"]["class_median"] == 39.6 and a2a["n1"]["status"] == "pass"
    assert a2a["n4"]["margin_vs_median_pct"] == pytest.approx(-4.29, abs=0.01) and a2a["n4"]["status"] == "pass"
    assert a2a["n5"]["status"] == "fail"  # under AMD's bound: fail, whatever the median
    a2a["n4"]["value"] = 37.5  # 5.3 % under the median: warn
    cluster(reports, {h: "MI300X" for h in reports})
    assert a2a["n4"]["status"] == "warn" and "5.3 % below the median of MI300X (5 nodes: 39.6 GB/s)" in a2a["n4"]["observed"]
    assert reports["n4"]["summary"]["warn"] == 1
    # a class of two has no median
    pair = {h: node_report(h, MI300X, [_a2a(v)], KNOWLEDGE) for h, v in (("a", 40.0), ("b", 34.0))}
    cluster(pair, {"a": "MI300X", "b": "MI300X"})
    b = next(v for v in pair["b"]["verdicts"] if v["id"] == "transferbench.a2a")
    assert b["class_median"] is None and b["status"] == "pass"
    assert blocking(reports, "fail") == {"n5": ["transferbench.a2a"]}
    assert blocking(reports, "warn") == {"n4": ["transferbench.a2a"], "n5": ["transferbench.a2a"]}
    assert blocking(reports, "never") == {}
    with pytest.raises(AcceptanceError, match="topotune_acceptance_fail_on: 'sometimes' is not one of fail, warn, never"):
        blocking(reports, "sometimes")
    assert any(line.startswith("n5 FAIL    transferbench.a2a: 1 of 1 miss the bound: node 30 GB/s") for line in lines(reports))


def test_junit_has_a_suite_per_node_and_a_case_per_criterion():
    reports = {"n1": node_report("n1", MI300X, [_a2a(30.0)], KNOWLEDGE)}
    root = ET.fromstring(junit(reports))
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "1"
    suite = root.find("testsuite")
    assert suite.get("name") == "n1" and suite.get("skipped") == "3"
    failed = suite.find("testcase[@name='transferbench.a2a']")
    assert failed.get("classname") == "n1.transferbench" and "node 30 GB/s" in failed.find("failure").get("message")


def _stand_in(tmp_path, name, text, rc=0):
    """A stand-in for a tool binary (a shell script printing a capture), named as the stand-in it is."""
    path = tmp_path / name
    (tmp_path / (name + ".out")).write_text(text)
    path.write_text("#!/bin/sh\n# stand-in for %s: prints a saved capture\ncat %s\nexit %d\n" % (
        name, tmp_path / (name + ".out"), rc))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_runs_on_the_node_run_read_or_say_why_not(tmp_path):
    with open(os.path.join(ACCEPTANCE, "rccl-tests_all_reduce_perf-1node-healthy__mi210-8gpu-node-006__mhilgema-"
                                       "core42.txt")) as handle:
        capture = handle.read()
    binary = _stand_in(tmp_path, "all_reduce_perf", capture)
    spec = {"id": "rccl-tests.all_reduce_perf", "tool": "rccl-tests", "test": "all_reduce_perf",
            "argv": ["-b", "8"], "binaries": [binary], "timeout": 30}
    ran = run_spec(spec)
    assert ran["status"] == "parsed" and ran["cmd"] == [binary, "-b", "8"] and ran["result"]["tool"] == "rccl-tests"
    assert run_spec(spec, check_mode=True)["status"] == "skipped"
    assert run_spec(dict(spec, binaries=["no-such-tool"]))["reason"].startswith("rccl-tests not installed (looked for "
                                                                                "no-such-tool on PATH")
    conf = run_spec(dict(spec, argv=["-c", "{var:RVS_CONF}/x.conf"], variables={"RVS_CONF": [str(tmp_path / "no")]}))
    assert conf["status"] == "missing" and "its RVS_CONF directory is not there" in conf["reason"]
    (tmp_path / "conf").mkdir()
    resolved = run_spec(dict(spec, argv=["-c", "{var:RVS_CONF}/x.conf"], variables={"RVS_CONF": [str(tmp_path / "conf")]}))
    assert resolved["cmd"][1:] == ["-c", str(tmp_path / "conf" / "x.conf")]
    saved = run_spec(dict(spec, output_file=str(tmp_path / "all_reduce_perf.out")), check_mode=True)
    assert saved["status"] == "parsed" and saved["source"].endswith("all_reduce_perf.out")
    garbage = _stand_in(tmp_path, "garbage", "segfault\n", rc=139)
    broken = run_spec(dict(spec, binaries=[garbage]))
    assert broken["status"] == "error" and broken["rc"] == 139 and "\n" not in broken["reason"]
    only = run_spec(dict(spec, saved_output_only="AMD's command runs a site wrapper"))
    assert only["status"] == "missing" and "not run by topotune: AMD's command runs a site wrapper" in only["reason"]
