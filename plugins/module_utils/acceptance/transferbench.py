"""Parse TransferBench output (the ``a2a``, ``p2p`` and ``healthcheck`` presets, config-file runs) into measurements.

Public API (standard library only, Python 3.8+):

``parse(text, source="output")``
    ``common.new_result("transferbench", test, source)`` with ``test`` one of ``p2p``, ``a2a``, ``config`` (a config
    file such as ``examples/example.cfg``, or any run that prints ``Test N:`` tables) or ``healthcheck``; ``version``
    from ``TransferBench vX.YY``; ``prefixes`` (the launcher or log prefixes removed) and ``errors`` (the tool's own
    ``[ERROR]`` lines, ``{line, text}``). Every figure is in GB/s, as the tool prints it. Per test:

    ``p2p``
        ``bytes_per_direction``, ``executor`` (``GFX``/``DMA``), ``read`` / ``write`` (``Local``/``Remote``),
        ``devices`` (the column labels, ``CPU 00``.. ``GPU 07``), ``unidir`` ``{"->": {src: {dst: value}}}``,
        ``bidir`` ``{"->": .., "<-": .., "<->": ..}`` (the rows of each device's block: ``->`` the device's transfer
        to the column, ``<-`` the column's transfer back during the same run, ``<->`` their sum), ``averages``
        ``{"unidir"|"bidir": {"GPU->GPU": value, ..}}``; ``N/A`` cells are None. Measurements (scope ``src``, ``dst``
        as device labels): case ``unidir``: ``<kind>_bandwidth`` per pair, kind ``cpu_cpu`` / ``cpu_gpu`` /
        ``gpu_cpu`` / ``gpu_gpu`` as the tool's average columns name them, ``local_bandwidth`` for a device to itself
        (the diagonal, a local copy the averages leave out); case ``bidir``: ``<kind>_bandwidth`` per transfer (scope
        ``src``, ``dst`` and ``pair``: ``GPU 03<->GPU 06``, the block and column; kind from the pair, as the tool's
        averages count it) and ``<kind>_combined_bandwidth`` per pair (the ``<->`` row); both cases:
        ``avg_<kind>_bandwidth`` (the ``Averages (During UniDir|BiDir)`` line, node-wide).
    ``a2a``
        ``bytes_per_transfer``, ``executor``, ``subexecutors``, ``reads``, ``writes``, ``gpus``, ``matrix``
        ``{src: {dst: value}}``, ``stotal`` / ``actual`` per source GPU, ``rtotal`` per destination, ``rtotal_sum``,
        ``actual_min`` / ``actual_max`` (the RTotal row's last figures), ``avg_bandwidth``, ``aggregate_bandwidth``
        (GPU timed) and ``aggregate_bandwidth_cpu_timed``. Measurements: ``bandwidth`` per pair (``src``, ``dst``),
        ``stotal``, ``actual``, ``rtotal`` per GPU (``gpu``), and node-wide ``avg_bandwidth`` (``Average bandwidth
        (GPU Timed)``), ``aggregate_bandwidth`` (``Aggregate bandwidth (GPU Timed)``),
        ``aggregate_bandwidth_cpu_timed``.
    ``config``
        ``tests``: ``[{test, description (the '## ' line above it), executors, transfers, aggregate}]``, each
        transfer with ``transfer``, ``bandwidth``, ``time_ms``, ``bytes``, ``src``, ``executor``, ``dst`` and its
        ``case``. Measurements: ``bandwidth`` per transfer (scope ``transfer``, ``src``, ``executor``, ``dst``),
        case ``test N`` for a test of one transfer, ``test N 0->1`` (GPU indices; memory tokens as printed when not
        one GPU each) for a test of several, ``test N transfer M`` when two share a direction; per test
        ``executor_bandwidth`` (scope ``executor``) and ``aggregate_bandwidth_cpu_timed`` (``Aggregate (CPU)``).
    ``healthcheck``
        ``checks``: ``[{name, status (PASS/FAIL/None), failed (the count the tool states), results [{gpu | src, dst,
        bandwidth, limit}]}]``, ``passed``. Measurements: case the check's name (``all-to-all XGMI copies``,
        ``HBM performance [READ]``..): ``pass`` (bool) and ``bandwidth`` per GPU (``gpu``) or pair (``src``,
        ``dst``) the tool printed (failures; every GPU with ``VERBOSE=1``); case None ``pass``: every check passed
        (only when the run is complete).

    ``complete`` is False when the output was cut (an author's ``...`` / ``<SNIP>`` marker), a table stops short
    (rows, the RTotal row, the summary or average lines missing), a p2p run lacks one of its two tables, a config
    test lacks its ``Aggregate (CPU)`` row, a healthcheck check lacks its verdict, or the tool printed ``[ERROR]``.
    Accepted: the v1.3x-v1.5x and current layouts (p2p with or without direction markers, ``SRC+EXE\\DST`` / ``D/D``
    headers, blank lines, ``SHOW_ITERATIONS`` min/max/sd rows; a2a with the ``Summary: [...]`` header or bare, with
    box-drawing table borders; config tables with ``|`` or ``│``), label padding (``Average   bandwidth``,
    ``Averages (During  BiDir)``), TABs, trailing spaces, launcher and log prefixes (Open MPI ``--tag-output``,
    ``srun --label``, timestamps, host names: learned from the lines the tool always prints, removed from every line).
    Refused with ``AcceptanceParseError`` (one line: source, line number, the line shortened, why): no TransferBench
    result (empty text, another tool's output, only the tool's error), rows before their header, a malformed row with
    table lines after it (a malformed last row is a cut: ``complete`` False), a table repeated in one output.
``detect(text)``
    True when ``text`` holds a line only TransferBench prints (its version banner, a p2p table title, the a2a summary
    figures, a config-test row, a healthcheck check); False for other tools' output (rccl-tests, RVS, BabelStream,
    rocm-bandwidth-test, perftest, amd-smi).
"""

