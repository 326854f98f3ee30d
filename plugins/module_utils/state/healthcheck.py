# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's ``HealthCheckProgram``: the node-local platform checks (the drift check's code and data), and the node
drained or resumed through ``scontrol`` by one rule, which never touches a drain it did not make.

Runs on the node without Ansible: role ``topotune.instinct.drift_exporter`` (``drift_exporter_slurm_healthcheck``)
installs ``/usr/local/sbin/topotune-healthcheck``, which calls ``main()``; slurmd runs it as root every
``HealthCheckInterval`` with ``SLURMD_NODENAME`` set, and kills it after 60 s.

Public API (standard library only, Python 3.8+):

``parse_node(text)``
    ``scontrol show node NAME`` (its multi-line form) as ``{"name", "state", "flags", "drained", "reason"}``: the base
    state, the ``+FLAG`` set, whether it is draining or drained, the reason without its ``[user@time]`` suffix.
``decide(results, node, drain, prefix="topotune:")``
    The action for the node: ``{"action": "drain" | "resume" | "none", "reason": text for a drain, "why": one line}``.
    ``results`` the platform checks' results (``id``, ``status``, ``observed``), ``drain`` the check ids whose
    ``fail`` drains (``knowledge/scheduler.yml``). A draining failure drains a node that is not drained, or re-words
    topotune's own drain; a node drained by anyone else (its reason does not start with ``prefix``) is left as it is;
    a topotune drain is resumed only when no draining check fails and every check its reason names passes (one that
    names no check, such as a rolling reboot's, is left to what made it).
``main(argv=None)``
    ``topotune-healthcheck [--config PATH] [--node NAME] [--dry-run]``: lock, run the checks in a child process under
    the configured timeout, read the node from Slurm, decide, act, log one line. A check that does not finish in time,
    a Slurm that cannot be asked, a broken configuration: nothing changes, the line says why, and the exit status is
    0 (slurmd would otherwise log "health_check failed" at every interval and, in recent Slurm, hold the node's
    registration at startup).
``load_config(path)``, ``build_config(drift_config, drain, timeout_seconds, log_path)``
    The program's configuration (``/etc/topotune/healthcheck.json``).
"""

import argparse
import fcntl
import json
import os
import re
import socket
import subprocess
import sys
import time

from ..core.errors import TopotuneError
from . import drift_metrics

DEFAULT_CONFIG = "/etc/topotune/healthcheck.json"
REASON_PREFIX = "topotune:"
_DRAIN_FLAGS = ("DRAIN", "DRAINING", "DRAINED")
_REASON = re.compile(r"^\s*Reason=(.*?)(?:\s+\[[^\]@]*@[^\]]*\])?\s*$", re.M)
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_NAME = re.compile(r"^NodeName=(\S+)")
# Slurm stores a reason as given; topotune's names checks only (ids are [a-z0-9_]), kept short for sinfo's column
_MAX_REASON = 200


class HealthcheckError(TopotuneError):
    """A configuration that cannot be read or Slurm that cannot be asked: the message says which and why."""


def parse_node(text):
    """See the module docstring."""
    name = _NAME.search(text.strip())
    state = _STATE.search(text)
    if not state:
        raise HealthcheckError("no State= in scontrol's answer: %r" % text.strip()[:200])
    parts = state.group(1).split("+")
    base, flags = parts[0], set(parts[1:])
    reason = _REASON.search(text)
    reason = reason.group(1).strip() if reason else ""
    if reason in ("(null)", "None"):
        reason = ""
    drained = base in _DRAIN_FLAGS or bool(flags & set(_DRAIN_FLAGS))
    return {"name": name.group(1) if name else None, "state": base, "flags": sorted(flags), "drained": drained,
            "reason": reason}


def named_checks(reason, prefix=REASON_PREFIX):
    """The check ids a topotune reason names (``topotune: a, b``), or [] when it is not topotune's."""
    if not reason.startswith(prefix):
        return []
    return [word for word in re.split(r"[,\s]+", reason[len(prefix):]) if re.match(r"^[a-z0-9_]+$", word)]


def decide(results, node, drain, prefix=REASON_PREFIX):
    """See the module docstring."""
    by_id = {r["id"]: r for r in results}
    failing = sorted(r["id"] for r in results if r["id"] in set(drain) and r["status"] == "fail")
    ours = node["reason"].startswith(prefix)
    if failing:
        reason = ("%s %s" % (prefix, ", ".join(failing)))[:_MAX_REASON]
        if node["drained"] and not ours:
            return {"action": "none", "reason": None,
                    "why": "%s fail, but the node is already drained by someone else (%r): left as it is" % (
                        ", ".join(failing), node["reason"])}
        if node["drained"] and node["reason"] == reason:
            return {"action": "none", "reason": None, "why": "still drained by topotune: %s fail" % ", ".join(failing)}
        return {"action": "drain", "reason": reason, "why": "; ".join(
            "%s: %s" % (i, by_id[i].get("observed") or "fail") for i in failing)}
    if not node["drained"]:
        return {"action": "none", "reason": None, "why": "no draining check fails"}
    if not ours:
        return {"action": "none", "reason": None,
                "why": "drained by someone else (%r): never resumed by topotune" % node["reason"]}
    # only the checks the reason names: another topotune drain (a rolling reboot's "topotune: kernel parameters
    # pending reboot") names none, and is left to the play that made it
    named = [i for i in named_checks(node["reason"], prefix) if i in by_id or i in drain]
    if not named:
        return {"action": "none", "reason": None,
                "why": "drained by topotune for something else (%r): left to what drained it" % node["reason"]}
    not_passing = [i for i in named if (by_id.get(i) or {}).get("status") != "pass"]
    if not_passing:
        return {"action": "none", "reason": None, "why": "kept drained: %s" % ", ".join(
            "%s is %s" % (i, (by_id.get(i) or {}).get("status", "not run")) for i in not_passing)}
    return {"action": "resume", "reason": None, "why": "every check of the drain passes again (%s)" % ", ".join(named)}


# ------------------------------------------------------------------------------------------------ configuration
def build_config(drift_config, drain, timeout_seconds, log_path, scontrol="scontrol", prefix=REASON_PREFIX):
    """The program's configuration; raises ``HealthcheckError`` naming the value and the fix."""
    if not isinstance(drain, list) or not drain or not all(isinstance(d, str) and re.match(r"^[a-z0-9_]+$", d)
                                                           for d in drain):
        raise HealthcheckError("drain checks %r: a non-empty list of platform check ids" % (drain,))
    # Slurm kills the program after 60 s (slurmd.c run_script_health_check: max_wait 60 * 1000 ms): the checks' own
    # limit stays under it, so a hung read ends in "nothing changed" said here, not in a kill during an scontrol call
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int) or not 1 <= timeout_seconds <= 55:
        raise HealthcheckError("timeout_seconds %r: 1 to 55 seconds (Slurm kills the program at 60 s)"
                               % (timeout_seconds,))
    return {"drift_config": drift_config, "drain": list(drain), "timeout_seconds": timeout_seconds,
            "log": log_path, "scontrol": scontrol, "reason_prefix": prefix}


