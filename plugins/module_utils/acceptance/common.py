"""What every acceptance-tool parser shares: the result shape, the refusal error, line cleaning and command lines.

Public API (standard library only, Python 3.8+):

``AcceptanceParseError(TopotuneError)``
    Output a parser cannot read; the message is one line naming the source, the line number, the line (shortened)
    and why.
``new_result(tool, test, source)``
    The result every ``parse`` returns::

        {"tool": "transferbench", "test": "a2a", "source": "output", "version": None, "complete": True,
         "measurements": [], "warnings": []}

    plus tool-specific keys. ``tool`` is the tool's name (``transferbench``, ``rvs``, ``babelstream``,
    ``rocblas-bench``, ``hipblaslt-bench``, ``perftest``, ``amd-smi``, ``rccl-tests``), ``test`` the tool's test or
    mode (``a2a``, ``gst``, ``ib_write_bw``...), ``complete`` False when the output was cut or the run did not finish
    (the cases it printed are still measurements; a figure the tool prints only at the end is then absent, never
    guessed).
``measurement(metric, unit, value, case=None, **scope)``
    One figure: ``{"case": ..., "metric": ..., "unit": ..., "value": ..., "scope": {...}}``. ``case`` selects within a
    test (a config test number, a direction, a kernel, a message size), ``metric`` names the figure as the tool does
    (``avg_bandwidth``, ``gflops``, ``met``...), ``unit`` as in ``criteria.UNITS``, ``value`` a float (or a bool for
    pass/fail verdicts such as RVS ``met: TRUE``), ``scope`` where it was measured (``gpu``, ``src``/``dst``,
    ``device``, ``action``...); empty for a node-wide figure. A criterion (``knowledge/acceptance.yml``) names the same
    ``tool``, ``test``, ``case`` and ``metric``.
``clean_lines(text)``
    ``[(number, line)]``: CRLF and lone CR as newlines, ANSI escapes and other control characters (TAB kept) removed,
    trailing space stripped; 1-based numbers of the original lines.
``is_cut(line)``
    True for an author's cut marker in a published excerpt (``...``, ``....``, ``…``, ``<SNIP>``): skipped, and the
    result is then not ``complete`` where the cut could have hidden a figure.
``last_meaningful(lines)``
    The number of the last of ``[(number, line)]`` that is neither blank nor a cut marker; 0 when there is none.
``text_of(text, source)``
    The output as a ``str``: bytes decoded as UTF-8 (undecodable bytes replaced); anything else refused with
    ``<source>: expected text, got <type>``.
``shorten(line, limit=80)``
    The line as an error message quotes it.
``refuse(source, number, line, why)``
    Raises the one-line ``AcceptanceParseError`` ``<source> line <n>: '<line>': <why>``.
``UnreadableFigure(AcceptanceParseError)``, ``finite_number(token, what="value")``
    A figure a parser knows the place of but cannot read: ``finite_number`` raises it for a token that is not a finite
    number (the parser catches it and refuses naming the line).
``split_command(text)``
    A shell command line (an echoed ``$ rocblas-bench ...``, a command a criterion names) as arguments (``shlex``
    rules; an unbalanced quote splits on blanks; backslash-newline continuations joined; a list or tuple is taken
    as its arguments); ``[]`` for no text.
``options(args, spec)``
    The values of the options ``spec`` names (``{name: (aliases, takes_value)}``) in ``args``: ``--name value``,
    ``--name=value``, ``-n value``, ``-nvalue`` (one-letter aliases), single-dash long names (``-use_rocm=0``) and
    flags (True); the last occurrence wins. Returns ``({name: value}, [arguments that are no option])``.

Launcher and log prefixes (learned from the lines a tool always prints, removed from every line): ``prefixes``.
"""

import math
import re
import shlex

from ..core.errors import TopotuneError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CUT = re.compile(r"^\s*(?:\.{3,}|…+|<SNIP>.*|\[\.\.\.\])\s*$", re.IGNORECASE)


class AcceptanceParseError(TopotuneError):
    """Acceptance-tool output that holds nothing the parser can read (one-line message)."""


def new_result(tool, test, source):
    """See the module docstring."""
    return {"tool": tool, "test": test, "source": source, "version": None, "complete": True, "measurements": [],
            "warnings": []}


def measurement(metric, unit, value, case=None, **scope):
    """See the module docstring."""
    return {"case": case, "metric": metric, "unit": unit, "value": value, "scope": dict(scope)}


def clean_lines(text):
    """See the module docstring."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    return [(number, _CONTROL.sub("", _ANSI.sub("", line)).rstrip())
            for number, line in enumerate(text.split("\n"), 1)]


def is_cut(line):
    """See the module docstring."""
    return bool(_CUT.match(line))


def last_meaningful(lines):
    """See the module docstring."""
    meaningful = [n for n, line in lines if line.strip() and not is_cut(line)]
    return meaningful[-1] if meaningful else 0


def text_of(text, source):
    """See the module docstring."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise AcceptanceParseError("%s: expected text, got %s" % (source, type(text).__name__))
    return text


def shorten(line, limit=80):
    """See the module docstring."""
    line = " ".join(str(line).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def split_command(text):
    """See the module docstring."""
    if not text:
        return []
    if isinstance(text, (list, tuple)):
        return [str(a) for a in text]
    text = re.sub(r"\\\r?\n", " ", str(text))
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:
        return text.split()


def options(args, spec):
    """See the module docstring."""
    names = {}
    for name, (aliases, takes_value) in spec.items():
        for alias in aliases:
            names[alias] = (name, takes_value)
    found, rest = {}, []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            rest.append(arg)
            continue
        key, eq, value = arg.lstrip("-").partition("=")
        known = names.get(key)
        if known is None and not eq and len(key) > 1 and not arg.startswith("--") and names.get(key[0], (0, 0))[1]:
            known, value, eq = names[key[0]], key[1:], "="      # -fgemm, -d mlx5_0 written -dmlx5_0
        if known is None:
            continue
        name, takes_value = known
        if not takes_value:
            found[name] = True
        elif eq:
            found[name] = value
        elif index < len(args):
            found[name] = args[index]
            index += 1
    return found, rest


def refuse(source, number, line, why):
    """See the module docstring."""
    raise AcceptanceParseError("%s line %d: %r: %s" % (source, number, shorten(line), why))


class UnreadableFigure(AcceptanceParseError):
    """A line whose kind is known but whose figures cannot be read."""


def finite_number(token, what="value"):
    """See the module docstring."""
    try:
        value = float(token)
    except (TypeError, ValueError):
        raise UnreadableFigure("%s %r is not a number" % (what, token)) from None
    if not math.isfinite(value):
        raise UnreadableFigure("%s %r is not a finite number" % (what, token))
    return value
