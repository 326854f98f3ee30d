"""AMD's acceptance criteria of a node's hardware, and a node's parsed tool outputs judged against them.

Public API (standard library only, Python 3.8+):

``criteria_of(view, generation)``
    The criteria of ``generation`` (its card's ``acceptance`` section, as the view ``knowledge/acceptance.yml``
    ``generations`` lists it) as a flat list, each criterion with its ``tool`` (the key it is listed under) and
    ``key`` (``<tool>.<id>``); ``[]`` for a generation without a card or without criteria.
``judge(criterion, results)``
    The verdict of one criterion over a node's parsed results (``common.new_result`` shape, any tools)::

        {"id": "transferbench.a2a", "tool": "transferbench", "test": "a2a", "status": "pass", "value": 35.1,
         "unit": "GB/s", "margin_pct": 6.7, "observed": "...", "expected": ">= 32.9 GB/s", "failing": [],
         "source": "ROCm/system-acceptance-docs docs/gpus/mi300x.md (e42af24): Pass: >= 32.9 GB/s"}

    ``status`` ``pass`` / ``fail`` / ``unknown`` (no output of the tool and test, or none with the criterion's case and
    metric: the reason says which, and that the output was cut when it was). The measurements that match are those
    of the criterion's ``tool``, ``test``, ``case`` and ``metric``; with ``per: each`` (the default) every one must
    meet the bound and the worst is ``value`` (``failing`` names the scopes that miss it), with ``per: node`` there is
    one figure per run and the worst run counts. ``margin_pct``: how far the value is above a minimum (below a
    maximum), in percent of the bound; negative when it fails; None for a boolean criterion.
``convert(value, unit, to)``
    A figure in another unit of the same kind (``UNITS``); ValueError between kinds.

Criterion fields (one entry of a card's ``acceptance.<tool>`` list): ``id`` (unique within the tool), ``test``,
``case`` (null: the measurement has none), ``metric``, ``unit``, one bound (``min``, ``max`` or ``equals``), ``per``
(``each`` or ``node``), ``command`` (AMD's, verbatim), ``sources`` ([{document, section, commit, says}]), and where
they apply ``disagreement`` (what each page says and the policy) and ``notes``.
"""

# unit -> (kind, factor to the kind's base unit)
UNITS = {
    "B/s": ("bandwidth", 1.0), "KB/s": ("bandwidth", 1e3), "MB/s": ("bandwidth", 1e6), "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12), "GiB/s": ("bandwidth", float(1 << 30)), "MiB/s": ("bandwidth", float(1 << 20)),
    "Gb/s": ("bandwidth", 1.25e8), "Mb/s": ("bandwidth", 1.25e5),
    "FLOPS": ("compute", 1.0), "GFLOPS": ("compute", 1e9), "TFLOPS": ("compute", 1e12),
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6), "ns": ("time", 1e-9),
    "bool": ("verdict", 1.0), "count": ("count", 1.0),
    "W": ("power", 1.0),
}
# perftest's message rate, amd-smi's PCIe link speed and xGMI read/write volumes (blas_bench, perftest, amdsmi_tables)
UNITS.update({"Mpps": ("rate", 1e6), "GT/s": ("transfer_rate", 1e9), "B": ("size", 1.0)})
BOUNDS = ("min", "max", "equals")


def convert(value, unit, to):
    """See the module docstring."""
    if unit == to:
        return value
    kind, factor = UNITS[unit]
    to_kind, to_factor = UNITS[to]
    if kind != to_kind:
        raise ValueError("cannot convert %s to %s" % (unit, to))
    return value * factor / to_factor


def criteria_of(view, generation):
    """See the module docstring."""
    for entry in (view or {}).get("generations") or []:
        if entry.get("name") != generation:
            continue
        out = []
        for tool in sorted(k for k, v in entry.items() if isinstance(v, list)):
            for criterion in entry[tool]:
                out.append(dict(criterion, tool=tool, key="%s.%s" % (tool, criterion["id"])))
        return out
    return []


