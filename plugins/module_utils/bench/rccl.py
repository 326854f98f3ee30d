"""Parse rccl-tests / nccl-tests ``*_perf`` output (all_reduce_perf and friends) into a dict.

Public API (standard library only, Python 3.8+):

``RcclParseError(TopotuneError)``
    Output that holds no usable result table; the one-line message quotes the line and says why.
``detect(text)``
    True when ``text`` is rccl-tests / nccl-tests perf output: a line of the parameter header (``nThread 1 nGpus 8
    ...``), the column header (``size count type redop ...``) or the ``Avg bus bandwidth`` footer, after any launcher
    prefix (``bin/topotune parse`` picks the tool of a file by it).
``parse_perf(text, source="output")``
    The parsed run (see ``_new_result``): ``rows`` (one per message size of the first cycle, each with
    ``size`` in bytes, ``count``, ``type``, ``redop``, ``root`` and ``out_of_place`` / ``in_place`` each
    holding ``time_us``, ``algbw``, ``busbw`` (GB/s) and ``wrong`` (``#wrong`` count) or ``error`` (old
    layouts, max relative error); a group the run did not print is ``None``), ``n_cycles`` and
    ``extra_cycles`` (rows of cycles 2.. of ``-N`` / ``-s`` runs), ``avg_busbw`` (the footer, ``None``
    when absent), ``peak_busbw``, header facts (``params``, ``ranks``, ``n_ranks``, ``hosts``,
    ``device_names``, ``versions``, ``hostname``, ``collective``), ``format``, ``columns``, ``groups``,
    ``complete``, ``failed`` with the tool's own ``failures`` lines, ``wrong_rows``, ``prefixes`` (launcher
    or log prefixes removed) and ``warnings``.
    Accepted: launcher and log prefixes (Open MPI ``--tag-output``, ``srun --label``, timestamps, host
    names: learned from the lines the tool always prints, then removed from every line), header lines
    pasted without their ``#``, old and new column layouts (read from the column header line), in-place-
    or out-of-place-only runs, repeated cycles, ``#wrong`` in exponent form, ``NCCL_DEBUG`` lines.
    Refused with a one-line message: no table (a crashed run quotes the tool's error line), rows without
    their column header (grep-filtered output), a malformed row with rows after it.
    Cycles follow the tools' own rule (``TimeTest`` in rccl-tests / nccl-tests ``src/common.cu``): within a
    cycle the printed sizes never decrease but may repeat (alltoall on many ranks prints several size-0
    rows); a cycle restarts on a smaller size, a ``# Testing N cycle.`` line, or a repeat once the cycle holds
    every size of the run's sweep.
``sweep_sizes(min_bytes, max_bytes, step)``
    The nominal sizes of one cycle of a sweep as the header prints it (``step`` ``2(factor)`` / ``N(bytes)``).
``load_expectations(data)`` / ``compare_busbw(result, expectations, generation)``
    Compare a parsed run with AMD's published RCCL pass criteria of a GPU generation
    (``knowledge/rccl_expectations.yml``), for the rank count AMD states: in-place busbw at the message size
    AMD states (``busbw_at_size``) or AMD's average bus bandwidth of its sweep (``avg_busbw``, MI210). Every
    minimum AMD's pages state is a bound with its sources; the status is ``ok``, ``warn`` (AMD's pages
    disagree and the run passes only the lower bound), ``below``, ``failed`` (the compared measurement failed
    validation) or ``unknown``, with a reason naming the pages.
"""

import math
import re

from ..core.errors import TopotuneError

PER_OP_KEYS = ("time_us", "algbw", "busbw")
GROUPS = ("out_of_place", "in_place")
_LEAD_ALIASES = {"size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type", "redop": "redop",
                 "op": "redop", "root": "root"}
_OP_COLUMNS = {"time": "time_us", "cputime": "time_us", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong",
               "wrong": "wrong", "error": "error", "res": "error"}
_QUOTE = 160

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Lines the tools always print: what stands before them on a line is a launcher or log prefix.
_ANCHOR = re.compile(
    r"#*[ \t]*(?:nThreads?[ \t]+\d+[ \t]+nGpus\b|(?:size[ \t]+count|bytes[ \t]+N)[ \t]+type\b|"
    r"Avg bus bandwidth[ \t]*:|Out of bounds values[ \t]*:|Using devices\b|"
    r"Rank[ \t]+\d+[ \t]+(?:Group[ \t]+\d+[ \t]+)?(?:Pid[ \t]+\d+[ \t]+)?on[ \t]|"
    r"Collective test (?:starting|concluded)|(?:rccl|nccl)-tests:?[ \t]+[Vv]ersion\b)")
