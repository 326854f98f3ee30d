# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role drift_exporter's plan, on the controller (it reads the collection's own files): the checker's package, its
data and configuration, and its units, as the one ``managed_files`` call of the role writes them.

``shipped_modules(entries=ENTRIES)``, ``shipped_packages(modules)``
    The ``plugins/module_utils`` files (``package/name``) the node-local programs import: the ``entries`` (the drift
    check and Slurm's health check program) and every module they import through relative imports, transitively (read
    with ``ast``), and their sub-packages (each ships its ``__init__.py``): what the node needs, no list to keep in step
    with the code.
``OPTIONS``
    The role's variables, declared once (``module_utils/core/options.py``); its ``drift_exporter_<name>`` platform check
    overrides derived from ``platform_checks.OPTIONS``.
``plan(options, knowledge, contents, paths)``
    ``options``: the role's variables without the ``drift_exporter_`` prefix, checked and turned into the checker's
    configuration by ``module_utils/state/drift_metrics.py`` ``build_config`` (``CheckerError`` naming the variable);
    ``knowledge``: ``{gpu_generations, <each CHECK_TABLES file>}`` (the platform checks' data, as role
    ``platform_checks`` passes it: ``plugin_utils/core/knowledge.py`` ``CHECK_TABLES``) and ``scheduler`` (the health
    check's draining checks); ``contents``: the rendered ``script``, ``service``, ``timer`` and ``healthcheck_script``;
    ``paths``: the role's constants (``package``, ``knowledge``, ``config``, ``script``, ``service``, ``timer``,
    ``timer_link``, ``healthcheck_script``, ``healthcheck_config``, ``healthcheck_log``). With ``slurm_healthcheck`` the
    Slurm health check program and its configuration are among the files, else they are removed.
    Returns ``{"files", "links", "config", "modules"}``.
