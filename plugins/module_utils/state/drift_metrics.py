# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local drift check: the manifest verification of ``managed_state``, the platform checks and the pending
reboot, exported as Prometheus text-format metrics for node_exporter's textfile collector.

Runs on the node without Ansible: role ``topotune.instinct.drift_exporter`` copies this package's files to
``/usr/local/lib/topotune/topotune_node/`` and a systemd timer runs ``topotune-drift-check``, which calls ``main()``.
The code is the collection's (``managed_state.verify_path``, ``platform_checks.gather``/``run_checks``), so a
node-local check and ``playbooks/drift.yml`` (fast) find the same drift.

Public API (standard library only, Python 3.8+):

``check(config, now=time.time)``
    Run the three stages and return ``(families, errors)``: metric families ``(name, type, help, samples)`` and the
    stages that failed ``{stage: message}``. A stage that fails leaves its metrics out and is counted; it never
    stops the others.
``render(families)``
    The Prometheus text exposition format (version 0.0.4) of ``families``.
``previous_errors(text)``
    The ``topotune_drift_check_errors_total`` values of an earlier output, by stage (the counter survives runs).
``pending_kernel_parameters(dropin_text, cmdline)``
    Kernel parameters topotune's GRUB drop-in configures for the next boot that the running kernel lacks.
``main(argv)``
    ``topotune-drift-check [--config PATH]``: lock, check, write the textfile atomically (``files.write_atomic``).
``build_config(options, knowledge_file)``
    The checker's configuration (what ``load_config`` reads) from the variables of role ``drift_exporter`` without
    their ``drift_exporter_`` prefix; raises ``CheckerError`` naming each wrong variable, its value and the fix.
``platform_results(config)``
    ``(results, generation)`` of the platform checks on this node: what the metrics export and what
    ``healthcheck.py`` (Slurm's HealthCheckProgram) judges.
``check_options(config)``, ``OVERRIDES``
    The platform check options a check runs with: what role platform_checks recorded on the node
    (``platform_checks.RECORD``), overridden by the ``drift_exporter_*`` variables of ``OVERRIDES`` that differ from
    the check's default (the configuration's ``platform_checks``).

Metric conventions (https://prometheus.io/docs/practices/naming/): prefix ``topotune_``, base units (seconds),
``_total`` only on the counter, ``_info`` carries labels with value 1.
"""

import argparse
import fcntl
import json
import os
import re
import resource
import sys
import time

from ..checks import platform_checks
from ..checks.platform_checks import (
    RECORD,
    RECORDED,
    STATUSES,
    gather,
    node_identity,
    read_record,
    role_option_problems,
    run_checks,
)
from ..core.errors import TopotuneError
from ..core.files import write_atomic
from ..core.options import defaults
from ..core.process import CommandError, run
from ..core.sysroot import join, read_text
from .kernel_settings import GRUB_DROPIN, grub_dropin_params, has_param, tokens
from .managed_state import MANIFEST_MISSING, MANIFEST_OK, MANIFEST_UNREADABLE, parse_systemctl_show, verify_path

# The collection's version (galaxy.yml; tests/unit/plugins/module_utils/state/test_drift_metrics.py keeps them equal).
TOPOTUNE_VERSION = "0.1.0"
DEFAULT_CONFIG = "/etc/topotune/drift-exporter/config.json"
STAGES = ("manifest", "platform_checks", "reboot")
# The platform check options role drift_exporter still takes as variables (drift_exporter_<name>), kept so that a
# play setting them goes on working: overrides of what role platform_checks recorded on the node (RECORD), which the
# check reads at every run. A new check option needs none: the record carries it.
OVERRIDES = ("generation", "gpu_count", "expected", "virtualization_host", "cpu_governor", "transparent_hugepage", "skip")
# manifest entry kind -> drift item kind (managed_state's drift items)
_KIND_OF = (("files", "file"), ("values", "value"), ("json_keys", "json_key"), ("groups", "group"),
            ("units", "unit"), ("dirs", "stale"))
_ERRORS = "topotune_drift_check_errors_total"
_ERRORS_LINE = re.compile(r'^%s\{stage="([a-z_]+)"\} ([0-9.eE+]+)$' % _ERRORS)


class CheckerError(TopotuneError):
    """The checker's configuration is missing or malformed; the message names the file, the key and the fix."""


# ------------------------------------------------------------------------------------------------- exposition
def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def render(families):
    """Text exposition format: ``# HELP``, ``# TYPE`` and the samples of each family, families in the given order."""
    lines = []
    for name, kind, help_text, samples in families:
        lines.append("# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", " ")))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            label_text = ",".join('%s="%s"' % (key, _escape(labels[key])) for key in sorted(labels))
            lines.append("%s%s %s" % (name, "{%s}" % label_text if label_text else "", _number(value)))
    return "\n".join(lines) + "\n"


