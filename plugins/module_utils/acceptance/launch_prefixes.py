"""Launcher and log prefixes on a tool's output lines, learned from the lines the tool always prints, and echoed
command lines.

Public API (standard library only, Python 3.8+):

``learn(lines, anchor)``
    The prefix patterns of ``lines`` (``[(number, line)]``, as ``common.clean_lines`` returns them): ``anchor(line)``
    gives where the tool's own text starts on a line it always prints (None on other lines); what stands before it
    there is a prefix (Open MPI ``--tag-output``, ``srun --label``, timestamps, host names). A prefix counts when
    seen on two anchor lines or on the only one; prefixes of digits and blanks alone are not learned (they would
    eat a table's first column). Digits in a prefix vary from line to line, its inner blanks may too, its trailing
    blanks are kept exactly (the tool's own indentation follows them). Longest first.
``strip(line, patterns)``
    ``line`` without the first learned prefix that matches at its start.
``strip_all(lines, patterns)``
    ``[(number, line)]`` with every line's prefix removed.
``split_command(text)``
    A shell command line as arguments (``shlex`` rules; an unbalanced quote splits on blanks; backslash-newline
    continuations joined); ``[]`` for no text.
``options(args, spec)``
    The values of the options ``spec`` names (``{name: (aliases, takes_value)}``) in ``args``: ``--name value``,
    ``--name=value``, ``-n value``, ``-nvalue`` (one-letter aliases), single-dash long names (``-use_rocm=0``) and
    flags (True); the last occurrence wins. Returns ``({name: value}, [arguments that are no option])``.
"""

import re
import shlex


def _shape(prefix):
    """A regex matching ``prefix`` and the same prefix on other lines (digits vary, stdout/stderr tags)."""
    body = prefix.rstrip()
    trailing = prefix[len(body):]
    parts = []
    for token in re.findall(r"\d+|\s+|<std(?:out|err|diag)>|.", body):
        if token.isdigit():
            part = r"\d+"
        elif token.isspace():
            part = r"[ \t]*"
        elif token.startswith("<std"):
            part = "<std(?:out|err|diag)>"
        else:
            part = re.escape(token)
        if not (parts and parts[-1] == part == r"[ \t]*"):
            parts.append(part)
    # the trailing blanks exactly, or none at the end of a line (clean_lines strips a blank line's prefix of them)
    return "".join(parts) + ("(?:%s|$)" % re.escape(trailing) if trailing else "")


def learn(lines, anchor):
    """See the module docstring."""
    shapes, anchors = {}, 0
    for _number, line in lines:
        start = anchor(line)
        if start is None:
            continue
        anchors += 1
        prefix = line[:start]
        if not prefix.strip() or not re.search(r"[^\d\s]", prefix):
            continue
        shape = _shape(prefix)
        shapes[shape] = shapes.get(shape, 0) + 1
    kept = [shape for shape, seen in shapes.items() if seen >= 2 or anchors == 1]
    return [re.compile(shape) for shape in sorted(kept, key=lambda s: (-len(s), s))]


def strip(line, patterns):
    """See the module docstring."""
    for pattern in patterns:
        match = pattern.match(line)
        if match is not None and match.end():
            return line[match.end():]
    return line


def strip_all(lines, patterns):
    """See the module docstring."""
    if not patterns:
        return list(lines)
    return [(number, strip(line, patterns)) for number, line in lines]


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
