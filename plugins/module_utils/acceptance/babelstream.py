"""Parse BabelStream output (UoB-HPC/BabelStream ``hip-stream`` and the other models) into an acceptance result.

Public API (standard library only, Python 3.8+):

``detect(text)``
    True when ``text`` is BabelStream's own output: its ``BabelStream`` banner, its table header
    (``Function  MBytes/sec  Min (sec)  Max  Average``) or its ``--csv`` header. Never true for RVS (whose babel
    module prints a ``GPU Id  Function ...`` table between ``[RESULT]`` lines), TransferBench, rccl-tests...
``parse(text, source="output")``
    ``new_result("babelstream", "stream", source)`` with, per run and kernel (``case`` ``Copy``, ``Mul``,
    ``Add``, ``Triad``, ``Dot``, ``Nstream`` as printed), ``bandwidth`` in the unit the table prints
    (``MBytes/sec`` -> MB/s, ``MiBytes/sec`` -> MiB/s; BabelStream >= 5.x develop prints ``MB/s``, ``MiB/s``,
    ``GB/s``, ``GiB/s``, ``TB/s`` or ``TiB/s``, the last read as GiB/s x 1024) and ``min_runtime``,
    ``max_runtime``, ``avg_runtime`` (s); ``Init`` / ``Read`` lines (``case`` Init, Read: ``bandwidth``,
    ``runtime``); ``--triad-only`` runs (``case`` Triad: ``bandwidth`` in GB/s or GiB/s, ``runtime``); the
    ``--csv`` layouts; ``valid`` (bool, per run: False when the run printed a validation failure).

    Scope: a log of one run has scope ``{}``. Several runs (``mpiexec -n 8 wrapper.sh``, one table per rank /
    GPU) are told apart by the launcher's rank tags (Open MPI ``--tag-output`` ``[1,3]<stdout>:``, ``srun
    --label`` ``3: ``): scope ``{"rank": 3}``; untagged runs printed one after the other are numbered in order:
    ``{"run": 2}`` (``{"rank": r, "run": k}`` for several runs of one rank). Untagged runs whose lines interleave
    cannot be told apart and are refused.

    Other keys: ``runs`` (per run: ``scope``, ``version``, ``implementation``, ``device``, ``driver``,
    ``memory``, ``precision``, ``num_times``, ``num_elements``, ``array_size`` / ``total_size`` (``{value,
    unit}`` as printed), ``selection``, ``kernels`` (the table's rows in order), ``format`` (``table``, ``csv``,
    ``triad``), ``complete``, ``failures``), ``device_names``, ``implementation``, ``precision``,
    ``array_size``, ``num_times`` (of the first run), ``failures`` (``[{line, text}]``: validation failures and
    the tool's error lines), ``prefixes`` (launcher or log prefixes removed) and ``warnings``. ``version`` is the
    first run's ``Version:``.

    ``complete`` is False when cut markers were skipped, a run's table lacks a kernel its ``Running ...`` line
    announces (the log was cut: the missing kernels are absent, never guessed) or the last row is damaged.
    Refused with ``AcceptanceParseError`` (one line: source, line number, the line, why): no result table (a run
    that only failed quotes its error line), rows without their header (filtered output), a damaged row with
    rows after it, an unknown bandwidth unit, a kernel twice in one table (interleaved ranks).
"""

import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, measurement, new_result, shorten, text_of
from .common import UnreadableFigure as _Bad
from .common import finite_number as _num

