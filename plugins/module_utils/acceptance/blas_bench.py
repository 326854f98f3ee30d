"""Parse rocblas-bench and hipblaslt-bench output (the GEMM benchmarks of AMD's acceptance guide) into measurements.

Public API (standard library only, Python 3.8+):

``parse(text, source="output", command=None)``
    ``common.new_result`` with ``tool`` ``rocblas-bench`` or ``hipblaslt-bench``, ``test`` the BLAS function
    (``gemm``, ``gemm_strided_batched_ex``, ``matmul``...; None when the log holds several, see ``parse_each``, or
    names none) and one ``gflops`` (GFLOPS, the tool's ``rocblas-Gflops`` / ``hipblaslt-Gflops``), ``us`` (us, the tool's ``us``:
    GPU time per call) and, where printed, ``bandwidth`` (GB/s, ``*-GB/s``) measurement per problem the log
    prints. ``case`` is the precision of matrix A (below); ``scope`` the problem: ``m``, ``n``, ``k``, ``trans_a``,
    ``trans_b``, ``batch_count`` (where printed), ``device`` (where the command names ``--device``) and
    ``problem`` (its 1-based order) when the log holds more than one. Extra keys: ``problems`` (every problem:
    ``line``, ``tool``, ``function`` and where it was read (``function_from``: ``column``, ``command``, ``columns``
    (the rocBLAS column set of one GEMM function), ``tool`` (hipblaslt-bench has one function)), ``columns`` (the
    printed values, text), ``a_type``/``b_type``/``c_type``/``d_type``/``compute_type`` (rocBLAS names) and
    ``types_from`` (``column``, ``command``, None), ``case``, ``gflops``, ``gbytes``, ``us``, ``index`` (hipBLASLt's
    ``[i]:`` solution number), ``solution``/``kernel`` (``--print_kernel_info``), ``role`` (``result``, ``winner``
    or ``candidate``: a hipBLASLt tuning candidate before its ``Winner:``, not measured)), ``devices`` (the
    ``Device ID n : name gfx`` lines), ``commands`` (the command lines read: echoed in the log or given), and
    ``failures`` (the tools' error lines).

    The precision (``case``): the ``a_type`` column (``--log_datatype`` / ``-z`` in rocblas-bench, always printed
    by hipblaslt-bench), else the command that ran the problem (echoed in the log, ``$ rocblas-bench -f gemm -r s
    ...``, or given as ``command``: a string or argument list): its ``--a_type``, else ``-r``/``--precision``,
    else the tool's default (rocblas-bench ``f32_r``, hipblaslt-bench ``f16_r``). rocBLAS type names (``h``,
    ``s``, ``d``, ``c``, ``z`` are ``f16_r``, ``f32_r``, ``f64_r``, ``f32_c``, ``f64_c``) map to ``fp16``,
    ``fp32``, ``fp64``, ``bf16``, ``fp8`` (``f8_r``), ``bf8``, ``int8`` (``i8_r``), ``int32``, ``uint8`` ...,
    complex types with ``-complex`` (``fp32-complex``); the compute type does not change it (AMD's "rocBLAS
    BF16" card runs ``--a_type h --compute_type s``: case ``fp16``). Without a type column or command the case is
    None (with a warning): rocblas-bench prints no precision by default, and the same columns serve every
    precision. The function (``test``): the ``function`` column (``--log_function_name``), else the command's
    ``-f``, else the column set where it belongs to one rocBLAS GEMM function (``gemm``: transA..ldc;
    ``gemm_batched``: + batch_count; ``gemm_strided_batched``: + stride_a/b/c; ``gemm_strided_batched_ex``: +
    ldd/stride_d, the columns of ``gemm_strided_batched_ex3`` too), ``matmul`` for hipblaslt-bench.

    Accepted: rocBLAS's and hipBLASLt's banners and info lines, the ``Device ID`` block, blank lines between the
    header and its value line, several problems and invocations in one log (``--yaml`` runs, scripts), hipBLASLt's
    solution lines and ``Winner:`` block (the winner is the problem's measurement, the candidates before it are
    kept in ``problems``), launcher and log prefixes (``prefixes.learn``), cut markers (skipped; not
    ``complete``). Not ``complete`` either: a header without its value line, a truncated last line, a hipBLASLt
    candidate set without its winner (its figures are not measured), an error line of the tool. Refused
    (``AcceptanceParseError``, one line): no result header; a value line whose fields do not match its header
    (unless it is the last line); a figure that is not a number; rocblas-bench and hipblaslt-bench output in one
    log.
``parse_each(text, source="output", command=None)``
    One ``parse`` result per function of the log, in the order they first appear (each with its own ``test`` and
    ``problems``): what ``criteria.judge`` needs for a log of several of AMD's commands.
``detect(text)``
    True for rocblas-bench or hipblaslt-bench output: a result header (a comma-separated column list with
    ``rocblas-Gflops``/``-GB/s`` or ``hipblaslt-Gflops``/``-GB/s``) or an echoed command line of either tool.
``case_of(type_name)``
    The ``case`` of a rocBLAS/hipBLASLt type name (``f32_r`` -> ``fp32``, ``h`` -> ``fp16``); None if unknown.
"""

