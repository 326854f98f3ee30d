"""Launcher and log prefixes of acceptance-tool output: learned from the lines a tool always prints, then removed.

Public API (standard library only, Python 3.8+):

``learn(lines, anchor)``
    The prefix patterns (regex strings) seen before ``anchor`` (a compiled regex searched in each line) on the
    lines that carry one: what stands before a line the tool always prints is a launcher or log prefix (Open MPI
    ``--tag-output`` ``[1,3]<stdout>:``, ``srun --label`` ``3: ``, timestamps, host names, syslog headers). A
    prefix counts when it is seen at least twice, or on the only anchor line; digits and blanks alone never count
    (they could be the tool's own first column). Digits in a prefix match any digits, runs of blanks any blanks.
``compile_prefixes(patterns)``
    One regex matching any of ``patterns`` at the start of a line (None for no pattern).
``strip(line, pattern)``
    ``(line without its prefixes, the prefix text removed)``: the pattern is removed up to three times (a
    timestamp before a launcher tag).
"""

import re

_TOKEN = re.compile(r"\d+|\s+|<std(?:out|err|diag)>|.")


def _shape(prefix):
    parts = []
    for token in _TOKEN.findall(prefix):
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


def learn(lines, anchor):
    """See the module docstring."""
    shapes, anchors = {}, 0
    for line in lines:
        match = anchor.search(line)
        if match is None:
            continue
        anchors += 1
        prefix = line[:match.start()]
        if not prefix.strip() or not re.search(r"[^\d\s]", prefix):
            continue
        shape = _shape(prefix)
        shapes[shape] = shapes.get(shape, 0) + 1
    return sorted(shape for shape, seen in shapes.items() if seen >= 2 or anchors == 1)


def compile_prefixes(patterns):
    """See the module docstring."""
    if not patterns:
        return None
    return re.compile("(?:%s)" % "|".join(patterns))


def strip(line, pattern):
    """See the module docstring."""
    removed = ""
    if pattern is None:
        return line, removed
    for _attempt in range(3):
        match = pattern.match(line)
        if match is None or not match.group(0):
            break
        removed += match.group(0)
        line = line[match.end():]
    return line, removed