def previous_errors(text):
    """``{stage: count}`` of the errors counter in an earlier output (``{}`` when none, or unreadable lines)."""
    counts = {}
    for line in (text or "").splitlines():
        match = _ERRORS_LINE.match(line.strip())
        if match:
            try:
                counts[match.group(1)] = int(float(match.group(2)))
            except ValueError:
                continue
    return counts


# -------------------------------------------------------------------------------------------------- stages
def _unit_states(names):
    """``systemctl show`` for the units whose ``active`` flag the manifest watches (managed_state's contract)."""
    try:
        rc, out, _err = run(["systemctl", "show", "--property=Id,LoadState,UnitFileState,ActiveState", "--"] + names)
    except CommandError:
        return {}
    return parse_systemctl_show(out, names) if rc == 0 else {}


def watched_kinds(manifest_path):
    """``{(owner, kind)}`` the manifest watches: one drift series each, so a clean node exports zeros, not nothing."""
    try:
        with open(manifest_path, encoding="utf-8") as handle:
            owners = json.load(handle).get("owners") or {}
    except (OSError, ValueError, AttributeError):
        return set()
    pairs = set()
    for owner, spec in owners.items():
        if isinstance(spec, dict):
            pairs.update((owner, kind) for key, kind in _KIND_OF if spec.get(key))
    return pairs


def _manifest_stage(config):
    path = config["manifest"]
    result = verify_path(path, unit_states=_unit_states)
    counts = {pair: 0 for pair in watched_kinds(path)} if result["manifest_state"] == MANIFEST_OK else {}
    for item in result["drifted"]:
        if item["kind"] != "manifest":
            key = (item["owner"], item["kind"])
            counts[key] = counts.get(key, 0) + 1
    state = result["manifest_state"]
    return [
        ("topotune_drift_items", "gauge",
         "Settings topotune manages on this node that differ from the manifest, by owner role and kind.",
         [({"owner": owner, "kind": kind}, count) for (owner, kind), count in sorted(counts.items())]),
        ("topotune_drift_checked_items", "gauge", "Settings compared with the manifest in the last check.",
         [({}, result["checked"])]),
        ("topotune_manifest_state", "gauge",
         "State of the manifest bring-up records (/etc/topotune/manifest.json): 1 for the current state.",
         [({"state": name}, int(state == name)) for name in (MANIFEST_OK, MANIFEST_MISSING, MANIFEST_UNREADABLE)]),
    ]


def pending_kernel_parameters(dropin_text, cmdline):
    """Tokens of the ``GRUB_CMDLINE_LINUX`` lines of topotune's GRUB drop-in missing from ``cmdline``."""
    running = tokens(cmdline)
    return [token for token in grub_dropin_params(dropin_text) if not has_param(running, token)]


def _pending(config):
    """``(kernel parameters pending, cmdline readable)``."""
    cmdline = read_text(join(config["sysroot"], "proc/cmdline"), None)
    dropin = read_text(config["grub_dropin"], None) if config.get("grub_dropin") else None
    return (pending_kernel_parameters(dropin, cmdline) if cmdline is not None else []), cmdline is not None


def check_options(config):
    """The platform check options of a check: the checks' defaults, then what role platform_checks recorded on the
    node (``platform_checks_record``: read at every check, so a new bring-up's options apply without reinstalling the
    checker), then each ``drift_exporter_*`` override whose value is not the check's default. A configuration without
    a record path (installed before the record existed) gives its options as they are. Raises ``PlatformChecksError``
    naming the record when it cannot be read."""
    check_defaults = defaults(platform_checks.OPTIONS)
    options = {name: check_defaults[name] for name in RECORDED}
    overrides = dict(config.get("platform_checks") or {})
    record = config.get("platform_checks_record")
    if not record:
        options.update(overrides)
        return options
    options.update(read_record(record) or {})
    options.update((name, value) for name, value in overrides.items() if value != check_defaults.get(name))
    return options


def platform_results(config):
    """``(results, generation)``: the platform checks of this node as the drift check runs them (its data, the options
    role platform_checks recorded, the pending kernel parameters); topotune-healthcheck judges the same results."""
    knowledge_path = config["knowledge"]
    try:
        with open(knowledge_path, encoding="utf-8") as handle:
            knowledge = json.load(handle)
    except (OSError, ValueError) as err:
        raise CheckerError("cannot read the GPU generation data %s: %s; run role topotune.instinct.drift_exporter "
                           "again" % (knowledge_path, err)) from None
    if not isinstance(knowledge, dict) or not isinstance(knowledge.get("generations"), list):
        raise CheckerError("%s has no generations list; run role topotune.instinct.drift_exporter again" % knowledge_path)
    options = check_options(config)
    options["pending_cmdline"] = _pending(config)[0]
    facts = gather(config["sysroot"])
    return run_checks(facts, knowledge, options), node_identity(facts, knowledge, options)["generation"]