import math
import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, last_meaningful, measurement, new_result, options, shorten, split_command
from .common import refuse as _refuse

TOOLS = {"rocblas": "rocblas-bench", "hipblaslt": "hipblaslt-bench"}
DEFAULT_PRECISION = {"rocblas-bench": "f32_r", "hipblaslt-bench": "f16_r"}

_PERF = re.compile(r"(?:^|,)(rocblas|hipblaslt)-(?:Gflops|GB/s)(?=,|$)")
_NAME = re.compile(r"^[A-Za-z_][\w.\-/%']*$")
_FIRST_NAME = re.compile(r"(\[\d+\]:)?([A-Za-z_][\w.\-/%']*)$")
_COMMAND = re.compile(r"(?:^|[\s/$+>#;&|(])((?:rocblas|hipblaslt)-bench)(?:\.exe)?[ \t]+(-.*)$")
_DEVICE = re.compile(r"^\s*Device ID\s+(\d+)\s*:\s*(.*?)\s*$")
_VERSION = re.compile(r"^\s*(rocBLAS|hipBLASLt) version:\s*(\S+)")
_WINNER = re.compile(r"^\s*Winner:\s*$")
_SOLUTION = re.compile(r"^\s*--\s*(Solution index|Solution name|kernel name)\s*:\s*(.*?)\s*$", re.IGNORECASE)
_FAILURE = re.compile(
    r"^\s*(?:rocBLAS error|hipBLASLt error|hipblaslt-bench error|rocblas-bench error)\b|\berror: |"
    r"^\s*terminate called\b|\bSegmentation fault\b|\bcore dumped\b|^\s*Aborted\b|No Solution Found|"
    r"\bhipError\w+|\bInvalid value for\b|\bMemory allocation error\b|^\s*what\(\):", re.IGNORECASE)
_INFO = re.compile(r"^\s*(?:rocBLAS|hipBLASLt|rocblas-bench|hipblaslt-bench)\b.*?(?:info|warning|INFO|WARNING)\b")

_TYPE_ALIASES = {"h": "f16_r", "s": "f32_r", "d": "f64_r", "c": "f32_c", "z": "f64_c", "f16_k": "f16_c",
                 "f8_fnuz_r": "f8_r", "bf8_fnuz_r": "bf8_r"}
_TYPE = re.compile(r"^(bf|f|i|u)(\d+)_(r|c)$")
_TYPE_PREFIX = {"bf": "bf", "f": "fp", "i": "int", "u": "uint"}
_INT_COLUMNS = ("M", "N", "K", "m", "n", "k", "lda", "ldb", "ldc", "ldd", "lde", "stride_a", "stride_b",
                "stride_c", "stride_d", "stride_e", "batch_count", "cold_iters", "hot_iters", "grouped_gemm")
