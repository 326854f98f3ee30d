"""Parse ROCm Validation Suite (``rvs -c <conf>``) output into acceptance results (``common.new_result`` shape).

Public API (standard library only, Python 3.8+):

``MODULES``
    The RVS modules whose figures are read: ``gst``, ``iet``, ``mem``, ``pebb``, ``pbqt``, ``peqt``, ``gpup``,
    ``babel``. Other modules (``gm``, ``pesm``, ``rcqt``...) are listed with their actions and summary verdicts only.
``detect(text)``
    True when ``text`` is RVS output: a ``[RESULT] [<seconds>.<micro>]`` log line (any level), an ``RVS-ERROR``
    line, the summary table or ``rvs -g``'s banner. Never true for BabelStream, TransferBench, rccl-tests...
``parse_all(text, source="output")``
    One result per RVS module of the log, in the order the modules first appear: ``new_result("rvs", <module>,
    source)`` (``test`` is the module). An ``rvs -c`` run of a conf with several modules' actions gives several
    results, so a criterion (``tool`` rvs, ``test`` gst...) meets only its module's measurements.
``parse(text, source="output")``
    The first module's result, plus ``others`` (the results of the log's other modules, ``[]`` for a one-module
    log) and a warning naming them: pass ``[result] + result["others"]`` to ``criteria.judge``.

Every result holds ``modules`` (all the log's modules), ``actions`` (this module's actions in order: ``name``,
``module``, ``gpus``, ``lines``, ``result`` (the summary table's PASS/FAIL as a bool, False after RVS's
``Action failed to run successfully.``, else None), ``gpus`` (the RVS GPU ids seen, as printed: ``28851``, not
indices), ``gpu_info`` (``[{id, node, index, bdf, name}]`` from ``[GPU:: node - id - bdf]`` references, the
summary table and ``rvs -g``), ``per_gpu`` (``[{action, gpu, lines, samples}]``: gst interval GFLOPS, iet
Power(W) samples), ``version`` (RVS version from the summary table or ``rvs -g``), ``rocm_version``, ``summary``
(the summary table was printed), ``filtered`` (the log holds ``grep`` command lines: a filtered log),
``commands``, ``errors`` (``[{line, text}]``: ERROR-level and ``RVS-ERROR`` lines), ``prefixes`` (launcher or
log prefixes removed), module details (``properties`` / ``io_links`` for gpup, ``capabilities`` for peqt,
``links`` (distances) for pebb / pbqt, ``mem_tests`` for mem) and ``warnings``.

Measurements (``scope`` always has ``action``; ``gpu`` is the RVS GPU id as printed):

=========  ==========================================================================================
gst        ``met`` (bool) and ``gflops`` / ``target_gflops`` (GFLOPS) of the final line of each GPU
           (``GFLOPS <max> Target GFLOPS: <target> met: TRUE``; the older ``Target stress : .. met :TRUE``)
iet        ``pass`` (bool, ``pass: TRUE``) and ``power_max`` (W, the largest printed ``Power(W)`` sample)
mem        ``pass`` (bool, ``Test N : PASS``) and Test 11's ``bandwidth`` (GB/s) and ``elapsedtime`` (ms);
           mem lines carry no GPU id, so the scope is ``{action, test, n}`` (``n``: the n-th report of that
           test in the action). A test started but never passed in an action the log shows finished (another
           action or the summary follows, or every GPU went on to a later test) is ``pass`` False.
pebb       ``bandwidth`` (GB/s), ``duration`` (s) and ``measured`` (bool; False for ``(not measured)``) of
           each final transfer line, scope ``{action, cpu, gpu}``; a transfer ``i/N`` missing from a finished action is
           ``measured`` False, scope ``{action, transfer}``
pbqt       ``peers`` (bool) per ``p2p`` pair line and ``bandwidth`` / ``duration`` / ``measured`` per final
           ``p2p-bandwidth`` line, scope ``{action, src, dst}``; a2a ``aggregate_bandwidth``
peqt       ``pass`` (bool) of each action's ``peqt true`` / ``peqt false`` (False for a finished action
           that printed neither)
gpup       ``gpus`` (count, node scope ``{}``): the distinct GPU ids the gpup actions list
babel      per GPU and kernel (``case`` Copy, Mul, Add, Triad, Dot, Read, Write): ``bandwidth`` (MB/s or
           MiB/s as printed) and, as the table prints them, ``max_bandwidth`` / ``min_bandwidth`` /
           ``avg_bandwidth`` or ``min_runtime`` / ``max_runtime`` / ``avg_runtime`` (s); triad-only
           blocks: ``bandwidth`` (GB/s or GiB/s) and ``runtime``
all        ``result`` (bool) per action where the summary table (or an ``Action failed`` line) says;
           ``errors`` (count) per action when the output is complete
=========  ==========================================================================================

An action is finished when another action or the summary table follows it. A GPU whose gst / iet action
finished but which printed no final verdict is ``met`` / ``pass`` False (AMD's rule is ``met: TRUE`` per GPU).
An action whose ``Module name`` line was cut or filtered out takes the module of the action before it; a tagged
line of an action never announced (a filtered log) names its module by its own form (``mem Test``,
``[GPU:: id] GFLOPS``, ``p2p``, ``pcie-bandwidth``...). Figures a cut or filtered log may hide (``gpus``, ``errors``,
the verdicts inferred from missing lines) are left out rather than guessed, and ``complete`` is False.

Accepted: padded timestamps (``[1101992.16545 ]``), ``grep`` command lines of filtered logs, the authors'
cut markers (skipped; ``complete`` False), launcher and log prefixes (learned from the lines RVS always prints,
then removed), ANSI colours of the summary table, the pre-2024 line layouts (``gst <id> GFLOPS ... met :TRUE``,
``p2p <id> <id> peers:true``, ``pcie-bandwidth  [1/16]  CPU ::0 GPU ::<id>``). Refused with
``AcceptanceParseError`` (one line: source, line number, the line, why): output with no RVS line, a run that
only failed, ``rvs -g`` alone, and a malformed result line (a number or verdict that cannot be read) with
result lines after it (as the last line it is a cut: ``complete`` False).
"""

