"""Running the acceptance tools on a node (or reading their saved output) and parsing what they print.

Public API (standard library only, Python 3.8+; the acceptance_run module's engine):

``find_binary(candidates, search=None)``
    The first of ``candidates`` that is an executable file: a path as given, a bare name on ``PATH`` or in one of
    ``search`` (default ``SEARCH``: ROCm's and rccl-tests' usual install directories); None when none is.
``run_spec(spec, check_mode=False, run_in_check_mode=False, runner=run)``
    One run. ``spec`` (``plugin_utils/acceptance/verdicts.py plan_runs``): ``{"id": "rvs.gst", "tool": "rvs", "test":
    "gst", "command": AMD's command, "argv": ["-c", "{var:RVS_CONF}/MI300X/gst_single.conf"], "binaries": ["rvs"],
    "variables": {"RVS_CONF": [dirs]}, "files": {"example.cfg": [paths]}, "timeout": 3600, "output_file": None,
    "saved_output_only": None}``. ``argv`` is without the binary; ``{var:NAME}`` in it is the first directory of
    ``variables[NAME]`` that exists on the node, ``{file:WORD}`` the first existing path of ``files[WORD]``.
    Returns the record::

        {"id", "tool", "test", "status", "reason", "cmd", "rc", "source", "result"}

    ``status`` ``parsed`` (``result`` the tool's parse), ``missing`` (no binary, no directory or file the command
    needs, or a tool that is only read from saved output: ``reason`` says which and where it looked), ``skipped``
    (check mode), ``error`` (the command could not run or timed out, or its output holds nothing the parser reads:
    ``reason`` is the one-line message; a non-zero exit whose output still parses is ``parsed``, with ``rc`` and the
    result's own failure facts). ``output_file`` given: that saved output is parsed instead (also in check mode).
"""

import os

from ..core.errors import TopotuneError
from ..core.process import CommandError, run
from .tools import parse

SEARCH = ("/opt/rocm/bin", "/opt/rocm/libexec/rocm-validation-suite", "/opt/rccl-tests/build", "/usr/local/bin",
          "/usr/bin")


def find_binary(candidates, search=None):
    """See the module docstring."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + list(SEARCH if search is None else search)
    for name in candidates or []:
        paths = [name] if os.sep in name else [os.path.join(d, name) for d in dirs]
        for path in paths:
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def _record(spec, status, reason="", cmd=None, rc=None, source=None, result=None):
    return {"id": spec["id"], "tool": spec["tool"], "test": spec.get("test"), "status": status, "reason": reason,
            "cmd": cmd or [], "rc": rc, "source": source, "result": result}


def _parsed(spec, text, source, cmd=None, rc=None):
    try:
        result = parse(text, source, spec["tool"], spec.get("command"))
    except TopotuneError as err:
        return _record(spec, "error", str(err), cmd, rc, source)
    return _record(spec, "parsed", "", cmd, rc, source, result)


def _first(paths, test):
    return next((p for p in paths or [] if test(p)), None)


def _resolve(spec):
    """``(argv, None)`` with the placeholders resolved on this node, or ``(None, what is missing)``."""
    argv = []
    for arg in spec.get("argv") or []:
        arg = str(arg)
        for kind, table, test in (("var", spec.get("variables") or {}, os.path.isdir),
                                  ("file", spec.get("files") or {}, os.path.isfile)):
            for name, paths in table.items():
                token = "{%s:%s}" % (kind, name)
                if token in arg:
                    found = _first(paths, test)
                    if found is None:
                        return None, "%s is not there (looked in %s)" % (
                            "its %s directory" % name if kind == "var" else name, ", ".join(paths) or "nowhere")
                    arg = arg.replace(token, found)
        argv.append(arg)
    return argv, None


def run_spec(spec, check_mode=False, run_in_check_mode=False, runner=run):
    """See the module docstring."""
    if spec.get("output_file"):
        path = spec["output_file"]
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError as err:
            return _record(spec, "error", "the saved output %s cannot be read: %s" % (path, err.strerror or err))
        return _parsed(spec, text, path)
    if spec.get("saved_output_only"):
        return _record(spec, "missing", "%s is not run by topotune: %s" % (spec["tool"], " ".join(
            str(spec["saved_output_only"]).split())))
    binary = find_binary(spec.get("binaries"))
    if binary is None:
        return _record(spec, "missing", "%s not installed (looked for %s on PATH and in %s): install it, or give its "
                       "saved output" % (spec["tool"], ", ".join(spec.get("binaries") or []), ", ".join(SEARCH)))
    argv, why = _resolve(spec)
    if why:
        return _record(spec, "missing", "%s is installed (%s) but %s" % (spec["tool"], binary, why))
    cmd = [binary] + argv
    if check_mode and not run_in_check_mode:
        return _record(spec, "skipped", "check mode: `%s` not run" % " ".join(cmd), cmd)
    try:
        rc, out, err = runner(cmd, timeout=spec.get("timeout") or 1800, env=spec.get("env") or {})
    except CommandError as exc:
        return _record(spec, "error", str(exc), cmd, exc.rc)
    return _parsed(spec, out + ("\n" + err if err else ""), binary, cmd, rc)