import math
import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, measurement, new_result, shorten

TOOL = "transferbench"
UNIT = "GB/s"

_NUM = r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_NUMBER = re.compile(r"^%s$" % _NUM)
_BOX = re.compile("[|\u2502\u2500\u253c\u252c\u2534\u251c\u2524\u250c\u2510\u2514\u2518]")
_BORDER = re.compile("^[-=+|\u2502\u2500\u253c\u252c\u2534\u251c\u2524\u250c\u2510\u2514\u2518\\s]+$")

# Lines the tool always prints: what stands before them on a line is a launcher or log prefix.
_ANCHOR = re.compile(
    r"TransferBench v\d|Bytes Per Direction\b|(?:Uni|Bi)directional copy peak bandwidth\b|Averages\s*\(During\b|"
    r"All-To-All benchmark:|Summary:|SRC(?:\+EXE)?\\+(?:EXE\+)?DST\b|RTotal\b|Average\s+bandwidth\s*\(|"
    r"Aggregate bandwidth\s*\(|Test \d+:|Executor:|Aggregate \(CPU\)|Testing (?:uni|bi|all-to-all|HBM)")
_VERSION = re.compile(r"TransferBench v(\d+(?:\.\d+)+[\w.+-]*)")
_ERROR = re.compile(r"^\[ERROR\]")
_WARN = re.compile(r"^\[WARN\]")

# p2p
_P2P_TITLE = re.compile(r"^(Uni|Bi)directional copy peak bandwidth GB/s\s*\[\s*(\w+) read\s*/\s*(\w+) write\s*\]"
                        r"(?:\s*\(GPU-Executor:\s*(\w+)\s*\))?\s*$")
_P2P_HEADER = re.compile(r"^(?:SRC(?:\+EXE)?\\+(?:EXE\+)?DST|D/D)[\s,]+(.*)$")
_P2P_LABELS = re.compile(r"^(?:(?:CPU|GPU)\s+\d+[\s,]*)+$")
_P2P_ROW = re.compile(r"^(CPU|GPU)\s+(\d+)(?=[\s,])")
_P2P_MARKERS = ("<->", "->", "<-", "min", "max", "sd")
_P2P_CATEGORIES = re.compile(r"^(?:[CG]PU->[CG]PU[\s,]*)+$")
_P2P_AVERAGES = re.compile(r"^Averages\s*\(During\s*(UniDir|BiDir)\s*\)\s*:?[\s,]*(.*)$")
_BYTES_PER_DIRECTION = re.compile(r"^Bytes Per Direction[\s,]+(\d+)$")
_P2P_MODE = re.compile(r"^P2P_MODE\s*=\s*(\d+)\b")
_P2P_SIGN = re.compile(r"^(?:CPU|GPU)\s+\d+\s+(?:<->|->|<-)(?:\s|$)|^Averages\s*\(During\b")

# a2a
_A2A_SIGN = re.compile(r"^Summary:|^GPU-(?:GFX|DMA) All-To-All benchmark|^SRC\\+DST\b.*\bSTotal\b|^RTotal\b|"
                       r"^Average\s+bandwidth\s*\(GPU\s+Timed\)|^Aggregate\s+bandwidth\s*\((?:GPU|CPU)\s+Timed\)")
_A2A_SUMMARY = re.compile(r"^Summary:")
_A2A_BYTES = re.compile(r"\[(\d+) bytes per Transfer\]")
_A2A_EXECUTOR = re.compile(r"\[(GFX|DMA):(\d+)\]")
_A2A_READS = re.compile(r"\[(\d+) Read\(s\) (\d+) Write\(s\)\]")
_A2A_COPYING = re.compile(r"^-?\s*Copying (\d+) bytes between (all|directly connected) pairs of GPUs using (\d+) CUs")
_A2A_HEADER = re.compile(r"^SRC\\+DST\s+(.*)$")
_A2A_LABEL = re.compile(r"GPU\s+(\d+)|NIC(?:\(\s*\d+\s*QP\))?|STotal|Actual|\(Rnk\)|\s+")
_A2A_ROW = re.compile(r"^GPU\s+(\d+)(?:\s+(.*))?$")
_A2A_RTOTAL = re.compile(r"^RTotal(?:\s+(.*))?$")
_A2A_FOOTER = re.compile(r"^(Average|Aggregate)\s+bandwidth\s*\((GPU|CPU)\s+Timed\)\s*:\s*(\S+)\s*GB/s$")

# config
_TEST = re.compile(r"^Test\s+(\d+)\s*:$")
_ECHO = re.compile(r"^##\s?(.*)$")
_CONFIG_SIGN = re.compile("^Test\\s+\\d+\\s*:$|^Executor:|^Transfer\\s+\\d+\\s*[|\u2502]|^Aggregate \\(CPU\\)")
_CELLS = re.compile("\\s*[|\u2502]\\s*")
_EXECUTOR = re.compile(r"^Executor:\s*(?:Rank\s+(\d+)\s+)?([A-Za-z]+)\s*(\d+)$")
_TRANSFER = re.compile(r"^Transfer\s+(\d+)$")
_AGGREGATE = re.compile(r"^Aggregate \(CPU\)$")
_DETAIL_ROW = re.compile(r"^(?:Iter\s+\d+|StandardDev|p\d+)$")
_BANDWIDTH_CELL = re.compile(r"^(%s)\s*GB/s$" % _NUM)
_SUM_CELL = re.compile(r"^(%s)\s*GB/s\s*\(sum\)(?:\s*\[(.*)\])?$" % _NUM)
_TIME_CELL = re.compile(r"^(%s)\s*ms$" % _NUM)
_BYTES_CELL = re.compile(r"^(\d+)\s*bytes$")
_PATH_CELL = re.compile(r"^(\S+)\s*->\s*(\S+)\s*->\s*(\S+)$")
_OVERHEAD_CELL = re.compile(r"^Overhead:\s*(%s)\s*ms$" % _NUM)
_MEMORY = re.compile(r"(?:R\d+)?([A-Z])(\d+)")
_GPU_MEMORY = ("G", "F")