import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, measurement, new_result, shorten, text_of
from .common import UnreadableFigure as _Bad
from .common import finite_number as _num

MODULES = ("gst", "iet", "mem", "pebb", "pbqt", "peqt", "gpup", "babel")
_OTHER_MODULES = ("gm", "pesm", "rcqt", "smqt", "pulse", "tst", "perf", "perq", "rvs")

_LEVELS = "RESULT|ERROR|INFO|DEBUG|TRACE|NONE"
_LEVEL = re.compile(r"^\[(%s)\s*\]\s*\[\s*\d+\.\d*\s*\]\s?(.*)$" % _LEVELS)
_ANCHOR = re.compile(r"\[(?:%s)\s*\]\s*\[\s*\d+\.\d*\s*\]|RVS-ERROR\b|\+={20,}\+|"
                     r"\|\s*ROCm Validation Suite \(RVS\) Summary|ROCm Validation Suite \(version" % _LEVELS)
_DETECT = re.compile(r"\[(?:%s)\s*\]\s*\[\s*\d+\.\d*\s*\]|^\s*\S*\s*RVS-ERROR \[|ROCm Validation Suite \(RVS\) "
                     r"Summary|ROCm Validation Suite \(version" % _LEVELS, re.MULTILINE)
_RVS_ERROR = re.compile(r"^RVS-ERROR(?:\s*\[([^\]]*)\])?(?:\s*\[([^\]]*)\])?\s*(.*)$")
_ACTION_NAME = re.compile(r"^Action name\s*:\s*(.*?)\s*$")
_MODULE_NAME = re.compile(r"^Module name\s*:\s*(.*?)\s*$")
_TAGGED = re.compile(r"^\[([^\]]+)\]\s?(.*)$")
_GREP = re.compile(r"^\s*(?:[$#>]\s*)?(?:sudo\s+)?(?:\w+=\S*\s+)*(?:\S*/)?[efz]?grep\b")
_RVS_COMMAND = re.compile(r"^\s*(?:[$#>]\s*)?(?:sudo\s+)?(?:\w+=\S*\s+)*(?:\S*/)?rvs(?:\s|$)")
_LIST_BANNER = re.compile(r"^ROCm Validation Suite \(version\s*([^)]*)\)")
_LIST_GPU = re.compile(r"^([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*-\s*GPU\[\s*(\d+)\s*-\s*(\d+)\s*\]"
                       r"\s*(.*?)\s*(?:\(Device\s+\d+\))?$")
_BDF = r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_GPU_REF = re.compile(r"\[GPU::\s*(\d+)\s*-\s*(\d+)\s*-\s*(%s)\s*\]" % _BDF)
_GPU_TAG = re.compile(r"^\[GPU::\s*([^\]]*?)\s*\]\s*(.*)$")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_BANDWIDTH = re.compile(r"(?P<value>%s|\S+)\s*GBps(?P<interval>\s*\(\*\))?|\((?P<state>not measured|pending)\)" % _NUMBER)
_DURATION = re.compile(r"duration\s*:\s*(\S+)\s*secs?\b")
# summary table (RVS >= 1.6): rows between '|' borders
_SUMMARY_KEY = re.compile(r"^\|\s*(Operating System|RVS version|ROCm version|amdgpu version|GPUs)\s*\|\s*(.*?)\s*\|$")
_SUMMARY_NAMES = re.compile(r"^\|\s*(.+?)\s+-\s+(\d+)\s*\|\s*(?:(.+?)\s+-\s+(\d+))?\s*\|$")
_SUMMARY_PLACES = re.compile(r"^\|\s*(\d+)\s*-\s*(\d+)\s*-\s*(%s)\s*\|\s*(?:(\d+)\s*-\s*(\d+)\s*-\s*(%s))?\s*\|$"
                             % (_BDF, _BDF))
_SUMMARY_ACTION = re.compile(r"^\|\s*(\S.*?)\s*\|\s*([A-Za-z0-9_]+)\s*\|\s*(PASS|FAIL)\s*\|$")
_BORDER = re.compile(r"^\+[-=]+\+$")
# mem (mem.so rvs_memtest.cpp): 'Test N: <what>' / 'Test N [<what>]' start a test, 'Test N : PASS' ends it
_MEM_VERDICT = re.compile(r"^Test\s+(\d+)\s*:\s*(PASS|FAIL)\b", re.IGNORECASE)
_MEM_BANDWIDTH = re.compile(r"^Test\s+(\d+)\s*:\s*elapsedtime\s*=\s*(\S+)\s+bandwidth\s*=\s*(.*?)\s*$")
_MEM_START = re.compile(r"^Test\s+(\d+)\s*(?::|\[)")
_MEM_ERRORS = re.compile(r"Number of errors\s*:\s*(\d+)")
# babel (babel.so rvs_stress.cpp)
_BABEL_HEADER = re.compile(r"^GPU Id\s+Function\s+(MBytes/sec|MiBytes/sec)\s+(.*)$")
_BABEL_ROW = re.compile(r"^(\d+)\s+([A-Za-z]\w*)\s+(.*)$")
_BABEL_CSV_HEADER = re.compile(r"^gpu_id,function,num_times,n_elements,sizeof,(max_mi?bytes_per_sec),")
_BABEL_TRIAD_GPU = re.compile(r"^GPU Id:\s*(\d+)\s*$")
_BABEL_TRIAD_RUNTIME = re.compile(r"^Runtime \(seconds\):\s*(\S+)\s*$")
_BABEL_TRIAD_BW = re.compile(r"^Bandwidth \((GB/s|GiB/s)\):\s*(\S+)\s*$")
_CHATTER = ("INFO", "DEBUG", "TRACE", "NONE")


