"""A node's acceptance: which tool runs it needs, its verdicts against AMD's criteria, and the cluster's view of them.

Controller only (pure functions, standard library; the ``acceptance`` action and the ``acceptance_cluster`` filter
call them). Knowledge: ``knowledge/acceptance.yml`` (``generations``: the cards' criteria; ``tools``: how each
tool's AMD command is run) and ``knowledge/rccl_expectations.yml`` (the cards' RCCL criteria, judged by ``bench/rccl.py
compare_busbw``): one table of acceptance numbers, the generation cards.

``SCHEMA_VERSION``
    The version of the per-node report (``acceptance/<host>.json``).
``plan_runs(knowledge, identity, outputs=None)``
    The module's run specs (``module_utils/acceptance/run.py run_spec``): one per distinct AMD command among the
    criteria of the node's generation (``identity``: the topology model's), run as ``knowledge/acceptance.yml``
    ``tools`` says (binary, directories, files, options left out); each saved output of ``outputs`` (``{run id: path
    on the node}``) in place of its run. Raises ``AcceptanceError`` naming an id of ``outputs`` that is no run of the
    generation, with the ids there are.
``node_report(host, identity, records, knowledge)``
    The node's report: ``{"schema_version", "host", "generation", "product", "runs": [record without the parsed
    result's bulk], "verdicts": [criteria.judge shape, plus "class_median", "margin_vs_median_pct"], "summary":
    {pass, warn, fail, unknown}}``. A criterion whose run did not parse is ``unknown`` with the run's reason (the tool is missing, the
    output holds nothing readable, check mode); the RCCL criterion's verdict is ``compare_busbw``'s (``ok`` pass,
    ``warn`` warn, ``below``/``failed`` fail).
``cluster(reports, classes, dip_pct=5.0)``
    The reports with, per criterion and hardware class, the median of the nodes' values and each node's margin
    against it; a node 5 % or more on the wrong side of its class median turns ``pass`` into ``warn`` (ROCm CVS
    ``verify_bw_dip``: a node that passes AMD's bound but trails its peers is the one that slows a collective). A
    class of one or two nodes has no median to compare with (left as is).
``junit(reports, name="topotune acceptance")``
    JUnit XML text: one test suite per node, one test case per criterion (failure for ``fail``, skipped with the
    reason for ``unknown``, a ``system-out`` line for ``warn``), for CI gates.
``blocking(reports, fail_on)``
    ``{host: [criterion ids]}`` that fail the node for ``fail_on`` ``fail`` | ``warn`` | ``never``.
``lines(reports)``
    One terminal line per verdict that is not ``pass``.
"""

from __future__ import annotations

import os
import shlex
import statistics
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import compare_busbw
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

SCHEMA_VERSION = 1
RCCL_STATUS = {"ok": "pass", "warn": "warn", "below": "fail", "failed": "fail", "unknown": "unknown"}
FAIL_ON = ("fail", "warn", "never")
_RANK = {"pass": 0, "unknown": 1, "warn": 2, "fail": 3}


class AcceptanceError(TopotuneError, ValueError):
    """Acceptance input that cannot be used (an unknown run id, a bad fail_on)."""


def _tools(knowledge):
    return (knowledge.get("acceptance") or {}).get("tools") or {}


def _rccl_criteria(knowledge, generation):
    entry = next((g for g in (knowledge.get("rccl_expectations") or {}).get("generations") or []
                  if g.get("name") == generation), None)
    return [c for c in (entry or {}).get("criteria") or [] if isinstance(c, dict)]


def _commands(knowledge, generation):
    """``[(run id, tool, test, AMD's command)]``: one per distinct command of the generation's criteria, the RCCL one
    included; the id is ``<tool>.<test>``, or ``<tool>.<criterion id>`` where one tool's test has several commands."""
    found = {}
    for criterion in criteria_of(knowledge.get("acceptance"), generation):
        if criterion.get("command"):
            found.setdefault((criterion["tool"], criterion["command"]), (criterion["test"], criterion["id"]))
    for criterion in _rccl_criteria(knowledge, generation):
        if criterion.get("command"):
            found.setdefault(("rccl-tests", criterion["command"]), (criterion.get("collective") or "all_reduce_perf",
                                                                    criterion.get("collective") or "all_reduce_perf"))
    tests = {}
    for (tool, _command), (test, _cid) in found.items():
        tests[(tool, test)] = tests.get((tool, test), 0) + 1
    return sorted(("%s.%s" % (tool, test if tests[(tool, test)] == 1 else cid), tool, test, command)
                  for (tool, command), (test, cid) in found.items())