_RANK = re.compile(r"^#*\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_DEBUG = re.compile(r"^\S+:\d+:\d+ \[\d+\] (?:NCCL|RCCL) ")
_DEBUG_WARN = re.compile(r"^\S+:\d+:\d+ \[\d+\] (?:NCCL|RCCL) WARN ")
_AVG = re.compile(r"^#*\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?\s*$")
_OOB = re.compile(r"^#*\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_COLLECTIVE = re.compile(r"^#*\s*Collective test (starting|concluded)\s*:\s*(\S+)")
_CYCLE = re.compile(r"^#*\s*Testing\s+(\d+)\s+cycles?\b", re.IGNORECASE)
_REDUCED = re.compile(r"^#*\s*Reducing maxBytes to (\d+)")
_IGNORED = re.compile(r"^#*\s*(?:Errors with asterisks|Using devices\s*$|(?:Blocking|Parallel Init) Enabled)")
_GROUP_LINE = re.compile(r"^#*\s*((?:(?:out-of-place|in-place)\s*){1,2})$")
_UNITS = re.compile(r"^#*\s*\(B\)")
# nccl-tests >= 2.13 and rccl-tests >= 2.17 (rocm-systems): '# rccl-tests version 2.17.9-develop:2596ca5f71
# rccl-headers=22803 rccl-library=22707'
_NCCL_TESTS_VERSION = re.compile(r"^#*\s*([nr]ccl)-tests\s+version\s+(\S+)(.*)$", re.IGNORECASE)
_TOOL_VERSION = re.compile(r"^#*\s*(rccl-tests|nccl-tests)\s*:?\s*[Vv]ersion\s*(.*?)\s*$")
_KEY_VALUE = re.compile(r"^#*\s*(RCCL version|NCCL version|HIP version|ROCm version|Hostname|Librccl path|Libnccl path)"
                        r"\s*:?\s*(.*?)\s*$")
_PARAMS_LINE = re.compile(r"^#*\s*nThreads?\s+\d+")
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
# The tools' own failure lines (nccl-tests/rccl-tests common.cu, MPI launchers, the C runtime).
_FAILURE = re.compile(
    r"\bTest (?:\w+ )?failure\b|\bTest timeout\b|^\[ERROR\]|\bMPI_ABORT\b|^srun: error:|\bSegmentation fault\b|"
    r"\bcore dumped\b|^terminate called\b|\bFailed, (?:NCCL|RCCL|HIP|CUDA|MPI) error\b|"
    r"invalid sizes for 'minbytes'|\bexited on signal\b|returned a non-zero exit code|\bBus error\b")
_WORD = re.compile(r"^[A-Za-z_][\w.+-]*$")
_INT = re.compile(r"^-?\d+$")


class RcclParseError(TopotuneError):
    """rccl-tests / nccl-tests output without a usable result table."""


def _short(line, limit=80):
    line = line.strip()
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _shape(prefix):
    """A regex matching ``prefix`` and the same prefix on other lines (digits vary, stdout/stderr tags)."""
    parts = []
    for token in re.findall(r"\d+|\s+|<std(?:out|err|diag)>|.", prefix):
        if token.isdigit():
            part = r"\d+"
        elif token.isspace():
            part = r"\s*"
        elif token.startswith("<std"):
            part = "<std(?:out|err|diag)>"
        else:
            part = re.escape(token)
        if not (parts and parts[-1] == part == r"\s*"):
            parts.append(part)
    return "".join(parts)


def _learn_prefixes(lines):
    """Prefix patterns seen before the lines the tool always prints (at least twice, or on its only such line)."""
    shapes, anchors = {}, 0
    for line in lines:
        match = None if _DEBUG.match(line.strip()) else _ANCHOR.search(line)
        if match is None:
            continue
        anchors += 1
        prefix = line[:match.start()]
        if not prefix.strip() or not prefix.strip().strip("#").strip():
            continue
        if not re.search(r"[^\d\s]", prefix):
            continue    # digits alone would eat the size column of rows
        shape = _shape(prefix)
        shapes[shape] = shapes.get(shape, 0) + 1
    return sorted(shape for shape, seen in shapes.items() if seen >= 2 or anchors == 1)


def _strip_prefix(line, pattern):
    for _attempt in range(3):
        match = pattern.match(line)
        if match is None or not match.group(0):
            break
        line = line[match.end():]
    return line


def _columns_from_header(tokens):
    """Map the column header tokens to (lead column names, [per-op column names] x groups), or None."""
    if not tokens:
        return None
    lowered = [t.lower() for t in tokens]
    try:
        first_time = next(i for i, t in enumerate(lowered) if t in ("time", "cputime"))
    except StopIteration:
        return None
    lead = [_LEAD_ALIASES.get(t) for t in lowered[:first_time]]
    if lead[:3] != ["size", "count", "type"] or None in lead or len(set(lead)) != len(lead):
        return None
    ops, current = [], None
    for token in lowered[first_time:]:
        if token in ("time", "cputime"):
            current = []
            ops.append(current)
        name = _OP_COLUMNS.get(token)
        if name is None or name in current:
            return None
        current.append(name)
    if not 1 <= len(ops) <= 2 or any(not all(k in group for k in PER_OP_KEYS) for group in ops):
        return None
    return lead, ops


def _number(token, kind):
    """Parse one cell; ``N/A`` is None. Returns (value, flagged) or raises ValueError."""
    flagged = token.endswith("*")
    token = token.rstrip("*")
    if token.upper() == "N/A":
        return None, flagged
    if kind == "count":
        # '#wrong' is printed with %g: 1048576 wrong elements read '1.04858e+06'
        value = float(token)
        if not math.isfinite(value) or value < 0:
            raise ValueError("#wrong %r is not a count" % token)
        return (int(value) if value == int(value) else value), flagged
    value = float(token)
    if not math.isfinite(value):
        raise ValueError("%r is not a finite number" % token)
    if kind == "positive" and value < 0:
        raise ValueError("%r is negative" % token)
    return value, flagged


_CELL_KIND = {"wrong": "count", "error": "float", "time_us": "positive", "algbw": "positive", "busbw": "positive"}


def _parse_row(tokens, lead, ops, group_names):
    expected = len(lead) + sum(len(g) for g in ops)
    if len(tokens) != expected:
        raise ValueError("%d fields, the column header has %d" % (len(tokens), expected))
    row = {"size": None, "count": None, "type": None, "redop": None, "root": None}
    for name, token in zip(lead, tokens):
        if name in ("size", "count", "root"):
            if not _INT.match(token) or (name != "root" and token.startswith("-")):
                raise ValueError("%s %r is not an integer" % (name, token))
            row[name] = int(token)
        elif not _WORD.match(token):
            raise ValueError("%s %r is not a name" % (name, token))
        else:
            row[name] = token
    position = len(lead)
    flagged = False
    for group, group_name in zip(ops, group_names):
        cells = {}
        for name in group:
            value, flag = _number(tokens[position], _CELL_KIND[name])
            flagged = flagged or flag
            cells[name] = value
            position += 1
        row[group_name] = cells
    for group_name in GROUPS:
        row.setdefault(group_name, None)
    row["errors_flagged"] = flagged
    return row


def _looks_like_row(tokens):
    """A line whose first fields are size and count: a result row, whole or damaged."""
    return len(tokens) >= 2 and _INT.match(tokens[0]) is not None and not tokens[0].startswith("-") \
        and _INT.match(tokens[1]) is not None


def _decode_nccl_code(code):
    """NCCL_VERSION_CODE (22606 -> 2.26.6; 2804 -> 2.8.4)."""
    try:
        value = int(code)
    except ValueError:
        return None
    if value >= 10000:
        return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
    if value >= 1000:
        return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)
    return None


# A sweep longer than this is not enumerated (rccl-tests -i 1 over gigabytes): its length is computed, its
# sizes are not listed.
_MAX_LISTED_SIZES = 4096


def sweep_sizes(min_bytes, max_bytes, step):
    """The nominal message sizes of one rccl-tests / nccl-tests cycle, in order, or None when unknown or endless.

    The tools' loop (``TimeTest`` in rccl-tests and nccl-tests ``src/common.cu``) is
    ``for (size = minbytes; size <= maxbytes; size = stepfactor > 1 ? size * stepfactor : size + stepbytes)``;
    the header prints the step as ``N(factor)`` or ``N(bytes)``. A sweep that never ends (``-b 0`` with a
    factor, a step of 0 bytes) has no length. Sweeps of more than ``_MAX_LISTED_SIZES`` sizes return None.
    """
    step = re.match(r"^(\d+)\((factor|bytes)\)$", str(step or ""))
    if min_bytes is None or max_bytes is None or step is None or min_bytes > max_bytes:
        return None
    value, kind = int(step.group(1)), step.group(2)
    sizes, size = [], min_bytes
    if kind == "factor" and value > 1:
        if min_bytes == 0:
            return None
        while size <= max_bytes:
            sizes.append(size)
            size *= value
        return sizes
    if kind == "bytes" and value > 0:
        if (max_bytes - min_bytes) // value + 1 > _MAX_LISTED_SIZES:
            return None
        return list(range(min_bytes, max_bytes + 1, value))
    return None


def _sweep_length(min_bytes, max_bytes, step):
    """How many rows one cycle of the sweep prints (per data type / op / root), or None when unknown or endless."""
    sizes = sweep_sizes(min_bytes, max_bytes, step)
    if sizes is not None:
        return len(sizes)
    match = re.match(r"^(\d+)\(bytes\)$", str(step or ""))
    if match and int(match.group(1)) > 0 and min_bytes is not None and max_bytes is not None and min_bytes <= max_bytes:
        return (max_bytes - min_bytes) // int(match.group(1)) + 1
    return None


def _parse_header_facts(stripped, result):
    """Rank, version, key/value and run-parameter lines; True when the line was one of those."""
    match = _RANK.match(stripped)
    if match:
        rank, group, pid, host, device, bus, name = match.groups()
        result["ranks"].append({"rank": int(rank), "group": None if group is None else int(group),
                                "pid": None if pid is None else int(pid), "host": host, "device": int(device),
                                "bus_id": bus, "name": name or None})
        return True
    match = _NCCL_TESTS_VERSION.match(stripped)
    if match:
        lib = match.group(1).lower()
        result["versions"][lib + "_tests"] = match.group(2)
        for key, value in re.findall(r"\b([nr]ccl-(?:headers|library))=(\S+)", match.group(3)):
            key = key.lower()
            result["versions"][key.replace("-", "_")] = value
            # the library's own 'RCCL version :' line, printed later, is more precise and replaces this
            if key.endswith("-library") and _decode_nccl_code(value) and key[:4] not in result["versions"]:
                result["versions"][key[:4]] = _decode_nccl_code(value)
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
    if _PARAMS_LINE.match(stripped):
        for key, regex, kind in _PARAMS:
            found = regex.search(stripped)
            if found:
                result["params"][key] = kind(found.group(1))
        return True
    return False


def _new_result(source):
    return {"source": source, "format": None, "collective": None, "columns": [], "groups": [], "params": {},
            "ranks": [], "n_ranks": None, "device_names": [], "hosts": [], "versions": {}, "hostname": None,
            "library_path": None, "rows": [], "n_cycles": 0, "extra_cycles": [], "avg_busbw": None,
            "avg_busbw_check": None, "peak_busbw": None, "out_of_bounds": None, "wrong_rows": [],
            "complete": False, "failed": False, "failures": [], "max_bytes_reduced": None, "prefixes": [],
            "debug_lines": 0, "warnings": []}


def _split_lines(text, source):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise RcclParseError("%s: expected text, got %s" % (source, type(text).__name__))
    text = _CONTROL.sub("", _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    return text.split("\n")


class _Parser:
    """One pass over the lines; ``run()`` returns the result dict or raises RcclParseError."""

    def __init__(self, text, source):
        self.source = source
        self.result = _new_result(source)
        raw = _split_lines(text, source)
        self.result["prefixes"] = _learn_prefixes(raw)
        if self.result["prefixes"]:
            pattern = re.compile("(?:%s)" % "|".join(self.result["prefixes"]))
            raw = [_strip_prefix(line, pattern) for line in raw]
        self.lines = raw
        self.layout = None          # (lead, ops, group names)
        self.group_order = None     # from the 'out-of-place  in-place' line
        self.state = "preamble"     # preamble -> table -> footer
        self.pending_bad = None     # (line number, text, why) of a damaged row
        self.cycles = []            # [(cycle index, row)]
        self.series = {}            # (type, redop, root) -> [cycle index, last size, rows in the cycle]
        self.restart = False        # a '# Testing N cycle.' line was seen: the next row starts a cycle
        self.first_text = None
        self.orphan_rows = []       # row-like lines before any column header
        self.noise = 0

    def warn(self, message):
        self.result["warnings"].append(message)

    def run(self):
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if stripped:
                self._line(number, stripped)
        return self._finish()

    # --- one line ------------------------------------------------------------------------------------

    def _line(self, number, stripped):
        result = self.result
        if self.state == "done":
            return
        if self.first_text is None:
            self.first_text = (number, stripped)
        if _DEBUG.match(stripped):
            result["debug_lines"] += 1
            if _DEBUG_WARN.match(stripped):
                result.setdefault("debug_warnings", []).append({"line": number, "text": _short(stripped, _QUOTE)})
            return
        if _FAILURE.search(stripped):
            result["failures"].append({"line": number, "text": _short(stripped, _QUOTE)})
            return
        if self._special(number, stripped):
            return
        tokens = stripped.lstrip("#").split() if stripped.startswith("#") else stripped.split()
        columns = _columns_from_header(tokens)
        if columns:
            self._header(number, stripped, columns)
            return
        if self.state == "preamble":
            self._preamble(number, stripped, tokens)
        elif self.state == "table":
            self._table(number, stripped)
        elif not stripped.startswith("#"):
            if _looks_like_row(stripped.split()):
                self.warn("line %d after the footer ignored (a row after '# Avg bus bandwidth'): %r"
                          % (number, _short(stripped)))
            else:
                self.warn("line %d after the table ignored: %r" % (number, _short(stripped)))

    def _special(self, number, stripped):
        """Lines that mean the same anywhere in the output; True when handled."""
        result = self.result
        match = _COLLECTIVE.match(stripped)
        if match:
            if match.group(1) == "starting" and result["collective"] is None:
                result["collective"] = match.group(2)
            return True
        if _CYCLE.match(stripped):
            self.restart = True     # rccl-tests prints it before each cycle of -s / -N (1 included when N > 1)
            return True
        match = _REDUCED.match(stripped)
        if match:
            result["max_bytes_reduced"] = int(match.group(1))
            return True
        match = _AVG.match(stripped)
        if match:
            self._avg(number, match)
            return True
        match = _OOB.match(stripped)
        if match:
            result["out_of_bounds"] = {"count": int(match.group(1)), "ok": match.group(2) == "OK"}
            if self.state == "table":
                self.state = "footer"
            return True
        if _UNITS.match(stripped) or _IGNORED.match(stripped):
            return True
        match = _GROUP_LINE.match(stripped)
        if match:
            names = match.group(1).split()
            if self.layout is None:
                self.group_order = ["in_place" if n == "in-place" else "out_of_place" for n in names]
            return True
        return False

    def _avg(self, number, match):
        result = self.result
        if self.pending_bad is not None:
            raise RcclParseError("%s line %d: not a result row (%s): %r" % (
                self.source, self.pending_bad[0], self.pending_bad[2], _short(self.pending_bad[1])))
        try:
            value = float(match.group(1))
        except ValueError:
            raise RcclParseError("%s line %d: average bus bandwidth %r is not a number"
                                 % (self.source, number, match.group(1))) from None
        if result["avg_busbw"] is None:
            result["avg_busbw"] = value if math.isfinite(value) else None
            result["avg_busbw_check"] = match.group(2)
        if self.layout is not None:
            self.state = "footer"

    def _header(self, number, stripped, columns):
        result = self.result
        if self.layout is not None:
            if self.state == "footer":
                self.warn("line %d starts another run (a second column header after the footer); only the first "
                          "run is parsed: split the file" % number)
                self.state = "done"
            return      # the header printed again inside the table: the sizes tell the cycles apart
        lead, ops = columns
        order = self.group_order or list(GROUPS)
        if len(ops) == 1 and not self.group_order:
            self.warn("line %d: one column group and no 'in-place'/'out-of-place' label line above it: taken as "
                      "out-of-place" % number)
        if len(order) != len(ops):
            order = list(GROUPS[:len(ops)]) if len(ops) == 2 else order[:1]
        self.layout = (lead, ops, order[:len(ops)])
        result["columns"] = stripped.lstrip("#").split()
        result["groups"] = order[:len(ops)]
        result["format"] = "new" if any("wrong" in g for g in ops) else "old"
        self.state = "table"
        if self.orphan_rows:
            self.warn("%d row-like line(s) before the column header ignored (first: line %d)"
                      % (len(self.orphan_rows), self.orphan_rows[0][0]))

    def _preamble(self, number, stripped, tokens):
        if _parse_header_facts(stripped, self.result):
            return
        if _looks_like_row(tokens):
            self.orphan_rows.append((number, stripped))
            return
        if not stripped.startswith("#"):
            self.warn("line %d before the table ignored: %r" % (number, _short(stripped)))

    def _table(self, number, stripped):
        tokens = stripped.split()
        if stripped.startswith("#"):
            if _parse_header_facts(stripped, self.result):
                return
            return    # a comment inside the table ('#' lines of other tools, '#' alone)
        if not _looks_like_row(tokens):
            self.noise += 1
            self.warn("line %d inside the table ignored (not a result row): %r" % (number, _short(stripped)))
            return
        try:
            row = _parse_row(tokens, *self.layout)
        except ValueError as err:
            if self.pending_bad is None:
                self.pending_bad = (number, stripped, str(err))
            return
        if self.pending_bad is not None:
            raise RcclParseError("%s line %d: not a result row (%s): %r; rows follow it, so the output is not a "
                                 "clean truncated run" % (self.source, self.pending_bad[0], self.pending_bad[2],
                                                          _short(self.pending_bad[1])))
        self._add_row(row)

    def _add_row(self, row):
        """Rows of one series (type, redop, root) in cycles, by the tools' own rule.

        rccl-tests and nccl-tests (``TimeTest``, ``src/common.cu``) print one row per size of the sweep, per
        cycle (``-N`` run_cycles, rccl-tests ``-s`` stress_cycles), for each data type, op and root in turn. The
        printed size is ``max(sendBytes, expectedBytes)`` after ``setupArgs`` rounds the element count down to
        what the collective can split (alltoall: a multiple of the rank count; all_gather / reduce_scatter:
        of ALIGN x ranks; nccl-tests alltoall also to 16-byte chunks), so within a cycle sizes never decrease
        but can repeat: alltoall on 8 or 16 ranks prints the smallest sizes of ``-b 8``/``-b 16`` as several
        size-0 rows. A new cycle starts with a smaller size, after a ``# Testing N cycle.`` line, or with a
        repeated size once the cycle holds every size of the run's sweep (a one-size sweep run several times);
        without the run's header, a repeated size 0 is rounding and another repeated size a new cycle.
        """
        key = (row["type"], row["redop"], row["root"])
        entry = self.series.get(key)
        restart, self.restart = self.restart, False
        if entry is None:
            entry = [0, row["size"], 1]
        elif restart or row["size"] < entry[1] or (row["size"] == entry[1] and not self._repeat_in_cycle(row, entry)):
            entry = [entry[0] + 1, row["size"], 1]
        else:
            entry = [entry[0], row["size"], entry[2] + 1]
        self.series[key] = entry
        self.cycles.append((entry[0], row))

    def _repeat_in_cycle(self, row, entry):
        """True when a row repeating the last size belongs to the same cycle (rounding, not a restart)."""
        params = self.result["params"]
        length = _sweep_length(params.get("minBytes"), self.result["max_bytes_reduced"] or params.get("maxBytes"),
                               params.get("step"))
        if length is None:
            return row["size"] == 0
        return entry[2] < length

    # --- end -----------------------------------------------------------------------------------------

    def _refuse_without_table(self):
        result, source = self.result, self.source
        if result["failures"]:
            first = result["failures"][0]
            raise RcclParseError("%s: the run failed before printing a result table: line %d: %r (%d failure "
                                 "line(s) in the output)" % (source, first["line"], first["text"], len(result["failures"])))
        if self.orphan_rows:
            number, text = self.orphan_rows[0]
            raise RcclParseError(
                "%s line %d: result rows without their column header (%d row-like line(s), first %r): the output "
                "was filtered or cut (grep?), so which columns are out-of-place / in-place and #wrong cannot be "
                "known; give the whole output" % (source, number, len(self.orphan_rows), _short(text)))
        where = "first line %d: %r" % (self.first_text[0], _short(self.first_text[1])) if self.first_text \
            else "the output is empty"
        raise RcclParseError("%s: no rccl-tests/nccl-tests result table (no '#  size  count  type ... time  algbw  "
                             "busbw' column header line); %s" % (source, where))

    def _finish(self):
        result, source = self.result, self.source
        if self.layout is None:
            self._refuse_without_table()
        if not self.cycles:
            if result["failures"]:
                first = result["failures"][0]
                raise RcclParseError("%s: the run failed before its first result row: line %d: %r"
                                     % (source, first["line"], first["text"]))
            reason = ("line %d: %r (%s)" % (self.pending_bad[0], _short(self.pending_bad[1]), self.pending_bad[2])
                      if self.pending_bad else "the output ends after the column header")
            raise RcclParseError("%s: the result table has no complete row; %s" % (source, reason))
        n_cycles = max(c for c, _unused in self.cycles) + 1
        result["rows"] = [row for cycle, row in self.cycles if cycle == 0]
        result["extra_cycles"] = [[row for cycle, row in self.cycles if cycle == n] for n in range(1, n_cycles)]
        result["n_cycles"] = n_cycles
        if self.pending_bad is not None:
            self.warn("truncated run: line %d is not a complete row (%s): %r; kept the %d complete rows before it"
                      % (self.pending_bad[0], self.pending_bad[2], _short(self.pending_bad[1]), len(self.cycles)))
        if result["failures"]:
            result["failed"] = True
            first = result["failures"][0]
            self.warn("the run reported a failure: line %d: %r%s" % (
                first["line"], first["text"], "" if len(result["failures"]) == 1
                else " (and %d more failure line(s))" % (len(result["failures"]) - 1)))
        if result["avg_busbw"] is None:
            self.warn("no '# Avg bus bandwidth' footer: the run was truncated or failed; avg_busbw is null")
        else:
            result["complete"] = self.pending_bad is None
        if result["avg_busbw_check"] == "FAILED":
            result["failed"] = True
            self.warn("the average bus bandwidth is below NCCL_TESTS_MIN_BW (the footer says FAILED)")
        oob = result["out_of_bounds"]
        if oob and not oob["ok"]:
            result["failed"] = True
            self.warn("%d out-of-bounds (wrong) values reported: results failed validation" % oob["count"])
        self._validation()
        self._sweep_checks()
        self._facts()
        return result

    def _validation(self):
        result = self.result
        for cycle, row in self.cycles:
            wrong = {g: row[g]["wrong"] for g in GROUPS if row[g] and row[g].get("wrong")}
            if wrong:
                result["wrong_rows"].append(dict(size=row["size"], cycle=cycle + 1, **wrong))
        if result["wrong_rows"]:
            result["failed"] = True
            first = result["wrong_rows"][0]
            self.warn("non-zero #wrong in %d row(s), first at %d B (%s): results failed validation" % (
                len(result["wrong_rows"]), first["size"],
                ", ".join("%s %s" % (g.replace("_", "-"), first[g]) for g in GROUPS if g in first)))
        if any(row["errors_flagged"] for _cycle, row in self.cycles):
            result["failed"] = True
            self.warn("rows with errors over the threshold (marked '*'): results failed validation")

    def _sweep_checks(self):
        """Rows missing at either end or inside the sweep, from the run's own minBytes/maxBytes/step."""
        result = self.result
        params = result["params"]
        rows = result["rows"]
        key = (rows[0]["type"], rows[0]["redop"], rows[0]["root"])
        sizes = [r["size"] for r in rows if (r["type"], r["redop"], r["root"]) == key]
        low, high = params.get("minBytes"), result["max_bytes_reduced"] or params.get("maxBytes")
        if len(sizes) == _sweep_length(low, high, params.get("step")):
            return      # one row per size of the run's own sweep: nothing is missing
        step = re.match(r"^(\d+)\((factor|bytes)\)$", str(params.get("step", "")))
        if low is not None and sizes[0] > low:
            self.warn("the rows start at %d B but the run's minBytes is %d: smaller sizes are missing "
                      "(edited or partial output)" % (sizes[0], low))
        if step is None or low is None or high is None or low <= 0 or high < low:
            return
        value, kind = int(step.group(1)), step.group(2)
        factor = value if kind == "factor" and value > 1 else None
        increment = value if factor is None and value > 0 else None
        if factor is None and increment is None:
            return
        last = low
        if factor:
            while last * factor <= high:
                last *= factor
            previous = last // factor
        else:
            last = low + (high - low) // increment * increment
            previous = last - increment
        # printed sizes are rounded down to whole elements per rank, never up: a row above the step before the
        # last one is the last one
        if self.pending_bad is None and result["avg_busbw"] is not None and sizes[-1] <= previous and last > low:
            self.warn("the rows end at %d B but the run's sweep (minBytes %d, maxBytes %d, step %s) ends at %d B: "
                      "larger sizes are missing" % (sizes[-1], low, high, params["step"], last))
        gaps = [(a, b) for a, b in zip(sizes, sizes[1:])
                if (factor and a > 0 and b >= a * factor * 1.5) or (increment and b - a >= increment * 1.5)]
        if gaps:
            self.warn("sizes are missing inside the sweep, first between %d B and %d B (%d gap(s)): rows were "
                      "filtered or cut" % (gaps[0][0], gaps[0][1], len(gaps)))

    def _facts(self):
        result = self.result
        ranks = result["ranks"]
        if ranks:
            result["n_ranks"] = len(ranks)
            result["device_names"] = sorted({r["name"] for r in ranks if r["name"]})
            result["hosts"] = sorted({r["host"] for r in ranks})
        busbw = [cells["busbw"] for row in result["rows"] for cells in (row["out_of_place"], row["in_place"])
                 if cells and cells["busbw"] is not None]
        result["peak_busbw"] = max(busbw) if busbw else None


_DETECT = re.compile(r"#*[ \t]*(?:nThreads?[ \t]+\d+[ \t]+nGpus\b|(?:size[ \t]+count|bytes[ \t]+N)[ \t]+type\b|"
                     r"Avg bus bandwidth[ \t]*:)")


def detect(text):
    """See the module docstring."""
    return any(_DETECT.search(line) for line in _CONTROL.sub("", _ANSI.sub("", text or "")).splitlines())


def parse_perf(text, source="output"):
    """Parse rccl-tests / nccl-tests perf output; see the module docstring for the result."""
    return _Parser(text, source).run()


def row_busbw(row, column=None):
    """Bus bandwidth of one row: of ``column`` ('in_place'/'out_of_place'), or the better of both (None if unknown)."""
    groups = (column,) if column else GROUPS
    values = [row[g]["busbw"] for g in groups if row.get(g) and row[g].get("busbw") is not None]
    return max(values) if values else None


def load_expectations(data):
    """The expectations mapping (knowledge/rccl_expectations.yml), checked for the keys the comparison reads."""
    if not isinstance(data, dict) or not isinstance(data.get("generations"), list):
        raise RcclParseError("rccl_expectations has no `generations` list (pass lookup('topotune.instinct.knowledge', "
                             "'rccl_expectations'))")
    return data


def _size_text(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return "%d %s" % (size // factor, unit)
    return "%d B" % size


# rccl-tests prints busbw with "%6.2f" (BenchTime): a printed value is within half a hundredth of the measured one
_PRINTED_HALF = 0.005


def _pick_criterion(criteria, result):
    """The criterion for the run's rank count; (criterion, None) or (None, reason)."""
    n_ranks = result.get("n_ranks")
    if n_ranks:
        for criterion in criteria:
            if criterion.get("ranks") in (None, n_ranks):
                return criterion, None
        return None, ("AMD's criterion is for %s ranks; this run has %d ranks: busbw of other shapes is not "
                      "comparable" % (" or ".join(str(c.get("ranks")) for c in criteria), n_ranks))
    if len(criteria) == 1:
        return criteria[0], None
    return None, ("the run prints no rank lines and AMD's criteria differ by rank count (%s)"
                  % ", ".join(str(c.get("ranks")) for c in criteria))


def _bounds(criterion):
    """The criterion's minimums, lowest first: [{busbw_gbs, below (fail|warn), sources}]. ValueError if malformed.

    A criterion with a single ``busbw_gbs`` (no ``bounds`` list) is one ``fail`` bound.
    """
    raw = criterion.get("bounds")
    if raw is None and "busbw_gbs" in criterion:
        raw = [{"busbw_gbs": criterion["busbw_gbs"], "below": "fail",
                "sources": [{"document": criterion.get("reference"), "says": criterion.get("source")}]}]
    if not isinstance(raw, list) or not raw:
        raise ValueError("no bounds")
    bounds = []
    for bound in raw:
        value = float(bound["busbw_gbs"])
        below = bound.get("below", "fail")
        if not math.isfinite(value) or value <= 0 or below not in ("fail", "warn"):
            raise ValueError("bad bound")
        sources = [dict(source) for source in bound.get("sources") or [] if isinstance(source, dict)]
        bounds.append({"busbw_gbs": value, "below": below, "sources": sources})
    if not any(bound["below"] == "fail" for bound in bounds):
        raise ValueError("no fail bound")
    return sorted(bounds, key=lambda bound: (bound["busbw_gbs"], bound["below"] != "fail"))


def _documents(bound):
    """The pages a bound comes from, short: 'docs/gpus/mi355x.md, docs/gpus/mi350x.md'."""
    names = []
    for source in bound["sources"]:
        name = str(source.get("document") or "").split()[-1:] or ["rccl_expectations"]
        if name[0] not in names:
            names.append(name[0])
    return ", ".join(names) or "rccl_expectations"


def _source_text(bounds):
    parts = []
    for bound in bounds:
        for source in bound["sources"]:
            where = ", ".join(str(source[key])[:12] if key == "commit" else str(source[key])
                              for key in ("section", "commit") if source.get(key))
            parts.append("%s%s: %s" % (source.get("document") or "rccl_expectations",
                                       " (%s)" % where if where else "", " ".join(str(source.get("says", "")).split())))
    return "; ".join(parts)


def _judge(low, high, bounds):
    """Status for a measurement known to lie in [low, high], against ``bounds``: (status, deciding bound).

    ``below`` when it is under a fail bound for certain; ``unknown`` when it may be either side of one; past
    every fail bound, ``warn`` when it is (or may be) under a warn bound, else ``ok``: ``ok`` needs proof.
    """
    fails = [bound for bound in bounds if bound["below"] == "fail"]
    top_fail = fails[-1]
    if high < top_fail["busbw_gbs"]:
        return "below", next(bound for bound in fails if high < bound["busbw_gbs"])
    if low < top_fail["busbw_gbs"]:
        return "unknown", top_fail
    warns = [bound for bound in bounds if bound["below"] == "warn" and low < bound["busbw_gbs"]]
    if warns:
        return "warn", warns[0]
    return "ok", None


def _verdict_text(what, status, bound, bounds, generation, ranks):
    """'... meets / is below ...' for a decided status."""
    shape = "%s ranks" % (ranks or "any")
    fails = [b for b in bounds if b["below"] == "fail"]
    if status == "ok":
        if len(bounds) == 1:
            return "%s meets AMD's %s pass criterion (>= %g GB/s, %s: %s)" % (
                what, generation, bounds[0]["busbw_gbs"], shape, _documents(bounds[0]))
        return "%s meets every AMD %s criterion (%s; %s)" % (what, generation, "; ".join(
            ">= %g GB/s in %s" % (b["busbw_gbs"], _documents(b)) for b in bounds), shape)
    if status == "below":
        others = [b for b in bounds if b is not bound]
        return "%s is below AMD's %s pass criterion (>= %g GB/s, %s: %s)%s" % (
            what, generation, bound["busbw_gbs"], shape, _documents(bound),
            "; AMD's other figure%s: %s" % ("s" if len(others) > 1 else "", ", ".join(
                ">= %g GB/s in %s" % (b["busbw_gbs"], _documents(b)) for b in others)) if others else "")
    # warn: past every fail bound, under (or not shown to reach) a warn bound
    return ("%s meets AMD's %s criterion >= %g GB/s (%s) but not >= %g GB/s (%s): AMD's documents disagree; "
            "topotune fails under %g GB/s and warns below %g GB/s (%s)" % (
                what, generation, fails[-1]["busbw_gbs"], _documents(fails[-1]), bound["busbw_gbs"],
                _documents(bound), fails[-1]["busbw_gbs"], bound["busbw_gbs"], shape))


def _compared_rows(result, size):
    """Rows at ``size`` (one per cycle), of the float series when the run has several data types."""
    cycles = [result.get("rows") or []] + list(result.get("extra_cycles") or [])
    picked = []
    for rows in cycles:
        candidates = [r for r in rows if r.get("size") == size]
        if candidates:
            floats = [r for r in candidates if r.get("type") == "float"]
            picked.append((floats or candidates)[0])
    return picked


def _new_comparison(generation):
    return {"generation": generation, "kind": None, "status": "unknown", "reason": None, "expected_busbw": None,
            "measured_busbw": None, "ratio": None, "message_bytes": None, "column": None, "ranks": None,
            "bounds": [], "bound": None, "disagreement": None, "reference": None, "source": None, "compared": None,
            "observed": []}


def compare_busbw(result, expectations, generation):
    """Compare a parsed run with AMD's RCCL pass criterion of ``generation`` (``knowledge/rccl_expectations.yml``).

    ``kind`` busbw_at_size: the criterion's column (in-place) busbw at its message size, the worst of the run's
    cycles; ``kind`` avg_busbw: the run's '# Avg bus bandwidth' over AMD's sweep (see ``_average_over_sweep``).
    The status is ``ok``, ``warn`` (past every fail bound, under a warn bound: AMD's pages disagree), ``below``
    (under a fail bound), ``failed`` (the compared measurement failed validation) or ``unknown`` (the reason
    says why); ``bounds`` lists every minimum with its sources and ``bound`` the one that decided.
    """
    out = _new_comparison(generation)
    if not generation:
        out["reason"] = "GPU generation unknown (give `generation`, or a topology with device ids)"
        return out
    entry = next((item for item in (expectations or {}).get("generations") or []
                  if isinstance(item, dict) and item.get("name") == generation), None)
    if entry is None:
        out["reason"] = "no expectation entry for %s in rccl_expectations" % generation
        return out
    out["observed"] = list(entry.get("observed") or [])
    criteria = [c for c in entry.get("criteria") or []
                if isinstance(c, dict) and (c.get("bounds") is not None or c.get("busbw_gbs") is not None)]
    if not criteria:
        out["reason"] = "AMD publishes no RCCL pass criterion for %s in rccl_expectations" % generation
        out["source"] = entry.get("source")
        return out
    criterion, why = _pick_criterion(criteria, result)
    if criterion is None:
        out["reason"] = why
        return out
    kind = criterion.get("kind") or "busbw_at_size"
    try:
        bounds = _bounds(criterion)
        size = None if kind == "avg_busbw" else int(criterion["message_bytes"])
        sweep = _criterion_sweep(criterion) if kind == "avg_busbw" else None
    except (KeyError, TypeError, ValueError):
        out["reason"] = ("malformed criterion for %s in rccl_expectations (bounds with busbw_gbs and below, "
                         "message_bytes or sweep)" % generation)
        return out
    fail = next(bound for bound in bounds if bound["below"] == "fail")
    out.update(kind=kind, expected_busbw=fail["busbw_gbs"], ranks=criterion.get("ranks"), bounds=bounds,
               disagreement=criterion.get("disagreement"), reference=criterion.get("reference"),
               source=_source_text(bounds))
    collective = result.get("collective")
    wanted = criterion.get("collective")
    if collective and wanted and not str(collective).startswith(wanted):
        out["reason"] = "AMD's criterion is for %s; this run is %s" % (wanted, collective)
        return out
    hosts = result.get("hosts") or []
    if criterion.get("nodes") and len(hosts) > criterion["nodes"]:
        out["reason"] = "AMD's criterion is for %d node(s); this run spans %d hosts" % (criterion["nodes"], len(hosts))
        return out
    if kind == "avg_busbw":
        return _compare_average(out, result, criterion, sweep, bounds)
    return _compare_at_size(out, result, criterion, size, bounds)


def _compare_at_size(out, result, criterion, size, bounds):
    generation = out["generation"]
    column = criterion.get("column", "in_place")
    out.update(message_bytes=size, column=column)
    what = "%s busbw at %s (%d B)" % (column.replace("_", "-"), _size_text(size), size)
    rows = _compared_rows(result, size)
    if not rows:
        out["reason"] = ("the run has no %d-byte row (%s), the size AMD states; rerun with -e covering it "
                         "(%s)" % (size, _size_text(size), criterion.get("command") or "-b 8 -e 8G -f 2"))
        return out
    cells = [row.get(column) for row in rows]
    if any(not c or c.get("busbw") is None for c in cells):
        out["reason"] = "the run has no %s column at %s (an %s-only run?): AMD's criterion is %s" % (
            column.replace("_", "-"), _size_text(size),
            "out-of-place" if column == "in_place" else "in-place", what)
        return out
    out["compared"] = {"size": size, "column": column, "type": rows[0].get("type"), "redop": rows[0].get("redop"),
                       "cycles": len(rows)}
    bad = [row for row in rows if row.get("errors_flagged")
           or any((row.get(g) or {}).get("wrong") for g in GROUPS)]
    measured = min(c["busbw"] for c in cells)
    out["measured_busbw"] = measured
    out["ratio"] = round(measured / out["expected_busbw"], 3)
    cycles = "" if len(rows) == 1 else " (worst of %d cycles)" % len(rows)
    if bad:
        out["status"] = "failed"
        out["reason"] = ("the %s row failed data validation (#wrong or '*'): its busbw is not a valid measurement"
                         % _size_text(size))
        return out
    status, bound = _judge(measured, measured, bounds)
    out.update(status=status, bound=bound)
    out["reason"] = _verdict_text("%s %.2f GB/s%s" % (what, measured, cycles), status, bound, bounds, generation,
                                  criterion.get("ranks"))
    return out


def _criterion_sweep(criterion):
    sweep = criterion["sweep"]
    low, high, step = int(sweep["min_bytes"]), int(sweep["max_bytes"]), str(sweep["step"])
    sizes = sweep_sizes(low, high, step)
    if not sizes:
        raise ValueError("sweep")
    return {"min_bytes": low, "max_bytes": high, "step": step, "sizes": sizes}


def _sweep_text(low, high, step):
    return "%s .. %s, step %s" % (_size_text(low) if low is not None else "?", _size_text(high) if high is not None
                                  else "?", step or "?")


def _average_over_sweep(result, sizes, datatype, redop):
    """AMD's average over ``sizes`` from the run's printed rows: per cycle (low, high, value, present, expected).

    Every size contributes its out-of-place and in-place busbw (rccl-tests' default -O 1 measures both); a
    printed value is within 0.005 of the measured one; a size or column the run lacks counts as 0 for the lower
    bound and leaves no upper bound.
    """
    out = []
    for rows in [result.get("rows") or []] + list(result.get("extra_cycles") or []):
        by_size = {}
        for row in rows:
            if row.get("type") == datatype and row.get("redop") in (redop, None):
                by_size.setdefault(row.get("size"), row)
        expected = 2 * len(sizes)
        low = high = value = 0.0
        present = 0
        for size in sizes:
            row = by_size.get(size) or {}
            for group in GROUPS:
                cell = row.get(group) or {}
                if cell.get("busbw") is None:
                    continue
                present += 1
                value += cell["busbw"]
                low += max(cell["busbw"] - _PRINTED_HALF, 0.0)
                high += cell["busbw"] + _PRINTED_HALF
        out.append((low / expected, high / expected if present == expected else math.inf, value / expected,
                    present, expected))
    return out


def _arg_size(size):
    """A size as rccl-tests' -b/-e read it (8589934592 -> '8G')."""
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return str(size)


def _compare_average(out, result, criterion, sweep, bounds):
    """AMD's '# Avg bus bandwidth' criterion (MI210): the run's footer over AMD's sweep, or bounds from its rows."""
    generation, ranks = out["generation"], criterion.get("ranks")
    datatype, redop = criterion.get("datatype", "float"), criterion.get("redop", "sum")
    params = result.get("params") or {}
    run_sweep = (params.get("minBytes"), result.get("max_bytes_reduced") or params.get("maxBytes"), params.get("step"))
    amd = (sweep["min_bytes"], sweep["max_bytes"], sweep["step"])
    amd_text = "-b %s -e %s -f %s" % (_arg_size(amd[0]), _arg_size(amd[1]), amd[2].split("(")[0])
    rerun = "rerun AMD's command (%s)" % (criterion.get("command") or amd_text)
    compared = {"sweep": {"min_bytes": amd[0], "max_bytes": amd[1], "step": amd[2], "sizes": len(sweep["sizes"])},
                "run_sweep": {"min_bytes": run_sweep[0], "max_bytes": run_sweep[1], "step": run_sweep[2]},
                "type": datatype, "redop": redop, "cycles": result.get("n_cycles") or 1, "from": None,
                "range": None, "cells": None, "cells_expected": 2 * len(sweep["sizes"])}
    out["compared"] = compared
    if result.get("failed"):
        out["status"] = "failed"
        first = next((w for w in result.get("warnings") or [] if "fail" in w.lower() or "wrong" in w.lower()),
                     "the run failed validation")
        out["reason"] = ("the run failed (%s): its average bus bandwidth is not a valid measurement for AMD's %s "
                         "criterion" % (first, generation))
        return out
    per_cycle = _average_over_sweep(result, sweep["sizes"], datatype, redop)
    present = min(cycle[3] for cycle in per_cycle)
    compared["cells"] = present
    if result.get("avg_busbw") is None:
        last = (result.get("rows") or [{}])[-1].get("size")
        hint = " (its rows alone average at least %.2f GB/s over AMD's sweep)" % min(c[0] for c in per_cycle) \
            if present else ""
        out["reason"] = ("the run did not finish: no '# Avg bus bandwidth' line (rows end at %s; the run's sweep: %s)%s;"
                         " AMD's %s criterion is the average bus bandwidth of its whole sweep (%s), so a cut or "
                         "unfinished run is never a pass: %s" % (
                             _size_text(last) if isinstance(last, int) else "?", _sweep_text(*run_sweep), hint,
                             generation, amd_text, rerun))
        return out
    keys = {(row.get("type"), row.get("redop"), row.get("root")) for row in result.get("rows") or []}
    exact = (tuple(run_sweep) == amd and len(keys) == 1 and next(iter(keys))[0] == datatype
             and next(iter(keys))[1] in (redop, None) and (result.get("n_cycles") or 1) == 1
             and list(result.get("groups") or []) == list(GROUPS))
    if exact:
        # AMD's criterion is the line as printed, compared like a printed row's busbw
        value = low = high = result["avg_busbw"]
        compared.update({"from": "footer", "range": [low, high], "cells": compared["cells_expected"]})
        out["measured_busbw"] = value
        what = "'# Avg bus bandwidth' %g GB/s of AMD's sweep (%s)" % (value, amd_text)
    else:
        if present == 0:
            out["reason"] = ("the run has no %s %s row at the sizes of AMD's sweep (%s; the run's sweep: %s): %s" % (
                datatype, redop, amd_text, _sweep_text(*run_sweep), rerun))
            return out
        low = min(cycle[0] for cycle in per_cycle)
        high = min(cycle[1] for cycle in per_cycle)
        missing = compared["cells_expected"] - present
        compared.update({"from": "rows, missing counted as 0" if missing else "rows",
                         "range": [round(low, 4), None if math.isinf(high) else round(high, 4)]})
        cycles = "" if len(per_cycle) == 1 else ", worst of %d cycles" % len(per_cycle)
        if missing:
            out["measured_busbw"] = round(low, 4)
            what = ("AMD's average bus bandwidth over its sweep (%s) is at least %.2f GB/s by the run's rows (the "
                    "run's sweep: %s; %d of AMD's %d busbw values, the other %d counted as 0%s), which" % (
                        amd_text, low, _sweep_text(*run_sweep), present, compared["cells_expected"], missing, cycles))
        else:
            out["measured_busbw"] = round(min(cycle[2] for cycle in per_cycle), 4)
            what = ("AMD's average bus bandwidth over its sweep (%s) is %.2f GB/s by the run's rows at its %d sizes "
                    "(the run's sweep: %s, whose own footer says %g GB/s%s), which" % (
                        amd_text, out["measured_busbw"], len(sweep["sizes"]), _sweep_text(*run_sweep),
                        result["avg_busbw"], cycles))
    out["ratio"] = round(out["measured_busbw"] / out["expected_busbw"], 3)
    status, bound = _judge(low, high, bounds)
    if status == "unknown":
        out["reason"] = ("%s is not enough to show AMD's %s pass criterion (>= %g GB/s avg bus bandwidth, %s ranks: "
                         "%s); %s" % (what[:-len(", which")] if what.endswith(", which") else what, generation,
                                      bound["busbw_gbs"], ranks or "any", _documents(bound), rerun))
        return out
    out.update(status=status, bound=bound)
    out["reason"] = _verdict_text(what, status, bound, bounds, generation, ranks)
    return out
