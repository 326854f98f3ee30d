"""The static topotune-bind wrapper, run by bash on generated tables: GPU choice inside allocations and
containers, visible-device indices, CPU and memory binding within what the process may use (real numactl)."""

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import TABLE_FORMAT, render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WRAPPER = os.path.join(REPO, "roles", "launch_templates", "files", "topotune-bind")
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# What the caller's environment may hold; cleared so each case states its own.
CLEARED = ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID",
           "TOPOTUNE_GROUP", "TOPOTUNE_GROUP_SIZE", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
           "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_JOB_ID", "TOPOTUNE_BIND_STRICT",
           "TOPOTUNE_BIND_DEVDIR", "TOPOTUNE_BIND_NUMACTL", "TOPOTUNE_BIND_STATUS"]
MI250X_NUMA = {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2}
MI250X_CPUS = {0: "48-63,112-127", 2: "16-31,80-95", 4: "0-15,64-79", 6: "32-47,96-111"}


class Node:
    """A profile's sysroot, the launch files rendered from it, and a way to run the installed wrapper."""

    def __init__(self, tmp_path, profile, options=None):
        self.root = tmp_path / "sysroot"
        simsys.build(profile, str(self.root), force=True)
        self.dest = tmp_path / "etc"
        self.wrapper = tmp_path / "bin" / "topotune-bind"
        with open(WRAPPER, encoding="utf-8") as handle:
            opts = {"dest": str(self.dest), "wrapper_path": str(self.wrapper), "dev_dir": str(self.root / "dev"),
                    "wrapper_content": handle.read()}
        opts.update(options or {})
        self.result = render(load_capture(sysroot=str(self.root)), opts)
        for f in self.result["files"]:
            os.makedirs(os.path.dirname(f["path"]), exist_ok=True)
            with open(f["path"], "w", encoding="utf-8") as handle:
                handle.write(f["content"])
            os.chmod(f["path"], int(f["mode"], 8))

    def run(self, args, env=None, prefix=(), expect_rc=0):
        base = {k: v for k, v in os.environ.items() if k not in CLEARED}
        base.update(env or {})
        proc = subprocess.run(list(prefix) + [str(self.wrapper)] + args, env=base, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == expect_rc, proc.stderr
        return proc

    def show(self, env=None, args=(), **kwargs):
        """--print output as a dict, plus the command line under "cmd" and stderr under "stderr"."""
        proc = self.run(["--print"] + list(args) + ["--", "app"], env, **kwargs)
        lines = proc.stdout.splitlines()
        out = dict(line.split("=", 1) for line in lines[:-1])
        out["cmd"] = lines[-1].strip()
        out["stderr"] = proc.stderr
        return out


@pytest.fixture()
def mi250x(tmp_path):
    return Node(tmp_path, "mi250x-8gcd")


def test_the_static_wrapper_passes_shellcheck():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (scripts/setup installs it)")
    proc = subprocess.run(["shellcheck", "-s", "bash", WRAPPER], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_the_installed_wrapper_reads_the_table_beside_the_env_files(mi250x):
    text = mi250x.wrapper.read_text()
    assert "TABLE=${TOPOTUNE_LAUNCH_TABLE:-%s/bind.table}" % mi250x.dest in text
    # everything else is the static file byte for byte
    with open(WRAPPER, encoding="utf-8") as handle:
        assert text.replace(str(mi250x.dest), "/etc/topotune/launch") == handle.read()


@pytest.mark.parametrize("rank_var", ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID"])
def test_every_rank_gets_its_gcd_and_that_gcds_numa_cpus(mi250x, rank_var):
    for rank in range(8):
        out = mi250x.show({rank_var: str(rank)})
        assert out["TOPOTUNE_GPU"] == str(rank)
        assert out["ROCR_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        assert out["TOPOTUNE_BIND_CPUS"] == MI250X_CPUS[rank - rank % 2]
        assert out["HSA_OVERRIDE_CPU_AFFINITY_DEBUG"] == "0"


# (environment, GPU of the rank, visible-device value, where the GPUs came from)
SELECTION = [
    ({"LOCAL_RANK": "1", "SLURM_STEP_GPUS": "4,5"}, "5", "4,5", "SLURM_STEP_GPUS=4,5"),
    # Slurm's task-level binding gives one GPU per task whatever the local rank
    ({"SLURM_LOCALID": "3", "SLURM_STEP_GPUS": "6"}, "6", "6", "SLURM_STEP_GPUS=6"),
    # an salloc shell: the job's GPUs
    ({"LOCAL_RANK": "0", "SLURM_JOB_GPUS": "2,3"}, "2", "2,3", "SLURM_JOB_GPUS=2,3"),
    # Slurm's step list wins over the indices it also puts in the visible-device variables
    ({"LOCAL_RANK": "0", "SLURM_STEP_GPUS": "7", "ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"},
     "7", "7", "SLURM_STEP_GPUS=7"),
    # the caller's selection, applied as ROCm does: ROCR first, then HIP indices into what is left
    ({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "6,7"}, "6", "6,7", "ROCR_VISIBLE_DEVICES=6,7"),
    ({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "3"}, "7", "7",
     "ROCR_VISIBLE_DEVICES=4,5,6,7 HIP_VISIBLE_DEVICES=3"),
    ({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "2,3"}, "3", "2,3", "CUDA_VISIBLE_DEVICES=2,3"),
    # HIP_VISIBLE_DEVICES, when set, is HIP's filter and CUDA_VISIBLE_DEVICES is not applied (ROCclr rocdevice.cpp)
    ({"LOCAL_RANK": "0", "HIP_VISIBLE_DEVICES": "5", "CUDA_VISIBLE_DEVICES": "2,3"}, "5", "5", "HIP_VISIBLE_DEVICES=5"),
    # GPU_DEVICE_ORDINAL is OpenCL's filter: a HIP program ignores it, so it selects nothing
    ({"LOCAL_RANK": "1", "GPU_DEVICE_ORDINAL": "6,7"}, "1", "0,1,2,3,4,5,6,7", "the GPUs this process can open"),
    ({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "4,5", "GPU_DEVICE_ORDINAL": "1"}, "4", "4,5",
     "ROCR_VISIBLE_DEVICES=4,5"),
]


@pytest.mark.parametrize("env,gpu,visible,source", SELECTION)
def test_the_rank_stays_within_the_gpus_it_was_given(mi250x, env, gpu, visible, source):
    out = mi250x.show(env)
    assert (out["TOPOTUNE_GPU"], out["ROCR_VISIBLE_DEVICES"], out["TOPOTUNE_GPU_SOURCE"]) == (gpu, visible, source)
    assert out["TOPOTUNE_VISIBLE_GPUS"] == visible


def test_group_scope_rank_scope_and_the_other_variables_are_unset(tmp_path):
    node = Node(tmp_path, "mi250x-8gcd", {"visible_devices_scope": "rank", "visible_devices_env": "HIP_VISIBLE_DEVICES"})
    env = {"LOCAL_RANK": "1", "SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1", "GPU_DEVICE_ORDINAL": "0,1",
           "ROCR_VISIBLE_DEVICES": "0,1"}
    proc = node.run(["sh", "-c", "env"], env)
    seen = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert seen["HIP_VISIBLE_DEVICES"] == "3" and seen["TOPOTUNE_GPU"] == "3"
    assert not {"ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"} & set(seen)


def test_an_inherited_gpu_device_ordinal_never_reaches_the_program(mi250x):
    """Slurm without Flags=amd_gpu_env sets GPU_DEVICE_ORDINAL to the step's indices (4,5); after the wrapper
    renumbers the two visible GPUs 0,1 an OpenCL program would apply 4,5 to them and see none (ROCclr stops at the
    first index past its devices), while HIP never reads it: it is unset, whatever the caller's selection."""
    for env in ({"LOCAL_RANK": "0", "SLURM_STEP_GPUS": "4,5", "GPU_DEVICE_ORDINAL": "4,5"},
                {"LOCAL_RANK": "0", "GPU_DEVICE_ORDINAL": "4,5"}):
        proc = mi250x.run(["sh", "-c", "env"], env)
        seen = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        assert "GPU_DEVICE_ORDINAL" not in seen and "ROCR_VISIBLE_DEVICES" in seen


def test_group_selection_inside_and_outside_the_step(mi250x):
    out = mi250x.show({"LOCAL_RANK": "1"}, ["--size", "2", "--group", "2"])
    assert (out["TOPOTUNE_GPU"], out["ROCR_VISIBLE_DEVICES"]) == ("5", "4,5")
    proc = mi250x.run(["--size", "2", "--group", "2", "--", "app"], {"LOCAL_RANK": "0", "SLURM_STEP_GPUS": "0,1"},
                      expect_rc=2)
    assert "group 2 of size 2 (GPUs 4 5) is not within SLURM_STEP_GPUS=0,1" in proc.stderr


def test_a_container_with_only_its_groups_render_nodes_renumbers_from_zero(tmp_path):
    node = Node(tmp_path, "mi250x-8gcd")
    # what docker --device does: only group 1 of size 4 (GPUs 4-7) exists under /dev/dri
    for minor in range(128, 132):
        os.unlink(node.root / "dev" / "dri" / ("renderD%d" % minor))
    for rank, gpu in enumerate((4, 5, 6, 7)):
        out = node.show({"LOCAL_RANK": str(rank), "TOPOTUNE_GROUP_SIZE": "4", "TOPOTUNE_GROUP": "1",
                         "ROCR_VISIBLE_DEVICES": "0,1,2,3"})
        assert (out["TOPOTUNE_GPU"], out["ROCR_VISIBLE_DEVICES"], out["TOPOTUNE_VISIBLE_GPUS"]) == (
            str(gpu), "0,1,2,3", "4,5,6,7")
    # the env file of that group says the same
    env = (node.dest / "size4-group1.env").read_text()
    assert "ROCR_VISIBLE_DEVICES=0,1,2,3\n" in env and "TOPOTUNE_GROUP_GPUS=4,5,6,7\n" in env


# (environment, message): refused with a clear message, nothing run
REFUSED = [
    ({"LOCAL_RANK": "2", "SLURM_STEP_GPUS": "4,5"}, "local rank 2 (from LOCAL_RANK) has no GPU: 2 GPU(s) (4 5)"),
    ({"LOCAL_RANK": "0", "SLURM_STEP_GPUS": "9"}, "SLURM_STEP_GPUS=9 names GPU 9, which this node's table does not list"),
    ({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "GPU-4b2c1a9f"}, "'GPU-4b2c1a9f' is not a device index"),
    ({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "9"}, "no GPU left from ROCR_VISIBLE_DEVICES=9"),
    ({}, "no local rank: pass --rank N"),
    ({"LOCAL_RANK": "x"}, "local rank 'x' (from LOCAL_RANK) is not a number"),
    ({"LOCAL_RANK": "0", "TOPOTUNE_GROUP_SIZE": "3"}, "group size 3 is not generated on this node"),
    ({"LOCAL_RANK": "0", "TOPOTUNE_BIND_DEVDIR": "/nonexistent"}, "no GPU render node under /nonexistent/dri"),
]


@pytest.mark.parametrize("env,message", REFUSED)
def test_what_cannot_be_honoured_is_refused_with_the_reason(mi250x, env, message):
    proc = mi250x.run(["--", "app"], env, expect_rc=2)
    assert message in proc.stderr and proc.stdout == ""


def test_a_slurm_job_without_gpu_gres_is_named(mi250x):
    out = mi250x.show({"LOCAL_RANK": "0", "SLURM_JOB_ID": "42"})
    assert out["TOPOTUNE_GPU"] == "0" and "Slurm job 42 without SLURM_STEP_GPUS/SLURM_JOB_GPUS" in out["stderr"]


def test_an_index_past_the_visible_gpus_stops_the_list_like_rocm(mi250x):
    out = mi250x.show({"LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "6,9,7"})
    assert out["ROCR_VISIBLE_DEVICES"] == "6" and "index 9 is past the 8 GPU(s)" in out["stderr"]


def test_a_missing_or_foreign_table_is_named(mi250x, tmp_path):
    proc = mi250x.run(["--", "app"], {"LOCAL_RANK": "0", "TOPOTUNE_LAUNCH_TABLE": str(tmp_path / "none")}, expect_rc=2)
    assert "cannot read the launch table %s" % (tmp_path / "none") in proc.stderr
    old = tmp_path / "old.table"
    old.write_text((mi250x.dest / "bind.table").read_text().replace("format %d" % TABLE_FORMAT, "format 0"))
    proc = mi250x.run(["--", "app"], {"LOCAL_RANK": "0", "TOPOTUNE_LAUNCH_TABLE": str(old)}, expect_rc=2)
    assert "table format '0'" in proc.stderr and "re-run the launch_templates role" in proc.stderr


def test_list_and_extra_env(tmp_path):
    node = Node(tmp_path, "mi300x-8gpu-spx", {"extra_env": {"NCCL_MIN_NCHANNELS": 112}, "sizes": [4]})
    assert node.run(["--list"]).stdout.splitlines() == ["size 4 group 0: GPUs 0 1 2 3", "size 4 group 1: GPUs 4 5 6 7"]
    proc = node.run(["sh", "-c", "echo $NCCL_MIN_NCHANNELS"], {"LOCAL_RANK": "0"})
    assert proc.stdout.strip() == "112"


def test_unknown_numa_node_runs_unbound_with_a_warning(tmp_path):
    node = Node(tmp_path, "fault-numa-minus1")
    out = node.show({"LOCAL_RANK": "3"})
    assert out["cmd"] == "app" and out["TOPOTUNE_BIND_CPUS"] == "-"
    assert "GPU 3 has no known NUMA node" in out["stderr"]


# --- real binding: a node whose CPUs exist on every test machine (CPUs 0 and 1, one L3 domain each) ----
@pytest.fixture()
def small(tmp_path):
    if shutil.which("numactl") is None:
        pytest.skip("numactl not installed (scripts/setup installs it)")
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    return Node(tmp_path, "mi300x-8gpu-2cpu", {"cpu_binding": "l3", "sizes": [8]})


STATUS = "grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; numactl --show | grep -E '^(policy|membind)'"


def _status(stdout):
    return dict(line.replace(":", "", 1).split(None, 1) for line in stdout.splitlines() if line.strip())


@pytest.mark.parametrize("rank,cpu", [(0, "0"), (3, "0"), (4, "1"), (7, "1")])
def test_each_rank_runs_on_its_gpus_l3_cpu_for_real(small, rank, cpu):
    proc = small.run(["sh", "-c", STATUS], {"LOCAL_RANK": str(rank)})
    seen = _status(proc.stdout)
    assert seen["Cpus_allowed_list"] == cpu
    # one NUMA node: the process may only use node 0 anyway, so no memory policy is needed
    assert seen["Mems_allowed_list"] == "0" and seen["policy"] == "default"


def test_binding_never_leaves_the_cpus_the_process_was_given(small):
    # the task was given CPU 0 only (as srun --cpu-bind would); GPU 5's L3 is CPU 1
    proc = small.run(["sh", "-c", STATUS], {"LOCAL_RANK": "5"}, prefix=("taskset", "-c", "0"))
    assert _status(proc.stdout)["Cpus_allowed_list"] == "0"
    assert "GPU 5's CPUs 1 (NUMA node 0) are all outside the CPUs this process may use (0)" in proc.stderr
    proc = small.run(["sh", "-c", STATUS], {"LOCAL_RANK": "5", "TOPOTUNE_BIND_STRICT": "1"},
                     prefix=("taskset", "-c", "0"), expect_rc=2)
    assert proc.stdout == ""
    # partly allowed: the intersection
    wide = small.run(["sh", "-c", STATUS], {"LOCAL_RANK": "2"}, prefix=("taskset", "-c", "0,1"))
    assert _status(wide.stdout)["Cpus_allowed_list"] == "0"


# --- memory: the table's resolved policy, applied within the memory nodes the process may use ----------------
# A /proc/self/status as the kernel prints it (fs/proc/array.c: Cpus_allowed_list, Mems_allowed_list, Seccomp,
# CapEff), read through TOPOTUNE_BIND_STATUS: the test machine has one NUMA node, a job on a 4-node MI250X host more.
def _status_file(tmp_path, cpus="0-127", mems="0-3", seccomp=0, capeff="000001ffffffffff"):
    path = tmp_path / "status"
    path.write_text("Name:\tbash\nSeccomp:\t%d\nCpus_allowed_list:\t%s\nMems_allowed_list:\t%s\nCapEff:\t%s\n"
                    % (seccomp, cpus, mems, capeff))
    return str(path)


def _gpu_lines(node):
    table = (node.dest / "bind.table").read_text()
    return {int(line.split()[1]): line.split()[2:] for line in table.splitlines() if line.startswith("gpu ")}


def _argv(out):
    return shlex.split(out["cmd"])


def _show_bound(node, tmp_path, rank, **status):
    env = {"LOCAL_RANK": str(rank), "TOPOTUNE_BIND_STATUS": _status_file(tmp_path, **status),
           "TOPOTUNE_BIND_NUMACTL": "true"}
    return node.show(env)


def test_the_table_carries_each_gpus_resolved_binding(mi250x):
    """CPUs, memory nodes and policy per GPU are the plan's, decided once in Python (launch_render.memory_policy)."""
    bindings = {b["gpu"]: b for b in mi250x.result["plan"]["bindings"]}
    for gpu, (_gres, _minor, numa, cpus, mems, policy) in _gpu_lines(mi250x).items():
        assert (cpus, mems, policy) == (bindings[gpu]["cpus"], str(MI250X_NUMA[gpu]), "membind")
        assert numa == mems and bindings[gpu]["numactl"][-1] == "--membind=%s" % mems


def test_the_wrapper_applies_the_tables_memory_policy_within_the_allowed_nodes(mi250x, tmp_path):
    # GPU 4 (NUMA node 0): a job allowed every node gets --membind=0 with the GPU's CPUs
    out = _show_bound(mi250x, tmp_path, 4)
    assert _argv(out) == "true --physcpubind=0-15,64-79 --membind=0 -- app".split()
    assert (out["TOPOTUNE_BIND_MEMS"], out["TOPOTUNE_MEMORY_POLICY"]) == ("0", "membind")
    # allowed only node 0: the cpuset already confines memory there, no policy to set
    assert _argv(_show_bound(mi250x, tmp_path, 4, mems="0")) == "true --physcpubind=0-15,64-79 -- app".split()
    # GPU 0 (node 3) in a job allowed nodes 1-2: said, not bound (strict: refused)
    out = _show_bound(mi250x, tmp_path, 0, mems="1-2")
    assert _argv(out) == "true --physcpubind=48-63,112-127 -- app".split()
    assert "GPU 0's memory nodes 3 are outside the memory nodes this process may use (1-2); memory not bound" in out["stderr"]
    proc = mi250x.run(["--", "app"], {"LOCAL_RANK": "0", "TOPOTUNE_BIND_STATUS": _status_file(tmp_path, mems="1-2"),
                                      "TOPOTUNE_BIND_NUMACTL": "true", "TOPOTUNE_BIND_STRICT": "1"}, expect_rc=2)
    assert "GPU 0's memory nodes 3 are outside" in proc.stderr
    # a container whose seccomp filter denies set_mempolicy (no CAP_SYS_NICE, bit 23 of CapEff): said, not bound
    out = _show_bound(mi250x, tmp_path, 4, seccomp=2, capeff="00000000a80425fb")
    assert _argv(out) == "true --physcpubind=0-15,64-79 -- app".split()
    assert "seccomp filter denies set_mempolicy without CAP_SYS_NICE" in out["stderr"]
    out = _show_bound(mi250x, tmp_path, 4, seccomp=2, capeff="00000000a88425fb")
    assert _argv(out) == "true --physcpubind=0-15,64-79 --membind=0 -- app".split()


def test_the_wrapper_applies_whatever_policy_the_table_gives(mi250x, tmp_path):
    """The wrapper holds no memory rule: a table line's policy is applied as it stands (preferred, none)."""
    table = mi250x.dest / "bind.table"
    text = table.read_text()
    line = next(line for line in text.splitlines() if line.startswith("gpu 4 "))
    table.write_text(text.replace(line, line.replace(" 0 membind", " 0 preferred")))
    assert _argv(_show_bound(mi250x, tmp_path, 4)) == "true --physcpubind=0-15,64-79 --preferred=0 -- app".split()
    table.write_text(text.replace(line, line.replace(" 0 membind", " 0 none")))
    out = _show_bound(mi250x, tmp_path, 4)
    assert _argv(out) == "true --physcpubind=0-15,64-79 -- app".split() and out["TOPOTUNE_MEMORY_POLICY"] == "none"
    table.write_text(text.replace(line, line.replace(" 0 membind", " 0 interleave")))
    proc = mi250x.run(["--", "app"], {"LOCAL_RANK": "4"}, expect_rc=2)
    assert "GPU 4 has memory policy 'interleave' (membind, preferred or none)" in proc.stderr


@pytest.mark.parametrize("options", [{"membind": False}, {"cpu_binding": "none"}])
def test_without_memory_binding_the_table_says_none_and_nothing_is_bound(tmp_path, options):
    node = Node(tmp_path, "mi250x-8gcd", options)
    assert {tuple(f[-2:]) for f in _gpu_lines(node).values()} == {("-", "none")}
    out = _show_bound(node, tmp_path, 4)
    assert "--membind" not in out["cmd"] and out["TOPOTUNE_MEMORY_POLICY"] == "none"