KERNELS = ("Copy", "Mul", "Add", "Triad", "Dot", "Nstream")
_CLASSIC = ("Copy", "Mul", "Add", "Triad", "Dot")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_UNITS = {"MBytes/sec": ("MB/s", 1.0), "MiBytes/sec": ("MiB/s", 1.0), "MB/s": ("MB/s", 1.0),
          "MiB/s": ("MiB/s", 1.0), "GB/s": ("GB/s", 1.0), "GiB/s": ("GiB/s", 1.0), "TB/s": ("TB/s", 1.0),
          "TiB/s": ("GiB/s", 1024.0), "mbytes": ("MB/s", 1.0), "mibytes": ("MiB/s", 1.0), "MB": ("MB/s", 1.0),
          "MiB": ("MiB/s", 1.0), "GB": ("GB/s", 1.0), "GiB": ("GiB/s", 1.0), "TB": ("TB/s", 1.0),
          "TiB": ("GiB/s", 1024.0), "gbytes": ("GB/s", 1.0), "gibytes": ("GiB/s", 1.0)}
_KERNEL_WORDS = "|".join(KERNELS)
_ANCHOR = re.compile(
    r"BabelStream\s*$|Version:\s|Implementation:\s|Running\s|Number of elements:|Precision:\s|Array size:\s|"
    r"Total size:\s|Using \S+ device|Driver:\s|Memory:\s|Init:\s|Read:\s|Function\s+\S+\s+Min \(sec\)|"
    r"function,num_times,|phase,n_elements,|(?:%s)[\s,]+[-+.\d]|Runtime \(seconds\)|Bandwidth \(" % _KERNEL_WORDS)
_RVS_LINE = re.compile(r"\[(?:RESULT|ERROR|INFO|DEBUG|TRACE)\s*\]\s*\[\s*\d+\.\d*\s*\]")
_DETECT = re.compile(r"^(?:.*[>:\]]\s*|\s*)(?:BabelStream\s*$|Function\s+\S+\s+Min \(sec\)\s+Max\s+Average|"
                     r"function,num_times,n_elements,sizeof,)", re.MULTILINE)
_BANNER = re.compile(r"^BabelStream\s*$")
_FACT = re.compile(r"^(Version|Implementation|Number of elements|Precision|Driver|Memory):\s*(.*?)\s*$")
_DEVICE = re.compile(r"^Using (\S+) device\s*(.*?)\s*$")
_RUNNING = re.compile(r"^Running\s+(.*?)\s*$")
_SIZE = re.compile(r"^(Array|Total) size:\s*(%s)\s*(\w+)(?:\s*\(=\s*(%s)\s*(\w+)\))?" % (_NUMBER, _NUMBER))
_PHASE = re.compile(r"^(Init|Read):\s*(\S+)\s*s\s*\(=\s*(\S+)\s*(\S+?)\)\s*$")
_HEADER = re.compile(r"^Function\s+(\S+)\s+Min \(sec\)\s+Max\s+Average\s*$")
_CSV_HEADER = re.compile(r"^function,num_times,n_elements,sizeof,max_(\w+?)_per_sec,min_runtime,max_runtime,"
                         r"avg_runtime\s*$")
_CSV_PHASES = re.compile(r"^phase,n_elements,sizeof,max_(\w+?)_per_sec,runtime\s*$")
_CSV_TRIAD = re.compile(r"^function,num_times,n_elements,sizeof,(\w+?)_per_sec,runtime\s*$")
_TRIAD_RUNTIME = re.compile(r"^Runtime \(seconds\):\s*(\S+)\s*$")
_TRIAD_BANDWIDTH = re.compile(r"^Bandwidth \(([^)]*)\):\s*(\S+)\s*$")
_ROW = re.compile(r"^([A-Za-z][\w-]*)\s+(\S.*?)\s*$")
_FAILURE = re.compile(r"^(?:Validation failed|FAILED validation|Error:|Invalid |Unrecognized argument|Unimplemented|"
                      r"Number of times must|Expected benchmark|Unknown benchmark|terminate called|.*Segmentation "
                      r"fault|.*core dumped|hipErrorNoDevice|No devices found)", re.IGNORECASE)
_VALIDATION = re.compile(r"^(?:Validation failed|FAILED validation)")
_RANK = (re.compile(r"\[\d+,(\d+)\]<std(?:out|err|diag)>"), re.compile(r"^\s*(\d+):\s"))


