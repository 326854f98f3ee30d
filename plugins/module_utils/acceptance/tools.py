"""Which acceptance tool printed a text, and its parse: the one entry point over every parser.

Public API (standard library only, Python 3.8+):

``TOOLS``
    The tools in detection order: ``(name, module)`` with ``module`` a module of this package (or ``bench/rccl.py``)
    that has ``detect(text)`` and a parse function. Order matters only where two detectors could both answer: the
    more specific first.
``detect(text)``
    The names of the tools whose detector claims ``text`` (normally one).
``parse(text, source="output", tool=None)``
    The parse of ``text`` by ``tool`` (a name of ``TOOLS``), or by the one tool that claims it. Every result has
    ``tool`` and ``test`` (rccl-tests: its usual result, with ``tool`` ``rccl-tests`` and ``test`` the collective when
    printed, else ``perf``). Raises ``AcceptanceParseError`` when no tool or several claim the text (naming them, and
    the option that picks one), for an unknown tool name, and the tool's own error for output it cannot read.
"""

import importlib

from .common import AcceptanceParseError

# name -> module (relative to module_utils) and its parse function
TOOLS = (
    ("rccl-tests", "bench.rccl", "parse_perf"),
    ("transferbench", "acceptance.transferbench", "parse"),
    ("rvs", "acceptance.rvs", "parse"),
    ("babelstream", "acceptance.babelstream", "parse"),
    ("blas-bench", "acceptance.blas_bench", "parse"),
    ("perftest", "acceptance.perftest", "parse"),
    ("amd-smi", "acceptance.amdsmi_tables", "parse"),
)
NAMES = tuple(name for name, _module, _function in TOOLS)


def _module(path):
    return importlib.import_module("%s.%s" % (__name__.rsplit(".", 2)[0], path))


def detect(text):
    """See the module docstring."""
    return [name for name, path, _function in TOOLS if _module(path).detect(text)]


def parse(text, source="output", tool=None):
    """See the module docstring."""
    if tool is None:
        found = detect(text)
        if len(found) != 1:
            raise AcceptanceParseError("%s: %s: give the tool (one of %s)" % (
                source, "no acceptance tool's output recognized" if not found else
                "the output looks like more than one tool's (%s)" % ", ".join(found), ", ".join(NAMES)))
        tool = found[0]
    entry = next((t for t in TOOLS if t[0] == tool), None)
    if entry is None:
        raise AcceptanceParseError("unknown tool %r: use one of %s" % (tool, ", ".join(NAMES)))
    result = getattr(_module(entry[1]), entry[2])(text, source)
    if tool == "rccl-tests":
        result = dict(result, tool="rccl-tests", test=result.get("collective") or "perf")
    return result