def load_config(path):
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as err:
        raise HealthcheckError("cannot read %s: %s; run role topotune.instinct.drift_exporter again" % (path, err)) \
            from None
    for key in ("drift_config", "drain", "timeout_seconds", "log", "scontrol", "reason_prefix"):
        if key not in config:
            raise HealthcheckError("%s has no %r; run role topotune.instinct.drift_exporter again" % (path, key))
    return config


# ------------------------------------------------------------------------------------------------------ running
def _checks(drift_config_path):
    """The platform checks of this node, as the drift check runs them (``--checks-only``, in the child)."""
    return drift_metrics.platform_results(drift_metrics.load_config(drift_config_path))[0]


def _run_checks(config, argv0):
    """The results, or raise HealthcheckError when the child fails or outlives the timeout (it is killed)."""
    cmd = [sys.executable, "-I", argv0, "--checks-only", "--config-of-drift", config["drift_config"]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=config["timeout_seconds"], check=False)
    except subprocess.TimeoutExpired:
        raise HealthcheckError("the checks did not finish within %d s (a hung read?): nothing changed"
                               % config["timeout_seconds"]) from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise HealthcheckError("the checks failed (rc=%d): %s: nothing changed" % (proc.returncode, last[0]))
    return json.loads(proc.stdout)