# the rocBLAS GEMM functions one column set belongs to (clients/include/blas3/testing_gemm*.hpp and
# blas_ex/testing_gemm*_ex*.hpp ArgumentModel lists); gemm_ex, gemm_batched_ex and gemm_ex3 print the same set
_GEMM_COLUMNS = {
    ("transA", "transB", "M", "N", "K", "alpha", "lda", "beta", "ldb", "ldc"): "gemm",
    ("transA", "transB", "M", "N", "K", "alpha", "lda", "beta", "ldb", "ldc", "batch_count"): "gemm_batched",
    ("transA", "transB", "M", "N", "K", "alpha", "lda", "stride_a", "beta", "ldb", "stride_b", "ldc", "stride_c",
     "batch_count"): "gemm_strided_batched",
    ("transA", "transB", "M", "N", "K", "alpha", "lda", "stride_a", "beta", "ldb", "stride_b", "ldc", "stride_c",
     "ldd", "stride_d", "batch_count"): "gemm_strided_batched_ex",
}
# columns after the problem's arguments (rocBLAS ArgumentModel::log_perf, hipBLASLt log_perf)
_PERF_TAIL = re.compile(r"^(?:lowest-avg-freq|lowest-median-freq|lowest_avg_freq|lowest_median_freq|avg-freq_\d+|"
                        r"median-freq_\d+|avg-MCLK|median-MCLK|avg_MCLK|median_MCLK|cold_iters|hot_iters|"
                        r"(?:rocblas|hipblaslt)-(?:Gflops|GB/s)|us|CPU-Gflops|CPU-us|norm_error(?:_\d)?|atol|rtol|"
                        r"efficiency)$")
_COMMAND_SPEC = {
    "function": (("f", "function"), True), "precision": (("r", "precision"), True),
    "a_type": (("a_type",), True), "b_type": (("b_type",), True), "c_type": (("c_type",), True),
    "d_type": (("d_type",), True), "compute_type": (("compute_type",), True),
    "m": (("m", "sizem"), True), "n": (("n", "sizen"), True), "k": (("k", "sizek"), True),
    "device": (("device",), True), "batch_count": (("batch_count", "batch"), True),
    "trans_a": (("transposeA", "transA"), True), "trans_b": (("transposeB", "transB"), True),
}


def case_of(type_name):
    """See the module docstring."""
    name = _TYPE_ALIASES.get(str(type_name or "").strip().lower(), str(type_name or "").strip().lower())
    match = _TYPE.match(name)
    if match is None:
        return None
    kind, bits, domain = match.groups()
    return "%s%s%s" % (_TYPE_PREFIX[kind], bits, "-complex" if domain == "c" else "")


def _type_name(value):
    value = str(value or "").strip().lower()
    return _TYPE_ALIASES.get(value, value) or None


def _header(line):
    """(start, tool, index, columns) of a result header on ``line``, or None."""
    match = _PERF.search(line)
    if match is None:
        return None
    token_start = max(line.rfind(" ", 0, match.start()), line.rfind("\t", 0, match.start())) + 1
    token = line[token_start:]
    if re.search(r"\s", token):
        return None
    fields = token.split(",")
    position = len(fields) - 1
    while position > 0 and _NAME.match(fields[position]):
        position -= 1
    # fields[position] holds the first column, glued to a prefix or to hipBLASLt's "[i]:" where there is one
    first = _FIRST_NAME.search(fields[position])
    if first is None:
        position += 1
        start, index, columns = token_start + len(",".join(fields[:position])) + 1, None, fields[position:]
    else:
        start = token_start + sum(len(f) + 1 for f in fields[:position]) + first.start()
        index, columns = first.group(1), [first.group(2)] + fields[position + 1:]
    if len(columns) < 2 or len(set(columns)) != len(columns) or not all(_NAME.match(c) for c in columns):
        return None
    return start, TOOLS[match.group(1)], (int(index[1:-2]) if index else None), columns


_ANCHORS = ("Device ID ", "rocBLAS version:", "hipBLASLt version:", "hipBLASLt git version:", "rocBLAS info:",
            "rocBLAS-commit-hash:", "Tensile-commit-hash:", "Query device success", "Winner:")