# healthcheck
_CHECK_VERDICT = re.compile(r"(?:(PASS)|FAIL\s*\(\s*(\d+)\s*test\(s\)\s*\))$")
_CHECK_SIGN = re.compile(r"^Testing\s+(?:uni|bi|all-to-all|HBM)")
_VERDICT = re.compile(r"^\.*\s*(?:(PASS)|FAIL\s*\(\s*(\d+)\s*test\(s\)\s*\))$")
_GPU_RESULT = re.compile(r"^GPU\s+(\d+)\s*:\s*Measured\s*:?\s*(%s)\s*(?:GB/s)?\s*(?:Criteria|Limit)\s*:?\s*(%s)\s*(?:GB/s)?$"
                         % (_NUM, _NUM))
_PAIR_RESULT = re.compile(r"^GPU\s+(\d+)\s+to\s+GPU\s+(\d+)\s*:\s*(?::\s*)?(?:Measured\s*:?\s*)?(%s)\s*(?:GB/s)?\s*"
                          r"(?:Criteria|Limit)\s*:?\s*(%s)\s*(?:GB/s)?$" % (_NUM, _NUM))

_SIGNATURE = re.compile(
    r"TransferBench v\d+\.\d+|(?:Uni|Bi)directional copy peak bandwidth GB/s\s*\[\s*(?:Local|Remote) read|"
    r"Averages\s*\(During\s*(?:UniDir|BiDir)\)|GPU-(?:GFX|DMA) All-To-All benchmark|"
    r"(?:Average|Aggregate)\s+bandwidth\s*\((?:GPU|CPU)\s+Timed\)|\[\d+ bytes per Transfer\]|"
    "Aggregate \\(CPU\\)\\s*[|\u2502]|Transfer\\s+\\d+\\s*[|\u2502]\\s*%s\\s*GB/s\\s*[|\u2502]|" % _NUM
    + r"Testing\s+(?:all-to-all XGMI copies|unidirectional\s+(?:reads from|writes to|host to device|device to host)|"
    r"bidirectional\s+(?:reads \+ writes|host<->device)|HBM performance \[)")


def detect(text):
    """See the module docstring."""
    if not isinstance(text, str):
        return False
    return any(_SIGNATURE.search(line) for _number, line in clean_lines(text))


def _prepared(text):
    """The cleaned lines, prefixes removed and stripped: ([(number, line)], [prefix patterns])."""
    lines = clean_lines(text)
    patterns = prefixes.learn(lines, _ANCHOR)
    return [(number, line.strip()) for number, line in prefixes.strip_all(lines, patterns)], patterns


# ---------------------------------------------------------------------------------------------------- shared


def _value(token):
    """A cell: a non-negative number, None for N/A; ValueError otherwise."""
    if token.upper() == "N/A":
        return None
    if not _NUMBER.match(token):
        raise ValueError("%r is not a number" % shorten(token, 20))
    value = float(token)
    if not math.isfinite(value):
        raise ValueError("%r is not a finite number" % shorten(token, 20))
    return value


def _values(tokens):
    return [_value(token) for token in tokens]


def _tokens(text):
    return [t for t in re.split(r"[\s,]+", text) if t]


def _label(kind, index):
    return "%s %02d" % (kind, int(index))


class _Reader:
    """What every layout's reader shares: the refusal, a malformed row kept until it is known not to be a cut."""

    def __init__(self, source, result):
        self.source = source
        self.result = result
        self.pending = None

    def refuse(self, number, line, why):
        raise AcceptanceParseError("%s line %d: %s: %r" % (self.source, number, why, shorten(line)))

    def bad(self, number, line, why):
        """A malformed table line: refused when table lines follow it, a cut when the output ends there."""
        self.good()
        self.pending = (number, line, why)

    def good(self):
        """A table line read: a malformed line before it is not a cut."""
        if self.pending is not None:
            number, line, why = self.pending
            self.refuse(number, line, "%s, and table lines follow it (not a cut output)" % why)

    def finish(self):
        if self.pending is not None:
            number, line, why = self.pending
            self.result["complete"] = False
            self.result["warnings"].append("line %d: %r is not a whole table line (%s): the output ends there (cut?)"
                                           % (number, shorten(line), why))
            self.pending = None

    def incomplete(self, why):
        self.result["complete"] = False
        self.result["warnings"].append(why)


# ---------------------------------------------------------------------------------------------------- p2p


def _kind_of(src, dst):
    return "%s_%s" % (src[:3].lower(), dst[:3].lower())