def _platform_stage(config):
    results, generation = platform_results(config)
    counts = {status: 0 for status in STATUSES}
    for item in results:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    families = [
        ("topotune_platform_check_status", "gauge",
         "Platform check result by check id: one series per check, its status label the current status, value 1.",
         [({"check": item["id"], "status": item["status"]}, 1) for item in sorted(results, key=lambda r: r["id"])]),
        ("topotune_platform_checks", "gauge", "Platform checks by status in the last check.",
         [({"status": status}, counts[status]) for status in STATUSES]),
    ]
    return families, generation or "unknown"


def _reboot_stage(config):
    pending, readable = _pending(config)
    if not readable:
        raise CheckerError("cannot read %s: is sysroot %r right?" % (join(config["sysroot"], "proc/cmdline"),
                                                                     config["sysroot"]))
    system = os.path.exists(config.get("reboot_required_file") or "/run/reboot-required")
    return [("topotune_reboot_pending", "gauge",
             "1 when the node needs a reboot: kernel_parameters (topotune's GRUB drop-in configures parameters the "
             "running kernel lacks), system (the distribution's /run/reboot-required flag).",
             [({"reason": "kernel_parameters"}, int(bool(pending))), ({"reason": "system"}, int(system))])]


def _cpu_seconds():
    self_usage, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_usage.ru_utime + self_usage.ru_stime + children.ru_utime + children.ru_stime


def check(config, now=time.time, previous=None):
    """Run the stages; ``(families, errors)``. ``previous`` is the earlier errors counter (``previous_errors``)."""
    started, started_mono = now(), time.monotonic()
    families, errors, generation = [], {}, "unknown"
    for stage in STAGES:
        try:
            if stage == "manifest":
                families.extend(_manifest_stage(config))
            elif stage == "platform_checks":
                stage_families, generation = _platform_stage(config)
                families.extend(stage_families)
            else:
                families.extend(_reboot_stage(config))
        except (TopotuneError, OSError, ValueError, KeyError, TypeError) as err:
            # the stage's series are left out (absent, not a false zero); the counter and success say why
            errors[stage] = "%s: %s" % (type(err).__name__, err)
    counter = dict(previous or {})
    for stage in STAGES:
        counter[stage] = counter.get(stage, 0) + (1 if stage in errors else 0)
    families.extend([
        ("topotune_info", "gauge", "topotune version and the GPU generation the platform checks detected; value 1.",
         [({"version": TOPOTUNE_VERSION, "generation": generation}, 1)]),
        (_ERRORS, "counter", "Checker stages that failed (the stage's metrics are then absent), since the textfile "
         "was created.", [({"stage": stage}, counter[stage]) for stage in STAGES]),
        ("topotune_drift_check_success", "gauge", "1 when every stage of the last check ran.", [({}, int(not errors))]),
        ("topotune_drift_check_interval_seconds", "gauge",
         "Longest time between two checks with the installed timer (OnUnitActiveSec + RandomizedDelaySec); 0 when "
         "the timer is off (checks run only by hand).",
         [({}, float(config.get("interval_seconds") or 0))]),
        ("topotune_drift_check_duration_seconds", "gauge", "Wall-clock time of the last check.",
         [({}, round(time.monotonic() - started_mono, 6))]),
        ("topotune_drift_check_cpu_seconds", "gauge",
         "CPU time (user + system, with its child processes) the last check's process used, interpreter start included.",
         [({}, round(_cpu_seconds(), 6))]),
        ("topotune_drift_check_last_end_time_seconds", "gauge", "Unix time at which the last check ended.",
         [({}, round(max(now(), started), 3))]),
    ])
    return families, errors


# ---------------------------------------------------------------------------------------------------- main
_REQUIRED = ("manifest", "sysroot", "knowledge", "textfile")
# Paths go into a systemd unit and a JSON file: no spaces or quotes.
_PATH = re.compile(r"^/[A-Za-z0-9._/@+-]*$")
TEXTFILE = "topotune.prom"
REBOOT_REQUIRED_FILE = "/run/reboot-required"