def _anchor(line):
    found = _header(line)
    if found is not None:
        return found[0]
    for marker in _ANCHORS:
        position = line.find(marker)
        if position >= 0:
            return position
    return None


def _number(text, column, source, number, line, kind=float):
    try:
        value = kind(text) if kind is int else float(text)
    except ValueError:
        _refuse(source, number, line, "%s %r is not a number" % (column, text))
    if kind is float and (not math.isfinite(value) or value < 0):
        _refuse(source, number, line, "%s %r is not a finite non-negative number" % (column, text))
    return value


def _command_facts(command):
    args = split_command(command)
    found, _rest = options(args[1:] if args and "bench" in args[0] else args, _COMMAND_SPEC)
    return found


def _echoed_command(line):
    match = _COMMAND.search(line)
    if match is None or _INFO.match(line):
        return None
    return match.group(1), match.group(1) + " " + match.group(2)


def detect(text):
    """See the module docstring."""
    if not isinstance(text, str):
        return False
    for _number, line in clean_lines(text):
        found = _header(line)
        if found is not None and len(found[3]) >= 3:
            return True
        if _echoed_command(line) is not None:
            return True
    return False


class _Parser:
    def __init__(self, source, command):
        self.source = source
        self.given = command
        self.problems = []
        self.pending = None          # (number, line, header tuple)
        self.cut = False
        self.echoed = None           # (tool, command text) of the invocation the next problems belong to
        self.winner_next = False
        self.failures = []
        self.warnings = []
        self.devices = []
        self.version = None
        self.commands = [] if command is None else [" ".join(split_command(command))]

    def run(self, text):
        lines = clean_lines(text)
        lines = prefixes.strip_all(lines, prefixes.learn(lines, _anchor))
        last = last_meaningful(lines)
        for number, line in lines:
            self._line(number, line, number == last)
        if self.pending is not None:
            self.warnings.append("line %d: the result header has no value line: the output was cut" % self.pending[0])
            self.cut = True
        return self._finish(lines)

    def _line(self, number, line, is_last):
        stripped = line.strip()
        if not stripped:
            return
        if is_cut(line):
            self.cut = True
            return
        header = _header(line)
        if header is not None:
            if self.pending is not None:
                self.warnings.append("line %d: the result header has no value line before the next header (line %d)"
                                     % (self.pending[0], number))
                self.cut = True
            self.pending = (number, line, header)
            return
        echoed = _echoed_command(line)
        if echoed is not None:
            self.echoed = echoed
            self.commands.append(echoed[1])
            return
        if _WINNER.match(line):
            self.winner_next = True
            return
        match = _SOLUTION.match(line)
        if match is not None and self.problems:
            key = {"solution index": "solution_index", "solution name": "solution", "kernel name": "kernel"}[
                match.group(1).lower()]
            self.problems[-1][key] = match.group(2)
            return
        match = _DEVICE.match(line)
        if match is not None:
            self.devices.append({"id": int(match.group(1)), "name": match.group(2)})
            return
        match = _VERSION.match(line)
        if match is not None:
            self.version = match.group(2)
            return
        if _FAILURE.search(line) and not _INFO.match(line):
            self.failures.append({"line": number, "text": shorten(stripped, 160)})
            return
        if self.pending is None or "," not in stripped:
            return
        self._values(number, line, is_last)

    def _values(self, number, line, is_last):
        header_number, _header_line, (_start, tool, index, columns) = self.pending
        fields = [f.strip() for f in line.strip().split(",")]
        if len(fields) != len(columns):
            if is_last:
                self.warnings.append("line %d: the last value line has %d fields, its header (line %d) %d: the "
                                     "output was cut" % (number, len(fields), header_number, len(columns)))
                self.cut = True
                self.pending = None
                return
            _refuse(self.source, number, line, "%d fields, the result header on line %d has %d" % (
                len(fields), header_number, len(columns)))
        self.pending = None
        values = dict(zip(columns, fields))
        problem = {"line": number, "header_line": header_number, "tool": tool, "index": index, "columns": values,
                   "role": "winner" if self.winner_next else "result"}
        self.winner_next = False
        for column in columns:
            if column in _INT_COLUMNS:
                try:
                    values[column] = int(values[column])
                except ValueError:
                    _refuse(self.source, number, line, "%s %r is not an integer" % (column, values[column]))
        perf = {"gflops": "%s-Gflops" % tool.split("-")[0], "gbytes": "%s-GB/s" % tool.split("-")[0], "us": "us"}
        for key, column in perf.items():
            problem[key] = _number(values[column], column, self.source, number, line) if column in values else None
        self._describe(problem, columns)
        self.problems.append(problem)

    def _describe(self, problem, columns):
        values, tool = problem["columns"], problem["tool"]
        given = _command_facts(self.given) if self.given is not None else {}
        echoed = _command_facts(self.echoed[1]) if self.echoed is not None and self.echoed[0] == tool else {}
        command = echoed or given
        problem["command"] = (self.echoed[1] if echoed else (self.commands[0] if given else None))
        arguments = tuple(c for c in columns if not _PERF_TAIL.match(c) and c not in ("function", "a_type", "b_type",
                                                                                      "c_type", "d_type",
                                                                                      "compute_type"))
        if "function" in values:
            problem["function"], problem["function_from"] = values["function"], "column"
        elif command.get("function"):
            problem["function"], problem["function_from"] = command["function"], "command"
        elif tool == "hipblaslt-bench":
            problem["function"], problem["function_from"] = "matmul", "tool"
        elif arguments in _GEMM_COLUMNS:
            problem["function"], problem["function_from"] = _GEMM_COLUMNS[arguments], "columns"
        else:
            problem["function"], problem["function_from"] = None, None
        size = {"m": values.get("M", values.get("m")), "n": values.get("N", values.get("n")),
                "k": values.get("K", values.get("k"))}
        if command and any(command.get(key) not in (None, str(value)) for key, value in size.items()
                           if value is not None):
            self.warnings.append("line %d: the command (%s) names another problem size than the row: its types are "
                                 "not used" % (problem["line"], shorten(problem["command"] or "", 60)))
            command = {}
            problem["command"] = None
        types = ("a_type", "b_type", "c_type", "d_type", "compute_type")
        if "a_type" in values:
            problem.update({t: _type_name(values.get(t)) for t in types})
            problem["types_from"] = "column"
        elif command:
            precision = _type_name(command.get("precision")) or DEFAULT_PRECISION[tool]
            problem.update({t: _type_name(command.get(t)) or precision for t in types})
            if tool == "hipblaslt-bench" and not command.get("compute_type"):
                problem["compute_type"] = "f32_r"
            problem["types_from"] = "command"
        else:
            problem.update({t: None for t in types})
            problem["types_from"] = None
        problem["case"] = case_of(problem["a_type"])
        problem["device"] = command.get("device")
        scope = {key: value for key, value in size.items() if value is not None}
        for key, column in (("trans_a", "transA"), ("trans_b", "transB")):
            if column in values:
                scope[key] = values[column]
        if "batch_count" in values:
            scope["batch_count"] = values["batch_count"]
        if problem["device"] is not None:
            scope["device"] = problem["device"]
        problem["scope"] = scope

    def _winners(self):
        """hipBLASLt tuning candidates: the rows before a ``Winner:`` block with the winner's arguments."""
        open_set = []
        for problem in self.problems:
            if problem["tool"] != "hipblaslt-bench":
                continue
            key = tuple(sorted((k, str(v)) for k, v in problem["columns"].items() if not _PERF_TAIL.match(k)))
            if problem["role"] == "winner":
                for other in open_set:
                    if other["key"] == key:
                        other["problem"]["role"] = "candidate"
                open_set = []
                continue
            if open_set and open_set[-1]["key"] != key:
                open_set = []
            open_set.append({"key": key, "problem": problem})
        unfinished = [o["problem"] for o in open_set if o["problem"]["index"] not in (None, 0)]
        if unfinished:
            self.cut = True
            self.warnings.append("line %d: hipBLASLt printed %d tuning candidate(s) but no 'Winner:' after them: the "
                                 "run did not finish, its result is not measured" % (unfinished[0]["line"],
                                                                                     len(open_set)))
            for item in open_set:
                item["problem"]["role"] = "candidate"

    def _finish(self, lines):
        """Check the log, then return its problems ordered by function: [(function, [problems])]."""
        source = self.source
        if not self.problems:
            if self.failures:
                first = self.failures[0]
                _refuse(source, first["line"], first["text"], "the run failed before printing a result")
            number, line = next(((n, t) for n, t in lines if t.strip()), (1, ""))
            why = ("the result header has no value line" if self.warnings else
                   "no rocblas-bench / hipblaslt-bench result (a header line with rocblas-Gflops or hipblaslt-Gflops "
                   "and its value line)")
            _refuse(source, number, line, why)
        tools = sorted({p["tool"] for p in self.problems})
        if len(tools) > 1:
            second = next(p for p in self.problems if p["tool"] != self.problems[0]["tool"])
            _refuse(source, second["line"], "", "rocblas-bench and hipblaslt-bench output in one log: parse each alone")
        self._winners()
        if self.failures:
            self.warnings.append("line %d: the tool reported an error: %s" % (self.failures[0]["line"],
                                                                              self.failures[0]["text"]))
        groups = []
        for problem in self.problems:
            if not groups or all(g[0] != problem["function"] for g in groups):
                groups.append((problem["function"], []))
            next(g for g in groups if g[0] == problem["function"])[1].append(problem)
        return groups

    def result(self, test, problems, note_mixed=None):
        """The result of ``problems`` (all of the log's, or one function's)."""
        result = new_result(self.problems[0]["tool"], test, self.source)
        warnings = list(self.warnings)
        if note_mixed:
            warnings.append(note_mixed)
        measured = [p for p in problems if p["role"] != "candidate"]
        unknown = [p for p in measured if p["case"] is None]
        if unknown:
            warnings.append(
                "line %d: %d problem(s) without a precision: the output prints no a_type column (rocblas-bench "
                "--log_datatype or -z) and no command names it; give the command (parse(..., command=...)) or echo "
                "it in the log" % (unknown[0]["line"], len(unknown)))
        for order, problem in enumerate(measured, 1):
            scope = dict(problem["scope"])
            if len(measured) > 1:
                scope["problem"] = order
            for key, metric, unit in (("gflops", "gflops", "GFLOPS"), ("us", "us", "us"),
                                      ("gbytes", "bandwidth", "GB/s")):
                if problem[key] is not None:
                    result["measurements"].append(measurement(metric, unit, problem[key], problem["case"], **scope))
        result.update(version=self.version, complete=not (self.cut or self.failures), problems=problems,
                      devices=self.devices, commands=self.commands, failures=self.failures, warnings=warnings)
        return result


def _parser(text, source, command):
    if not isinstance(text, str):
        raise AcceptanceParseError("%s line 0: %r: expected text, got %s" % (source, "", type(text).__name__))
    parser = _Parser(source, command)
    return parser, parser.run(text)


def parse(text, source="output", command=None):
    """See the module docstring."""
    parser, groups = _parser(text, source, command)
    if len(groups) == 1:
        note = None if groups[0][0] is not None else (
            "the output names no function (no function column or command, and a column set several functions "
            "print): no test")
        return parser.result(groups[0][0], parser.problems, note)
    functions = ", ".join(str(f) for f, _p in groups)
    note = ("the log holds problems of the functions %s: no single test (parse_each gives one result per function)"
            % functions if len(groups) > 1 else "")
    return parser.result(None, parser.problems, note)


def parse_each(text, source="output", command=None):
    """See the module docstring."""
    parser, groups = _parser(text, source, command)
    return [parser.result(function, problems) for function, problems in groups]
