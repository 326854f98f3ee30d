"""Check ``os_supported``: the node's OS release and kernel against AMD's ROCm compatibility matrix for the ROCm release
installed on it (knowledge/rocm_compatibility.yml, the platform_checks module's knowledge key ``rocm_compatibility``).

Public API (standard library only, Python 3.8+; hooked into ``platform_checks.run_checks``):

``parse_version(text)``
    ``"6.4.1-112"`` -> ``(6, 4, 1)``; None when the text does not start with X.Y.Z.
``kernel_line(release)``
    ``"6.8.0-45-generic"`` -> ``"6.8"`` (major.minor); None when it is not a kernel release.
``matrix_release(spec, version)``
    ``(entry, label, note)``: the ``releases`` entry of ``spec`` for ROCm ``version`` (a tuple), the release it is
    listed as, and a note when a newer patch release is judged by an older one (the policy ``patch_releases``);
    ``(None, None, why)`` when the matrix has no entry for it.
``run_checks(facts, spec, gen=None)``
    ``[]`` without ``spec``; else the one ``os_supported`` result. ``facts`` are ``platform_checks.gather``'s:
    ``health.rocm_version`` (``opt/rocm/.info/version``), ``health.kernel_release`` (``proc/sys/kernel/osrelease``,
    both read by ``gpu_health.gather``), ``expected.os_release_fields`` (``etc/os-release``, read by
    ``expected_values.gather``): the readers own their paths, this module reads nothing. ``gen`` is the identified
    generation entry (``name``, ``aliases``), which decides the footnotes that apply; None leaves them unjudged.

Verdicts (levels: the spec's ``policy``): no ROCm, an unreadable or unknown release, an unreadable os-release ->
``unknown`` with the reason; the OS not listed for the release, or listed only for other GPUs -> ``os_not_listed`` /
``os_not_for_gpu`` (fail); the kernel line not listed for the OS (and GPU) -> ``kernel_not_listed`` (warn).
"""

import re

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)")
_KERNEL = re.compile(r"^\s*(\d+)\.(\d+)")
CHECK_ID = "os_supported"


def parse_version(text):
    """See the module docstring."""
    match = _VERSION.match(str(text or ""))
    return tuple(int(part) for part in match.groups()) if match else None


def kernel_line(release):
    """See the module docstring."""
    match = _KERNEL.match(str(release or ""))
    return "%s.%s" % match.groups() if match else None


def _label(version):
    return ".".join(str(part) for part in version)


def matrix_release(spec, version):
    """See the module docstring."""
    listed = []
    for entry in (spec or {}).get("releases") or []:
        if not isinstance(entry, dict):
            continue
        for text in entry.get("rocm") or []:
            parsed = parse_version(text)
            if parsed:
                listed.append((parsed, entry))
    for parsed, entry in listed:
        if parsed == version:
            return entry, _label(parsed), None
    older = [(parsed, entry) for parsed, entry in listed if parsed[:2] == version[:2] and parsed < version]
    if older:
        parsed, entry = max(older, key=lambda item: item[0])
        return entry, _label(parsed), "ROCm %s is not in the matrix: judged by %s, the newest listed %d.%d release" % (
            _label(version), _label(parsed), version[0], version[1])
    known = sorted({parsed for parsed, _unused in listed})
    return None, None, "ROCm %s is not in the matrix data (knowledge/rocm_compatibility.yml has %s)" % (
        _label(version), ", ".join(_label(v) for v in known) or "no release")


def _products(gen, spec):
    """The product names of AMD's footnotes the node's generation answers to; None when the generation is unknown."""
    if not gen or not gen.get("name"):
        return None
    names = {gen["name"]} | set(gen.get("aliases") or [])
    names.update(item.get("product") for item in (spec or {}).get("products") or []
                 if isinstance(item, dict) and item.get("generation") == gen["name"] and item.get("product"))
    return names


def _matches(entry, fields):
    """Whether the os-release ``fields`` are the OS version of ``entry`` (ID equal; VERSION_ID equal or a dotted
    extension of the entry's, so "9" matches 9.4)."""
    if (fields.get("ID") or "").lower() != str(entry.get("id") or "").lower():
        return False
    have, want = fields.get("VERSION_ID") or "", str(entry.get("version_id") or "")
    return bool(want) and (have == want or have.startswith(want + "."))


def _allowed(entry, release, products):
    """``(True, None)`` when the entry holds for these GPU products, ``(False, why)`` when a footnote excludes them,
    ``(None, why)`` when it cannot be told (generation unknown)."""
    only = [str(p) for p in entry.get("only_for") or []]
    name = entry.get("name", "?")
    if products is None:
        if only:
            return None, "%s is supported only on %s, and the node's GPU generation is unknown" % (name, ", ".join(only))
        return True, None
    if only and not products & set(only):
        return False, "%s is supported only on %s" % (name, ", ".join(only))
    for limit in release.get("gpu_only_on") or []:
        names = set((limit or {}).get("products") or [])
        listed = [str(os_name) for os_name in (limit or {}).get("os") or []]
        if products & names and name not in listed:
            return False, "%s: supported only on %s" % ("/".join(sorted(products & names)), ", ".join(listed))
    return True, None


def _kernels(entries, products):
    """``{line: kind}`` the entries list for these GPU products (``kernel_not_for`` footnotes taken out)."""
    lines = {}
    for entry in entries:
        excluded = entry.get("kernel_not_for") if isinstance(entry.get("kernel_not_for"), dict) else {}
        kernels = entry.get("kernels") if isinstance(entry.get("kernels"), dict) else {}
        for line, kind in kernels.items():
            if products is not None and products & set(excluded.get(str(line)) or []):
                continue
            lines.setdefault(str(line), kind)
    return lines