def _bound(criterion):
    for name in BOUNDS:
        if name in criterion:
            return name, criterion[name]
    raise ValueError("criterion %s has no bound (min, max or equals)" % criterion.get("id"))


def _expected(criterion):
    name, bound = _bound(criterion)
    text = {"min": ">= %s %s", "max": "<= %s %s", "equals": "== %s %s"}[name] % (
        _fmt(bound), "" if criterion["unit"] == "bool" else criterion["unit"])
    what = " ".join(str(p) for p in (criterion["test"], criterion.get("case") or "", criterion["metric"]) if p)
    each = " on every %s" % "measurement" if criterion.get("per", "each") == "each" else ""
    return "%s: %s%s" % (what, text.strip(), each)


def _fmt(value):
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return "%d" % value
    return "%s" % (round(value, 3) if isinstance(value, float) else value)


def _scope_text(scope):
    return ",".join("%s %s" % (k, v) for k, v in sorted((scope or {}).items())) or "node"


def _meets(name, bound, value):
    if name == "min":
        return value >= bound
    if name == "max":
        return value <= bound
    return value == bound


def _margin(name, bound, value):
    if name == "equals" or isinstance(value, bool) or not bound:
        return None
    return round(((value - bound) if name == "min" else (bound - value)) * 100.0 / bound, 2)


def source_text(criterion):
    """The criterion's sources, one line: ``document (commit7): says; ...``."""
    return "; ".join("%s (%s): %s" % (s.get("document"), str(s.get("commit") or "")[:7], s.get("says"))
                     for s in criterion.get("sources") or [])


def judge(criterion, results):
    """See the module docstring."""
    name, bound = _bound(criterion)
    runs = [r for r in results or [] if r.get("tool") == criterion["tool"] and r.get("test") == criterion["test"]]
    verdict = {"id": criterion.get("key") or "%s.%s" % (criterion["tool"], criterion["id"]), "tool": criterion["tool"],
               "test": criterion["test"], "status": "unknown", "value": None, "unit": criterion["unit"],
               "margin_pct": None, "observed": "", "expected": _expected(criterion), "failing": [],
               "source": source_text(criterion)}
    if not runs:
        verdict["observed"] = "no %s %s output" % (criterion["tool"], criterion["test"])
        return verdict
    found = []
    for run in runs:
        for m in run.get("measurements") or []:
            if m.get("case") == criterion.get("case") and m.get("metric") == criterion["metric"]:
                value = m["value"]
                if criterion["unit"] != "bool":
                    value = convert(float(value), m["unit"], criterion["unit"])
                found.append((value, m.get("scope") or {}))
    if not found:
        cut = any(not r.get("complete", True) for r in runs)
        verdict["observed"] = "the %s %s output has no %s%s%s" % (
            criterion["tool"], criterion["test"], criterion["metric"],
            " for %s" % criterion["case"] if criterion.get("case") else "", " (the output was cut)" if cut else "")
        return verdict
    failing = [(v, s) for v, s in found if not _meets(name, bound, v)]
    if name == "min":
        worst = min(found, key=lambda f: f[0])
    elif name == "max":
        worst = max(found, key=lambda f: f[0])
    else:
        worst = failing[0] if failing else found[0]
    verdict.update(status="fail" if failing else "pass", value=worst[0], margin_pct=_margin(name, bound, worst[0]),
                   failing=[_scope_text(s) for _v, s in failing])
    unit = "" if criterion["unit"] == "bool" else " " + criterion["unit"]
    if failing:
        verdict["observed"] = "%d of %d miss the bound: %s" % (len(failing), len(found), ", ".join(
            "%s %s%s" % (_scope_text(s), _fmt(v), unit) for v, s in failing[:8]))
    else:
        verdict["observed"] = "worst %s%s (%s) of %d measurement(s)" % (_fmt(worst[0]), unit, _scope_text(worst[1]),
                                                                        len(found))
    return verdict
