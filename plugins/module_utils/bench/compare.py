"""The source article's comparison: one collective run measured under each CPU binding plan, and against the node's
stored baseline (before and after tuning). Pure functions, standard library only: the ``rccl_bench`` module compares
its plan runs on the node, the ``benchmark_baseline`` filter compares a run with the stored baseline on the controller.

Public API:

``PLANS``
    The binding plans, as ``launch_templates_cpu_binding`` names them: ``none`` (no CPU or memory binding), ``numa``
    (each rank on its GPU's NUMA node), ``l3`` (each rank on its GPU's L3 domain(s)).
``SIGNIFICANT``
    0.05: a change smaller than 5 % is run-to-run spread, not a difference (the 5 % of CVS's ``verify_bw_dip``, the
    class-median rule of the acceptance suite).
``figures(result, message_bytes=8 GiB)``
    What one parsed run (``rccl.parse_perf``) is compared by: ``size`` (``message_bytes`` when the run has that row,
    else its largest size), ``column`` (``in_place``, else ``out_of_place``), ``busbw`` and ``time_us`` there (the
    worst cycle), ``avg_busbw``, ``sizes`` (``{size: {"busbw", "time_us"}}``, worst cycle), ``n_ranks``,
    ``complete``, ``failed``. Raises ``ValueError`` when the run has no row.
``delta(reference, other)``
    ``other`` against ``reference`` (two ``figures``): ``busbw_pct`` and ``time_pct`` at the reference's headline
    size, ``small_time_pct`` (mean time change over the common sizes up to 64 KiB, where latency, not bandwidth,
    rules), ``sizes`` (per common size), ``verdict`` ``better`` / ``worse`` / ``same`` (busbw at the headline size,
    or the small-message time when busbw does not move, past ``SIGNIFICANT``), or ``unknown`` with ``reason`` when
    the other run lacks the headline size or either run failed validation.
``compare_plans(runs, deployed=None)``
    ``runs``: ``{plan: {"figures": ...} | {"error": reason}}`` in run order. Each measured plan against ``none``
    (else the first measured plan), ``best`` (highest headline busbw), ``deployed`` and a ``recommendation`` line.
``baseline_record(host, figures, recorded_at, cmd=(), plans=None)``, ``compare_baseline(current, baseline)``
    The stored baseline (``schema_version`` 1) and a run compared with it (``status`` ``improved`` /
    ``regressed`` / ``unchanged`` / ``unknown`` / ``recorded`` when there was none).
"""

PLANS = ("none", "numa", "l3")
SIGNIFICANT = 0.05
SCHEMA_VERSION = 1
_SMALL = 64 << 10
_COLUMNS = ("in_place", "out_of_place")


def _pct(before, after):
    if not before:
        return None
    return round((after - before) / before * 100.0, 2)


def figures(result, message_bytes=8 << 30):
    """See the module docstring."""
    cycles = [result.get("rows") or []] + list(result.get("extra_cycles") or [])
    column = next((c for c in _COLUMNS if any((row.get(c) or {}).get("busbw") is not None
                                              for cycle in cycles for row in cycle)), None)
    if column is None:
        raise ValueError("the run has no result row with a bus bandwidth")
    sizes = {}
    for cycle in cycles:
        for row in cycle:
            cell = row.get(column) or {}
            if cell.get("busbw") is None:
                continue
            seen = sizes.get(row["size"])
            # the worst cycle: lowest busbw (its time with it)
            if seen is None or cell["busbw"] < seen["busbw"]:
                sizes[row["size"]] = {"busbw": cell["busbw"], "time_us": cell.get("time_us")}
    size = message_bytes if message_bytes in sizes else max(sizes)
    return {"size": size, "column": column, "busbw": sizes[size]["busbw"], "time_us": sizes[size]["time_us"],
            "avg_busbw": result.get("avg_busbw"), "sizes": {str(k): sizes[k] for k in sorted(sizes)},
            "n_ranks": result.get("n_ranks"), "complete": bool(result.get("complete")),
            "failed": bool(result.get("failed"))}