def _sources(spec, release):
    table = (spec or {}).get("sources") or {}
    out = []
    for key in (release or {}).get("sources") or []:
        item = table.get(key) or {}
        out.append("%s (%s)" % (" ".join(str(item.get("document", key)).split()), str(item.get("commit", ""))[:7]))
    return "; ".join(out)


def _result(status, observed, expected, remediation="", source=""):
    return {"id": CHECK_ID, "status": status, "observed": observed, "expected": expected,
            "remediation": remediation if status != "pass" else "", "source": source, "cvs": None}


def _describe(entry):
    return "%s (kernel %s)" % (entry.get("name", "?"), ", ".join(sorted((entry.get("kernels") or {}), key=_line_key)))


def _line_key(line):
    try:
        return tuple(int(part) for part in str(line).split("."))
    except ValueError:
        return (0,)


def _os_text(fields):
    """``ubuntu 24.04 (Ubuntu 24.04.2 LTS)`` from the os-release fields."""
    base = " ".join(v for v in (fields.get("ID"), fields.get("VERSION_ID")) if v) or "no ID/VERSION_ID"
    pretty = fields.get("PRETTY_NAME") or fields.get("VERSION")
    return "%s (%s)" % (base, pretty) if pretty else base


def run_checks(facts, spec, gen=None):
    """See the module docstring."""
    if not spec:
        return []
    return [_check(facts or {}, spec, gen)]


def _check(facts, spec, gen):
    policy = spec.get("policy") or {}
    health = facts.get("health") or {}
    base_source = " ".join(str(policy.get("os_source", "")).split())
    rocm_text = health.get("rocm_version")
    default_expected = "an OS and kernel AMD's ROCm compatibility matrix lists for the node's ROCm release"
    if rocm_text is None:
        return _result("unknown", "no ROCm installed (opt/rocm/.info/version missing): the matrix is per ROCm release",
                       default_expected, "install ROCm (amdgpu-install / the distribution packages), or run on the "
                       "node itself", base_source)
    version = parse_version(rocm_text)
    if version is None:
        return _result("unknown", "ROCm version %r (opt/rocm/.info/version) is not X.Y.Z" % rocm_text,
                       default_expected, "check the ROCm installation (rocm-core package)", base_source)
    release, label, note = matrix_release(spec, version)
    if release is None:
        return _result("unknown", note, default_expected,
                       "add the release's column of AMD's compatibility matrix to knowledge/rocm_compatibility.yml, "
                       "or check the OS by hand against rocm.docs.amd.com compatibility-matrix", base_source)
    source = "; ".join(s for s in (_sources(spec, release), base_source) if s)
    products = _products(gen, spec)
    gpu_text = (" on %s" % gen["name"]) if products else ""
    fields = (facts.get("expected") or {}).get("os_release_fields")
    candidates = [e for e in release.get("os") or [] if isinstance(e, dict)]
    allowed = []
    for entry in candidates:
        ok, _why = _allowed(entry, release, products)
        if ok:
            allowed.append(entry)
    expected = "ROCm %s%s: %s" % (label, gpu_text, "; ".join(_describe(e) for e in allowed) or "no OS listed")
    if products is None:
        expected += " (GPU generation unknown: OS versions AMD limits to some GPUs not judged)"
    if not fields or not fields.get("ID") or not fields.get("VERSION_ID"):
        return _result("unknown", "etc/os-release %s" % ("unreadable" if not fields else "has no ID or VERSION_ID"),
                       expected, "run on the node itself (etc/os-release, os-release(5))", source)
    kernel = health.get("kernel_release")
    observed = "%s, kernel %s, ROCm %s" % (_os_text(fields), kernel or "unreadable", rocm_text)
    if note:
        observed += " (%s)" % note
    same_os = [e for e in candidates if _matches(e, fields)]
    if not same_os:
        return _result(policy.get("os_not_listed", "fail"), observed + ": the OS is not in the matrix for ROCm %s" % label,
                       expected, "install an OS the matrix lists for ROCm %s (or the ROCm release that supports this OS); "
                       "AMD's acceptance guide: do not continue on an unlisted OS" % label, source)
    verdicts = [(e,) + _allowed(e, release, products) for e in same_os]
    usable = [e for e, ok, _why in verdicts if ok]
    if not usable:
        undecided = [why for _e, ok, why in verdicts if ok is None]
        if undecided:
            return _result("unknown", observed + ": " + "; ".join(undecided), expected,
                           "identify the GPUs (check gpu_generation) or set platform_checks_generation", source)
        reasons = sorted({why for _e, _ok, why in verdicts})
        return _result(policy.get("os_not_for_gpu", "fail"), "%s: %s" % (observed, "; ".join(reasons)), expected,
                       "install an OS the matrix lists for %s with ROCm %s" % (gen["name"], label), source)
    names = ", ".join(str(e.get("name", "?")) for e in usable)
    lines = _kernels(usable, products)
    line = kernel_line(kernel)
    if line is None:
        return _result("unknown", "%s: OS listed as %s; kernel release %s" % (
            observed, names, "unreadable" if kernel is None else "%r not understood" % kernel), expected,
            "run on the node itself (proc/sys/kernel/osrelease)", source)
    listed = ", ".join("%s %s" % (k, lines[k]) for k in sorted(lines, key=_line_key))
    if line not in lines:
        return _result(policy.get("kernel_not_listed", "warn"),
                       "%s: OS listed as %s, kernel line %s not among %s" % (observed, names, line, listed or "none"),
                       expected, "boot a kernel of the listed lines (%s): the distribution's GA or HWE kernel AMD "
                       "validated for ROCm %s" % (listed or "none", label), source)
    return _result("pass", "%s: listed as %s, kernel line %s (%s)" % (observed, names, line, lines[line]), expected,
                   source=source)