def _flag(value, variable, problems):
    """A boolean variable as Ansible reads one (an -e value arrives as the text "false")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    problems.append("drift_exporter_%s must be true or false, got %s" % (variable, value))
    return False


def _count(value):
    return None if isinstance(value, bool) else value if isinstance(value, int) else _int(value)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def build_config(options, knowledge_file):
    """``options``: role drift_exporter's variables without the prefix (``sysroot``, ``textfile_dir``, ``manifest``,
    ``interval_seconds``, ``randomized_delay_seconds``, ``boot_delay_seconds``, ``timer_enabled`` and the platform
    check expectations ``generation``, ``gpu_count``, ``expected``, ``virtualization_host``, ``cpu_governor``,
    ``transparent_hugepage``, ``skip``)."""
    problems = []
    paths = (
        ("textfile_dir", "an absolute path of letters, digits and ._/@+- (node_exporter --collector.textfile.directory)"),
        ("manifest", "an absolute path of letters, digits and ._/@+-"),
        ("sysroot", "an absolute path without spaces"),
    )
    for key, what in paths:
        if not (isinstance(options.get(key), str) and _PATH.match(options[key])):
            problems.append("drift_exporter_%s must be %s, got %s" % (key, what, options.get(key)))
    timings = ("interval_seconds", "randomized_delay_seconds", "boot_delay_seconds")
    interval, delay, boot = (_count(options.get(key)) for key in timings)
    if interval is None or interval < 10:
        problems.append("drift_exporter_interval_seconds must be at least 10 (a check every few seconds costs CPU on "
                        "every node), got %s" % (options.get("interval_seconds"),))
    for key, value in (("randomized_delay_seconds", delay), ("boot_delay_seconds", boot)):
        if value is None or value < 0:
            problems.append("drift_exporter_%s must be 0 or more, got %s" % (key, options.get(key)))
    gpu_count = _count(options.get("gpu_count"))
    problems.extend(role_option_problems({"gpu_count": gpu_count if gpu_count is not None else options.get("gpu_count")},
                                         prefix="drift_exporter_"))
    timer = _flag(options.get("timer_enabled", True), "timer_enabled", problems)
    virtualization_host = _flag(options.get("virtualization_host", False), "virtualization_host", problems)
    if problems:
        raise CheckerError("drift_exporter: invalid input. %s" % "; ".join(problems))
    return {
        "manifest": options["manifest"],
        "sysroot": options["sysroot"],
        "knowledge": knowledge_file,
        "textfile": options["textfile_dir"].rstrip("/") + "/" + TEXTFILE,
        # the GRUB drop-in role kernel_tuning writes: its parameters, missing from the running kernel, are a pending reboot
        "grub_dropin": GRUB_DROPIN,
        "reboot_required_file": REBOOT_REQUIRED_FILE,
        # the options role platform_checks ran with, recorded on the node: what the check judges it by
        "platform_checks_record": RECORD,
        # the longest time between two timer checks; 0 without the timer (checks only by hand: alert
        # TopotuneDriftCheckTimerOff)
        "interval_seconds": interval + delay if timer else 0,
        "platform_checks": {
            "generation": options.get("generation") or None,
            "gpu_count": gpu_count,
            "expected": options.get("expected") or {},
            "virtualization_host": virtualization_host,
            "cpu_governor": options.get("cpu_governor") or "",
            "transparent_hugepage": options.get("transparent_hugepage") or "",
            "skip": list(options.get("skip") or []),
        },
    }


def load_config(path):
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as err:
        raise CheckerError("cannot read the checker configuration %s: %s; run role topotune.instinct.drift_exporter "
                           "to install it" % (path, err)) from None
    if not isinstance(config, dict):
        raise CheckerError("%s is not a JSON object; run role topotune.instinct.drift_exporter again" % path)
    missing = [key for key in _REQUIRED if not (isinstance(config.get(key), str) and config[key].startswith("/"))]
    if missing:
        raise CheckerError("%s lacks %s (absolute paths); run role topotune.instinct.drift_exporter again"
                           % (path, ", ".join(missing)))
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(prog="topotune-drift-check", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="checker configuration (default: %(default)s)")
    parser.add_argument("--stdout", action="store_true", help="print the metrics instead of writing the textfile")
    args = parser.parse_args(argv)
    lock = None
    try:
        config = load_config(args.config)
        # the lock: one check at a time (the timer's, a manual run); a second one leaves at once, writing nothing
        lock = os.open(args.config, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.stdout.write("topotune-drift-check: another check holds the lock on %s; nothing done\n" % args.config)
            return 0
        textfile = config["textfile"]
        earlier = None
        try:
            with open(textfile, encoding="utf-8") as handle:
                earlier = handle.read()
        except OSError:
            pass
        families, errors = check(config, previous=previous_errors(earlier))
        text = render(families)
        if args.stdout:
            sys.stdout.write(text)
        else:
            # temp file + rename in the textfile directory: node_exporter reads the old or the new file, never part
            write_atomic(None, textfile, text, 0o644, root_owned=os.geteuid() == 0)
    except TopotuneError as err:
        sys.stderr.write("topotune-drift-check: %s\n" % err)
        return 2
    finally:
        if lock is not None:
            os.close(lock)  # releases the lock
    for stage, message in sorted(errors.items()):
        sys.stderr.write("topotune-drift-check: stage %s failed: %s\n" % (stage, message))
    return 1 if errors else 0
