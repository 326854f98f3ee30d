"""Which acceptance tool printed a text, and its parse: the one entry point over every parser.

Public API (standard library only, Python 3.8+):

``NAMES``
    The tool names ``parse`` takes (the ``tool`` of a criterion and of a parse result): ``rccl-tests``,
    ``transferbench``, ``rvs``, ``babelstream``, ``rocblas-bench``, ``hipblaslt-bench`` (one parser reads both),
    ``perftest``, ``amd-smi``.
``detect(text)``
    The parsers that claim ``text``, by the first of their names (normally one).
``parse(text, source="output", tool=None, command=None)``
    The parse of ``text`` by ``tool``, or by the one parser that claims it. Every result has ``tool`` and ``test``
    (rccl-tests: its usual result, with ``tool`` ``rccl-tests`` and ``test`` the collective when printed, else
    ``perf``). ``command``: the command line that printed it, for the parsers that read facts from it (rocblas-bench
    prints no precision; perftest's path); the others ignore it. Raises ``AcceptanceParseError`` when no parser or
    several claim the text (naming them, and that ``tool`` picks one) or for an unknown tool name, and the parser's
    own error for output it cannot read.
"""

from ..bench import rccl
from . import amdsmi_tables, babelstream, blas_bench, perftest, rvs, transferbench
from .common import AcceptanceParseError

# (names, module, its parse function, whether it reads the command line); detection in this order
_PARSERS = (
    (("rccl-tests",), rccl, rccl.parse_perf, False),
    (("transferbench",), transferbench, transferbench.parse, False),
    (("rvs",), rvs, rvs.parse, False),
    (("babelstream",), babelstream, babelstream.parse, False),
    (("rocblas-bench", "hipblaslt-bench"), blas_bench, blas_bench.parse, True),
    (("perftest",), perftest, perftest.parse, True),
    (("amd-smi",), amdsmi_tables, amdsmi_tables.parse, False),
)
NAMES = tuple(name for names, _m, _p, _c in _PARSERS for name in names)


def detect(text):
    """See the module docstring."""
    return [names[0] for names, module, _parse, _cmd in _PARSERS if module.detect(text)]


def parse(text, source="output", tool=None, command=None):
    """See the module docstring."""
    if tool is None:
        found = detect(text)
        if len(found) != 1:
            raise AcceptanceParseError("%s: %s: give the tool (one of %s)" % (
                source, "no acceptance tool's output recognized" if not found else
                "the output looks like more than one tool's (%s)" % ", ".join(found), ", ".join(NAMES)))
        tool = found[0]
    entry = next((p for p in _PARSERS if tool in p[0]), None)
    if entry is None:
        raise AcceptanceParseError("unknown tool %r: use one of %s" % (tool, ", ".join(NAMES)))
    _names, _module, function, reads_command = entry
    result = function(text, source, command=command) if reads_command else function(text, source)
    if tool == "rccl-tests":
        result = dict(result, tool="rccl-tests", test=result.get("collective") or "perf")
    return result
