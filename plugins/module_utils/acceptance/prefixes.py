"""Launcher and log prefixes of acceptance-tool output: learned from the lines a tool always prints, then removed
from every line. The one prefix learner of the acceptance parsers (``bench/rccl.py`` keeps its own).

Public API (standard library only, Python 3.8+):

``learn(lines, anchor)``
    The prefix patterns (regex strings, sorted) of ``lines`` (``[(number, line)]``, as ``common.clean_lines``
    returns them). ``anchor`` finds the tool's own text on a line the tool always prints: a compiled regex (searched
    in the line) or a function of the line giving the index where that text starts (None on other lines). What
    stands before it there is a launcher or log prefix (Open MPI ``--tag-output`` ``[1,3]<stdout>:``, ``srun
    --label`` `` 3: ``, timestamps, host names, syslog headers). A prefix counts when it is seen on two anchor lines
    or on the only one; prefixes of digits and blanks alone never count (they could be the tool's own first column),
    nor prefixes longer than 160 characters. In a pattern, digits match any digits, ``<stdout>``, ``<stderr>`` and
    ``<stddiag>`` one another, inner blanks any blanks (at least one between two numbers: a pattern holds no two
    choices that can match the same text, so a line it does not match fails in linear time, never with
    exponential backtracking), and trailing blanks at most as many as on the anchor line (the tool's own
    indentation follows them: tables keep theirs).
``strip(line, patterns)``
    ``(line without its prefix, the prefix removed)``: the longest match of ``patterns`` (``learn``'s strings, or
    compiled) at the start of the line, removed once (a learned prefix is all that stood before the tool's text,
    and the tool's text may start like it: ``G`` before ``GPU0``); ``(line, "")`` when none matches.
``strip_all(lines, patterns)``
    ``[(number, line)]`` with every line's prefix removed (``strip``).
"""

import re

_TAG = "<std(?:out|err|diag)>"
_TOKEN = re.compile(r"\d+|\s+|%s|." % _TAG)
_DIGITS = re.compile(r"\d")
_NOT_DIGIT_OR_BLANK = re.compile(r"[^\d\s]")
_LONGEST = 160


def _shape(prefix):
    """A regex matching ``prefix`` and the same prefix on other lines: see ``learn`` in the module docstring.

    Each part starts with characters the part before it cannot match (digit runs and blank runs are whole tokens,
    and two digit runs are parted by at least one blank), so a match never has two ways through the line.
    """
    body = prefix.rstrip()
    tokens = _TOKEN.findall(body)
    digits = [bool(_DIGITS.match(token)) for token in tokens]
    parts = []
    for index, token in enumerate(tokens):
        if digits[index]:
            parts.append(r"\d+")
        elif token.isspace():
            between = 0 < index < len(tokens) - 1 and digits[index - 1] and digits[index + 1]
            parts.append(r"\s+" if between else r"\s*")
        elif token.startswith("<std"):
            parts.append(_TAG)
        else:
            parts.append(re.escape(token))
    trailing = len(prefix) - len(body)
    if trailing:
        parts.append(r"\s{0,%d}" % trailing)
    return "".join(parts)


def _finder(anchor):
    if hasattr(anchor, "search"):
        def find(line):
            match = anchor.search(line)
            return None if match is None else match.start()
        return find
    return anchor


def learn(lines, anchor):
    """See the module docstring."""
    find = _finder(anchor)
    shapes, anchors = {}, 0
    for _number, line in lines:
        start = find(line)
        if start is None:
            continue
        anchors += 1
        prefix = line[:start]
        if len(prefix) > _LONGEST or not _NOT_DIGIT_OR_BLANK.search(prefix):
            continue
        shape = _shape(prefix)
        shapes[shape] = shapes.get(shape, 0) + 1
    return sorted(shape for shape, seen in shapes.items() if seen >= 2 or anchors == 1)


def _compiled(patterns):
    return [re.compile(pattern) for pattern in patterns or ()]


def _strip(line, compiled):
    end = 0
    for pattern in compiled:
        match = pattern.match(line)
        if match is not None and match.end() > end:
            end = match.end()
    return line[end:], line[:end]


def strip(line, patterns):
    """See the module docstring."""
    return _strip(line, _compiled(patterns))


def strip_all(lines, patterns):
    """See the module docstring."""
    compiled = _compiled(patterns)
    if not compiled:
        return list(lines)
    return [(number, _strip(line, compiled)[0]) for number, line in lines]