def _unit(token):
    unit = _UNITS.get(token) or _UNITS.get(token.replace("_", "/")) or _UNITS.get(str(token).lower())
    if unit is None:
        raise _Bad("unknown bandwidth unit %r" % token)
    return unit


def detect(text):
    """See the module docstring."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or _RVS_LINE.search(text):
        return False
    return _DETECT.search(text) is not None


class _Run:
    def __init__(self, rank, number):
        self.rank = rank
        self.number = number
        self.facts = {"version": None, "implementation": None, "device": None, "driver": None, "memory": None,
                      "precision": None, "num_times": None, "num_elements": None, "array_size": None,
                      "total_size": None, "selection": None, "api": None}
        self.banner = False
        self.format = None
        self.unit = None            # (unit, factor) of the table
        self.rows = {}              # kernel -> (line, figures)
        self.phases = {}            # Init / Read -> (runtime, bandwidth, unit)
        self.triad_runtime = None
        self.triad = None           # (bandwidth, unit, runtime)
        self.failures = []
        self.lines = 0

    def empty(self):
        return not (self.banner or self.lines)

    def has_results(self):
        return bool(self.rows or self.triad or self.phases)

    def expected(self):
        selection = (self.facts["selection"] or "").lower()
        if self.format == "triad" or selection == "triad":
            return ("Triad",)
        if selection == "nstream":
            return ("Nstream",)
        if selection == "all":
            return KERNELS
        if selection in ("kernels", "classic"):
            return _CLASSIC
        for kernel in KERNELS:
            if selection == kernel.lower():
                return (kernel,)
        return ()


class _Stream:
    """The lines of one rank (or of the whole log): runs one after the other."""

    def __init__(self, parser, rank):
        self.parser = parser
        self.rank = rank
        self.runs = []
        self.run = None
        self.table = False
        self.table_unit = ("MB/s", 1.0)
        self.orphans = []

    def _new(self):
        self.run = _Run(self.rank, len(self.runs) + 1)
        self.runs.append(self.run)
        self.table = False
        return self.run

    def _current(self):
        return self.run if self.run is not None else self._new()

    def line(self, number, text):
        parser = self.parser
        if _BANNER.match(text):
            if self.run is None or not self.run.empty():
                self._new()
            self.run.banner = True
            return
        if _FAILURE.match(text):
            run = self._current()
            run.failures.append({"line": number, "text": shorten(text, 160)})
            parser.failures.append({"line": number, "text": shorten(text, 160)})
            return
        match = _FACT.match(text)
        if match:
            key = {"Version": "version", "Implementation": "implementation", "Number of elements": "num_elements",
                   "Precision": "precision", "Driver": "driver", "Memory": "memory"}[match.group(1)]
            run = self._current()
            if run.facts[key] is not None and (key in ("version", "implementation") or run.has_results()):
                run = self._new()     # a run whose banner was filtered out
            value = match.group(2)
            if key == "num_elements":
                value = int(value) if value.isdigit() else value
            run.facts[key] = value
            run.lines += 1
            return
        match = _DEVICE.match(text)
        if match:
            run = self._current()
            if run.facts["device"] is not None and run.has_results():
                run = self._new()
            run.facts["api"], run.facts["device"] = match.group(1), match.group(2)
            run.lines += 1
            return
        match = _RUNNING.match(text)
        if match:
            run = self._current()
            if run.has_results():
                run = self._new()
            words = match.group(1)
            times = re.search(r"(\d+)\s+times", words)
            run.facts["num_times"] = int(times.group(1)) if times else run.facts["num_times"]
            lowered = words.lower()
            for name in ("all", "classic", "triad", "nstream", "kernels") + tuple(k.lower() for k in KERNELS):
                if re.search(r"\b%s\b" % name, lowered):
                    run.facts["selection"] = "kernels" if name == "kernels" else name
                    break
            run.lines += 1
            return
        match = _SIZE.match(text)
        if match:
            run = self._current()
            entry = {"value": float(match.group(2)), "unit": match.group(3)}
            if match.group(4):
                entry.update(value2=float(match.group(4)), unit2=match.group(5))
            run.facts["array_size" if match.group(1) == "Array" else "total_size"] = entry
            run.lines += 1
            return
        match = _PHASE.match(text)
        if match:
            run = self._current()
            unit, factor = _unit(match.group(4))
            runtime, value = _num(match.group(2), "runtime"), _num(match.group(3), "bandwidth")
            run.phases[match.group(1)] = (runtime, value * factor, unit)
            run.lines += 1
            return
        if self._header(number, text):
            return
        if self._triad(number, text):
            return
        if self._row(number, text):
            return
        if re.match(r"^-{8,}$", text):
            return
        parser.unread.append((number, text))

    def _header(self, number, text):
        for regex, layout in ((_HEADER, "table"), (_CSV_HEADER, "csv"), (_CSV_PHASES, "csv-phases"),
                              (_CSV_TRIAD, "csv-triad")):
            match = regex.match(text)
            if match is None:
                continue
            run = self._current()
            if run.rows and layout in ("table", "csv"):
                run = self._new()       # a second table without its run's banner lines
            try:
                unit = _unit(match.group(1))
            except _Bad as err:
                raise _Bad("a table header with an %s" % err) from None
            if layout in ("table", "csv"):
                run.unit = unit
                run.format = layout
            self.table = layout
            self.table_unit = unit
            self.parser.header_seen = True
            run.lines += 1
            return True
        return False

    def _triad(self, number, text):
        match = _TRIAD_RUNTIME.match(text)
        if match:
            run = self._current()
            run.triad_runtime = _num(match.group(1), "runtime")
            return True
        match = _TRIAD_BANDWIDTH.match(text)
        if match:
            run = self._current()
            unit, factor = _unit(match.group(1))
            value = _num(match.group(2), "bandwidth") * factor
            self.parser.result_row()
            run.triad = (value, unit, run.triad_runtime)
            run.format = run.format or "triad"
            self.parser.header_seen = True
            return True
        return False

    def _row(self, number, text):
        parser = self.parser
        csv = self.table in ("csv", "csv-phases", "csv-triad")
        if csv and "," in text:
            fields = [f.strip() for f in text.split(",")]
        else:
            match = _ROW.match(text)
            if match is None:
                return False
            fields = [match.group(1)] + match.group(2).split()
        kernel = fields[0]
        known = kernel in KERNELS or kernel in ("Init", "Read")
        numeric = len(fields) > 1 and re.match(r"^%s$" % _NUMBER, fields[1]) is not None
        if not known and not (self.table and numeric):
            return False
        if not self.table:
            if numeric:
                self.orphans.append((number, text))
                return True
            return False
        run = self._current()
        try:
            if self.table == "table":
                if len(fields) != 5:
                    raise _Bad("%d fields, the table header has 5" % len(fields))
                figures = [_num(f, "figure") for f in fields[1:]]
                figures[0] *= self.table_unit[1]
                self._add_row(number, run, kernel, figures, text)
            elif self.table == "csv":
                if len(fields) != 8:
                    raise _Bad("%d fields, the csv header has 8" % len(fields))
                figures = [_num(f, "figure") for f in fields[4:8]]
                figures[0] *= self.table_unit[1]
                self._add_row(number, run, kernel, figures, text)
            elif self.table == "csv-phases":
                if len(fields) != 5:
                    raise _Bad("%d fields, the csv header has 5" % len(fields))
                run.phases[kernel] = (_num(fields[4], "runtime"), _num(fields[3], "bandwidth") * self.table_unit[1],
                                      self.table_unit[0])
            else:
                if len(fields) != 6:
                    raise _Bad("%d fields, the csv header has 6" % len(fields))
                parser.result_row()
                run.triad = (_num(fields[4], "bandwidth") * self.table_unit[1], self.table_unit[0],
                             _num(fields[5], "runtime"))
                run.format = "csv"
        except _Bad as err:
            parser.damaged(number, text, str(err))
        return True

    def _add_row(self, number, run, kernel, figures, text):
        if kernel in run.rows:
            raise AcceptanceParseError("%s line %d: a second %s row in one table (first at line %d): the output of "
                                       "several runs is interleaved without rank tags (use mpirun --tag-output or "
                                       "one file per rank): %r" % (self.parser.source, number, kernel,
                                                                   run.rows[kernel][0], shorten(text)))
        self.parser.result_row()
        run.rows[kernel] = (number, figures)


class _Parser:
    def __init__(self, text, source):
        self.source = source
        lines = clean_lines(text_of(text, source))
        patterns = prefixes.learn(lines, _ANCHOR)
        self.prefixes = patterns
        self.lines = []
        for number, line in lines:
            stripped, removed = prefixes.strip(line, patterns)
            rank = None
            for regex in _RANK:
                match = regex.search(removed)
                if match:
                    rank = int(match.group(1))
                    break
            self.lines.append((number, stripped, rank))
        self.cut = False
        self.bad = None
        self.failures = []
        self.unread = []
        self.first_text = None
        self.header_seen = False

    def result_row(self):
        if self.bad is not None:
            number, text, why = self.bad
            raise AcceptanceParseError("%s line %d: not a result row (%s): %r; rows follow it, so the output is not "
                                       "a clean cut run" % (self.source, number, why, shorten(text)))

    def damaged(self, number, text, why):
        if self.bad is None:
            self.bad = (number, text, why)

    def run(self):
        ranks = sorted({rank for _n, _l, rank in self.lines if rank is not None})
        streams = {}
        order = []
        last_rank = None
        for number, line, rank in self.lines:
            text = line.strip()
            if not text:
                continue
            if is_cut(text):
                self.cut = True
                continue
            if self.first_text is None:
                self.first_text = (number, text)
            key = rank if ranks else None
            if key is None and ranks:
                key = last_rank     # an untagged line of a tagged log: the rank before it
            last_rank = key
            if key not in streams:
                streams[key] = _Stream(self, key)
                order.append(key)
            try:
                streams[key].line(number, text)
            except _Bad as err:
                self.damaged(number, text, str(err))
        return self._finish([streams[k] for k in order], ranks)

    def _refuse(self, streams):
        source = self.source
        if self.failures:
            first = self.failures[0]
            raise AcceptanceParseError("%s: the run failed before printing a result table: line %d: %r (%d failure "
                                       "line(s))" % (source, first["line"], first["text"], len(self.failures)))
        if self.bad is not None:
            number, text, why = self.bad
            what = why if why.startswith("a table header") else "not a result row (%s)" % why
            raise AcceptanceParseError("%s line %d: %s: %r" % (source, number, what, shorten(text)))
        orphans = [o for s in streams for o in s.orphans]
        if orphans:
            number, text = orphans[0]
            raise AcceptanceParseError("%s line %d: BabelStream result rows without their 'Function ... Min (sec)' "
                                       "header (%d row-like line(s)): the output was filtered or cut, so the unit "
                                       "is unknown: %r" % (source, number, len(orphans), shorten(text)))
        if self.header_seen or any(r.banner for s in streams for r in s.runs):
            raise AcceptanceParseError("%s: the BabelStream run printed no result row (the output ends at line %d: "
                                       "%r)" % (source, self.lines[-1][0], shorten(self._last_text())))
        where = "first line %d: %r" % (self.first_text[0], shorten(self.first_text[1])) if self.first_text \
            else "the output is empty"
        raise AcceptanceParseError("%s: no BabelStream output (no 'BabelStream' banner, no 'Function  MBytes/sec  "
                                   "Min (sec)' table); %s" % (source, where))

    def _last_text(self):
        for _number, line, _rank in reversed(self.lines):
            if line.strip():
                return line.strip()
        return ""

    def _finish(self, streams, ranks):
        runs = [r for s in streams for r in s.runs if r.has_results()]
        if not runs:
            self._refuse(streams)
        result = new_result("babelstream", "stream", self.source)
        tagged = len(ranks) > 1
        per_rank = {}
        for run in runs:
            per_rank.setdefault(run.rank, []).append(run)
        complete = not self.cut and self.bad is None
        listed = []
        for run in runs:
            scope = {}
            if tagged:
                scope["rank"] = run.rank
            if len(per_rank[run.rank]) > 1:
                scope["run"] = per_rank[run.rank].index(run) + 1
            run_complete = all(k in run.rows or (k == "Triad" and run.triad) for k in run.expected())
            complete = complete and run_complete
            self._measure(result, run, scope)
            listed.append(dict(run.facts, scope=scope, kernels=list(run.rows) or (["Triad"] if run.triad else []),
                               format=run.format, complete=run_complete, failures=list(run.failures)))
        result["complete"] = complete
        first = listed[0]
        result["version"] = first["version"]
        result.update({
            "runs": listed,
            "device_names": sorted({r["device"] for r in listed if r["device"]}),
            "implementation": first["implementation"],
            "precision": first["precision"],
            "array_size": first["array_size"],
            "num_times": first["num_times"],
            "ranks": sorted({r["scope"]["rank"] for r in listed if "rank" in r["scope"]}),
            "format": first["format"],
            "failures": list(self.failures),
            "prefixes": list(self.prefixes),
        })
        result["warnings"] = self._warnings(listed, streams)
        return result

    @staticmethod
    def _measure(result, run, scope):
        add = result["measurements"].append
        unit = (run.unit or ("MB/s", 1.0))[0]
        for phase, (runtime, value, phase_unit) in run.phases.items():
            add(measurement("bandwidth", phase_unit, value, phase, **scope))
            add(measurement("runtime", "s", runtime, phase, **scope))
        for kernel, (_number, figures) in run.rows.items():
            add(measurement("bandwidth", unit, figures[0], kernel, **scope))
            for metric, value in zip(("min_runtime", "max_runtime", "avg_runtime"), figures[1:]):
                add(measurement(metric, "s", value, kernel, **scope))
        if run.triad:
            value, triad_unit, runtime = run.triad
            add(measurement("bandwidth", triad_unit, value, "Triad", **scope))
            if runtime is not None:
                add(measurement("runtime", "s", runtime, "Triad", **scope))
        invalid = any(_VALIDATION.match(f["text"]) for f in run.failures)
        add(measurement("valid", "bool", not invalid, None, **scope))

    def _warnings(self, listed, streams):
        warnings = []
        if self.cut:
            warnings.append("the output holds cut markers ('...'): lines were left out, so the result is not "
                            "complete")
        if self.bad is not None:
            number, text, why = self.bad
            warnings.append("truncated run: line %d is not a complete row (%s): %r" % (number, why, shorten(text)))
        for run in listed:
            if not run["complete"]:
                where = ", ".join("%s %s" % kv for kv in sorted(run["scope"].items())) or "the run"
                warnings.append("%s: the table lacks kernels its 'Running ...' line announces (has %s): the output "
                                "was cut" % (where, ", ".join(run["kernels"]) or "none"))
        empty = [r for s in streams for r in s.runs if not r.has_results() and not r.empty()]
        if empty:
            warnings.append("%d run(s) printed no result table" % len(empty))
        invalid = [r for r in listed if any(_VALIDATION.match(f["text"]) for f in r["failures"])]
        if invalid:
            warnings.append("%d run(s) failed BabelStream's validation: %s" % (len(invalid), invalid[0]["failures"][0]
                                                                               ["text"]))
        if self.unread:
            number, text = self.unread[0]
            warnings.append("%d line(s) not read (first: line %d: %r)" % (len(self.unread), number, shorten(text)))
        return warnings


def parse(text, source="output"):
    """See the module docstring."""
    return _Parser(text, source).run()
