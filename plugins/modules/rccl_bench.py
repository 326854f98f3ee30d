#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run rccl-tests all_reduce_perf (or parse a saved run) and compare its bus bandwidth with the expected figure."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rccl_bench
author: topotune contributors (@topotune)
short_description: Run rccl-tests all_reduce_perf and compare bus bandwidth with AMD's pass criterion
description:
  - Runs the rccl-tests C(all_reduce_perf) binary at O(rccl_tests_path) with O(arguments) (no shell, with
    O(timeout)), or parses a saved run given as O(output_file), and returns the parsed table as RV(result).
  - Parses rccl-tests and nccl-tests output, new and old column layouts (detected from the column header
    line), in-place and out-of-place columns (or only one of them), repeated cycles and the
    C(# Avg bus bandwidth) footer. Launcher and log prefixes (Open MPI C(--tag-output), C(srun --label),
    timestamps, host names) are removed. A truncated run keeps its complete rows and adds a warning; a run
    with non-zero C(#wrong) or the tool's failure lines is marked C(failed).
  - When the binary is absent the module returns RV(skipped)=V(true) with a message saying how to install it
    or where to point O(rccl_tests_path); that is not a failure.
  - Compares the run with AMD's published pass criterion in O(expectations) (the knowledge file
    C(rccl_expectations)) for the node's GPU generation (O(generation), or the device ids of O(topology) looked
    up in O(gpu_generations), or the device name printed by the run) and the run's rank count. It compares the in-place bus
    bandwidth of the row at the size AMD states (8 GiB), or for MI210 AMD's average bus bandwidth of its sweep
    C(-b 8 -e 8G -f 2) (the run's C(# Avg bus bandwidth) when the run is that sweep, else bounds from its rows).
    Where AMD's pages state different minimums (MI350X/MI355X, 304 and 350 GB/s) a run under the lower one is
    V(below) and one between them V(warn). Generations or shapes without a criterion compare as V(unknown); a
    compared row with C(#wrong), or for the average any failed row, compares as V(failed).
  - Check mode does not run the benchmark (it returns RV(skipped) with the reason) unless
    O(run_in_check_mode=true); a saved O(output_file) is parsed in check mode too.
  - When the benchmark exits non-zero the task fails; the message quotes the tool's own failure line and
    the parsed table (if any) is still returned.
  - Read-only on the host; C(changed) is always V(false).
options:
  rccl_tests_path:
    description:
      - The C(all_reduce_perf) binary, or the rccl-tests directory holding it (C(build/all_reduce_perf) or
        C(all_reduce_perf)).
    type: path
    default: /opt/rccl-tests/build/all_reduce_perf
  arguments:
    description:
      - Arguments passed to the binary as an argv list (no shell). The default sweeps 8 B .. 16 GiB with one
        process driving 8 GPUs. AMD's commands sweep C(-b 8 -e 8G -f 2); the compared message size is 8 GiB,
        and for MI210 (AMD's average bus bandwidth) a longer sweep is compared at AMD's sizes.
      - Set C(-g) to the node's GPU count.
    type: list
    elements: str
    default: ["-b", "8", "-e", "16G", "-f", "2", "-g", "8"]
  environment:
    description: Extra environment variables for the run (for example C(NCCL_DEBUG=VERSION)).
    type: dict
    default: {}
  timeout:
    description: Seconds before the run is killed and the module fails.
    type: int
    default: 1800
  output_file:
    description: Parse this saved rccl-tests/nccl-tests output instead of running the benchmark.
    type: path
  run_in_check_mode:
    description: Run the benchmark in check mode too (it changes no state, but takes the GPUs for a while).
    type: bool
    default: false
  generation:
    description: GPU generation to compare with (for example C(MI300X)); detected when omitted.
    type: str
  topology:
    description:
      - The topology model (C(topotune_discovery.topology), registered from M(topotune.instinct.gpu_topology)); its
        C(identity) (set at discovery) names the generation.
    type: dict
  gpu_generations:
    description:
      - The knowledge file C(gpu_generations), whose generation names and aliases resolve O(generation) and the device
        names a run prints; a topology without C(identity) is identified with it.
    type: dict
  expectations:
    description:
      - The knowledge file C(rccl_expectations) (C(lookup('topotune.instinct.knowledge', 'rccl_expectations'))).
        Without it the comparison is V(unknown).
    type: dict
  plans:
    description:
      - The source article's binding comparison. When given, the benchmark runs once per plan, one rank per GPU, through
        O(launcher), each rank bound by the wrapper O(bind) with a table rendered for that plan (C(none), C(numa),
        C(l3), as C(launch_templates_cpu_binding) names them; the other launch options from O(launch_options)), and
        RV(binding) compares them. RV(result) and RV(comparison) are then the run of O(deployed_plan).
      - Needs O(topology), the wrapper on the node (role C(topotune.instinct.launch_templates)) and a launcher that
        starts one process per rank (Open MPI's C(mpirun) by default).
    type: list
    elements: str
    choices: [none, numa, l3]
    default: []
  launcher:
    description:
      - The argv template of a plan run, one word each, no shell (C(knowledge/acceptance.yml) C(collective.templates)).
        Placeholders C({hostfile}) (written for the run), C({hosts}) (O(launcher_host)), C({np}) and C({ppn}) (the
        node's GPU count), C({nodes}) (1), C({binary}); the words C({bind}) (O(bind)) and C({export}) (C(-x NAME) for
        C(TOPOTUNE_LAUNCH_TABLE) and C(TOPOTUNE_GROUP_SIZE)).
    type: list
    elements: str
    default: []
  launcher_host:
    description: The name the launcher reaches this node by (C(localhost) for Open MPI on the node; the Slurm node name
      for C(srun)).
    type: str
    default: localhost
  bind:
    description: The launch wrapper that binds each rank (written by role C(topotune.instinct.launch_templates)).
    type: path
    default: /usr/local/bin/topotune-bind
  launch_options:
    description: Options of the launch renderer for the plans' tables (as module M(topotune.instinct.launch_templates)
      takes them, for example C(reserved_cpus), C(membind)); C(cpu_binding), C(sizes) and C(default_size) are set per
      plan.
    type: dict
    default: {}
  sysroot:
    description: Root of the node's hardware tree (C(topotune_sysroot)); the plans' tables look for the render nodes under
      C(<sysroot>/dev) unless O(launch_options) gives C(dev_dir), as module M(topotune.instinct.launch_templates) does.
    type: path
    default: /
  deployed_plan:
    description: The plan the node's launch configuration uses (C(launch_templates_cpu_binding)); the comparison says
      when another plan beats it.
    type: str
    choices: [none, numa, l3]
    default: numa
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - The criteria are AMD's (AMD Instinct Customer Acceptance Guide, one page per GPU); see
    C(knowledge/rccl_expectations.yml) and C(docs/benchmark.md).
"""

EXAMPLES = r"""
- name: Run all_reduce_perf and compare with AMD's MI300X pass criterion
  topotune.instinct.rccl_bench:
    rccl_tests_path: /opt/rccl-tests/build/all_reduce_perf
    arguments: ["-b", "8", "-e", "16G", "-f", "2", "-g", "8"]
    topology: "{{ topotune_discovery.topology | default(omit) }}"
    gpu_generations: "{{ lookup('topotune.instinct.knowledge', 'gpu_generations') }}"
    expectations: "{{ lookup('topotune.instinct.knowledge', 'rccl_expectations') }}"
  register: __benchmark_rccl

- name: Parse a saved run
  topotune.instinct.rccl_bench:
    output_file: /var/tmp/all_reduce_perf.txt
    generation: MI300X
    expectations: "{{ lookup('topotune.instinct.knowledge', 'rccl_expectations') }}"
"""

RETURN = r"""
skipped:
  description: V(true) when nothing was run or parsed (binary absent, or check mode); RV(msg) says why.
  returned: always
  type: bool
  sample: false
msg:
  description: What happened, in one line.
  returned: always
  type: str
  sample: "parsed 32 rows of /opt/rccl-tests/build/all_reduce_perf; avg busbw 116.669 GB/s"
cmd:
  description: The argv run (empty when a saved file was parsed or nothing ran).
  returned: always
  type: list
  elements: str
  sample: ["/opt/rccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8"]
result:
  description:
    - The parsed run (null when skipped). C(rows) (one per message size with C(size) bytes, C(count), C(type),
      C(redop), C(root), C(out_of_place) and C(in_place) each with C(time_us), C(algbw), C(busbw) GB/s and
      C(wrong) or C(error)); C(avg_busbw) (null when the footer is absent); C(peak_busbw); C(params) (the
      C(# nThread ...) line); C(ranks), C(n_ranks), C(hosts), C(device_names), C(versions); C(format) (V(new)
      with C(#wrong), V(old) with C(error)); C(groups); C(n_cycles), C(extra_cycles); C(complete); C(failed),
      C(failures) (the tool's failure lines), C(wrong_rows); C(prefixes); C(warnings).
  returned: always
  type: dict
  sample: {avg_busbw: 116.669, peak_busbw: 318.98, n_ranks: 8, complete: true}
comparison:
  description:
    - C(generation) and how it was found (C(generation_from)); C(kind) (V(busbw_at_size), or V(avg_busbw) for
      AMD's average bus bandwidth of a sweep); C(status) (V(ok), V(warn) (past AMD's lower minimum, under a
      higher one another AMD page states), V(below), V(failed), V(unknown)) and C(reason), which names the pages.
    - C(bounds) lists every minimum AMD's pages state for the run, lowest first, each with C(busbw_gbs),
      C(below) (V(fail) or V(warn)) and C(sources) (C(document), C(section), C(commit), C(says)); C(bound) is
      the one that decided a V(warn) or V(below) (else null); C(disagreement) says where AMD's pages disagree
      and the policy; C(expected_busbw) is the lowest minimum (under it the run fails).
    - C(measured_busbw) is the C(column) (V(in_place)) busbw at C(message_bytes) (worst cycle), or AMD's
      average (the footer, the mean of the run's rows at AMD's sizes, or its lower bound when sizes are
      missing, as C(compared.from) says); C(compared) (size, column, type, cycles; for the average C(sweep),
      C(run_sweep), C(range), C(cells) of C(cells_expected)); C(ratio); C(ranks); C(reference) (AMD's page);
      C(source) (the pages, as text); C(observed) (real runs kept for context).
  returned: always
  type: dict
  sample: {generation: MI300X, kind: busbw_at_size, expected_busbw: 304, measured_busbw: 317.66,
           message_bytes: 8589934592, column: in_place, status: ok}
rc:
  description: Exit code of the benchmark.
  returned: when the benchmark ran
  type: int
  sample: 0
binding:
  description:
    - The binding comparison (O(plans)), null without it. C(runs) one per plan, in run order (C(plan), C(cmd), C(rc), C(figures)
      (in-place busbw and time at 8 GiB or the largest size, C(avg_busbw), per-size figures) or C(error), and
      C(status) of the AMD criterion); C(comparison) (C(reference), C(deltas) per plan with C(busbw_pct),
      C(time_pct), C(small_time_pct) and C(verdict) C(better)/C(worse)/C(same)/C(unknown), C(best), C(deployed),
      C(recommendation)).
  returned: always
  type: dict
  sample: {comparison: {reference: none, best: numa, recommendation: "numa: busbw at 8 GiB +25.0 % over no binding"}}
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.launcher import (
    build_argv,
    hostfile_text,
    needs_hostfile,
)
from ansible_collections.topotune.instinct.plugins.module_utils.bench.compare import PLANS, compare_plans, figures
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import (
    RcclParseError,
    compare_busbw,
    parse_perf,
)
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.process import TIMED_OUT, CommandError, run
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import plan as launch_plan
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import render_table
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import by_name, identify, model_identity

_BINARY = "all_reduce_perf"
_INSTALL_HINT = ("build rccl-tests (https://github.com/ROCm/rccl-tests: `make MPI=0`) or set rccl_tests_path "
                 "(playbook variable topotune_rccl_tests_path) to its all_reduce_perf")


def find_binary(path):
    """The all_reduce_perf executable for ``path`` (a file or an rccl-tests directory), or None."""
    candidates = [path]
    if os.path.isdir(path):
        candidates = [os.path.join(path, "build", _BINARY), os.path.join(path, _BINARY)]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class RcclBench:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def _skip(self, msg):
        # no `rc` key here: Ansible marks any result with a non-zero/None rc as failed
        return {"changed": False, "skipped": True, "msg": msg, "cmd": [], "result": None,
                "comparison": {"status": "unknown", "reason": msg}, "binding": None}

    def _run(self, binary, argv=None, extra_env=None):
        argv = argv or [binary] + [str(a) for a in self.params["arguments"]]
        env = {str(k): str(v) for k, v in (self.params["environment"] or {}).items()}
        env.update(extra_env or {})
        try:
            # AnsibleModule.run_command has no timeout; a hung collective must not block the play forever
            rc, out, err = run(argv, timeout=self.params["timeout"], env=env)
        except CommandError as exc:
            if exc.rc == TIMED_OUT:
                raise TopotuneError("%s: raise timeout or shrink the sweep (-e)" % exc) from None
            raise
        return argv, rc, out, err

    def _failed_run(self, argv, rc, text, err):
        """A non-zero exit: the tool's own failure line in the message, the parsed table (if any) alongside."""
        command = " ".join(argv)
        try:
            result = parse_perf(text + "\n" + err, argv[0])
        except RcclParseError as parse_error:
            raise TopotuneError("`%s` failed (rc=%s): %s" % (command, rc, parse_error)) from None
        quoted = [f["text"] for f in result["failures"]] or (err or text).strip().splitlines()[-1:]
        out = self._compare(result)
        out.update(failed=True, rc=rc, cmd=argv, msg="`%s` failed (rc=%s): %s" % (
            command, rc, quoted[0] if quoted else "no output"))
        return out

    def _generation(self, result):
        """(generation, how): given, else the topology's identity, else a device name the run printed."""
        p = self.params
        generations = (p["gpu_generations"] or {}).get("generations") or []
        if p["generation"]:
            named = identify([], generations, p["generation"])["generation"] if generations else None
            return named or p["generation"], "given"
        if p["topology"]:
            identity = model_identity(p["topology"], generations)
            if identity["generation"]:
                return identity["generation"], "topology identity (%s %s)" % (identity["product"], identity["device_id"])
        # without the generations table, the expectation entries' names (the same generation names) still match
        named = generations or (p["expectations"] or {}).get("generations") or []
        for name in result["device_names"]:
            gen = by_name(named, name)
            if gen is not None:
                return gen["name"], "device name %r" % name
        return None, "unknown"

    def _compare(self, result):
        p = self.params
        generation, how = self._generation(result)
        if p["expectations"]:
            comparison = compare_busbw(result, p["expectations"], generation)
        else:
            comparison = {"generation": generation, "status": "unknown",
                          "reason": "no expectations passed (lookup('topotune.instinct.knowledge', 'rccl_expectations'))"}
        comparison["generation_from"] = how
        return {"changed": False, "skipped": False, "cmd": [], "result": result, "comparison": comparison}

    def _plan_table(self, plan, gpus, path):
        """The wrapper's table for ``plan``: the launch renderer's, one group of every GPU (ranks 0..n-1)."""
        options = dict({"dev_dir": os.path.join(self.params["sysroot"], "dev")}, **(self.params["launch_options"] or {}))
        options.update(cpu_binding=plan, sizes=[gpus], default_size=gpus)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render_table(launch_plan(self.params["topology"], options)))

    def _binding(self, binary):
        """One run per plan through the launcher, each rank bound by the wrapper with the plan's table."""
        p = self.params
        if not p["launcher"]:
            raise TopotuneError("plans need launcher: the argv template of a run (playbook variable "
                                "topotune_benchmark_launcher, default knowledge/acceptance.yml collective.templates.mpirun)")
        if not p["topology"] or not (p["topology"].get("gpus") or []):
            raise TopotuneError("plans need the node's topology model with its GPUs (run playbooks/topology.yml "
                                "first, in the same ansible-playbook call)")
        if not (os.path.isfile(p["bind"]) and os.access(p["bind"], os.X_OK)):
            return self._skip("the binding comparison needs the launch wrapper %s, absent on this node: apply role "
                              "topotune.instinct.launch_templates (playbooks/site.yml) first" % p["bind"])
        gpus = len(p["topology"]["gpus"])
        runs, records, workdir = {}, {}, tempfile.mkdtemp(prefix="topotune-compare.")
        try:
            hostfile = None
            if needs_hostfile(p["launcher"]):
                hostfile = os.path.join(workdir, "hostfile")
                with open(hostfile, "w", encoding="utf-8") as handle:
                    handle.write(hostfile_text([p["launcher_host"]], gpus))
            for plan in dict.fromkeys(p["plans"]):
                table = os.path.join(workdir, "%s.table" % plan)
                self._plan_table(plan, gpus, table)
                argv = build_argv(p["launcher"], [p["launcher_host"]], gpus, binary, p["bind"], hostfile,
                                  ("TOPOTUNE_LAUNCH_TABLE", "TOPOTUNE_GROUP_SIZE"))
                records[plan] = self._plan_run(binary, argv, {"TOPOTUNE_LAUNCH_TABLE": table,
                                                              "TOPOTUNE_GROUP_SIZE": str(gpus)})
                runs[plan] = {"figures": records[plan]["figures"]} if records[plan]["figures"] else {
                    "error": records[plan]["error"]}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        comparison = compare_plans(runs, p["deployed_plan"])
        chosen = p["deployed_plan"] if p["deployed_plan"] in records else next(iter(records))
        out = records[chosen].pop("_out")
        for record in records.values():
            record.pop("_out", None)
        # a list: the plans in run order (JSON reports sort mapping keys)
        out["binding"] = {"runs": [dict(record, plan=plan) for plan, record in records.items()],
                          "comparison": comparison}
        out["msg"] = "binding plans %s: %s" % (", ".join(records), comparison["recommendation"])
        return out

    def _plan_run(self, binary, argv, env):
        record = {"cmd": argv, "rc": None, "figures": None, "error": None, "status": "unknown"}
        try:
            argv, rc, text, err = self._run(binary, argv, env)
            record["rc"] = rc
            out = self._failed_run(argv, rc, text, err) if rc != 0 else self._compare(parse_perf(text, argv[0]))
            out.pop("failed", None)
            out["cmd"] = argv
        except (RcclParseError, TopotuneError) as error:
            record["error"] = str(error)
            record["_out"] = {"changed": False, "skipped": False, "cmd": argv, "result": None,
                              "comparison": {"status": "unknown", "reason": str(error)}}
            return record
        record["_out"] = out
        record["status"] = out["comparison"]["status"]
        try:
            record["figures"] = figures(out["result"])
        except ValueError as error:
            record["error"] = "%s (rc=%s)" % (error, rc)
        return record

    def run(self):
        p = self.params
        argv, rc = [], None
        if p["output_file"]:
            try:
                with open(p["output_file"], "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
            except OSError as err:
                raise TopotuneError("output_file %s cannot be read: %s" % (p["output_file"], err.strerror)) from None
            source = p["output_file"]
        else:
            binary = find_binary(p["rccl_tests_path"])
            if binary is None:
                return self._skip("rccl-tests all_reduce_perf not found at %s (not an executable file or rccl-tests "
                                  "directory): benchmark skipped; %s" % (p["rccl_tests_path"], _INSTALL_HINT))
            if self.module.check_mode and not p["run_in_check_mode"]:
                return self._skip("check mode: all_reduce_perf (%s) not run; set run_in_check_mode: true to run it"
                                  % binary)
            if p["plans"]:
                return self._binding(binary)
            argv, rc, text, err = self._run(binary)
            source = binary
            if rc != 0:
                return self._failed_run(argv, rc, text, err)
        result = parse_perf(text, source)
        for warning in result["warnings"]:
            self.module.warn("%s: %s" % (source, warning))
        out = self._compare(result)
        avg = "n/a" if result["avg_busbw"] is None else "%s GB/s" % result["avg_busbw"]
        out["msg"] = "parsed %d rows of %s; avg busbw %s; comparison: %s" % (
            len(result["rows"]), source, avg, out["comparison"]["status"])
        out["cmd"] = argv
        out["binding"] = None
        if rc is not None:
            out["rc"] = rc
        return out


def main():
    module = AnsibleModule(
        argument_spec={
            "rccl_tests_path": {"type": "path", "default": "/opt/rccl-tests/build/all_reduce_perf"},
            "arguments": {"type": "list", "elements": "str", "default": ["-b", "8", "-e", "16G", "-f", "2", "-g", "8"]},
            "environment": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 1800},
            "output_file": {"type": "path"},
            "run_in_check_mode": {"type": "bool", "default": False},
            "generation": {"type": "str"},
            "topology": {"type": "dict"},
            "gpu_generations": {"type": "dict"},
            "expectations": {"type": "dict"},
            "plans": {"type": "list", "elements": "str", "choices": list(PLANS), "default": []},
            "launcher": {"type": "list", "elements": "str", "default": []},
            "launcher_host": {"type": "str", "default": "localhost"},
            "bind": {"type": "path", "default": "/usr/local/bin/topotune-bind"},
            "launch_options": {"type": "dict", "default": {}},
            "deployed_plan": {"type": "str", "choices": list(PLANS), "default": "numa"},
            "sysroot": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    try:
        out = RcclBench(module).run()
    except (RcclParseError, TopotuneError) as err:
        module.fail_json(msg=str(err))
    if out.pop("failed", False):
        module.fail_json(**out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
