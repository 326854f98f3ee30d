"""Fleet expectations: the versions and sizes a site pins, so that a uniformly wrong fleet fails.

Cross-node consistency (``plugin_utils/fleet/consistency.py``) finds the odd node; it cannot see a fleet that is uniformly
on the wrong ROCm, kernel, BIOS or firmware. ``platform_checks_expected`` says what every node of the group must
run, and each item is a check of its own.

Public API (standard library only, Python 3.8+):

``EXPECTED_KEYS``
    The keys of the ``expected`` option: ``rocm_version``, ``kernel_release``, ``os_release``, ``bios_version``,
    ``vbios``, ``firmware`` (``{name: version}``, the names of amdgpu's ``fw_version/<name>_fw_version`` files),
    ``min_online_memory_gib``.
``gather(sysroot)``
    What only these checks read: the OS release (``etc/os-release`` under the sysroot: ``os_release`` is ``ID
    VERSION_ID``, e.g. ``ubuntu 22.04``; ``os_release_fields`` the fields of ``OS_RELEASE_FIELDS``, which check
    ``os_supported`` (``module_utils/checks/os_support.py``) reads too) and the system memory
    (``sys/devices/system/memory``: online and offline blocks x ``block_size_bytes``, which check ``online_memory``
    of ``platform_checks`` judges). ROCm, kernel, BIOS, VBIOS and
    firmware come from the facts the other checks gather.
``os_release_fields(sysroot)``
    ``{field: value}`` of ``etc/os-release`` (``OS_RELEASE_FIELDS``), None when unreadable.
``check_expected(expected)``
    The option checked: a dict of known keys, each value a string (an ``fnmatch`` pattern: ``6.4.*``), a list of
    strings (any of them), or, for ``min_online_memory_gib``, a positive number; raises ``ExpectedError`` naming the
    key and the fix.
``run_checks(facts, expected)``
    One result per key set (nothing for keys left out): ``expected_rocm_version``, ``expected_kernel_release``,
    ``expected_os_release``, ``bios_version`` (CVS ``test_check_bios_version``), ``expected_vbios``,
    ``expected_firmware``. A value the node cannot read is ``unknown`` with the reason. ``min_online_memory_gib`` is
    no check of its own: it replaces the generation's minimum in check ``online_memory`` (``platform_checks``), the
    one owner of that fact.
"""

import fnmatch
import os

from ..core.errors import TopotuneError
from ..core.sysroot import join, list_dir, read_text

EXPECTED_KEYS = ("rocm_version", "kernel_release", "os_release", "bios_version", "vbios", "firmware",
                 "min_online_memory_gib")
MEMORY_DIR = "sys/devices/system/memory"
_SOURCE = {
    "rocm_version": "opt/rocm/.info/version (written by the ROCm packages); platform_checks_expected",
    "kernel_release": "proc/sys/kernel/osrelease; platform_checks_expected",
    "os_release": "etc/os-release ID and VERSION_ID (os-release(5)); platform_checks_expected",
    "bios_version": "sys/class/dmi/id/bios_version (dmidecode -s bios-version); ROCm/cvs "
                    "cvs/tests/platform/host_configs_cvs.py test_check_bios_version",
    "vbios": "amdgpu sysfs vbios_version (amdgpu_atombios.c); platform_checks_expected",
    "firmware": "amdgpu sysfs fw_version/<name>_fw_version (amdgpu_ucode.c); platform_checks_expected",
}


class ExpectedError(TopotuneError):
    """A platform_checks_expected value that cannot be checked."""


OS_RELEASE_FILE = "etc/os-release"
# the os-release(5) fields the checks read: ID VERSION_ID (the pin, AMD's matrix), VERSION (Ubuntu's point release)
OS_RELEASE_FIELDS = ("ID", "VERSION_ID", "VERSION", "PRETTY_NAME", "ID_LIKE")


def os_release_fields(sysroot):
    """``etc/os-release`` under ``sysroot`` as ``{field: value}`` (``OS_RELEASE_FIELDS`` only, quotes removed); None
    when the file cannot be read."""
    text = read_text(join(sysroot, OS_RELEASE_FILE), None)
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in OS_RELEASE_FIELDS:
            fields[key.strip()] = value.strip().strip('"').strip("'")
    return fields


def _os_release(fields):
    return " ".join(v for v in ((fields or {}).get("ID"), (fields or {}).get("VERSION_ID")) if v) or None


def _block_online(block_dir):
    """A memory block's ``online`` (1/0), else its ``state`` (online*/offline*, memory-hotplug.rst); None unread."""
    online = read_text(os.path.join(block_dir, "online"), None)
    if online in ("0", "1"):
        return online == "1"
    state = read_text(os.path.join(block_dir, "state"), None) or ""
    if state.startswith("online"):  # "online", "online_kernel", "online_movable"
        return True
    if state.startswith("offline") or state == "going-offline":
        return False
    return None


def _memory(sysroot):
    """``(online bytes, offline bytes)``; ``(None, None)`` without a memory block directory (a kernel without memory
    hotplug sysfs) or without any online block."""
    base = join(sysroot, MEMORY_DIR)
    size = read_text(os.path.join(base, "block_size_bytes"), None)
    try:
        block = int(size, 16)
    except (TypeError, ValueError):
        return None, None
    states = [_block_online(os.path.join(base, name)) for name in list_dir(base)
              if name.startswith("memory") and name[6:].isdigit()]
    online, offline = states.count(True), states.count(False)
    return (online * block, offline * block) if online else (None, None)