def _bool(token, what):
    word = str(token).strip().upper()
    if word in ("TRUE", "FALSE"):
        return word == "TRUE"
    raise _Bad("%s %r is neither TRUE nor FALSE" % (what, token))


def _gpu_id(token):
    if not re.match(r"^\d+$", str(token).strip()):
        raise _Bad("GPU id %r is not a number" % token)
    return int(token)


def detect(text):
    """See the module docstring."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return isinstance(text, str) and _DETECT.search(text) is not None


class _Action:
    """One RVS action as the log shows it."""

    def __init__(self, name, module=None, implicit=False):
        self.name = name
        self.module = module
        self.implicit = implicit
        self.closed = False
        self.gpus = set()
        self.lines = 0
        self.result = None
        self.summarized = False
        self.errors = 0
        self.samples = {}           # gpu -> [figures] (gst GFLOPS, iet Power(W))
        self.started = []           # gst / iet: gpus in the order they started
        self.finals = set()         # gpus with a final verdict
        self.tests = {}             # mem: test -> {"starts", "verdicts", "pass", "fail", "bandwidth"}
        self.error_counts = []      # mem: 'Number of errors' figures
        self.transfers = {}         # pebb / pbqt: total -> set(index)
        self.table = None           # babel: (layout, unit)
        self.triad_gpu = None
        self.triad_runtime = None


class _Parser:
    def __init__(self, text, source):
        self.source = source
        lines = clean_lines(text_of(text, source))
        patterns = prefixes.learn(lines, _ANCHOR)
        self.lines = prefixes.strip_all(lines, patterns)
        self.prefixes = patterns
        self.actions = []
        self.current = None
        self.cut = False
        self.filtered = False
        self.commands = []
        self.errors = []
        self.gpu_info = {}
        self.facts = {"version": None, "rocm_version": None, "os": None, "amdgpu_version": None, "gpu_count": None}
        self.summary = False
        self.summary_names = []
        self.measures = []          # (action, measurement)
        self.unread = []            # (number, text)
        self.bad = None             # (number, text, why)
        self.first_text = None
        self.list_lines = 0
        self.result_lines = 0
        self.properties = {}
        self.io_links = {}
        self.capabilities = {}
        self.links = []
        self.warnings = []

    # --- helpers -------------------------------------------------------------------------------------

    def _add(self, action, metric, unit, value, case=None, **scope):
        self.measures.append((action, measurement(metric, unit, value, case, action=action.name, **scope)))

    def _info(self, gpu, node=None, bdf=None, name=None, index=None):
        entry = self.gpu_info.setdefault(gpu, {"id": gpu, "node": None, "index": None, "bdf": None, "name": None})
        for key, value in (("node", node), ("bdf", bdf), ("name", name), ("index", index)):
            if value is not None and entry[key] is None:
                entry[key] = value

    def _action(self, name, rest=""):
        """The action a tagged line names: the current one, one seen before, or a new implicit one."""
        if self.current is not None and self.current.name == name:
            return self.current
        for action in reversed(self.actions):
            if action.name == name:
                return action
        action = _Action(name, _infer(rest), implicit=True)
        self._start(action)
        return action

    def _start(self, action):
        if self.current is not None:
            self.current.closed = True
        self.actions.append(action)
        self.current = action

    def _result_line(self):
        """A result line was read: a malformed result line before it is not a cut, it is damage."""
        self.result_lines += 1
        if self.bad is not None:
            number, text, why = self.bad
            raise AcceptanceParseError("%s line %d: %s: %r; result lines follow it, so the output is not a clean "
                                       "cut run" % (self.source, number, why, shorten(text)))

    # --- the pass over the lines ---------------------------------------------------------------------

    def run(self):
        for number, line in self.lines:
            stripped = line.strip()
            if not stripped:
                continue
            if is_cut(stripped):
                self.cut = True
                continue
            if self.first_text is None:
                self.first_text = (number, stripped)
            try:
                self._line(number, stripped)
            except _Bad as err:
                if self.bad is None:
                    self.bad = (number, stripped, str(err))
        return self._finish()

    def _line(self, number, stripped):
        match = _LEVEL.match(stripped)
        if match:
            level, message = match.group(1), match.group(2).strip()
            if level == "ERROR":
                self.errors.append({"line": number, "text": shorten(stripped, 160)})
            self._message(number, level, message, stripped)
            return
        match = _RVS_ERROR.match(stripped)
        if match:
            self.errors.append({"line": number, "text": shorten(stripped, 160)})
            module, name, message = match.groups()
            action = None
            if name:
                action = self._action(name.strip(), (module or "").lower())
                if action.module is None and module:
                    action.module = module.strip().lower()
            elif self.current is not None:
                action = self.current
            if action is not None:
                action.errors += 1
                if "failed to run successfully" in message.lower():
                    action.result = False if action.result is None else action.result
            return
        if _GREP.match(stripped):
            self.filtered = True
            self.commands.append(stripped)
            return
        if _RVS_COMMAND.match(stripped):
            self.commands.append(stripped)
            return
        if stripped[:1] in "|+" and self._summary(stripped):
            return
        match = _LIST_BANNER.match(stripped)
        if match:
            self.facts["version"] = self.facts["version"] or match.group(1).strip()
            self.list_lines += 1
            return
        match = _LIST_GPU.match(stripped)
        if match:
            bdf, node, gpu, name = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
            self._info(gpu, node=node, bdf=bdf.lower(), name=name or None)
            self.list_lines += 1
            return
        if stripped.startswith("Supported GPUs available"):
            return
        if self.current is not None and self.current.module == "babel" and self._babel_text(number, stripped):
            return
        if _BABEL_HEADER.match(stripped) or _BABEL_CSV_HEADER.match(stripped):
            action = self.current or self._action("babel", "babel")
            action.module = action.module or "babel"
            self._babel_text(number, stripped)
            return
        self.unread.append((number, stripped))

    def _message(self, number, level, message, stripped):
        match = _ACTION_NAME.match(message)
        if match:
            self._start(_Action(match.group(1)))
            return
        match = _MODULE_NAME.match(message)
        if match:
            if self.current is None:
                self._start(_Action("?"))
            self.current.module = match.group(1).strip().lower() or None
            return
        match = _TAGGED.match(message)
        if match and not match.group(1).startswith("GPU::"):
            action = self._action(match.group(1).strip(), match.group(2))
            action.lines += 1
            if level == "ERROR":
                action.errors += 1
            if action.module is None:
                action.module = _infer(match.group(2))
            if self._module_line(action, level, match.group(2).strip()) or level in _CHATTER or level == "ERROR":
                return
            self.unread.append((number, stripped))
            return
        if self.current is not None and self.current.module == "babel":
            if not message or self._babel_text(number, message):
                return
        if re.match(r"^=+\s*Test\s+\d+", message) or level in _CHATTER or not message:
            return
        if self.current is not None and self.current.module == "babel" and re.match(
                r"^(Running |Array size|Total size|Completed |Number of elements|Devices:)", message):
            return
        self.unread.append((number, stripped))

    # --- module lines --------------------------------------------------------------------------------

    def _module_line(self, action, level, rest):
        module = action.module
        handler = {"gst": self._gst_iet, "iet": self._gst_iet, "mem": self._mem, "pebb": self._pebb,
                   "pbqt": self._pbqt, "peqt": self._peqt, "gpup": self._gpup, "babel": self._babel_tag}.get(module)
        if handler is None:
            return False
        return handler(action, level, rest)

    def _gpu_payload(self, action, rest):
        """(gpu id, payload) of '[GPU:: id] ...', '<module> <id> ...' or '<module> [GPU:: id] ...'; None if neither."""
        words = rest.split(None, 1)
        if words and words[0].lower() == (action.module or ""):
            rest = words[1] if len(words) > 1 else ""
            match = re.match(r"^(\d+)\s+(.*)$", rest)
            if match:
                return int(match.group(1)), match.group(2).strip()
        match = _GPU_TAG.match(rest)
        if match:
            return _gpu_id(match.group(1)), match.group(2).strip()
        return None

    def _gst_iet(self, action, level, rest):
        found = self._gpu_payload(action, rest)
        if found is None:
            return False
        gpu, payload = found
        action.gpus.add(gpu)
        if action.module == "gst":
            return self._gst(action, level, gpu, payload)
        return self._iet(action, level, gpu, payload)

    def _gst(self, action, level, gpu, payload):
        if re.match(r"^Start of GPU ramp up", payload, re.IGNORECASE):
            if gpu not in action.started:
                action.started.append(gpu)
            return True
        if re.match(r"^(End of GPU ramp up|start\b)", payload, re.IGNORECASE):
            return True
        match = re.match(r"^GFLOPS\s+(\S+)\s*(.*)$", payload)
        if match is None:
            return False
        value = _num(match.group(1), "GFLOPS")
        tail = match.group(2).strip()
        if not tail:
            action.samples.setdefault(gpu, []).append(value)
            return True
        final = re.match(r"^Target\s+(?:GFLOPS|stress)\s*:\s*(\S+)\s+met\s*:\s*(\S+)$", tail, re.IGNORECASE)
        if final is None:
            raise _Bad("a GFLOPS line whose end is not 'Target GFLOPS: <n> met: TRUE|FALSE'")
        target = _num(final.group(1), "target GFLOPS")
        met = _bool(final.group(2), "met")
        self._result_line()
        if gpu not in action.started:
            action.started.append(gpu)
        action.finals.add(gpu)
        self._add(action, "met", "bool", met, gpu=gpu)
        self._add(action, "gflops", "GFLOPS", value, gpu=gpu)
        self._add(action, "target_gflops", "GFLOPS", target, gpu=gpu)
        return True

    def _iet(self, action, level, gpu, payload):
        match = re.match(r"^Power\s*\(W\)\s+(\S+)$", payload)
        if match:
            action.samples.setdefault(gpu, []).append(_num(match.group(1), "Power(W)"))
            if gpu not in action.started:
                action.started.append(gpu)
            return True
        match = re.match(r"^(pass|met)\s*:\s*(\S+)$", payload, re.IGNORECASE)
        if match:
            verdict = _bool(match.group(2), match.group(1).lower())
            self._result_line()
            if gpu not in action.started:
                action.started.append(gpu)
            action.finals.add(gpu)
            self._add(action, match.group(1).lower(), "bool", verdict, gpu=gpu)
            return True
        return bool(re.match(r"^(start|Target power|Average power|Total time|End of worker)", payload, re.IGNORECASE))

    def _mem(self, action, level, rest):
        words = rest.split(None, 1)
        if not words or words[0].lower() != "mem":
            return False
        rest = words[1].strip() if len(words) > 1 else ""
        match = re.match(r"^(\d+)\s+(.*)$", rest)
        if match:
            action.gpus.add(int(match.group(1)))
            return True
        test = None
        match = _MEM_VERDICT.match(rest)
        if match:
            test = action.tests.setdefault(int(match.group(1)), _mem_test())
            passed = match.group(2).upper() == "PASS"
            self._result_line()
            test["verdicts"] += 1
            test["pass" if passed else "fail"] += 1
            self._add(action, "pass", "bool", passed, test=int(match.group(1)), n=test["verdicts"])
            return True
        match = _MEM_BANDWIDTH.match(rest)
        if match:
            elapsed = _num(match.group(2), "elapsedtime")
            figure = re.match(r"^(\S+?)\s*GB/s$", match.group(3))
            if figure is None:
                raise _Bad("bandwidth %r is not '<number>GB/s'" % match.group(3))
            value = _num(figure.group(1), "bandwidth")
            self._result_line()
            test = action.tests.setdefault(int(match.group(1)), _mem_test())
            test["bandwidth"].append(value)
            n = len(test["bandwidth"])
            self._add(action, "bandwidth", "GB/s", value, test=int(match.group(1)), n=n)
            self._add(action, "elapsedtime", "ms", elapsed, test=int(match.group(1)), n=n)
            return True
        match = _MEM_START.match(rest)
        if match:
            if level not in _CHATTER and "reverse]" not in rest:
                action.tests.setdefault(int(match.group(1)), _mem_test())["starts"] += 1
            return True
        match = _MEM_ERRORS.search(rest)
        if match:
            action.error_counts.append(int(match.group(1)))
            return True
        return bool(re.match(r"^(The following memory tests|Memory tests|Starting)", rest))

    def _pair(self, text, cpu=False):
        """(src, dst) GPU ids (or (cpu node, gpu id)) of a pebb / pbqt line's middle part; raises _Bad."""
        refs = _GPU_REF.findall(text)
        for node, gpu, bdf in refs:
            self._info(int(gpu), node=int(node), bdf=bdf.lower())
        if cpu:
            match = re.search(r"\[CPU::\s*(\d+)\s*\]|CPU\s*::\s*(\d+)", text)
            gpu = re.search(r"GPU\s*::\s*(\d+)\s*(?:\]|$|\s)", text)
            if match and refs:
                return int(match.group(1) or match.group(2)), int(refs[0][1])
            if match and gpu:
                return int(match.group(1) or match.group(2)), int(gpu.group(1))
            old = re.match(r"^\s*(\d+)\s+(\d+)\s*$", text)
            if old:
                return int(old.group(1)), int(old.group(2))
            raise _Bad("no '[CPU:: n] [GPU:: node - id - bdf]' pair")
        if len(refs) == 2:
            return int(refs[0][1]), int(refs[1][1])
        old = re.match(r"^\s*(\d+)\s+(\d+)\s*$", text)
        if old:
            return int(old.group(1)), int(old.group(2))
        raise _Bad("no '[GPU:: node - id - bdf] [GPU:: node - id - bdf]' pair")

    def _bandwidth_tail(self, level, text):
        """(value or None, final) of a transfer line's end: a final line has 'duration:' or is a RESULT line."""
        match = _BANDWIDTH.search(text)
        if match is None:
            raise _Bad("no '<n> GBps' or '(not measured)' figure")
        duration = _DURATION.search(text)
        seconds = _num(duration.group(1), "duration") if duration else None
        if match.group("state") == "pending" or match.group("interval"):
            return None, False, seconds
        final = duration is not None or level == "RESULT"
        if match.group("state") == "not measured":
            return None, final, seconds
        return _num(match.group("value"), "bandwidth"), final, seconds

    def _transfer(self, action, index, total):
        action.transfers.setdefault(total, set()).add(index)

    def _pebb(self, action, level, rest):
        match = re.match(r"^pcie-bandwidth\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]\s*(.*)$", rest)
        if match:
            body = match.group(3)
            split = re.search(r"\bh2d\s*::?\s*(\S+)\s+d2h\s*::?\s*(\S+)\s+(.*)$", body)
            if split is None:
                raise _Bad("a pcie-bandwidth transfer line without 'h2d::<bool> d2h::<bool>'")
            cpu, gpu = self._pair(body[:split.start()], cpu=True)
            value, final, seconds = self._bandwidth_tail(level, split.group(3))
            action.gpus.add(gpu)
            if not final:
                return True
            self._result_line()
            self._transfer(action, int(match.group(1)), int(match.group(2)))
            self._add(action, "measured", "bool", value is not None, cpu=cpu, gpu=gpu)
            if value is not None:
                self._add(action, "bandwidth", "GB/s", value, cpu=cpu, gpu=gpu)
            if seconds is not None:
                self._add(action, "duration", "s", seconds, cpu=cpu, gpu=gpu)
            return True
        match = re.match(r"^pcie-bandwidth\s+(.*?)\s*distance\s*:\s*(-?\d+)(.*)$", rest)
        if match:
            body = match.group(1)
            old = re.match(r"^(\d+)\s+(\d+)\s+(\d+)$", body)
            if old:
                cpu, gpu = int(old.group(1)), int(old.group(3))
            else:
                cpu, gpu = self._pair(body, cpu=True)
            action.gpus.add(gpu)
            self.links.append({"action": action.name, "cpu": cpu, "gpu": gpu, "distance": int(match.group(2)),
                               "hops": _hops(match.group(3))})
            return True
        return bool(re.match(r"^pcie-bandwidth\b", rest))

    def _pbqt(self, action, level, rest):
        match = re.match(r"^p2p\s+(.*?)\s*peers\s*:\s*(\S+)\s+distance\s*:\s*(-?\d+)(.*)$", rest)
        if match:
            src, dst = self._pair(match.group(1))
            peers = _bool(match.group(2), "peers")
            self._result_line()
            action.gpus.update((src, dst))
            self.links.append({"action": action.name, "src": src, "dst": dst, "distance": int(match.group(3)),
                               "hops": _hops(match.group(4))})
            self._add(action, "peers", "bool", peers, src=src, dst=dst)
            return True
        match = re.match(r"^(a2a-)?p2p-bandwidth\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]\s*(.*)$", rest)
        if match:
            body = match.group(4)
            split = re.search(r"\bbidirectional\s*:\s*(\S+)\s+|(?=%s\s*GBps|\((?:not measured|pending)\))"
                              % _NUMBER, body)
            if split is None:
                raise _Bad("a p2p-bandwidth line without a figure")
            src, dst = self._pair(body[:split.start()])
            if split.group(1) is not None:
                _bool(split.group(1), "bidirectional")
            value, final, seconds = self._bandwidth_tail("RESULT" if match.group(1) else level, body[split.end():])
            action.gpus.update((src, dst))
            if not final:
                return True
            self._result_line()
            self._transfer(action, int(match.group(2)), int(match.group(3)))
            self._add(action, "measured", "bool", value is not None, src=src, dst=dst)
            if value is not None:
                self._add(action, "bandwidth", "GB/s", value, src=src, dst=dst)
            if seconds is not None:
                self._add(action, "duration", "s", seconds, src=src, dst=dst)
            return True
        match = re.match(r"^a2a-gpu-bandwidth\s*(.*?)\s*Aggregate peer bandwidth\s*:\s*(\S+)\s*GBps", rest)
        if match:
            refs = _GPU_REF.findall(match.group(1))
            if not refs:
                raise _Bad("an a2a-gpu-bandwidth line without '[GPU:: node - id - bdf]'")
            gpu = int(refs[0][1])
            value = _num(match.group(2), "aggregate bandwidth")
            self._result_line()
            self._info(gpu, node=int(refs[0][0]), bdf=refs[0][2].lower())
            action.gpus.add(gpu)
            self._add(action, "aggregate_bandwidth", "GB/s", value, gpu=gpu)
            return True
        match = re.match(r"^a2a-bandwidth\s*\[\s*(\d+)\s*GPUs\s*\]\s*\[\s*(\d+)\s*p2p transfers\s*\]\s*"
                         r"Aggregate bandwidth\s*:\s*(\S+)\s*GBps", rest)
        if match:
            value = _num(match.group(3), "aggregate bandwidth")
            self._result_line()
            self._add(action, "aggregate_bandwidth", "GB/s", value)
            return True
        return bool(re.match(r"^(a2a-)?p2p(-bandwidth)?\b", rest))

    def _peqt(self, action, level, rest):
        words = rest.split(None, 1)
        if not words or words[0].lower() != "peqt":
            return False
        rest = words[1].strip() if len(words) > 1 else ""
        if not rest:
            raise _Bad("a peqt line without a verdict")
        parts = rest.split(None, 1)
        if len(parts) == 1:
            verdict = _bool(parts[0], "peqt verdict")
            self._result_line()
            self._add(action, "pass", "bool", verdict)
            return True
        self.capabilities.setdefault(action.name, {})[parts[0]] = parts[1]
        return True

    def _gpup(self, action, level, rest):
        words = rest.split(None, 1)
        if not words or words[0].lower() != "gpup":
            return False
        rest = words[1].strip() if len(words) > 1 else ""
        match = re.match(r"^(\d+)\s+(\d+)\s+(\S+)\s+(.+)$", rest)
        if match:
            gpu = int(match.group(1))
            links = self.io_links.setdefault(str(gpu), {}).setdefault(match.group(2), {})
            links[match.group(3)] = match.group(4).strip()
        else:
            match = re.match(r"^(\d+)\s+(\S+)\s+(.+)$", rest)
            if match is None:
                return False
            gpu = int(match.group(1))
            self.properties.setdefault(str(gpu), {})[match.group(2)] = match.group(3).strip()
        self._result_line()
        action.gpus.add(gpu)
        return True

    def _babel_tag(self, action, level, rest):
        match = _GPU_TAG.match(rest)
        if match:
            gpu = _gpu_id(match.group(1))
            action.gpus.add(gpu)
            action.triad_gpu = gpu
            return True
        return False

    def _babel_text(self, number, text):
        """Lines of the babel module's tables (untagged); True when read."""
        action = self.current
        if re.match(r"^-{10,}$", text):
            return True
        match = _BABEL_HEADER.match(text)
        if match:
            unit = "MiB/s" if match.group(1).startswith("Mi") else "MB/s"
            layout = "times" if "Min (sec)" in match.group(2) else "rates"
            action.table = (layout, unit)
            return True
        match = _BABEL_CSV_HEADER.match(text)
        if match:
            action.table = ("csv", "MiB/s" if "mibytes" in match.group(1) else "MB/s")
            return True
        match = _BABEL_TRIAD_GPU.match(text)
        if match:
            action.triad_gpu = int(match.group(1))
            action.gpus.add(action.triad_gpu)
            return True
        match = _BABEL_TRIAD_RUNTIME.match(text)
        if match:
            action.triad_runtime = _num(match.group(1), "runtime")
            return True
        match = _BABEL_TRIAD_BW.match(text)
        if match:
            value = _num(match.group(2), "bandwidth")
            if action.triad_gpu is None:
                raise _Bad("a triad bandwidth without its 'GPU Id:' line")
            self._result_line()
            self._add(action, "bandwidth", match.group(1), value, case="Triad", gpu=action.triad_gpu)
            if action.triad_runtime is not None:
                self._add(action, "runtime", "s", action.triad_runtime, case="Triad", gpu=action.triad_gpu)
            action.triad_runtime = None
            return True
        if action.table is None:
            return False
        layout, unit = action.table
        fields = text.split(",") if layout == "csv" else None
        if fields is not None:
            if len(fields) != 9 or not fields[0].strip().isdigit():
                return False
            gpu, kernel, numbers = int(fields[0]), fields[1].strip(), [_num(f, "bandwidth") for f in fields[5:9]]
        else:
            match = _BABEL_ROW.match(text)
            if match is None:
                return False
            gpu, kernel = int(match.group(1)), match.group(2)
            cells = match.group(3).split()
            if len(cells) != 4:
                raise _Bad("a babel row with %d figures, the header has 4" % len(cells))
            numbers = [_num(c, "figure") for c in cells]
        self._result_line()
        action.gpus.add(gpu)
        self._add(action, "bandwidth", unit, numbers[0], case=kernel, gpu=gpu)
        if layout == "times":
            names = (("min_runtime", "s"), ("max_runtime", "s"), ("avg_runtime", "s"))
        else:
            names = (("max_bandwidth", unit), ("min_bandwidth", unit), ("avg_bandwidth", unit))
        for (metric, metric_unit), value in zip(names, numbers[1:]):
            self._add(action, metric, metric_unit, value, case=kernel, gpu=gpu)
        return True

    def _summary(self, stripped):
        if _BORDER.match(stripped):
            return True
        inner = stripped.strip("|").strip()
        if inner.startswith("ROCm Validation Suite (RVS) Summary"):
            self.summary = True
            if self.current is not None:
                self.current.closed = True
            return True
        if inner in ("System Overview",) or re.match(r"^Action Name\s*\|\s*Module\s*\|\s*Result$", inner):
            return True
        match = _SUMMARY_KEY.match(stripped)
        if match:
            key = {"Operating System": "os", "RVS version": "version", "ROCm version": "rocm_version",
                   "amdgpu version": "amdgpu_version", "GPUs": "gpu_count"}[match.group(1)]
            self.facts[key] = match.group(2) if key != "version" or not self.facts[key] else self.facts[key]
            return True
        match = _SUMMARY_ACTION.match(stripped)
        if match:
            name, module, verdict = match.group(1), match.group(2).lower(), match.group(3) == "PASS"
            action = None
            for candidate in self.actions:
                if candidate.name == name and candidate.module in (module, None) and not candidate.summarized:
                    action = candidate
                    break
            if action is None:
                action = _Action(name, module, implicit=True)
                action.closed = True
                self.actions.append(action)
            action.module = action.module or module
            action.result = verdict
            action.summarized = True
            self._result_line()
            return True
        match = _SUMMARY_PLACES.match(stripped)
        if match:
            places = [match.group(1, 2, 3)] + ([match.group(4, 5, 6)] if match.group(4) else [])
            names, self.summary_names = self.summary_names, []
            for (index, node, bdf), named in zip(places, names):
                self._info(named[1], node=int(node), bdf=bdf.lower(), name=named[0], index=int(index))
            return True
        match = _SUMMARY_NAMES.match(stripped)
        if match:
            self.summary_names = [(match.group(1), int(match.group(2)))]
            if match.group(3):
                self.summary_names.append((match.group(3), int(match.group(4))))
            return True
        return False

    # --- the end -------------------------------------------------------------------------------------

    def _refuse(self):
        source = self.source
        if self.errors:
            first = self.errors[0]
            raise AcceptanceParseError("%s: the RVS run failed before any module output: line %d: %r (%d error "
                                       "line(s))" % (source, first["line"], first["text"], len(self.errors)))
        if self.list_lines:
            raise AcceptanceParseError("%s: only the GPU list of 'rvs -g' (%d GPU(s)): no module output to read"
                                       % (source, len(self.gpu_info)))
        if self.bad is not None:
            number, text, why = self.bad
            raise AcceptanceParseError("%s line %d: %s: %r" % (source, number, why, shorten(text)))
        where = "first line %d: %r" % (self.first_text[0], shorten(self.first_text[1])) if self.first_text \
            else "the output is empty"
        raise AcceptanceParseError("%s: no ROCm Validation Suite module output (no '[RESULT] [<time>] [<action>] "
                                   "<module> ...' line, no summary table); %s" % (source, where))

    def _finish(self):
        modules = []
        known = [a.module for a in self.actions if a.module]
        previous = known[0] if known else None
        for action in self.actions:
            # an action whose 'Module name' line was cut or filtered out: the module of the action before it
            action.module = action.module or previous
            previous = action.module
        for action in self.actions:
            if action.module and action.module not in modules and (action.lines or action.result is not None or
                                                                   action.module in MODULES):
                modules.append(action.module)
        if not modules or not (self.result_lines or any(a.lines for a in self.actions)):
            self._refuse()
        if self.summary:
            for action in self.actions:
                action.closed = True
        results = []
        for module in modules:
            results.append(self._result(module, modules))
        return results

    def _result(self, module, modules):
        result = new_result("rvs", module, self.source)
        actions = [a for a in self.actions if a.module == module]
        complete = not self.cut and not self.filtered and self.bad is None
        inferred = []
        unfinished = []
        for action in actions:
            self._missing(action, inferred, unfinished)
        if unfinished:
            complete = False
        names = {id(a) for a in actions}
        result["measurements"] = [m for a, m in self.measures if id(a) in names] + inferred
        for action in actions:
            if action.module == "iet":
                for gpu in _gpu_order(action):
                    if action.samples.get(gpu):
                        result["measurements"].append(measurement("power_max", "W", max(action.samples[gpu]),
                                                                  action=action.name, gpu=gpu))
        for action in actions:
            if action.result is not None:
                result["measurements"].append(measurement("result", "bool", action.result, action=action.name))
        if complete:
            for action in actions:
                result["measurements"].append(measurement("errors", "count", float(action.errors),
                                                          action=action.name))
            if module == "gpup":
                listed = set()
                for action in actions:
                    listed |= action.gpus
                if listed:
                    result["measurements"].append(measurement("gpus", "count", float(len(listed))))
        result["complete"] = complete
        result["version"] = self.facts["version"]
        gpus = set()
        for action in actions:
            gpus |= action.gpus
        for m in result["measurements"]:
            for key in ("gpu", "src", "dst"):
                if isinstance(m["scope"].get(key), int):
                    gpus.add(m["scope"][key])
        result.update({
            "modules": list(modules),
            "actions": [{"name": a.name, "module": a.module, "gpus": sorted(a.gpus), "lines": a.lines,
                         "result": a.result} for a in actions],
            "gpus": sorted(gpus),
            "gpu_info": [self.gpu_info[g] for g in sorted(self.gpu_info)],
            "per_gpu": [{"action": a.name, "gpu": g, "lines": len(a.samples.get(g, [])),
                         "samples": list(a.samples.get(g, []))} for a in actions for g in _gpu_order(a)],
            "rocm_version": self.facts["rocm_version"],
            "os": self.facts["os"],
            "amdgpu_version": self.facts["amdgpu_version"],
            "summary": self.summary,
            "filtered": self.filtered,
            "commands": list(self.commands),
            "errors": [dict(e) for e in self.errors],
            "prefixes": list(self.prefixes),
        })
        if module == "gpup":
            result["properties"] = {k: dict(v) for k, v in self.properties.items()}
            result["io_links"] = {k: {link: dict(p) for link, p in v.items()} for k, v in self.io_links.items()}
        if module == "peqt":
            result["capabilities"] = {k: dict(v) for k, v in self.capabilities.items()}
        if module in ("pebb", "pbqt"):
            action_names = {a.name for a in actions}
            result["links"] = [dict(link) for link in self.links if link["action"] in action_names]
        if module == "mem":
            result["mem_tests"] = [dict(action=a.name, test=t, starts=v["starts"], passed=v["pass"], failed=v["fail"],
                                        bandwidth=list(v["bandwidth"]), errors_reported=list(a.error_counts))
                                   for a in actions for t, v in sorted(a.tests.items())]
        result["warnings"] = self._warnings(module, modules, unfinished)
        return result

    def _missing(self, action, inferred, unfinished):
        """Verdicts a finished action lacks (inferred as failures), or the action noted as unfinished."""
        missing = []
        if action.module in ("gst", "iet"):
            metric = "met" if action.module == "gst" else "pass"
            missing = [("%s of GPU %d" % (metric, g), measurement(metric, "bool", False, action=action.name, gpu=g))
                       for g in action.started if g not in action.finals]
        elif action.module == "mem":
            for number, test in sorted(action.tests.items()):
                lacking = test["starts"] - test["verdicts"]
                later = [t["starts"] for n, t in action.tests.items() if n > number]
                for n in range(test["verdicts"] + 1, test["verdicts"] + lacking + 1):
                    missing.append(("Test %d report %d" % (number, n),
                                    measurement("pass", "bool", False, action=action.name, test=number, n=n),
                                    bool(later) and max(later) >= test["starts"]))
        elif action.module == "peqt" and not any(a is action and m["metric"] == "pass" for a, m in self.measures):
            missing = [("the peqt verdict", measurement("pass", "bool", False, action=action.name))]
        elif action.module in ("pebb", "pbqt"):
            for total, seen in sorted(action.transfers.items()):
                for index in range(1, total + 1):
                    if index not in seen:
                        missing.append(("transfer %d/%d" % (index, total),
                                        measurement("measured", "bool", False, action=action.name,
                                                    transfer="%d/%d" % (index, total))))
        if not missing:
            return
        if self.filtered or self.cut:
            unfinished.append((action.name, missing[0][0], "the log is %s" % ("filtered" if self.filtered else "cut"),
                               len(missing)))
            return
        left = [entry for entry in missing if not (action.closed or (len(entry) > 2 and entry[2]))]
        inferred.extend(entry[1] for entry in missing if entry not in left)
        if left:
            unfinished.append((action.name, left[0][0], "the log ends inside the action", len(left)))

    def _warnings(self, module, modules, unfinished):
        warnings = list(self.warnings)
        if self.cut:
            warnings.append("the output holds cut markers ('...'): lines were left out, so the result is not "
                            "complete")
        if self.filtered:
            warnings.append("the log was filtered (%s): lines were left out, so the result is not complete"
                            % shorten(self.commands[0] if self.commands else "grep", 60))
        if self.bad is not None:
            number, text, why = self.bad
            warnings.append("truncated run: line %d is not a complete result line (%s): %r" % (number, why,
                                                                                               shorten(text)))
        for name, what, why, count in unfinished[:4]:
            warnings.append("action %s: no line for %s%s (%s): not counted as a failure, the result is not "
                            "complete" % (name, what, " and %d more" % (count - 1) if count > 1 else "", why))
        if self.unread:
            number, text = self.unread[0]
            warnings.append("%d line(s) not read (first: line %d: %r)" % (len(self.unread), number, shorten(text)))
        if len(modules) > 1:
            warnings.append("the log holds %d RVS modules (%s): each has its own result (parse_all)"
                            % (len(modules), ", ".join(modules)))
        for action in self.actions:
            if action.module == module and action.error_counts:
                warnings.append("action %s: mem reported memory errors (%s)" % (
                    action.name, ", ".join(str(c) for c in action.error_counts[:8])))
        return warnings