def _argv(words, settings):
    """AMD's command words after the binary, as the node runs them: options of ``drop_options`` left out with their
    value, ``${VAR}`` -> ``{var:VAR}`` and a word of ``files`` -> ``{file:WORD}`` for the module to resolve."""
    out, skip = [], False
    drop = set(settings.get("drop_options") or [])
    for word in words:
        if skip:
            skip = False
            continue
        if word in drop:
            skip = True
            continue
        for name in settings.get("variables") or {}:
            word = word.replace("${%s}" % name, "{var:%s}" % name)
        out.append("{file:%s}" % word if word in (settings.get("files") or {}) else word)
    return out


def plan_runs(knowledge, identity, outputs=None):
    """See the module docstring."""
    generation = (identity or {}).get("generation")
    commands, outputs = _commands(knowledge, generation), dict(outputs or {})
    ids = [c[0] for c in commands]
    unknown = sorted(set(outputs) - set(ids))
    if unknown:
        raise AcceptanceError("topotune_acceptance_outputs: %s is no acceptance run of %s: use one of %s" % (
            ", ".join(unknown), generation or "this node", ", ".join(ids) or "(none: no criteria)"))
    specs = []
    for run_id, tool, test, command in commands:
        settings = _tools(knowledge).get(tool) or {}
        try:
            words = shlex.split(command)
        except ValueError as err:
            raise AcceptanceError("knowledge/acceptance.yml: the command of %s cannot be split: %s" % (run_id, err)) from None
        spec = {"id": run_id, "tool": tool, "test": test, "command": command, "argv": _argv(words[1:], settings),
                "binaries": list(settings.get("binaries") or [os.path.basename(words[0])]),
                "variables": dict(settings.get("variables") or {}), "files": dict(settings.get("files") or {}),
                "timeout": settings.get("timeout") or 1800, "output_file": outputs.get(run_id),
                "saved_output_only": settings.get("saved_output_only")}
        specs.append(spec)
    return specs


def _rccl_verdict(records, knowledge, generation):
    record = next((r for r in records if r["tool"] == "rccl-tests"), None)
    verdict = {"id": "rccl-tests.all_reduce_perf", "tool": "rccl-tests", "test": "all_reduce_perf", "status": "unknown", "value": None,
               "unit": "GB/s", "margin_pct": None, "observed": "", "expected": "", "failing": [], "source": ""}
    criteria = _rccl_criteria(knowledge, generation)
    if criteria:
        verdict["expected"] = "all_reduce_perf busbw: %s" % "; ".join(
            ">= %s GB/s (%s)" % (b.get("busbw_gbs"), b.get("below")) for c in criteria for b in c.get("bounds") or [])
    if record is None or record["status"] != "parsed":
        verdict["observed"] = record["reason"] if record else "no rccl-tests run"
        return verdict
    comparison = compare_busbw(record["result"], knowledge.get("rccl_expectations"), generation)
    verdict.update(status=RCCL_STATUS.get(comparison["status"], "unknown"), value=comparison["measured_busbw"],
                   observed=comparison["reason"] or "", source=str(comparison.get("source") or ""))
    if comparison.get("measured_busbw") is not None and comparison.get("expected_busbw"):
        verdict["margin_pct"] = round((comparison["measured_busbw"] - comparison["expected_busbw"]) * 100.0
                                      / comparison["expected_busbw"], 2)
    return verdict


def _slim(record):
    """The record as the report keeps it: the parse's measurements and facts, not its detail tables."""
    result = record.get("result") or {}
    keep = {k: result.get(k) for k in ("tool", "test", "version", "complete", "warnings", "measurements",
                                       "avg_busbw", "hosts", "n_ranks") if k in result}
    return dict(record, result=keep or None)


def node_report(host, identity, records, knowledge):
    """See the module docstring."""
    identity = identity or {}
    generation = identity.get("generation")
    # a log of several RVS modules parses to its first module's result with the others under "others"
    parsed = [one for r in records if r["status"] == "parsed" and r.get("result")
              for one in [r["result"]] + list(r["result"].get("others") or [])]
    by_test = {(r["tool"], r.get("test")): r for r in records}
    verdicts = []
    for criterion in criteria_of(knowledge.get("acceptance"), generation):
        verdict = judge(criterion, parsed)
        record = next((r for (tool, _test), r in by_test.items() if tool == criterion["tool"]
                       and r.get("test") == criterion["test"]), None)
        if verdict["status"] == "unknown" and record is not None and record["status"] != "parsed":
            verdict["observed"] = record["reason"]
        verdicts.append(verdict)
    if _rccl_criteria(knowledge, generation) or any(r["tool"] == "rccl-tests" for r in records):
        verdicts.append(_rccl_verdict(records, knowledge, generation))
    if not verdicts:
        verdicts.append({"id": "acceptance", "tool": None, "test": None, "status": "unknown", "value": None,
                         "unit": None, "margin_pct": None, "failing": [], "source": "knowledge/acceptance.yml",
                         "observed": "AMD publishes no acceptance criteria for %s" % (generation or "an unidentified "
                                                                                      "GPU generation"),
                         "expected": "the criteria of the node's GPU generation (knowledge/generations/*.yml)"})
    for verdict in verdicts:
        verdict.setdefault("class_median", None)
        verdict.setdefault("margin_vs_median_pct", None)
    return {"schema_version": SCHEMA_VERSION, "host": host, "generation": generation,
            "product": identity.get("product") or generation, "runs": [_slim(r) for r in records],
            "verdicts": verdicts, "summary": summarize(verdicts)}