class _P2P(_Reader):
    def __init__(self, source, result):
        _Reader.__init__(self, source, result)
        result.update(bytes_per_direction=None, executor=None, read=None, write=None, devices=[],
                      unidir={"->": {}}, bidir={"->": {}, "<-": {}, "<->": {}}, averages={})
        self.sections = {}
        self.current = None
        self.categories = None
        self.mode = None

    def line(self, number, line):
        match = _P2P_TITLE.match(line)
        if match:
            self.good()
            case = "unidir" if match.group(1) == "Uni" else "bidir"
            if case in self.sections:
                self.refuse(number, line, "a second %s table (one p2p run per parse)" % case)
            self.current = {"case": case, "line": number, "columns": None, "rows": {}, "arrows": False}
            self.sections[case] = self.current
            self.result.update(read=match.group(2), write=match.group(3))
            if match.group(4):
                self.result["executor"] = match.group(4)
            return True
        match = _BYTES_PER_DIRECTION.match(line)
        if match:
            self.result["bytes_per_direction"] = int(match.group(1))
            return True
        match = _P2P_MODE.match(line)
        if match:
            self.mode = int(match.group(1))
            return True
        match = _P2P_HEADER.match(line)
        if match:
            return self._header(number, line, match.group(1))
        if _P2P_ROW.match(line):
            return self._row(number, line)
        if _P2P_CATEGORIES.match(line):
            self.good()
            self.categories = _tokens(line)
            return True
        match = _P2P_AVERAGES.match(line)
        if match:
            return self._averages(number, line, match)
        return False

    def _header(self, number, line, rest):
        self.good()
        if self.current is None:
            self.refuse(number, line, "a p2p column header before its 'Unidirectional/Bidirectional copy peak "
                                      "bandwidth' title")
        if not _P2P_LABELS.match(rest):
            self.refuse(number, line, "not a p2p column header (CPU nn / GPU nn labels)")
        columns = [_label(kind, index) for kind, index in re.findall(r"(CPU|GPU)\s+(\d+)", rest)]
        if len(set(columns)) != len(columns):
            self.refuse(number, line, "a device twice in the column header")
        if self.current["columns"] is not None and self.current["columns"] != columns:
            self.refuse(number, line, "a second, different column header in the %s table" % self.current["case"])
        self.current["columns"] = columns
        if self.result["devices"] and self.result["devices"] != columns:
            self.refuse(number, line, "the %s table's columns differ from the other table's" % self.current["case"])
        self.result["devices"] = columns
        return True

    def _row(self, number, line):
        tokens = _tokens(line)
        label = _label(tokens[0], tokens[1])
        marker = tokens[2] if len(tokens) > 2 and tokens[2] in _P2P_MARKERS else None
        cells = tokens[3:] if marker else tokens[2:]
        section = self.current
        if section is None or section["columns"] is None:
            self.refuse(number, line, "a p2p row before its table's title and column header")
        if marker in ("<-", "<->") and section["case"] == "unidir":
            self.bad(number, line, "a %s row in the unidirectional table" % marker)
            return True
        try:
            values = _values(cells)
        except ValueError as err:
            self.bad(number, line, "not a p2p row (%s)" % err)
            return True
        if len(values) != len(section["columns"]):
            self.bad(number, line, "%d values, the column header has %d" % (len(values), len(section["columns"])))
            return True
        self.good()
        if label not in section["columns"]:
            self.refuse(number, line, "a row of %s, which is not a column of the table" % label)
        if marker in ("min", "max", "sd"):
            return True
        if marker is None:
            marker = "->" if section["case"] == "unidir" else "<->"
        else:
            section["arrows"] = True
        if (label, marker) in section["rows"]:
            self.refuse(number, line, "%s %s again in the %s table" % (label, marker, section["case"]))
        section["rows"][(label, marker)] = dict(zip(section["columns"], values))
        return True

    def _averages(self, number, line, match):
        case = "unidir" if match.group(1) == "UniDir" else "bidir"
        categories = self.categories or ["CPU->CPU", "CPU->GPU", "GPU->CPU", "GPU->GPU"]
        try:
            values = _values(_tokens(match.group(2)))
        except ValueError as err:
            self.bad(number, line, "not an averages line (%s)" % err)
            return True
        if len(values) != len(categories):
            self.bad(number, line, "%d averages for %d categories" % (len(values), len(categories)))
            return True
        self.good()
        if case in self.result["averages"]:
            self.refuse(number, line, "a second %s averages line (one p2p run per parse)" % case)
        self.result["averages"][case] = dict(zip(categories, values))
        return True

    def finish(self):
        _Reader.finish(self)
        result = self.result
        for case, section in sorted(self.sections.items()):
            columns = section["columns"] or []
            markers = ["->"] if case == "unidir" else (["->", "<-", "<->"] if section["arrows"] else ["<->"])
            missing = [label for label in columns if any((label, m) not in section["rows"] for m in markers)]
            if section["columns"] is None or missing:
                self.incomplete("the %s table (line %d) has no row of %s (cut?)" % (
                    case, section["line"], ", ".join(missing[:4]) if missing else "any device"))
            if section["arrows"] and case not in result["averages"]:
                self.incomplete("the %s table (line %d) has no 'Averages (During %s)' line (cut?)" % (
                    case, section["line"], "UniDir" if case == "unidir" else "BiDir"))
            for (label, marker), row in sorted(section["rows"].items()):
                (result["unidir"] if case == "unidir" else result["bidir"])[marker][label] = row
        for case, title, mode in (("unidir", "unidirectional", 2), ("bidir", "bidirectional", 1)):
            if self.sections and case not in self.sections and self.mode != mode:
                self.incomplete("no %s table (TransferBench p2p prints both unless P2P_MODE says otherwise): cut?"
                                % title)
        self._measure()
        if not result["measurements"]:
            number, line = min((s["line"], s["case"]) for s in self.sections.values()) if self.sections else (1, "")
            raise AcceptanceParseError("%s line %d: the p2p %s table has no rows (the output stops before them)"
                                       % (self.source, number, line))

    def _measure(self):
        result = self.result
        add = result["measurements"].append
        for src, row in sorted(result["unidir"]["->"].items()):
            for dst, value in row.items():
                if value is not None:
                    metric = "local_bandwidth" if src == dst else "%s_bandwidth" % _kind_of(src, dst)
                    add(measurement(metric, UNIT, value, case="unidir", src=src, dst=dst))
        for marker in ("->", "<-", "<->"):
            for block, row in sorted(result["bidir"][marker].items()):
                for column, value in row.items():
                    if value is None or block == column:
                        continue
                    kind = _kind_of(block, column)
                    if marker == "<->":
                        add(measurement("%s_combined_bandwidth" % kind, UNIT, value, case="bidir", src=block,
                                        dst=column))
                    else:
                        src, dst = (block, column) if marker == "->" else (column, block)
                        add(measurement("%s_bandwidth" % kind, UNIT, value, case="bidir", src=src, dst=dst,
                                        pair="%s<->%s" % (block, column)))
        for case in ("unidir", "bidir"):
            for category, value in (result["averages"].get(case) or {}).items():
                if value is not None:
                    kind = category.lower().replace("->", "_")
                    add(measurement("avg_%s_bandwidth" % kind, UNIT, value, case=case))