"""

from __future__ import annotations

import ast
import functools
import json
import os

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.state import drift_metrics, healthcheck
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import CHECK_TABLES


def _jinja(value):
    """``value`` as a Jinja literal (the default of a ``default()`` filter)."""
    return "'%s'" % value if isinstance(value, str) else json.dumps(value)


def _override(name):
    """Variable drift_exporter_<name>: the platform check option ``name``, an override of what the node recorded."""
    check = platform_checks.OPTIONS[name]
    role = check.get("role") or {}
    default = role.get("default", check.get("default"))
    declared = {
        "type": role.get("type", check.get("type", "str")),
        "default": "{{ platform_checks_%s | default(%s) }}" % (name, _jinja(default)),
        "description": [
            "Overrides, in the node-local check, the C(%s) role C(platform_checks) recorded on the node "
            "(C(platform_checks_%s), in C(/etc/topotune/platform-checks.json)) when it is not the check's default "
            "(%s); by default the play's C(platform_checks_%s), so both judge alike."
            % (name, name, "empty" if default == "" else "C(%s)" % json.dumps(default), name),
            "The check reads the record at every run, so a new bring-up's options apply without reinstalling the "
            "checker, and a check option added later needs no variable here. A checker configuration without the "
            "record's path (installed before the record existed) uses the value here as it is.",
        ],
    }
    if check.get("elements"):
        declared["elements"] = check["elements"]
    return declared


# The variables of role drift_exporter, declared once (module_utils/core/options.py): scripts/gen-options generates
# the role's argument specs, defaults, README table and the options its plan call passes. The platform check options
# are not declared again: the check reads what role platform_checks recorded on the node; the drift_exporter_<name>
# overrides (drift_metrics.OVERRIDES) are derived from platform_checks.OPTIONS.
OPTIONS = {
    "sysroot": {
        "type": "str", "default": "{{ topotune_sysroot | default('/') }}",
        "description": "Directory under which the platform checks read sysfs/procfs (C(/) on a real node, C(/sim) on a "
                       "simulated one).",
    },
    "textfile_dir": {
        "type": "str", "default": "/var/lib/prometheus/node-exporter",
        "description": "node_exporter's textfile collector directory (C(--collector.textfile.directory); Debian's "
                       "prometheus-node-exporter default); the checker writes C(topotune.prom) there.",
    },
    "manifest": {
        "type": "str", "default": "/etc/topotune/manifest.json",
        "description": "The manifest bring-up records (C(playbooks/site.yml), M(topotune.instinct.managed_state)).",
    },
    "interval_seconds": {
        "type": "int", "default": 120,
        "description": [
            "Seconds from one check to the next (C(OnUnitActiveSec=)), at least 10.",
            "Worst-case detection latency = interval + randomized delay + check time + scrape interval "
            "(C(docs/fleet-metrics.md)).",
        ],
    },
    "randomized_delay_seconds": {
        "type": "int", "default": 60,
        "description": "Random delay of up to this many seconds added to each check (C(RandomizedDelaySec=)); it "
                       "spreads a fleet's checks.",
    },
    "boot_delay_seconds": {
        "type": "int", "default": 60,
        "description": "Seconds after boot of the first check (C(OnBootSec=)).",
    },
    "timer_enabled": {
        "type": "bool", "default": True,
        "description": "Enable and start the timer; C(false) installs only and stops it (the check can still be run by "
                       "hand, and then exports interval 0, which alert C(TopotuneDriftCheckTimerOff) reports).",
    },
    "slurm_healthcheck": {
        "type": "bool", "default": False,
        "description": [
            "Also install C(/usr/local/sbin/topotune-healthcheck), Slurm's C(HealthCheckProgram): the same platform "
            "checks, and the node drained through C(scontrol) with a reason starting C(topotune:) when a draining check "
            "fails, resumed only when topotune drained it and its checks pass again; an administrator's or another "
            "tool's drain is never touched (C(docs/scheduler.md)). C(false) removes it.",
            "Then set in slurm.conf C(HealthCheckProgram=/usr/local/sbin/topotune-healthcheck), "
            "C(HealthCheckInterval) (seconds) and C(HealthCheckNodeState=ANY) (the default: a drained node must be "
            "checked to be resumed).",
        ],
    },
    "healthcheck_timeout_seconds": {
        "type": "int", "default": 45,
        "description": "Seconds the health check's platform checks may take (1 to 55; Slurm kills the program at 60): a "
                       "check still running then is killed and nothing changes on the node.",
    },
    "healthcheck_drain": {
        "type": "list", "elements": "str", "default": [],
        "description": "Platform check ids whose C(fail) drains the node; empty (the default) for "
                       "C(knowledge/scheduler.yml) C(healthcheck.drain) (uncorrectable ECC, retired pages over the "
                       "driver's threshold, a missing GPU, an xGMI link down, fatal PCIe errors, amdgpu's fatal kernel "
                       "log lines).",
    },
}
# the variables of the Slurm health check program, apart from the drift check's configuration
HEALTHCHECK_OPTIONS = ("slurm_healthcheck", "healthcheck_timeout_seconds", "healthcheck_drain")
OPTIONS.update((name, _override(name)) for name in drift_metrics.OVERRIDES)

# plugins/module_utils, the root of the shipped package (drift_metrics is in its state/ sub-package)
MODULE_UTILS = os.path.dirname(os.path.dirname(os.path.abspath(drift_metrics.__file__)))
PACKAGE_INIT = "# topotune module_utils for the node-local drift check (role topotune.instinct.drift_exporter)\n"


@functools.lru_cache(maxsize=64)
def _source(path, _mtime_ns, _size):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def _read(name, directory):
    path = os.path.join(directory, name + ".py")
    info = os.stat(path)
    return _source(path, info.st_mtime_ns, info.st_size)


# the node-local programs: topotune-drift-check and topotune-healthcheck
ENTRIES = ("state/drift_metrics", "state/healthcheck")


def shipped_modules(entries=ENTRIES, directory=MODULE_UTILS):
    needed, todo = set(), list(entries)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        package = os.path.dirname(name)
        for node in ast.walk(ast.parse(_read(name, directory))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            # level 1: this sub-package; level 2: a sibling sub-package (module_utils is the package's root)
            base = package if node.level == 1 else ""
            parts = node.module.split(".") if node.module else []
            if node.level == 2 and parts:
                base, parts = parts[0], parts[1:]
            todo.extend(["%s/%s" % (base, parts[0])] if parts else ["%s/%s" % (base, alias.name) for alias in node.names])
    return sorted(needed)


def shipped_packages(modules):
    """The sub-packages of ``modules`` ("core", "state", ...): each ships its own ``__init__.py``."""
    return sorted({os.path.dirname(name) for name in modules})


def _healthcheck_files(options, knowledge, contents, paths):
    """The health check program and its configuration, present or absent (``slurm_healthcheck``)."""
    wanted = options.get("slurm_healthcheck", False)
    if not isinstance(wanted, bool):
        raise TopotuneError("drift_exporter: invalid input. drift_exporter_slurm_healthcheck must be true or false, "
                            "got %r" % (wanted,))
    if not wanted:
        return [{"path": paths[key], "state": "absent"} for key in ("healthcheck_script", "healthcheck_config")]
    policy = (knowledge.get("scheduler") or {}).get("healthcheck") or {}
    drain = list(options.get("healthcheck_drain") or [c["check"] for c in policy.get("drain") or []])
    try:
        config = healthcheck.build_config(paths["config"], drain, options.get("healthcheck_timeout_seconds", 45),
                                          paths["healthcheck_log"],
                                          prefix=policy.get("reason_prefix") or healthcheck.REASON_PREFIX)
    except healthcheck.HealthcheckError as err:
        raise TopotuneError("drift_exporter: invalid input. drift_exporter_healthcheck_%s" % str(err).replace(
            "drain checks", "drain: drain checks")) from None
    return [{"path": paths["healthcheck_config"], "mode": "0644",
             "content": json.dumps(config, indent=4, sort_keys=True, separators=(",", ": "))},
            {"path": paths["healthcheck_script"], "mode": "0755", "validate": "/usr/bin/python3 -m py_compile %s",
             "content": contents["healthcheck_script"]}]


def plan(options, knowledge, contents, paths):
    options = dict(options)
    hc_options = {name: options.pop(name) for name in HEALTHCHECK_OPTIONS if name in options}
    config = drift_metrics.build_config(options, paths["knowledge"])
    missing = [name for name in ("gpu_generations",) + CHECK_TABLES if name not in (knowledge or {})]
    if missing:
        raise TopotuneError("drift_exporter: the knowledge lacks %s (pass gpu_generations and %s)"
                            % (", ".join(missing), ", ".join(CHECK_TABLES)))
    checks = dict(knowledge["gpu_generations"])
    checks.update((name, knowledge[name]) for name in CHECK_TABLES)
    modules = shipped_modules()
    files = [{"path": paths["package"] + "/__init__.py", "mode": "0644", "content": PACKAGE_INIT}]
    files.extend({"path": "%s/%s/__init__.py" % (paths["package"], package), "mode": "0644",
                  "content": _read(package + "/__init__", MODULE_UTILS)} for package in shipped_packages(modules))
    files.extend({"path": "%s/%s.py" % (paths["package"], name), "mode": "0644", "content": _read(name, MODULE_UTILS)}
                 for name in modules)
    files.extend([
        # the layouts Ansible's to_json(sort_keys=true) and to_nice_json(sort_keys=true) gave these files
        {"path": paths["knowledge"], "mode": "0644", "content": json.dumps(checks, sort_keys=True, default=str)},
        {"path": paths["config"], "mode": "0644",
         "content": json.dumps(config, indent=4, sort_keys=True, separators=(",", ": "))},
        {"path": paths["script"], "mode": "0755", "validate": "/usr/bin/python3 -m py_compile %s",
         "content": contents["script"]},
        {"path": paths["service"], "mode": "0644", "content": contents["service"]},
        {"path": paths["timer"], "mode": "0644", "content": contents["timer"]},
    ])
    files.extend(_healthcheck_files(hc_options, knowledge, contents, paths))
    # the timer is enabled by the timers.target.wants link `systemctl enable` would create (WantedBy=timers.target);
    # the configuration's interval is 0 exactly when the timer is off
    links = [{"path": paths["timer_link"], "src": paths["timer"],
              "state": "present" if config["interval_seconds"] else "absent"}]
    return {"files": files, "links": links, "config": config, "modules": modules}