def gather(sysroot="/"):
    """See the module docstring."""
    online, offline = _memory(sysroot)
    fields = os_release_fields(sysroot)
    return {"os_release": _os_release(fields), "os_release_fields": fields, "online_memory_bytes": online,
            "offline_memory_bytes": offline}


def _patterns(key, value):
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ExpectedError("platform_checks_expected.%s must be a version string (fnmatch patterns such as 6.4.* "
                            "allowed) or a list of them, got %r" % (key, value))
    return [v.strip() for v in values]


def check_expected(expected):
    """See the module docstring; returns the option with patterns as lists."""
    if expected is None:
        return {}
    if not isinstance(expected, dict):
        raise ExpectedError("platform_checks_expected must be a mapping of %s, got %r"
                            % (", ".join(EXPECTED_KEYS), expected))
    unknown = sorted(set(expected) - set(EXPECTED_KEYS))
    if unknown:
        raise ExpectedError("platform_checks_expected has unknown key(s) %s: use %s"
                            % (", ".join(unknown), ", ".join(EXPECTED_KEYS)))
    out = {}
    for key, value in expected.items():
        if value in (None, "", [], {}):
            continue
        if key == "min_online_memory_gib":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ExpectedError("platform_checks_expected.min_online_memory_gib must be a positive number of GiB, "
                                    "got %r" % (value,))
            out[key] = value
        elif key == "firmware":
            if not isinstance(value, dict):
                raise ExpectedError("platform_checks_expected.firmware must map firmware names (the fw_version file "
                                    "names without _fw_version, e.g. mec, sos) to versions, got %r" % (value,))
            out[key] = {str(name): _patterns("firmware." + str(name), v) for name, v in value.items()}
        else:
            out[key] = _patterns(key, value)
    return out


def _matches(value, patterns):
    return value is not None and any(fnmatch.fnmatchcase(str(value), p) for p in patterns)


def _result(check_id, status, observed, expected, remediation, key):
    return {"id": check_id, "status": status, "observed": observed, "expected": expected,
            "remediation": remediation if status != "pass" else "", "source": _SOURCE[key],
            "cvs": "test_check_bios_version" if key == "bios_version" else None}


_NODE_ITEMS = (
    ("rocm_version", "expected_rocm_version", "ROCm", "install the expected ROCm release (amdgpu-install / the "
                                                      "distribution packages), or fix platform_checks_expected.rocm_version"),
    ("kernel_release", "expected_kernel_release", "kernel", "boot the expected kernel, or fix "
                                                            "platform_checks_expected.kernel_release"),
    ("os_release", "expected_os_release", "OS", "reinstall or upgrade to the expected OS release, or fix "
                                                "platform_checks_expected.os_release"),
    ("bios_version", "bios_version", "BIOS", "update the BIOS (vendor tool), or fix "
                                             "platform_checks_expected.bios_version"),
)


def _gpu_check(check_id, key, items, patterns_by_name, fix):
    """Per GPU and name, the observed value against its patterns; ``items``: [(bdf, {name: value})]."""
    expected = "; ".join("%s %s" % (n, " or ".join(p)) for n, p in sorted(patterns_by_name.items()))
    if not items:
        return _result(check_id, "unknown", "no AMD GPU with amdgpu sysfs", expected, "run on the node itself", key)
    bad, missing = [], []
    for bdf, values in items:
        for name, patterns in sorted(patterns_by_name.items()):
            value = values.get(name)
            if value in (None, ""):
                missing.append("%s %s" % (bdf, name))
            elif not _matches(value, patterns):
                bad.append("%s %s %s" % (bdf, name, value))
    if bad:
        return _result(check_id, "fail", "; ".join(bad), expected, fix, key)
    if missing:
        return _result(check_id, "unknown", "unreadable: " + "; ".join(missing), expected,
                       "check that amdgpu exposes the file (sysfs of the GPU's PCI device)", key)
    return _result(check_id, "pass", "%d GPU(s) as expected" % len(items), expected, "", key)


def run_checks(facts, expected):
    """See the module docstring."""
    health = facts.get("health") or {}
    observed = {"rocm_version": health.get("rocm_version"), "kernel_release": health.get("kernel_release"),
                "os_release": (facts.get("expected") or {}).get("os_release"), "bios_version": facts.get("bios_version")}
    results = []
    for key, check_id, what, fix in _NODE_ITEMS:
        if key not in expected:
            continue
        patterns, value = expected[key], observed[key]
        shown = " or ".join(patterns)
        if value is None:
            results.append(_result(check_id, "unknown", "%s version unreadable" % what, shown,
                                   "run on the node itself (%s)" % _SOURCE[key].split(";", maxsplit=1)[0], key))
        else:
            results.append(_result(check_id, "pass" if _matches(value, patterns) else "fail", value, shown, fix, key))
    gpus = health.get("gpus") or []
    if "vbios" in expected:
        results.append(_gpu_check("expected_vbios", "vbios", [(g["bdf"], {"vbios": g.get("vbios")}) for g in gpus],
                                  {"vbios": expected["vbios"]},
                                  "flash the GPUs with the expected VBIOS (platform vendor's bundle), or fix "
                                  "platform_checks_expected.vbios"))
    if "firmware" in expected:
        results.append(_gpu_check("expected_firmware", "firmware", [(g["bdf"], g.get("firmware") or {}) for g in gpus],
                                  expected["firmware"],
                                  "update the GPU firmware (the platform vendor's bundle / amdgpu firmware package), "
                                  "or fix platform_checks_expected.firmware"))
    return results