# ---------------------------------------------------------------------------------------------------- a2a


class _A2A(_Reader):
    def __init__(self, source, result):
        _Reader.__init__(self, source, result)
        result.update(bytes_per_transfer=None, executor=None, subexecutors=None, reads=None, writes=None, gpus=[],
                      matrix={}, stotal={}, actual={}, rtotal={}, rtotal_sum=None, actual_min=None, actual_max=None,
                      avg_bandwidth=None, aggregate_bandwidth=None, aggregate_bandwidth_cpu_timed=None)
        self.columns = None
        self.header_line = None
        self.multi_rank = False
        self.summary_line = None
        self.rtotal_seen = False

    def line(self, number, line):
        result = self.result
        for pattern, keys in ((_A2A_BYTES, ("bytes_per_transfer",)), (_A2A_EXECUTOR, ("executor", "subexecutors")),
                              (_A2A_READS, ("reads", "writes"))):
            match = pattern.search(line)
            if match:
                for key, value in zip(keys, match.groups()):
                    result[key] = value if key == "executor" else int(value)
        if _A2A_SUMMARY.match(line):
            if self.summary_line is not None:
                self.refuse(number, line, "a second a2a summary (one a2a run per parse; the first at line %d)"
                            % self.summary_line)
            self.summary_line = number
            return True
        match = _A2A_COPYING.match(line)
        if match:
            result["bytes_per_transfer"] = int(match.group(1))
            result["subexecutors"] = int(match.group(3))
            return True
        match = _A2A_FOOTER.match(line)
        if match:
            return self._footer(number, line, match)
        flat = _BOX.sub(" ", line).strip()
        if not flat or _BORDER.match(line):
            return True
        match = _A2A_HEADER.match(flat)
        if match:
            return self._header(number, line, match.group(1))
        match = _A2A_RTOTAL.match(flat)
        if match:
            return self._rtotal(number, line, _tokens(match.group(1) or ""))
        match = _A2A_ROW.match(flat)
        if match is None:
            return False
        if self.columns is None:
            if self.summary_line is not None:
                self.refuse(number, line, "an a2a row before its 'SRC\\DST ... STotal Actual' column header")
            return False
        return self._row(number, line, _label("GPU", match.group(1)), _tokens(match.group(2) or ""))

    def _header(self, number, line, rest):
        self.good()
        if self.columns is not None:
            self.refuse(number, line, "a second a2a column header (one a2a run per parse; the first at line %d)"
                        % self.header_line)
        labels = []
        position = 0
        for match in _A2A_LABEL.finditer(rest):
            if match.start() != position:
                break
            position = match.end()
            if match.group(0).strip():
                labels.append(_label("GPU", match.group(1)) if match.group(1) else match.group(0).split("(")[0]
                              if match.group(0).startswith("NIC") else match.group(0))
        if position != len(rest) or labels[-2:] != ["STotal", "Actual"] or not any(
                label.startswith("GPU") for label in labels):
            self.refuse(number, line, "not an a2a column header (GPU nn ... STotal Actual)")
        if "(Rnk)" in labels:
            self.multi_rank = True
            self.result["warnings"].append("line %d: a multi-rank a2a table (MAX/AVG/MIN rows per rank): only its "
                                           "summary lines are read" % number)
            labels = [label for label in labels if label != "(Rnk)"]
        self.columns = labels[:-2]
        self.header_line = number
        self.result["gpus"] = [label for label in self.columns if label.startswith("GPU")]
        return True

    def _row(self, number, line, src, tokens):
        if self.multi_rank:
            return True
        try:
            values = _values(tokens)
        except ValueError as err:
            self.bad(number, line, "not an a2a row (%s)" % err)
            return True
        if len(values) != len(self.columns) + 2:
            self.bad(number, line, "%d values, the column header has %d" % (len(values), len(self.columns) + 2))
            return True
        self.good()
        if src not in self.columns:
            self.refuse(number, line, "a row of %s, which is not a column of the table" % src)
        if src in self.result["matrix"]:
            self.refuse(number, line, "%s's row again" % src)
        self.result["matrix"][src] = dict(zip(self.columns, values[:-2]))
        self.result["stotal"][src], self.result["actual"][src] = values[-2:]
        return True

    def _rtotal(self, number, line, tokens):
        if self.columns is None:
            self.refuse(number, line, "an a2a RTotal row before its 'SRC\\DST ... STotal Actual' column header")
        if self.multi_rank:
            return True
        try:
            values = _values(tokens)
        except ValueError as err:
            self.bad(number, line, "not an a2a RTotal row (%s)" % err)
            return True
        width = len(self.columns)
        if len(values) not in (width + 2, width + 3):
            self.bad(number, line, "%d values, the RTotal row has %d or %d" % (len(values), width + 2, width + 3))
            return True
        self.good()
        if self.rtotal_seen:
            self.refuse(number, line, "a second RTotal row (one a2a run per parse)")
        self.rtotal_seen = True
        self.result["rtotal"] = dict(zip(self.columns, values[:width]))
        self.result["rtotal_sum"] = values[width]
        if len(values) == width + 3:
            self.result["actual_min"], self.result["actual_max"] = values[width + 1:]
        return True

    def _footer(self, number, line, match):
        key = {("Average", "GPU"): "avg_bandwidth", ("Aggregate", "GPU"): "aggregate_bandwidth",
               ("Aggregate", "CPU"): "aggregate_bandwidth_cpu_timed"}.get((match.group(1), match.group(2)))
        if key is None:
            return False
        try:
            value = _value(match.group(3))
        except ValueError as err:
            self.bad(number, line, "not a summary figure (%s)" % err)
            return True
        self.good()
        if self.result[key] is not None:
            self.refuse(number, line, "a second '%s bandwidth (%s Timed)' line (one a2a run per parse)"
                        % (match.group(1), match.group(2)))
        self.result[key] = value
        return True

    def finish(self):
        _Reader.finish(self)
        result = self.result
        if self.columns is None:
            self.incomplete("no a2a table (no 'SRC\\DST ... STotal Actual' header): only the summary lines are read")
        elif not self.multi_rank:
            missing = [gpu for gpu in result["gpus"] if gpu not in result["matrix"]]
            if missing:
                self.incomplete("the a2a table (line %d) has no row of %s (cut?)" % (
                    self.header_line, ", ".join(missing[:4])))
            if not self.rtotal_seen:
                self.incomplete("the a2a table (line %d) has no RTotal row (cut?)" % self.header_line)
        lacking = [text for key, text in (("avg_bandwidth", "Average bandwidth (GPU Timed)"),
                                          ("aggregate_bandwidth", "Aggregate bandwidth (GPU Timed)"),
                                          ("aggregate_bandwidth_cpu_timed", "Aggregate bandwidth (CPU Timed)"))
                   if result[key] is None]
        if lacking:
            self.incomplete("no %s line (cut?)" % ", ".join("'%s'" % t for t in lacking))
        add = result["measurements"].append
        for src, row in sorted(result["matrix"].items()):
            for dst, value in row.items():
                if value is not None:
                    add(measurement("bandwidth", UNIT, value, src=src, dst=dst))
        for key in ("stotal", "actual", "rtotal"):
            for gpu, value in sorted(result[key].items()):
                if value is not None and gpu.startswith("GPU"):
                    add(measurement(key, UNIT, value, gpu=gpu))
        for key in ("avg_bandwidth", "aggregate_bandwidth", "aggregate_bandwidth_cpu_timed"):
            if result[key] is not None:
                add(measurement(key, UNIT, result[key]))
        if not result["measurements"]:
            number = self.header_line or self.summary_line or 1
            raise AcceptanceParseError("%s line %d: the a2a output has no figure (no table row, no summary line): "
                                       "the output stops before them" % (self.source, number))