def _scontrol(config, args):
    try:
        proc = subprocess.run([config["scontrol"]] + args, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise HealthcheckError("scontrol %s: %s: nothing changed" % (" ".join(args[:2]), err)) from None
    if proc.returncode != 0:
        raise HealthcheckError("scontrol %s failed (rc=%d): %s" % (" ".join(args[:3]), proc.returncode,
                                                                   (proc.stderr or proc.stdout).strip()[:200]))
    return proc.stdout


def _log(config, line):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    text = "%s %s\n" % (stamp, line)
    sys.stdout.write(text)
    try:
        os.makedirs(os.path.dirname(config["log"]), mode=0o755, exist_ok=True)
        with open(config["log"], "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        pass


def run_once(config, node_name, argv0, dry_run=False):
    """One health check: the line to log."""
    results = _run_checks(config, argv0)
    node = parse_node(_scontrol(config, ["show", "node", node_name]))
    decision = decide(results, node, config["drain"], config["reason_prefix"])
    state = node["state"] + "".join("+" + f for f in node["flags"])
    if decision["action"] == "none" or dry_run:
        return "%s%s: %s (state %s)" % (decision["action"], " (dry run)" if dry_run else "", decision["why"], state)
    args = ["update", "NodeName=%s" % node_name]
    args += (["State=DRAIN", "Reason=%s" % decision["reason"]] if decision["action"] == "drain" else ["State=RESUME"])
    _scontrol(config, args)
    return "%s: %s (was %s%s)" % (decision["action"] if decision["action"] == "resume" else
                                  "drain %r" % decision["reason"], decision["why"], state,
                                  ", %r" % node["reason"] if node["reason"] else "")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="topotune-healthcheck", description="Slurm HealthCheckProgram of topotune")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--node", help="the Slurm node name (default SLURMD_NODENAME, else the short host name)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    parser.add_argument("--checks-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config-of-drift", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.checks_only:
        try:
            json.dump(_checks(args.config_of_drift), sys.stdout)
        except (TopotuneError, OSError, ValueError, KeyError, TypeError) as err:
            sys.stderr.write("%s: %s\n" % (type(err).__name__, err))
            return 1
        return 0
    # slurmd sets SLURMD_NODENAME for its HealthCheckProgram (slurmd.c run_script_health_check); the log says which
    node_name, named_by = next((n, how) for n, how in (
        (args.node, "--node"), (os.environ.get("SLURMD_NODENAME"), "SLURMD_NODENAME"),
        (socket.gethostname().split(".")[0], "host name")) if n)
    try:
        config = load_config(args.config)
    except HealthcheckError as err:
        sys.stdout.write("topotune-healthcheck: %s\n" % err)
        return 0
    try:
        with open(args.config, encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                _log(config, "%s (%s) none: another topotune-healthcheck is running" % (node_name, named_by))
                return 0
            try:
                line = run_once(config, node_name, os.path.abspath(sys.argv[0]), args.dry_run)
            except (HealthcheckError, TopotuneError, OSError, ValueError) as err:
                line = "none: %s" % err
            _log(config, "%s (%s) %s" % (node_name, named_by, line))
    except OSError as err:
        sys.stdout.write("topotune-healthcheck: %s\n" % err)
    return 0
