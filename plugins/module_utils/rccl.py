"""Parse rccl-tests / nccl-tests ``*_perf`` output (all_reduce_perf and friends) into a dict.

Public API (standard library only, Python 3.8+):

``RcclParseError(TopotuneError)``
    Output that holds no usable result table; the one-line message names the line and why.
``parse_perf(text, source="output")``
    The parsed run (see ``RESULT_KEYS``): ``rows`` (one per message size, each with ``size`` in bytes,
    ``count``, ``type``, ``redop``, ``root`` and ``out_of_place`` / ``in_place`` each holding ``time_us``,
    ``algbw``, ``busbw`` (GB/s) and ``wrong`` (new format, ``#wrong`` count) or ``error`` (old nccl-tests
    format, max relative error)), ``avg_busbw`` (the ``# Avg bus bandwidth`` footer, ``None`` when absent),
    ``peak_busbw``, header facts (``params``, ``ranks``, ``n_ranks``, ``device_names``, ``versions``,
    ``hostname``, ``collective``), ``format``, ``columns``, ``complete`` and ``warnings``.
    The table layout is read from the column header line, so old nccl-tests (no ``root``/``#wrong``, an
    ``error`` column) and new rccl-tests/nccl-tests layouts parse alike. A truncated run keeps its complete
    rows, sets ``complete: false`` and explains in ``warnings``. Debug lines (``NCCL_DEBUG=INFO``) are skipped.
``load_expectations(data)`` / ``resolve_generation(...)`` / ``compare_busbw(result, expectations, generation)``
    Compare a parsed run with the expected bus bandwidth of a GPU generation
    (``knowledge/rccl_expectations.yml``); the status is ``ok``, ``below`` or ``unknown`` with a reason.
"""

import re

from .sysroot import TopotuneError