def _gpu_order(action):
    return list(action.started) + [g for g in action.samples if g not in action.started]


def _mem_test():
    return {"starts": 0, "verdicts": 0, "pass": 0, "fail": 0, "bandwidth": []}


def _hops(text):
    return [{"type": kind, "distance": int(distance)} for kind, distance in re.findall(r"(\w+)\s*:\s*(-?\d+)", text)]


def _infer(rest):
    """The module a tagged line belongs to when its action has no 'Module name' line (filtered logs)."""
    rest = (rest or "").strip()
    word = rest.split(None, 1)[0].lower() if rest else ""
    if word in MODULES or word in _OTHER_MODULES:
        return word
    if re.match(r"^(a2a-)?p2p(-bandwidth)?\b", rest):
        return "pbqt"
    if rest.startswith("pcie-bandwidth"):
        return "pebb"
    match = _GPU_TAG.match(rest)
    if match:
        payload = match.group(2)
        if re.match(r"^(GFLOPS|Start of GPU ramp|End of GPU ramp)", payload):
            return "gst"
        if re.match(r"^(Power\s*\(W\)|pass\s*:)", payload):
            return "iet"
        if "Babel" in payload:
            return "babel"
    return None


def parse_all(text, source="output"):
    """See the module docstring."""
    return _Parser(text, source).run()


def parse(text, source="output"):
    """See the module docstring."""
    results = parse_all(text, source)
    first = results[0]
    first["others"] = results[1:]
    return first