def _gib(size):
    size = int(size)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def delta(reference, other):
    """See the module docstring."""
    key = str(reference["size"])
    out = {"size": reference["size"], "busbw_pct": None, "time_pct": None, "small_time_pct": None, "sizes": {},
           "verdict": "unknown", "reason": ""}
    if reference.get("failed") or other.get("failed"):
        out["reason"] = "a run failed validation (#wrong or the tool's failure lines): its figures are no measurement"
        return out
    for size in sorted(set(reference["sizes"]) & set(other["sizes"]), key=int):
        a, b = reference["sizes"][size], other["sizes"][size]
        out["sizes"][size] = {"busbw_pct": _pct(a["busbw"], b["busbw"]),
                              "time_pct": _pct(a["time_us"], b["time_us"]) if a["time_us"] and b["time_us"] else None}
    small = [v["time_pct"] for s, v in out["sizes"].items() if int(s) <= _SMALL and v["time_pct"] is not None]
    out["small_time_pct"] = round(sum(small) / len(small), 2) if small else None
    if key not in out["sizes"]:
        out["reason"] = "the run has no %s row (the reference's headline size)" % _gib(reference["size"])
        return out
    out.update(busbw_pct=out["sizes"][key]["busbw_pct"], time_pct=out["sizes"][key]["time_pct"])
    limit = SIGNIFICANT * 100.0
    busbw, small_time = out["busbw_pct"] or 0.0, out["small_time_pct"]
    said = "busbw at %s %s" % (_gib(reference["size"]), _signed(busbw))
    if abs(busbw) >= limit:
        out["verdict"] = "better" if busbw > 0 else "worse"
        out["reason"] = said
    elif small_time is not None and abs(small_time) >= limit:
        out["verdict"] = "better" if small_time < 0 else "worse"
        out["reason"] = "%s (within %d %%); small-message time %s" % (said, limit, _signed(small_time))
    else:
        out["verdict"] = "same"
        out["reason"] = "%s%s: within %d %%" % (
            said, "" if small_time is None else ", small-message time %s" % _signed(small_time), limit)
    return out


def _signed(pct):
    return "%+.1f %%" % float(pct)


def compare_plans(runs, deployed=None):
    """See the module docstring."""
    measured = [plan for plan, run in runs.items() if run.get("figures")]
    out = {"plans": list(runs), "reference": None, "deltas": {}, "best": None, "deployed": deployed,
           "recommendation": ""}
    if not measured:
        reasons = "; ".join("%s: %s" % (plan, run.get("error") or "no figures") for plan, run in runs.items())
        out["recommendation"] = "no plan was measured (%s)" % (reasons or "no plans")
        return out
    reference = "none" if "none" in measured else measured[0]
    out["reference"] = reference
    base = runs[reference]["figures"]
    for plan in measured:
        if plan != reference:
            out["deltas"][plan] = delta(base, runs[plan]["figures"])
    valid = [p for p in measured if not runs[p]["figures"].get("failed")]
    if valid:
        out["best"] = max(valid, key=lambda p: (runs[p]["figures"]["busbw"], -measured.index(p)))
    best = out["best"]
    words = []
    if best is None:
        words.append("every measured plan failed validation")
    elif best == reference or out["deltas"][best]["verdict"] != "better":
        words.append("no plan beats %s by %d %% or more at %s" % (
            "no binding" if reference == "none" else reference, SIGNIFICANT * 100, _gib(base["size"])))
    else:
        d = out["deltas"][best]
        words.append("%s: %s over %s (%s -> %s GB/s, %s)" % (
            best, d["reason"], "no binding" if reference == "none" else reference, _gbs(base["busbw"]),
            _gbs(runs[best]["figures"]["busbw"]), _time_words(base, runs[best]["figures"])))
    if deployed and deployed in measured and best and deployed != best:
        d = delta(runs[deployed]["figures"], runs[best]["figures"])
        if d["verdict"] == "better":
            words.append("the deployed plan (%s) is slower than %s: %s" % (deployed, best, d["reason"]))
    out["recommendation"] = "; ".join(words)
    return out


def _gbs(value):
    return "%.2f" % float(value)


def _time_words(a, b):
    if not a.get("time_us") or not b.get("time_us"):
        return "time n/a"
    return "time %d -> %d us" % (round(float(a["time_us"])), round(float(b["time_us"])))


def baseline_record(host, figures_, recorded_at, cmd=(), plans=None):
    """See the module docstring."""
    return {"schema_version": SCHEMA_VERSION, "host": host, "recorded_at": recorded_at, "cmd": list(cmd or []),
            "figures": figures_, "plans": plans}


def compare_baseline(current, baseline):
    """See the module docstring. ``current`` is a run's ``figures`` (None when the run gave none)."""
    if current is None:
        return {"status": "unknown", "reason": "this run has no figures to compare", "delta": None, "baseline": None}
    if not baseline:
        return {"status": "recorded", "reason": "no baseline stored for this node: this run is recorded as its "
                                                "baseline", "delta": None, "baseline": None}
    if (baseline.get("schema_version") != SCHEMA_VERSION or not isinstance(baseline.get("figures"), dict)
            or not isinstance(baseline["figures"].get("sizes"), dict)):
        return {"status": "unknown", "reason": "the stored baseline is not a schema %d record (recorded by another "
                                               "version?): remove it to record a new one" % SCHEMA_VERSION,
                "delta": None, "baseline": None}
    d = delta(baseline["figures"], current)
    status = {"better": "improved", "worse": "regressed", "same": "unchanged"}.get(d["verdict"], "unknown")
    when = baseline.get("recorded_at") or "an earlier run"
    return {"status": status, "reason": "against the baseline of %s: %s" % (when, d["reason"]), "delta": d,
            "baseline": {"recorded_at": baseline.get("recorded_at"), "cmd": baseline.get("cmd") or [],
                         "busbw": baseline["figures"].get("busbw"), "time_us": baseline["figures"].get("time_us"),
                         "size": baseline["figures"].get("size")}}