PER_OP_KEYS = ("time_us", "algbw", "busbw")
_LEAD_COLUMNS = ("size", "count", "type", "redop", "root")
_OP_COLUMNS = {"time": "time_us", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong", "error": "error"}

_RANK = re.compile(r"^#\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_DEBUG = re.compile(r"^\S+:\d+:\d+ \[\d+\] (?:NCCL|RCCL) ")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_COLLECTIVE = re.compile(r"^#\s*Collective test (starting|concluded)\s*:\s*(\S+)")
_TOOL_VERSION = re.compile(r"^(?:#\s*)?(rccl-tests|nccl-tests)\s*:?\s*[Vv]ersion\s*(.*?)\s*$")
_KEY_VALUE = re.compile(r"^(RCCL version|NCCL version|HIP version|ROCm version|Hostname|Librccl path|Libnccl path)"
                        r"\s*:?\s*(.*?)\s*$")
_PARAMS = (
    ("nThread", re.compile(r"\bnThreads?\s+(\d+)"), int),
    ("nGpus", re.compile(r"\bnGpus\s+(\d+)"), int),
    ("minBytes", re.compile(r"\bminBytes\s+(\d+)"), int),
    ("maxBytes", re.compile(r"\bmaxBytes\s+(\d+)"), int),
    ("step", re.compile(r"\bstep:\s*(\S+)"), str),
    ("warmup_iters", re.compile(r"\bwarmup iters:\s*(\d+)"), int),
    ("iters", re.compile(r"(?<!warmup)(?<!agg) iters:\s*(\d+)"), int),
    ("agg_iters", re.compile(r"\bagg iters:\s*(\d+)"), int),
    ("validation", re.compile(r"\bvalidation:\s*(\d+)"), int),
    ("graph", re.compile(r"\bgraph:\s*(\d+)"), int),
)
_VERSION_KEYS = {"RCCL version": "rccl", "NCCL version": "nccl", "HIP version": "hip", "ROCm version": "rocm"}


class RcclParseError(TopotuneError):
    """rccl-tests / nccl-tests output without a usable result table."""


def _short(line, limit=80):
    line = line.strip()
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _columns_from_header(tokens):
    """Map the column header tokens to (lead column names, [per-op column names] x groups)."""
    try:
        first_time = tokens.index("time")
    except ValueError:
        return None
    lead = tokens[:first_time]
    if lead[:3] != ["size", "count", "type"] or any(t not in _LEAD_COLUMNS for t in lead):
        return None
    ops, current = [], None
    for token in tokens[first_time:]:
        if token == "time":
            current = []
            ops.append(current)
        if token not in _OP_COLUMNS or _OP_COLUMNS[token] in current:
            return None
        current.append(_OP_COLUMNS[token])
    if any(not all(k in group for k in PER_OP_KEYS) for group in ops) or not 1 <= len(ops) <= 2:
        return None
    return lead, ops


def _number(token, kind):
    """Parse one cell; ``N/A`` is None. Returns (value, flagged) or raises ValueError."""
    flagged = token.endswith("*")
    token = token.rstrip("*")
    if token == "N/A":
        return None, flagged
    return (int(token) if kind == "int" else float(token)), flagged


def _parse_row(tokens, lead, ops, group_names):
    if len(tokens) != len(lead) + sum(len(g) for g in ops):
        raise ValueError("%d fields, the column header has %d" % (len(tokens), len(lead) + sum(len(g) for g in ops)))
    row = {"size": None, "count": None, "type": None, "redop": None, "root": None}
    for name, token in zip(lead, tokens):
        if name in ("size", "count"):
            row[name] = int(token)
        elif name == "root":
            row[name] = int(token)
        else:
            row[name] = token
    position = len(lead)
    flagged = False
    for group, group_name in zip(ops, group_names):
        cells = {}
        for name in group:
            value, flag = _number(tokens[position], "int" if name == "wrong" else "float")
            flagged = flagged or flag
            cells[name] = value
            position += 1
        row[group_name] = cells
    for group_name in ("out_of_place", "in_place"):
        row.setdefault(group_name, None)
    row["errors_flagged"] = flagged
    return row


def _parse_header_facts(line, result):
    stripped = line.strip()
    match = _RANK.match(stripped)
    if match:
        rank, group, pid, host, device, bus, name = match.groups()
        result["ranks"].append({"rank": int(rank), "group": None if group is None else int(group), "pid": int(pid),
                                "host": host, "device": int(device), "bus_id": bus, "name": name or None})
        return True
    match = _TOOL_VERSION.match(stripped)
    if match:
        result["versions"][match.group(1).replace("-", "_")] = match.group(2)
        return True
    match = _KEY_VALUE.match(stripped)
    if match:
        key, value = match.groups()
        if key in _VERSION_KEYS:
            result["versions"][_VERSION_KEYS[key]] = value
        elif key == "Hostname":
            result["hostname"] = value
        else:
            result["library_path"] = value
        return True
    if re.match(r"^#\s*nThreads?\s+\d+", stripped):
        for key, regex, kind in _PARAMS:
            found = regex.search(stripped)
            if found:
                result["params"][key] = kind(found.group(1))
        return True
    return False


def _new_result(source):
    return {"source": source, "format": None, "collective": None, "columns": [], "params": {}, "ranks": [],
            "n_ranks": None, "device_names": [], "hosts": [], "versions": {}, "hostname": None, "library_path": None,
            "rows": [], "avg_busbw": None, "peak_busbw": None, "out_of_bounds": None, "complete": False,
            "debug_lines": 0, "warnings": []}


def parse_perf(text, source="output"):
    """Parse rccl-tests / nccl-tests perf output; see the module docstring for the result."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise RcclParseError("%s: expected text, got %s" % (source, type(text).__name__))
    result = _new_result(source)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    layout = None        # (lead, ops, group names) once the column header is seen
    state = "preamble"   # preamble -> table -> footer
    group_order = ["out_of_place", "in_place"]
    pending_bad = None   # (line number, text) of a non-row line inside the table
    first_text = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if first_text is None:
            first_text = (number, stripped)
        if _DEBUG.match(stripped):
            result["debug_lines"] += 1
            continue
        match = _COLLECTIVE.match(stripped)
        if match:
            if match.group(1) == "starting":
                result["collective"] = match.group(2)
            continue
        if state == "preamble":
            if stripped.startswith("#") and "out-of-place" in stripped and "in-place" in stripped:
                if stripped.index("in-place") < stripped.index("out-of-place"):
                    group_order = ["in_place", "out_of_place"]
                continue
            if stripped.startswith("#"):
                columns = _columns_from_header(stripped.lstrip("#").split())
                if columns:
                    lead, ops = columns
                    layout = (lead, ops, group_order[:len(ops)])
                    result["columns"] = stripped.lstrip("#").split()
                    has_new = any("wrong" in g for g in ops)
                    result["format"] = "new" if has_new else "old"
                    state = "table"
                    continue
            if not _parse_header_facts(line, result) and not stripped.startswith("#"):
                result["warnings"].append("line %d before the table ignored: %r" % (number, _short(stripped)))
            continue
        if state == "table":
            if stripped.startswith("#") and pending_bad is None:
                if re.match(r"^#\s*\(B\)", stripped):
                    continue   # the units line under the column header
                state = "footer"
            elif not stripped.startswith("#"):
                try:
                    row = _parse_row(stripped.split(), *layout)
                except ValueError as err:
                    if pending_bad is None:
                        pending_bad = (number, stripped, str(err))
                    continue
                if pending_bad is not None:
                    raise RcclParseError("%s line %d: not a result row (%s): %r; rows follow it, so the output is "
                                         "not a clean truncated run" % (source, pending_bad[0], pending_bad[2],
                                                                        _short(pending_bad[1])))
                result["rows"].append(row)
                continue
        # footer (also reached from a '#' line ending the table)
        match = _AVG.match(stripped)
        if match:
            if pending_bad is not None:
                raise RcclParseError("%s line %d: not a result row (%s): %r" % (
                    source, pending_bad[0], pending_bad[2], _short(pending_bad[1])))
            try:
                result["avg_busbw"] = float(match.group(1))
            except ValueError:
                raise RcclParseError("%s line %d: average bus bandwidth %r is not a number"
                                     % (source, number, match.group(1))) from None
            continue
        match = _OOB.match(stripped)
        if match:
            result["out_of_bounds"] = {"count": int(match.group(1)), "ok": match.group(2) == "OK"}
            continue
        if state == "footer" and not stripped.startswith("#") and pending_bad is None:
            result["warnings"].append("line %d after the table ignored: %r" % (number, _short(stripped)))

    if layout is None:
        where = "first line %d: %r" % first_text if first_text else "the output is empty"
        raise RcclParseError("%s: no rccl-tests/nccl-tests result table (no '#  size  count  type ... time  algbw  "
                             "busbw' column header line); %s" % (source, where))
    if not result["rows"]:
        reason = ("line %d: %r (%s)" % pending_bad) if pending_bad else "the output ends after the column header"
        raise RcclParseError("%s: the result table has no complete row; %s" % (source, reason))
    if pending_bad is not None:
        result["warnings"].append(
            "truncated run: line %d is not a complete row (%s): %r; kept the %d complete rows before it"
            % (pending_bad[0], pending_bad[2], _short(pending_bad[1]), len(result["rows"])))
    if result["avg_busbw"] is None:
        result["warnings"].append("no '# Avg bus bandwidth' footer: the run was truncated or failed; avg_busbw is null")
    else:
        result["complete"] = pending_bad is None
    if result["out_of_bounds"] and not result["out_of_bounds"]["ok"]:
        result["warnings"].append("%d out-of-bounds (wrong) values reported: results failed validation"
                                  % result["out_of_bounds"]["count"])
    params = result["params"]
    if params.get("minBytes") is not None and result["rows"][0]["size"] > params["minBytes"]:
        result["warnings"].append("the rows start at %d B but the run's minBytes is %d: smaller sizes are missing "
                                  "(edited or partial output)" % (result["rows"][0]["size"], params["minBytes"]))
    if params.get("maxBytes") is not None and result["rows"][-1]["size"] < params["maxBytes"]:
        result["warnings"].append("the rows end at %d B but the run's maxBytes is %d: larger sizes are missing"
                                  % (result["rows"][-1]["size"], params["maxBytes"]))
    if any(row["errors_flagged"] for row in result["rows"]):
        result["warnings"].append("rows with errors over the threshold (marked '*'): results failed validation")
    _finish(result)
    return result


def _finish(result):
    ranks = result["ranks"]
    if ranks:
        result["n_ranks"] = len(ranks)
        result["device_names"] = sorted({r["name"] for r in ranks if r["name"]})
        result["hosts"] = sorted({r["host"] for r in ranks})
    busbw = [cells["busbw"] for row in result["rows"] for cells in (row["out_of_place"], row["in_place"])
             if cells and cells["busbw"] is not None]
    result["peak_busbw"] = max(busbw) if busbw else None


def row_busbw(row):
    """Best bus bandwidth of one row over out-of-place and in-place (None when neither is known)."""
    values = [c["busbw"] for c in (row["out_of_place"], row["in_place"]) if c and c["busbw"] is not None]
    return max(values) if values else None


def resolve_generation(expectations, generation=None, device_ids=None, device_names=None, generations=None):
    """Name of the expectation entry for a run: explicit, by PCI device id, or by the device name printed.

    ``generations`` is the ``generations`` list of knowledge/gpu_generations.yml (for device ids).
    Returns ``(name or None, how)``.
    """
    entries = (expectations or {}).get("generations") or []
    names = {}
    for entry in entries:
        for name in [entry.get("name")] + list(entry.get("aliases") or []):
            if name:
                names[str(name).upper()] = entry["name"]
    if generation:
        return names.get(str(generation).upper(), generation), "given"
    for gen in generations or []:
        ids = {str(d).lower() for d in gen.get("device_ids") or []}
        if any(str(d).lower() in ids for d in device_ids or []):
            for name in [gen.get("name")] + list(gen.get("aliases") or []):
                if name and str(name).upper() in names:
                    return names[str(name).upper()], "device id"
            return gen.get("name"), "device id"
    for device_name in device_names or []:
        words = re.findall(r"[A-Za-z0-9]+", str(device_name).upper())
        for word in words:
            if word in names:
                return names[word], "device name %r" % device_name
    return None, "unknown"


def compare_busbw(result, expectations, generation):
    """Compare a parsed run with the expected busbw of ``generation`` at the reference message size."""
    out = {"generation": generation, "expected_busbw": None, "measured_busbw": None, "message_bytes": None,
           "ratio": None, "status": "unknown", "reason": None, "reference": None, "source": None}
    entry = None
    for item in (expectations or {}).get("generations") or []:
        if generation and item.get("name") == generation:
            entry = item
    if not generation:
        out["reason"] = "GPU generation unknown (give `generation`, or a topology with device ids)"
        return out
    if entry is None:
        out["reason"] = "no expectation entry for %s in rccl_expectations" % generation
        return out
    out["source"] = entry.get("source")
    out["reference"] = entry.get("reference")
    if entry.get("busbw_gbs") is None:
        out["reason"] = "no sourced busbw figure for %s (rccl_expectations has null)" % generation
        return out
    expected = float(entry["busbw_gbs"])
    out["expected_busbw"] = expected
    size = entry.get("message_bytes")
    out["message_bytes"] = size
    ranks = entry.get("ranks")
    if ranks and result.get("n_ranks") and result["n_ranks"] != ranks:
        out["reason"] = "reference has %d ranks, this run %d: busbw not comparable" % (ranks, result["n_ranks"])
        return out
    row = next((r for r in result.get("rows") or [] if r["size"] == size), None)
    if row is None or row_busbw(row) is None:
        out["reason"] = ("the run has no %s-byte row (the reference message size); rerun with -e covering it"
                         % size)
        return out
    measured = row_busbw(row)
    out["measured_busbw"] = measured
    out["ratio"] = round(measured / expected, 3) if expected else None
    tolerance = float((expectations or {}).get("tolerance", 0.1))
    if measured >= expected * (1.0 - tolerance):
        out["status"] = "ok"
        out["reason"] = "%.2f GB/s at %d B is within %d%% of the %s reference %.2f GB/s" % (
            measured, size, round(tolerance * 100), generation, expected)
    else:
        out["status"] = "below"
        out["reason"] = "%.2f GB/s at %d B is more than %d%% below the %s reference %.2f GB/s" % (
            measured, size, round(tolerance * 100), generation, expected)
    return out
