"""Linux cpulists (``0-7,64-71``), the format of ``local_cpulist``, ``node<N>/cpulist``, ``taskset -c``.

Public API (standard library only):

``CpulistError(TopotuneError, ValueError)``
    Malformed cpulist; the message quotes the offending part.
``parse(text)``
    ``"0-3,8,10-14:2"`` -> ``[0, 1, 2, 3, 8, 10, 12, 14]`` (sorted, unique). Accepts the kernel's
    ``a-b:stride/group`` form, surrounding whitespace and an empty string (``[]``).
``format_cpulist(cpus)``
    Any iterable of ints -> the shortest range form, ``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``; ``[]`` -> ``""``.
``normalize(text)``
    ``format_cpulist(parse(text))``.
``parse_mask(text)``
    A kernel CPU mask (``cpumap``, ``core_cpus``, ``shared_cpu_map``, ``local_cpus``: 32-bit hex words, most
    significant first, comma separated, ``00000000,0000ffff``) -> the sorted CPU numbers, as hwloc reads them
    (``hwloc__read_path_as_cpumask``: word k from the right holds CPUs 32k..32k+31). Raises ``CpulistError``.
"""

from .errors import TopotuneError


class CpulistError(TopotuneError, ValueError):
    """A cpulist that cannot be parsed."""


def _int(token, text):
    token = token.strip()
    if not token.isdigit():
        raise CpulistError("invalid cpulist %r: %r is not a CPU number" % (text, token))
    return int(token)


def parse(text):
    """Return the sorted unique CPU numbers of a cpulist."""
    if text is None:
        raise CpulistError("invalid cpulist None: expected a string such as '0-7,64-71'")
    text = str(text).strip()
    cpus = set()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CpulistError("invalid cpulist %r: empty element" % text)
        stride, group = 1, None
        if ":" in part:
            part, _unused, spec = part.partition(":")
            used, _unused, grp = spec.partition("/")
            stride = _int(used, text)
            group = _int(grp, text) if grp else None
            if stride == 0 or group == 0:
                raise CpulistError("invalid cpulist %r: zero stride or group" % text)
        if "-" in part:
            low_s, _unused, high_s = part.partition("-")
            low, high = _int(low_s, text), _int(high_s, text)
            if high < low:
                raise CpulistError("invalid cpulist %r: range %s is reversed" % (text, part))
        else:
            low = high = _int(part, text)
        if group is None:
            cpus.update(range(low, high + 1, stride))
        else:
            # kernel semantics: in each group of `group` CPUs starting at low, take the first `stride`
            for base in range(low, high + 1, group):
                cpus.update(c for c in range(base, min(base + stride, high + 1)))
    return sorted(cpus)


def format_cpulist(cpus):
    """Return the range form of an iterable of CPU numbers."""
    ordered = sorted(set(int(c) for c in cpus))
    parts = []
    start = prev = None
    for cpu in ordered:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(str(start) if start == prev else "%s-%s" % (start, prev))
            start = prev = cpu
    if start is not None:
        parts.append(str(start) if start == prev else "%s-%s" % (start, prev))
    return ",".join(parts)


def normalize(text):
    """Return ``text`` in canonical range form."""
    return format_cpulist(parse(text))


def parse_mask(text):
    """Return the sorted CPU numbers set in a kernel CPU mask (``00000000,00000f0f`` -> ``[0..3, 8..11]``)."""
    if text is None:
        raise CpulistError("invalid CPU mask None: expected 32-bit hex words such as '00000000,0000ffff'")
    words = str(text).strip().split(",")
    cpus = []
    for position, word in enumerate(reversed(words)):
        word = word.strip()
        if word[:2].lower() == "0x":
            word = word[2:]
        try:
            value = int(word, 16)
        except ValueError:
            raise CpulistError("invalid CPU mask %r: %r is not a hex word" % (text, word)) from None
        if value < 0 or value >> 32:
            raise CpulistError("invalid CPU mask %r: word %r is wider than 32 bits" % (text, word))
        base = 32 * position
        while value:
            low = value & -value
            cpus.append(base + low.bit_length() - 1)
            value ^= low
    return sorted(cpus)
