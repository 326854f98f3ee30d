"""Multi-node collectives: the argv of each template kind, the hostfile, the cluster criterion, and the
acceptance_collective action driven with a fake ``_execute_module`` that runs the STAND-IN SIMULATOR of rccl-tests
(``sim/bench_standin.py``: not rccl-tests, no GPU; it prints all_reduce_perf's output for a host list, figures from a
model of the nodes' links, with slow hosts injected) as a local subprocess."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.topotune.instinct.plugins.action import acceptance_collective
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import launcher as la
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance import collective as co
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
STANDIN = os.path.join(REPO, "sim", "bench_standin.py")
KNOWLEDGE = load_knowledge("acceptance")["collective"]
HOSTS = ["n%02d" % i for i in range(1, 9)]


def test_mpirun_template_names_the_hostfile_ranks_per_node_and_the_wrapper():
    template = la.template_argv(KNOWLEDGE, "mpirun")
    assert la.needs_hostfile(template)
    argv = la.build_argv(template, ["a", "b"], ppn=8, bind="/usr/local/bin/topotune-bind", hostfile="/tmp/x/hf",
                         export=["NCCL_IB_HCA"])
    assert argv == ["mpirun", "--hostfile", "/tmp/x/hf", "-np", "16", "--map-by", "ppr:8:node", "--bind-to", "none",
                    "-x", "NCCL_IB_HCA", "/usr/local/bin/topotune-bind", "all_reduce_perf", "-b", "8", "-e", "8G",
                    "-f", "2", "-g", "1"]
    # no wrapper, nothing exported: the words are left out
    bare = la.build_argv(template, ["a", "b", "c"], ppn=4, bind="", hostfile="/h", binary="/opt/rccl-tests/all_reduce_perf")
    assert bare[:9] == ["mpirun", "--hostfile", "/h", "-np", "12", "--map-by", "ppr:4:node", "--bind-to", "none"]
    assert bare[9] == "/opt/rccl-tests/all_reduce_perf"
    with pytest.raises(ValueError, match="no hostfile"):
        la.build_argv(template, ["a", "b"])


def test_srun_template_names_the_nodes_and_needs_no_hostfile():
    template = la.template_argv(KNOWLEDGE, "srun")
    assert not la.needs_hostfile(template)
    assert la.build_argv(template, ["a", "b"], ppn=8, bind="topotune-bind") == [
        "srun", "-N", "2", "--nodelist=a,b", "--ntasks-per-node=8", "--gpus-per-node=8", "--cpu-bind=none",
        "topotune-bind", "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]


def test_command_template_is_the_users_and_placeholders_are_checked():
    assert la.build_argv(la.template_argv(KNOWLEDGE, "command"), ["a", "b"], ppn=8) == [
        "all_reduce_perf", "--hosts", "a,b", "-g", "8", "-b", "8", "-e", "8G", "-f", "2"]
    mine = ["run.sh", "{nodes}x{ppn}", "{hosts}"]
    assert la.build_argv(la.template_argv(KNOWLEDGE, "mpirun", mine), ["a", "b"], ppn=2) == ["run.sh", "2x2", "a,b"]
    with pytest.raises(ValueError, match=r"unknown placeholder \{host\}"):
        la.template_argv(KNOWLEDGE, "command", ["x", "{host}"])
    with pytest.raises(ValueError, match=r"\{bind\} must be a word of its own"):
        la.template_argv(KNOWLEDGE, "command", ["x", "--wrap={bind}"])
    with pytest.raises(ValueError, match="not one of"):
        la.template_argv(KNOWLEDGE, "pdsh")


def test_hostfile_text_and_mpi_names():
    assert la.hostfile_text(["a", "b"], 8) == "a slots=8\nb slots=8\n"
    assert co.mpi_names(["n1", "n2"], {"n1": "n1-ib.cluster"}) == ["n1-ib.cluster", "n2"]
    assert co.short_name("n1-ib.cluster") == "n1-ib"
    with pytest.raises(ValueError, match="both map to x"):
        co.mpi_names(["n1", "n2"], {"n1": "x", "n2": "x"})


def test_the_cluster_criterion_is_amds_per_generation_in_place_at_8_gib():
    mi300x = co.criterion_for(KNOWLEDGE, "MI300X")
    assert (mi300x["busbw_gbs"], mi300x["column"], mi300x["message_bytes"]) == (304, "in_place", 8 << 30)
    assert "docs/network/validation.md" in mi300x["sources"][0]["document"]
    assert co.criterion_for(KNOWLEDGE, "mi355x")["busbw_gbs"] == 350
    assert co.criterion_for(KNOWLEDGE, "MI210") is None and co.criterion_for(KNOWLEDGE, "") is None
    assert co.criterion_for(KNOWLEDGE, "MI210", {"busbw_gbs": 12})["busbw_gbs"] == 12


# --- the action, with the stand-in simulator as the launcher's tools ---------------------------------------------

class Launcher:
    """A fake launcher: ``_execute_module`` of the action. ansible.builtin.command runs the stand-in simulator as a
    subprocess (``all_reduce_perf`` and ``mpirun`` both map to it, mpirun reading the hostfile the action wrote);
    tempfile and file make and remove a local directory."""

    def __init__(self, faults=None, broken=False):
        self.work = tempfile.mkdtemp(prefix="tt-coll-")
        self.faults = os.path.join(self.work, "faults.json")
        with open(self.faults, "w") as handle:
            json.dump(faults or {}, handle)
        self.broken = broken
        self.calls = []
        self.dirs = []

    def __call__(self, module_name, module_args, task_vars):
        self.calls.append((module_name, module_args))
        if module_name == "ansible.builtin.tempfile":
            path = tempfile.mkdtemp(prefix=module_args["prefix"], dir=self.work)
            self.dirs.append(path)
            return {"changed": True, "path": path}
        if module_name == "ansible.builtin.file":
            shutil.rmtree(module_args["path"])
            return {"changed": True}
        argv = list(module_args["argv"])
        if argv[0] == "timeout":
            argv = argv[3:]
        if argv[0] == "mpirun":
            argv = ["all_reduce_perf", "--hostfile", argv[argv.index("--hostfile") + 1], "-b", "1G"]
        if argv[0] == "all_reduce_perf":
            if self.broken:
                return {"failed": True, "rc": 2, "msg": "[Errno 2] No such file or directory: b'all_reduce_perf'",
                        "stdout": "", "stderr": ""}
            argv = [sys.executable, STANDIN, "--faults", self.faults] + argv[1:]
        proc = subprocess.run(argv, input=module_args.get("stdin"), capture_output=True, text=True, check=False)
        return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "failed": proc.returncode != 0}

    def runs(self):
        return [args["argv"] for name, args in self.calls if name == "ansible.builtin.command"
                and "all_reduce_perf" in args["argv"] or name == "ansible.builtin.command" and "mpirun" in args["argv"]]


def act(args, launcher, check_mode=False):
    task = MagicMock(args=args, check_mode=check_mode, diff=False, async_val=0)
    action = acceptance_collective.ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None,
                                                shared_loader_obj=None)
    action._execute_module = launcher
    return action.run(task_vars={"inventory_hostname": HOSTS[0]})


COMMAND = ["all_reduce_perf", "--hosts", "{hosts}", "-g", "{ppn}", "-b", "1G", "-e", "8G", "-f", "2"]


@pytest.mark.parametrize("bad", [[], ["n05"], ["n02", "n07"]])
@pytest.mark.parametrize("strategy", ["auto", "pairwise"])
def test_the_excluded_hosts_are_exactly_the_bad_ones_within_the_bound(bad, strategy):
    launcher = Launcher({host: {"slow": 0.9} for host in bad})
    result = act({"hosts": HOSTS, "template": "command", "command": COMMAND, "generation": "MI300X",
                  "strategy": strategy}, launcher)
    record = result["collective"]
    assert record["schema_version"] == 1 and record["criterion"]["busbw_gbs"] == 304
    assert sorted(result["excluded"]) == bad == record["bad"] == [e["host"] for e in record["excluded"]]
    assert record["undetermined"] == [] and sorted(record["good"]) == sorted(set(HOSTS) - set(bad))
    assert record["full_run"]["argv"][:3] == ["all_reduce_perf", "--hosts", ",".join(HOSTS)]
    if not bad:
        assert record["status"] == "pass" and record["isolation"] is None and len(launcher.runs()) == 1
        assert record["full_run"]["evidence"].startswith("in-place busbw 3") and "(8 hosts, 64 ranks)" in \
            record["full_run"]["evidence"]
        return
    iso = record["isolation"]
    assert record["status"] == "fail" and iso["complete"] and iso["within_bound"]
    assert iso["runs_used"] <= iso["bound"] and len(launcher.runs()) == 1 + iso["runs_used"]
    assert iso["runs"][0]["trigger"] and iso["runs"][0]["argv"] == record["full_run"]["argv"]
    assert all(run["argv"][0] == "all_reduce_perf" and run["verdict"] in ("pass", "fail") for run in iso["runs"])
    for entry in record["excluded"]:
        assert "< 304 GB/s" in entry["evidence"] and entry["why"].startswith("run ")
    assert result["lines"][0].startswith("excluded %s: in-place busbw" % bad[0])


def test_mpirun_writes_each_runs_hostfile_on_the_launcher_and_removes_it():
    launcher = Launcher({"n03": {"slow": 0.9}})
    result = act({"hosts": HOSTS, "template": "mpirun", "generation": "MI300X", "hostnames": {"n01": "n01"}},
                 launcher)
    assert result["excluded"] == ["n03"]
    writes = [args for name, args in launcher.calls if name == "ansible.builtin.command" and args["argv"][0] == "dd"]
    assert writes[0]["stdin"] == "".join("%s slots=8\n" % h for h in HOSTS)
    assert launcher.runs()[0][:5] == ["timeout", "--kill-after=30", "1800", "mpirun", "--hostfile"]
    assert launcher.runs()[0][-10:-8] == ["/usr/local/bin/topotune-bind", "all_reduce_perf"]
    assert launcher.dirs and not any(os.path.exists(d) for d in launcher.dirs)


def test_a_broken_launcher_is_unknown_and_excludes_nobody():
    launcher = Launcher(broken=True)
    record = act({"hosts": HOSTS, "template": "command", "command": COMMAND, "generation": "MI300X"},
                 launcher)["collective"]
    assert record["status"] == "unknown" and record["excluded"] == [] and record["bad"] == []
    assert record["undetermined"] == HOSTS and record["isolation"] is None
    assert record["full_run"]["evidence"].startswith("the run broke before rccl-tests reported")
    assert "No such file" in record["full_run"]["evidence"]


def test_an_unreachable_host_in_a_run_is_no_evidence_against_it():
    launcher = Launcher({"n04": {"unreachable": True}})
    record = act({"hosts": HOSTS, "template": "command", "command": COMMAND, "generation": "MI300X"},
                 launcher)["collective"]
    assert record["status"] == "unknown" and record["excluded"] == []


def test_check_mode_runs_nothing_and_says_so():
    launcher = Launcher()
    result = act({"hosts": HOSTS, "template": "mpirun", "generation": "MI300X"}, launcher, check_mode=True)
    record = result["collective"]
    assert launcher.calls == [] and record["status"] == "skipped" and record["check_mode"]
    assert record["full_run"]["evidence"].startswith("check mode: nothing run (would run: mpirun --hostfile <hostfile>")
    assert result["lines"] == ["collective: not run (%s)" % record["full_run"]["evidence"]]


def test_a_generation_without_a_criterion_fails_naming_the_ones_there_are():
    with pytest.raises(AnsibleActionFail, match=r"no multi-node criterion for GPU generation 'MI210' \(AMD's network "
                                                r"page gives MI300X, MI355X\)"):
        act({"hosts": HOSTS, "template": "command", "command": COMMAND, "generation": "MI210"}, Launcher())


def test_max_runs_bounds_the_isolation_and_leaves_the_rest_undetermined():
    launcher = Launcher({"n02": {"slow": 0.9}, "n07": {"slow": 0.9}})
    record = act({"hosts": HOSTS, "template": "command", "command": COMMAND, "generation": "MI300X",
                  "strategy": "bisect", "max_runs": 2}, launcher)["collective"]
    iso = record["isolation"]
    assert iso["runs_used"] == 2 and iso["stopped"] == "budget" and len(launcher.runs()) == 3
    assert record["undetermined"] and not set(record["good"]) & {"n02", "n07"}
    assert set(record["bad"]) <= {"n02", "n07"}