# ---------------------------------------------------------------------------------------------------- config


class _Config(_Reader):
    def __init__(self, source, result):
        _Reader.__init__(self, source, result)
        result["tests"] = []
        self.current = None
        self.description = None
        self.numbers = {}

    def line(self, number, line):
        match = _ECHO.match(line)
        if match:
            self.description = match.group(1).strip() or None
            return True
        match = _TEST.match(line)
        if match:
            self.good()
            test = int(match.group(1))
            if test in self.numbers:
                self.refuse(number, line, "Test %d again (first at line %d; one run per parse)"
                            % (test, self.numbers[test]))
            self.numbers[test] = number
            self.current = {"test": test, "line": number, "description": self.description, "executors": [],
                            "transfers": [], "aggregate": None}
            self.description = None
            self.result["tests"].append(self.current)
            return True
        if _BORDER.match(line):
            return True
        if not re.search("[|\u2502]", line):
            return False
        cells = _CELLS.split(line.strip(" |\u2502"))
        label = cells[0]
        for pattern, read in ((_EXECUTOR, self._executor), (_TRANSFER, self._transfer), (_AGGREGATE, self._aggregate)):
            match = pattern.match(label)
            if match:
                if self.current is None:
                    self.refuse(number, line, "a config-test row before any 'Test N:' line")
                try:
                    read(match, cells)
                except ValueError as err:
                    self.bad(number, line, "not a config-test row (%s)" % err)
                    return True
                self.good()
                return True
        return bool(_DETAIL_ROW.match(label))

    @staticmethod
    def _timing(cells):
        if len(cells) < 4:
            raise ValueError("%d cells, expected 5" % len(cells))
        out = {}
        for key, pattern, cell, cast in (("bandwidth", _BANDWIDTH_CELL, cells[1], _value),
                                         ("time_ms", _TIME_CELL, cells[2], _value),
                                         ("bytes", _BYTES_CELL, cells[3], int)):
            match = pattern.match(cell)
            if match is None:
                raise ValueError("%s cell %r" % (key, shorten(cell, 30)))
            out[key] = cast(match.group(1))
        return out

    def _executor(self, match, cells):
        entry = dict(self._timing(cells), executor=_label(match.group(2).upper(), match.group(3)), rank=None,
                     sum_bandwidth=None)
        if match.group(1) is not None:
            entry["rank"] = int(match.group(1))
        if len(cells) > 4 and cells[4]:
            total = _SUM_CELL.match(cells[4])
            if total is None:
                raise ValueError("sum cell %r" % shorten(cells[4], 30))
            entry["sum_bandwidth"] = _value(total.group(1))
        if len(cells) > 5:
            raise ValueError("%d cells, expected 5" % len(cells))
        self.current["executors"].append(entry)

    def _transfer(self, match, cells):
        if len(cells) != 5:
            raise ValueError("%d cells, expected 5" % len(cells))
        entry = dict(self._timing(cells), transfer=int(match.group(1)))
        path = _PATH_CELL.match(cells[4])
        if path is None:
            raise ValueError("path cell %r (SRC -> EXE -> DST)" % shorten(cells[4], 30))
        entry.update(src=path.group(1), executor=path.group(2), dst=path.group(3))
        if any(t["transfer"] == entry["transfer"] for t in self.current["transfers"]):
            raise ValueError("Transfer %d twice in Test %d" % (entry["transfer"], self.current["test"]))
        self.current["transfers"].append(entry)

    def _aggregate(self, match, cells):
        entry = self._timing(cells)
        entry["overhead_ms"] = None
        if len(cells) > 4 and cells[4]:
            overhead = _OVERHEAD_CELL.match(cells[4])
            if overhead is None:
                raise ValueError("overhead cell %r" % shorten(cells[4], 30))
            entry["overhead_ms"] = _value(overhead.group(1))
        if self.current["aggregate"] is not None:
            raise ValueError("a second Aggregate (CPU) row in Test %d" % self.current["test"])
        self.current["aggregate"] = entry

    def finish(self):
        _Reader.finish(self)
        result = self.result
        for test in result["tests"]:
            if not test["transfers"] or test["aggregate"] is None:
                self.incomplete("Test %d (line %d) has no %s (cut?)" % (
                    test["test"], test["line"], "Transfer row" if not test["transfers"] else "'Aggregate (CPU)' row"))
            _cases(test)
            case = "test %d" % test["test"]
            for transfer in test["transfers"]:
                result["measurements"].append(measurement(
                    "bandwidth", UNIT, transfer["bandwidth"], case=transfer["case"], transfer=transfer["transfer"],
                    src=transfer["src"], executor=transfer["executor"], dst=transfer["dst"]))
            for executor in test["executors"]:
                scope = {"executor": executor["executor"]}
                if executor["rank"] is not None:
                    scope["rank"] = executor["rank"]
                result["measurements"].append(measurement("executor_bandwidth", UNIT, executor["bandwidth"],
                                                          case=case, **scope))
            if test["aggregate"] is not None:
                result["measurements"].append(measurement("aggregate_bandwidth_cpu_timed", UNIT,
                                                          test["aggregate"]["bandwidth"], case=case))
        if not result["measurements"]:
            first = result["tests"][0] if result["tests"] else {"line": 1, "test": 0}
            raise AcceptanceParseError("%s line %d: Test %d has no row (the output stops before them)"
                                       % (self.source, first["line"], first["test"]))