def summarize(verdicts):
    out = {"pass": 0, "warn": 0, "fail": 0, "unknown": 0}
    for verdict in verdicts:
        out[verdict["status"]] += 1
    return out


def _lower_is_better(verdict):
    return verdict.get("unit") in ("s", "ms", "us", "ns")


def cluster(reports, classes, dip_pct=5.0):
    """See the module docstring."""
    members = {}
    for host, report in reports.items():
        for verdict in report.get("verdicts") or []:
            if isinstance(verdict.get("value"), (int, float)) and not isinstance(verdict["value"], bool):
                members.setdefault((classes.get(host), verdict["id"]), []).append((host, verdict))
    for (klass, _vid), entries in members.items():
        if len(entries) < 3:
            continue
        median = statistics.median(v["value"] for _h, v in entries)
        if not median:
            continue
        for _host, verdict in entries:
            gap = (verdict["value"] - median) * 100.0 / median
            margin = -gap if _lower_is_better(verdict) else gap
            verdict["class_median"] = round(median, 4)
            verdict["margin_vs_median_pct"] = round(margin, 2)
            if margin <= -dip_pct and verdict["status"] == "pass":
                verdict["status"] = "warn"
                verdict["observed"] += "; %.1f %% %s the median of %s (%d nodes: %s %s)" % (
                    abs(margin), "above" if _lower_is_better(verdict) else "below", klass, len(entries),
                    round(median, 3), verdict.get("unit") or "")
    for report in reports.values():
        report["summary"] = summarize(report.get("verdicts") or [])
    return reports


def blocking(reports, fail_on):
    """See the module docstring."""
    if fail_on not in FAIL_ON:
        raise AcceptanceError("topotune_acceptance_fail_on: %r is not one of %s" % (fail_on, ", ".join(FAIL_ON)))
    if fail_on == "never":
        return {}
    worst = _RANK[fail_on]
    out = {}
    for host, report in sorted(reports.items()):
        ids = [v["id"] for v in report.get("verdicts") or [] if v["status"] != "unknown" and _RANK[v["status"]] >= worst]
        if ids:
            out[host] = ids
    return out


def junit(reports, name="topotune acceptance"):
    """See the module docstring."""
    suites = []
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for host, report in sorted(reports.items()):
        cases = []
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for verdict in report.get("verdicts") or []:
            counts["tests"] += 1
            head = "    <testcase classname=%s name=%s>" % (quoteattr("%s.%s" % (host, verdict.get("tool") or "acceptance")),
                                                            quoteattr(verdict["id"]))
            body = ""
            text = "%s (expected %s; %s)" % (verdict["observed"], verdict["expected"], verdict.get("source") or "")
            if verdict["status"] == "fail":
                counts["failures"] += 1
                body = "\n      <failure message=%s>%s</failure>" % (quoteattr(verdict["observed"]), escape(text))
            elif verdict["status"] == "unknown":
                counts["skipped"] += 1
                body = "\n      <skipped message=%s/>" % quoteattr(verdict["observed"])
            elif verdict["status"] == "warn":
                body = "\n      <system-out>%s</system-out>" % escape("warn: " + text)
            cases.append(head + body + ("\n    </testcase>" if body else "</testcase>"))
        for key in totals:
            totals[key] += counts[key]
        suites.append("  <testsuite name=%s tests=\"%d\" failures=\"%d\" skipped=\"%d\" errors=\"0\">\n%s\n  </testsuite>"
                      % (quoteattr(host), counts["tests"], counts["failures"], counts["skipped"], "\n".join(cases)))
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=%s tests=\"%d\" failures=\"%d\" skipped=\"%d\" "
            "errors=\"0\">\n%s\n</testsuites>\n" % (quoteattr(name), totals["tests"], totals["failures"],
                                                    totals["skipped"], "\n".join(suites)))


def lines(reports):
    """See the module docstring."""
    out = []
    for host, report in sorted(reports.items()):
        for verdict in report.get("verdicts") or []:
            if verdict["status"] != "pass":
                out.append("%s %-7s %s: %s (expected %s)" % (host, verdict["status"].upper(), verdict["id"],
                                                             verdict["observed"], verdict["expected"]))
    return out
