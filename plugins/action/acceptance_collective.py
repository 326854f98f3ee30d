# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: a multi-node rccl-tests all_reduce over the play's hosts, launched from one launcher host (the task's
host: ``run_once``, ``delegate_to``), judged against the cluster criterion; when it fails, the bad-node isolation
(plugin_utils/acceptance/isolation.py) run by run until the hosts responsible are found.

Each run is ``ansible.builtin.command`` (argv, no shell) on the launcher, under coreutils ``timeout``; the argv comes
from the template of knowledge/acceptance.yml ``collective`` (module_utils/acceptance/launcher.py). The hostfile
(when the template names ``{hostfile}``) is written per run into a temporary directory on the launcher and removed
at the end. Check mode runs nothing.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import launcher as la
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import RcclParseError, parse_perf
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance import collective as co
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.isolation import (
    STRATEGIES,
    Isolation,
    judge_run,
)
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "template": {"type": "str", "default": "mpirun", "choices": list(la.KINDS)},
    "command": {"type": "list", "elements": "str", "default": []},
    "ppn": {"type": "int"},
    "binary": {"type": "str"},
    "bind": {"type": "str", "default": "/usr/local/bin/topotune-bind"},
    "export": {"type": "list", "elements": "str", "default": []},
    "hostnames": {"type": "dict", "default": {}},
    "generation": {"type": "str", "default": ""},
    "criterion": {"type": "dict", "default": {}},
    "strategy": {"type": "str", "default": "auto", "choices": list(STRATEGIES)},
    "max_runs": {"type": "int"},
    "reference": {"type": "str"},
    "known_good": {"type": "list", "elements": "str", "default": []},
    "retries": {"type": "int", "default": 1},
    "timeout": {"type": "int", "default": 1800},
    "tmpdir": {"type": "str", "default": "/tmp"},
}
TIMEOUT_RC = 124   # coreutils timeout: the command timed out (137 after --kill-after)


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=SPEC)
        self._vars = task_vars or {}
        try:
            knowledge = load_knowledge("acceptance").get("collective") or {}
            record = self._collective(args, knowledge)
        except (TopotuneError, ValueError) as err:
            raise AnsibleActionFail("acceptance_collective: %s" % err) from None
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        shown = co.lines(record)
        return dict(result, changed=False, collective=record, lines=shown,
                    excluded=[e["host"] for e in record["excluded"]],
                    msg="collective over %d hosts: %s; %s" % (len(record["hosts"]), record["status"],
                                                              "; ".join(shown[:3])))

    # --- one run on the launcher --------------------------------------------------------------------------

    def _command(self, argv, stdin=None):
        module_args = {"argv": list(argv)}
        if stdin is not None:
            module_args.update(stdin=stdin, stdin_add_newline=False)
        return self._execute_module(module_name="ansible.builtin.command", module_args=module_args,
                                    task_vars=self._vars) or {}

    def _one(self, hosts, ctx, index):
        names = co.mpi_names(hosts, ctx["hostnames"])
        hostfile = None
        if ctx["needs_hostfile"]:
            hostfile = "%s/hostfile-%d" % (ctx["dir"], index)
            wrote = self._command(["dd", "of=%s" % hostfile, "status=none"],
                                  stdin=la.hostfile_text(names, ctx["ppn"], ctx["hostfile_line"]))
            if wrote.get("rc") != 0:
                argv = la.build_argv(ctx["template"], names, ctx["ppn"], ctx["binary"], ctx["bind"], hostfile,
                                     ctx["export"])
                return co.run_entry(hosts, argv, "unknown", "the hostfile %s could not be written on the launcher: %s"
                                    % (hostfile, _first_line(wrote.get("stderr") or wrote.get("msg"))))
        argv = la.build_argv(ctx["template"], names, ctx["ppn"], ctx["binary"], ctx["bind"], hostfile, ctx["export"])
        limit = ctx["timeout"]
        started = time.monotonic()
        ran = self._command((["timeout", "--kill-after=30", str(limit)] if limit else []) + argv)
        seconds = round(time.monotonic() - started, 3)
        rc = ran.get("rc")
        out = ran.get("stdout") or ""
        if limit and rc in (TIMEOUT_RC, 137):
            verdict, evidence = "unknown", "the run timed out after %d s (no evidence against any host)" % limit
        else:
            expected = [co.short_name(n) for n in names]
            try:
                verdict, evidence = judge_run(parse_perf(out, source="the run's output"), ctx["criterion"],
                                              hosts=expected)
            except RcclParseError:
                error = "\n".join(t for t in (out, ran.get("stderr") or "", "" if out else ran.get("msg") or "") if t)
                verdict, evidence = judge_run(None, ctx["criterion"], error=error, hosts=expected)
        return co.run_entry(hosts, argv, verdict, evidence, rc, seconds)

    # --- the full run and the isolation ---------------------------------------------------------------------

    def _collective(self, args, knowledge):
        hosts = list(dict.fromkeys(args["hosts"]))
        criterion = co.criterion_for(knowledge, args["generation"], args["criterion"] or None)
        if criterion is None:
            figures = ", ".join(sorted((knowledge.get("criterion") or {}).get("busbw_gbs") or {}))
            raise ValueError("no multi-node criterion for GPU generation %r (AMD's network page gives %s); give "
                             "criterion: {busbw_gbs: N}" % (args["generation"] or "unknown", figures or "none"))
        ctx = {
            "template": la.template_argv(knowledge, args["template"], args["command"] or None),
            "ppn": args["ppn"] or knowledge.get("ppn") or 8,
            "binary": args["binary"] or knowledge.get("binary") or "all_reduce_perf",
            "bind": args["bind"], "export": args["export"], "criterion": criterion, "timeout": args["timeout"],
            "hostnames": args["hostnames"], "hostfile_line": knowledge.get("hostfile_line") or "{host} slots={ppn}",
        }
        ctx["needs_hostfile"] = la.needs_hostfile(ctx["template"])
        co.mpi_names(hosts, ctx["hostnames"])
        delegated = getattr(self._task, "delegate_to", None)
        launcher = delegated if isinstance(delegated, str) and delegated else self._vars.get("inventory_hostname")
        common = {"template": args["template"], "launcher": launcher,
                  "hostnames": {h: n for h, n in ctx["hostnames"].items() if h in hosts}}
        if self._task.check_mode:
            argv = la.build_argv(ctx["template"], co.mpi_names(hosts, ctx["hostnames"]), ctx["ppn"], ctx["binary"],
                                 ctx["bind"], "<hostfile>" if ctx["needs_hostfile"] else None, ctx["export"])
            full = co.run_entry(hosts, argv, "skipped", "check mode: nothing run (would run: %s)" % " ".join(argv))
            return co.summary(hosts, criterion, full, check_mode=True, **common)
        if len(hosts) < 2:
            full = co.run_entry(hosts, [], "skipped", "a multi-node run needs at least 2 hosts, got %d" % len(hosts))
            return co.summary(hosts, criterion, full, **common)
        ctx["dir"] = None
        try:
            if ctx["needs_hostfile"]:
                made = self._execute_module(module_name="ansible.builtin.tempfile", module_args={
                    "state": "directory", "path": args["tmpdir"], "prefix": "topotune-collective."},
                    task_vars=self._vars) or {}
                if made.get("failed") or not made.get("path"):
                    raise ValueError("cannot make a directory for the hostfile under %s on the launcher: %s" % (
                        args["tmpdir"], made.get("msg") or "no path returned"))
                ctx["dir"] = made["path"]
            full = self._one(hosts, ctx, 0)
            isolation = None
            if full["verdict"] == "fail":
                isolation = self._isolate(hosts, args, ctx, full)
            return co.summary(hosts, criterion, full, isolation, **common)
        finally:
            if ctx["dir"]:
                self._execute_module(module_name="ansible.builtin.file", module_args={
                    "path": ctx["dir"], "state": "absent"}, task_vars=self._vars)

    def _isolate(self, hosts, args, ctx, full):
        unknown = sorted(set(args["known_good"]) - set(hosts))
        if unknown or (args["reference"] and args["reference"] not in hosts):
            raise ValueError("known_good / reference name hosts not in the run: %s" % ", ".join(
                unknown or [args["reference"]]))
        iso = Isolation(hosts, strategy=args["strategy"], reference=args["reference"], known_good=args["known_good"],
                        max_runs=args["max_runs"], retries=args["retries"], trigger=full["evidence"])
        ran = {}
        cap = len(hosts) * (len(hosts) + 1) + 10   # a guard only: the stepper's bound is far below
        while len(ran) < cap:
            run = iso.next_run()
            if run is None:
                break
            entry = self._one(run, ctx, len(ran) + 1)
            ran[iso.record(run, entry["verdict"], entry["evidence"])] = entry
        out = iso.result()
        for item in out["runs"]:
            entry = full if item.get("trigger") else ran.get(item["index"])
            if entry:
                item.update(argv=entry["argv"], rc=entry["rc"], seconds=entry["seconds"])
        return out


def _first_line(text):
    return next((line.strip() for line in str(text or "").splitlines() if line.strip()), "no output")