def _direction(src, dst):
    """``0->1`` for a transfer between two single GPUs (memory tokens G/F), else the tokens as printed."""
    parts = []
    for token in (src, dst):
        found = _MEMORY.findall(token)
        if len(found) != 1 or found[0][0] not in _GPU_MEMORY or _MEMORY.sub("", token):
            return "%s->%s" % (src, dst)
        parts.append(str(int(found[0][1])))
    return "->".join(parts)


def _cases(test):
    """Each transfer's case: ``test N``, ``test N 0->1`` (several transfers) or ``test N transfer M`` (a repeat)."""
    base = "test %d" % test["test"]
    transfers = test["transfers"]
    if len(transfers) == 1:
        transfers[0]["case"] = base
        return
    directions = [_direction(t["src"], t["dst"]) for t in transfers]
    unique = len(set(directions)) == len(directions)
    for transfer, direction in zip(transfers, directions):
        transfer["case"] = "%s %s" % (base, direction) if unique else "%s transfer %d" % (base, transfer["transfer"])


# ---------------------------------------------------------------------------------------------------- healthcheck


class _Health(_Reader):
    def __init__(self, source, result):
        _Reader.__init__(self, source, result)
        result.update(checks=[], passed=None)
        self.open = None
        self.last = None

    def line(self, number, line):
        if _CHECK_SIGN.match(line):
            verdict = _CHECK_VERDICT.search(line)
            name = " ".join(line[len("Testing"):verdict.start() if verdict else len(line)].rstrip(" .\t").split())
            if self.open is not None:
                self.incomplete("line %d: check %r has no verdict (cut?)" % (self.open["line"], self.open["name"]))
            check = {"name": name, "line": number, "status": None, "failed": None, "results": []}
            self.result["checks"].append(check)
            self.last = check
            self.open = check
            if verdict:
                self._verdict(verdict.group(1), verdict.group(2))
            return True
        match = _VERDICT.match(line)
        if match and self.open is not None:
            self._verdict(match.group(1), match.group(2))
            return True
        match = _GPU_RESULT.match(line)
        pair = None if match else _PAIR_RESULT.match(line)
        if match or pair:
            if self.last is None:
                self.refuse(number, line, "a healthcheck result before any 'Testing ...' line")
            try:
                if match:
                    entry = {"gpu": _label("GPU", match.group(1)), "bandwidth": _value(match.group(2)),
                             "limit": _value(match.group(3))}
                else:
                    entry = {"src": _label("GPU", pair.group(1)), "dst": _label("GPU", pair.group(2)),
                             "bandwidth": _value(pair.group(3)), "limit": _value(pair.group(4))}
            except ValueError as err:
                self.bad(number, line, "not a healthcheck result (%s)" % err)
                return True
            self.good()
            where = {k: v for k, v in entry.items() if k in ("gpu", "src", "dst")}
            if not any({k: v for k, v in r.items() if k in ("gpu", "src", "dst")} == where
                       for r in self.last["results"]):
                self.last["results"].append(entry)
            return True
        return False

    def _verdict(self, passed, failed):
        if passed or failed is not None:
            self.open["status"] = "PASS" if passed else "FAIL"
            self.open["failed"] = 0 if passed else int(failed)
            self.open = None

    def finish(self):
        _Reader.finish(self)
        result = self.result
        if self.open is not None:
            self.incomplete("line %d: check %r has no verdict (cut?)" % (self.open["line"], self.open["name"]))
        for check in result["checks"]:
            if check["status"] == "FAIL" and sum(r["bandwidth"] < r["limit"] for r in check["results"]) < check["failed"]:
                self.incomplete("line %d: check %r states %d failure(s) and lists fewer (cut?)"
                                % (check["line"], check["name"], check["failed"]))
            if check["status"] is not None:
                result["measurements"].append(measurement("pass", "bool", check["status"] == "PASS",
                                                          case=check["name"]))
            for entry in check["results"]:
                scope = {k: v for k, v in entry.items() if k in ("gpu", "src", "dst")}
                result["measurements"].append(measurement("bandwidth", UNIT, entry["bandwidth"], case=check["name"],
                                                          **scope))
        if result["checks"] and result["complete"]:
            result["passed"] = all(c["status"] == "PASS" for c in result["checks"])
            result["measurements"].append(measurement("pass", "bool", result["passed"]))
        if not result["measurements"]:
            first = result["checks"][0] if result["checks"] else {"line": 1, "name": ""}
            raise AcceptanceParseError("%s line %d: healthcheck check %r has no verdict (the output stops there)"
                                       % (self.source, first["line"], first["name"]))


# ---------------------------------------------------------------------------------------------------- parse

_READERS = {"p2p": _P2P, "a2a": _A2A, "config": _Config, "healthcheck": _Health}
_SIGNS = (("p2p", _P2P_TITLE), ("p2p", _P2P_SIGN), ("a2a", _A2A_SIGN), ("healthcheck", _CHECK_SIGN),
          ("config", _CONFIG_SIGN))
_NATIVE = {("a2a", "config")}  # the a2a preset prints its transfers as a config-test table before its summary


def _kinds(lines):
    """{test: first line number} of the kinds of output the lines hold."""
    found = {}
    for number, line in lines:
        for kind, pattern in _SIGNS:
            if pattern.match(line):
                found.setdefault(kind, number)
                break
    return found


def _refuse_without_result(source, lines):
    content = [(n, line) for n, line in lines if line and not is_cut(line)]
    if not content:
        raise AcceptanceParseError("%s line 1: no TransferBench output (the text is empty): %r"
                                   % (source, shorten(lines[0][1] if lines else "")))
    errors = [(n, line) for n, line in content if _ERROR.match(line) or _WARN.match(line)]
    if errors and any(_VERSION.search(line) or re.search(r"TransferBench|\bpreset\b", line) for _n, line in content):
        number, line = errors[0]
        raise AcceptanceParseError("%s line %d: TransferBench printed no result, only its own message(s): %r"
                                   % (source, number, shorten(line)))
    number, line = content[0]
    raise AcceptanceParseError("%s line %d: not TransferBench output (no p2p or a2a table, config-test row or "
                               "healthcheck check): %r" % (source, number, shorten(line)))


def parse(text, source="output"):
    """See the module docstring."""
    source = " ".join(str(source).split()) or "output"
    if not isinstance(text, str):
        raise AcceptanceParseError("%s line 1: expected text, got %s: %r" % (source, type(text).__name__, ""))
    lines, patterns = _prepared(text)
    kinds = _kinds(lines)
    if not kinds:
        _refuse_without_result(source, lines)
    test = next(kind for kind in ("p2p", "a2a", "healthcheck", "config") if kind in kinds)
    result = new_result(TOOL, test, source)
    result.update(prefixes=patterns, errors=[])
    if "p2p" in kinds and "a2a" in kinds:
        number = max(kinds["p2p"], kinds["a2a"])
        line = next(line for n, line in lines if n == number)
        raise AcceptanceParseError("%s line %d: p2p and a2a output in one text (one run per parse): %r"
                                   % (source, number, shorten(line)))
    for other, number in sorted(kinds.items()):
        if other != test and (test, other) not in _NATIVE:
            result["warnings"].append("line %d: lines of a %s run are not read (one run per parse: this is %s "
                                      "output)" % (number, other, test))
    reader = _READERS[test](source, result)
    for number, line in lines:
        if not line:
            continue
        if is_cut(line):
            reader.incomplete("line %d: the author's cut %r: figures may be missing" % (number, shorten(line)))
            continue
        if result["version"] is None:
            match = _VERSION.search(line)
            if match:
                result["version"] = match.group(1)
        if _ERROR.match(line):
            result["errors"].append({"line": number, "text": line})
            reader.incomplete("line %d: TransferBench error: %s" % (number, shorten(line, 120)))
            continue
        if _WARN.match(line):
            result["warnings"].append("line %d: %s" % (number, shorten(line, 120)))
            continue
        reader.line(number, line)
    reader.finish()
    return result
