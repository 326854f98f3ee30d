"""What a real Slurm 22.05.8 (Debian bookworm) makes of topotune-style gres.conf lines, and what each task gets.

One-node Slurm clusters inside simulated nodes (tests/integration/slurm_node.py). Three nodes:

- ``mi250x-8gcd`` and ``mi300x-8gpu-spx`` with slurmd under ``HWLOC_FSROOT=/sim``: hwloc, hence slurmd, sees the
  simulated 128 / 384-CPU machine. What slurmd reports (``-C``), parses (``-G``) and registers.
- ``mi300x-8gpu-2cpu`` (2 cores = CPUs 0 and 1, one L3 each): the simulated CPUs exist on the 2-CPU test host, so
  tasks really launch. What Slurm sets per task for each kind of GPU request.

The gres.conf is hand-written here in the shape topotune's generator emits: one line per GPU in GPU index order,
``File=/dev/dri/renderD<128+i>``, ``Cores=`` logical core indices, ``Links=`` xGMI link counts, ``Flags=amd_gpu_env``.
"""

import os
import re
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from slurm_node import SlurmNode, gres_records, node_config  # noqa: E402

# MI250X: GCD -> NUMA 3,3,1,1,0,0,2,2 (Frontier); NPS4 NUMA node k = cores 16k..16k+15 (CPUs 16k.., 64+16k..).
MI250X_CORES = ["48-63", "48-63", "16-31", "16-31", "0-15", "0-15", "32-47", "32-47"]
MI250X_LINKS = ["-1,4,1,0,0,0,2,0", "4,-1,0,1,0,1,0,0", "1,0,-1,4,2,0,0,0", "0,1,4,-1,0,0,0,1",
                "0,0,2,0,-1,4,1,0", "0,1,0,0,4,-1,0,1", "2,0,0,0,1,0,-1,4", "0,0,0,1,0,1,4,-1"]
ALL_TO_ALL = [",".join("-1" if a == b else "1" for b in range(8)) for a in range(8)]
MI300X_CORES = ["0-95"] * 4 + ["96-191"] * 4          # NPS1: GPUs 0-3 on socket 0, 4-7 on socket 1
TWO_CPU_CORES = ["0"] * 4 + ["1"] * 4                 # mi300x-8gpu-2cpu: L3 domain 0 = core 0, L3 domain 1 = core 1
MI250X_NODE = "Sockets=1 CoresPerSocket=64 ThreadsPerCore=2 Gres=gpu:mi250x:8"
TWO_CPU_NODE = "Sockets=2 CoresPerSocket=1 ThreadsPerCore=1 Gres=gpu:mi300x:8"   # l3cache_as_socket: socket = L3
L3_AS_SOCKET = ["SlurmdParameters=l3cache_as_socket"]
CORE_0 = ("0", "0,64")   # MI250X core 0 = CPUs 0 and 64; a task's mask keeps the ones the host has
GPU_VARS = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def gres_conf(gpu_type, cores, links, dev="/dev/dri", flags=" Flags=amd_gpu_env"):
    return "".join("Name=gpu Type=%s File=%s/renderD%d Cores=%s Links=%s%s\n" % (gpu_type, dev, 128 + i, cores[i], links[i], flags)
                   for i in range(len(cores)))


def gpus(task, var="SLURM_STEP_GPUS"):
    return [int(x) for x in task[var].split(",")]


def only_rocr(task):
    """Flags=amd_gpu_env: ROCR_VISIBLE_DEVICES is set, equal to SLURM_STEP_GPUS; no other GPU variable."""
    assert task["ROCR_VISIBLE_DEVICES"] == task["SLURM_STEP_GPUS"], task
    for var in GPU_VARS[1:]:
        assert var not in task, task


def running(node, job_ids, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(node.job(j)["JobState"] == "RUNNING" for j in job_ids):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def mi250x():
    with SlurmNode("mi250x-8gcd") as node:
        node.make_devices(8)
        node.configure(gres_conf("mi250x", MI250X_CORES, MI250X_LINKS), MI250X_NODE)
        yield node


@pytest.fixture(scope="module")
def mi300x():
    with SlurmNode("mi300x-8gpu-spx") as node:
        node.make_devices(8)
        node.configure(gres_conf("mi300x", MI300X_CORES, ALL_TO_ALL), "Sockets=2 CoresPerSocket=96 ThreadsPerCore=2 Gres=gpu:mi300x:8")
        yield node


@pytest.fixture(scope="module")
def launch():
    with SlurmNode("mi300x-8gpu-2cpu") as node:
        node.make_devices(8)
        node.configure(gres_conf("mi300x", TWO_CPU_CORES, ALL_TO_ALL), TWO_CPU_NODE, extra=L3_AS_SOCKET)
        yield node


def _real_cpus(node):
    text = node.sh("sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status").stdout.strip()
    cpus = set()
    for part in text.split(","):
        lo, _sep, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


# --- slurmd on the simulated machines (HWLOC_FSROOT=/sim) ----------------------------------------------------------

def test_slurmd_C_reads_the_simulated_cpus_under_hwloc_fsroot(mi250x, mi300x):
    assert "CPUs=128 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=2" in mi250x.slurmd("-C")
    assert "CPUs=384 Boards=1 SocketsPerBoard=2 CoresPerSocket=96 ThreadsPerCore=2" in mi300x.slurmd("-C")
    # without it slurmd describes the container's real CPUs
    real = node_config(mi250x.slurmd("-C", hwloc_fsroot=False))
    assert int(real["CPUs"]) == len(_real_cpus(mi250x))


def test_slurmd_G_parses_type_links_and_logical_cores(mi250x, mi300x):
    out = mi250x.slurmd("-G")
    assert "error" not in out, out
    recs = gres_records(out)
    assert [r["File"] for r in recs] == ["/dev/dri/renderD%d" % (128 + i) for i in range(8)]
    assert [r["Cores"] for r in recs] == MI250X_CORES
    assert [r["Links"] for r in recs] == MI250X_LINKS
    assert {r["Type"] for r in recs} == {"mi250x"} and {r["Count"] for r in recs} == {"1"}
    # Index= is the number in the file name, CoreCnt= the CPU count (not the 64 cores); Flags= is accepted, not echoed
    assert [r["Index"] for r in recs] == [str(128 + i) for i in range(8)]
    assert {r["CoreCnt"] for r in recs} == {"128"}
    assert "Flags" not in recs[0]
    recs = gres_records(mi300x.slurmd("-G"))
    assert [r["Cores"] for r in recs] == MI300X_CORES and {r["CoreCnt"] for r in recs} == {"384"}


def test_nodes_register_idle_with_typed_gres(mi250x, mi300x):
    info = mi250x.node_info()
    assert info["State"] == "IDLE" and info["Gres"] == "gpu:mi250x:8(S:0)" and info["CPUTot"] == "128"
    info = mi300x.node_info()
    assert info["State"] == "IDLE" and info["Gres"] == "gpu:mi300x:8(S:0-1)" and info["CPUTot"] == "384"


def test_cores_past_the_core_count_are_rejected_per_line(mi250x, mi300x):
    """Cores= counts cores, not CPUs: 64 is past a 64-core MI250X host even though it has 128 CPUs. slurmd logs the
    line as invalid and still registers the node with all its GPUs."""
    for cores in ("60-64", "64-127"):
        bad = [cores] + MI250X_CORES[1:]
        mi250x.write("/etc/slurm/gres.conf", gres_conf("mi250x", bad, MI250X_LINKS))
        out = mi250x.slurmd("-G")
        assert "error: xcpuinfo_abs_to_mac: failed" in out
        assert "error: Invalid GRES data for gpu, Cores=%s" % cores in out
        assert len(gres_records(out)) == 8
    info = mi250x.configure(gres_conf("mi250x", ["60-64"] + MI250X_CORES[1:], MI250X_LINKS), MI250X_NODE).node_info()
    assert info["Gres"] == "gpu:mi250x:8(S:0)"
    assert "Invalid GRES data for gpu, Cores=60-64" in mi250x.sh("cat /var/log/slurm/slurmd.log").stdout
    # mi300x: 192 cores on 2 sockets; core 192 is past them
    mi300x.write("/etc/slurm/gres.conf", gres_conf("mi300x", ["96-192"] + MI300X_CORES[1:], ALL_TO_ALL))
    assert "Invalid GRES data for gpu, Cores=96-192" in mi300x.slurmd("-G")
    mi300x.write("/etc/slurm/gres.conf", gres_conf("mi300x", MI300X_CORES, ALL_TO_ALL))
    # without HWLOC_FSROOT the real container has 2 cores: the MI250X lines are all invalid
    if len(_real_cpus(mi250x)) < 16:
        mi250x.write("/etc/slurm/gres.conf", gres_conf("mi250x", MI250X_CORES, MI250X_LINKS))
        out = mi250x.slurmd("-G", hwloc_fsroot=False)
        assert out.count("Invalid GRES data for gpu") >= 8


@pytest.mark.parametrize("parameter, sockets, cores_per_socket, gres", [
    ("numa_node_as_socket", 4, 16, "gpu:mi250x:8(S:0-3)"),
    ("l3cache_as_socket", 8, 8, "gpu:mi250x:8(S:0-7)"),
])
def test_socket_parameters_change_the_registered_node_not_slurmd_C(mi250x, parameter, sockets, cores_per_socket, gres):
    node_line = "Sockets=%d CoresPerSocket=%d ThreadsPerCore=2 Gres=gpu:mi250x:8" % (sockets, cores_per_socket)
    mi250x.configure(gres_conf("mi250x", MI250X_CORES, MI250X_LINKS), node_line, extra=["SlurmdParameters=" + parameter])
    # slurmd -C ignores SlurmdParameters; the running slurmd applies them
    assert "SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=2" in mi250x.slurmd("-C")
    log = mi250x.sh("cat /var/log/slurm/slurmd.log").stdout
    assert "CPUs=128 Boards=1 Sockets=%d Cores=%d Threads=2" % (sockets, cores_per_socket) in log
    info = mi250x.node_info()
    assert (info["State"], info["Sockets"], info["CoresPerSocket"], info["Gres"]) == ("IDLE", str(sockets), str(cores_per_socket), gres)
    # GPU affinity now follows Cores=: the first core (CPU 0) goes with GCD 4 (NUMA 0 = cores 0-15), not GCD 0
    [task] = mi250x.probe("--gres=gpu:1")
    assert task["SLURM_STEP_GPUS"] == "4" and task["Cpus_allowed_list"] in CORE_0


def test_one_socket_ignores_cores_when_choosing_gpus(mi250x):
    """Without a socket parameter the NPS4 node is one socket: GPU 0 (Cores=48-63) comes with core 0."""
    mi250x.configure(gres_conf("mi250x", MI250X_CORES, MI250X_LINKS), MI250X_NODE)
    [task] = mi250x.probe("--gres=gpu:1", "--gres-flags=enforce-binding")
    assert task["SLURM_STEP_GPUS"] == "0" and task["Cpus_allowed_list"] in CORE_0


def test_tasks_bound_to_cpus_that_do_not_exist_fail_to_launch(mi250x):
    """HWLOC_FSROOT=/sim on a host with fewer CPUs: a task whose mask holds no real CPU is not started (the second
    task of core 0 is CPU 64). srun still exits 0."""
    if 64 in _real_cpus(mi250x):
        pytest.skip("this host has a CPU 64")
    proc = mi250x.srun("-n2", "--gres=gpu:1", "/usr/local/bin/tt-probe")
    assert "TTPROBE" not in proc.stdout
    assert "error: task_g_set_affinity: Invalid argument" in proc.stderr
    assert "launch failed: Slurmd could not execve job" in proc.stderr
    assert proc.returncode == 0
    assert "sched_setaffinity(" in mi250x.sh("grep sched_setaffinity /var/log/slurm/slurmd.log").stdout


def test_gres_file_must_be_a_device(mi250x):
    """Regular files (the sysroot's /sim/dev/dri) are logged as invalid; the node registers its GPUs but tasks get
    no GPU variables. mknod'ed character devices (226:128..135, never opened) are enough."""
    mi250x.configure(gres_conf("mi250x", MI250X_CORES, MI250X_LINKS, dev="/sim/dev/dri"), MI250X_NODE)
    log = mi250x.sh("cat /var/log/slurm/slurmd.log").stdout
    assert "error: /sim/dev/dri/renderD128 is not a valid character or block device, fix your gres.conf" in log
    assert mi250x.node_info()["Gres"] == "gpu:mi250x:8(S:0)"
    [task] = mi250x.probe("--gres=gpu:1")
    assert "SLURM_STEP_GPUS" not in task and "ROCR_VISIBLE_DEVICES" not in task
    # DRM major 226, minor 128 (stat prints them in hex)
    assert mi250x.sh("stat -c '%F %t:%T' /dev/dri/renderD128").stdout.strip() == "character special file e2:80"
    mi250x.configure(gres_conf("mi250x", MI250X_CORES, MI250X_LINKS), MI250X_NODE)
    [task] = mi250x.probe("--gres=gpu:1")
    assert task["SLURM_STEP_GPUS"] == "0" == task["ROCR_VISIBLE_DEVICES"]


def test_missing_gres_file_makes_slurmd_wait_then_exit(mi300x):
    """A File= path that does not exist: slurmd waits for it (about 20 s), then exits."""
    mi300x.write("/etc/slurm/gres.conf", gres_conf("mi300x", MI300X_CORES, ALL_TO_ALL, dev="/dev/dri/missing"))
    try:
        out = mi300x.slurmd("-G")
    finally:
        mi300x.write("/etc/slurm/gres.conf", gres_conf("mi300x", MI300X_CORES, ALL_TO_ALL))
    assert "error: Waiting for gres.conf file /dev/dri/missing/renderD128" in out
    assert "fatal: can't stat gres.conf file /dev/dri/missing/renderD128: No such file or directory" in out


# --- task launch on mi300x-8gpu-2cpu: CPUs 0 and 1 exist on the host, one L3 (= socket) each -----------------------

def test_launch_node_is_two_l3_sockets(launch):
    info = launch.node_info()
    assert (info["State"], info["Sockets"], info["CoresPerSocket"], info["Gres"]) == ("IDLE", "2", "1", "gpu:mi300x:8(S:0-1)")
    assert [r["Cores"] for r in gres_records(launch.slurmd("-G"))] == TWO_CPU_CORES


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_one_task_sees_its_gpus_in_rocr_only(launch, count):
    [task] = launch.probe("--gres=gpu:%d" % count)
    assert gpus(task) == list(range(count))
    only_rocr(task)
    assert task["SLURM_GPUS_ON_NODE"] == str(count)
    assert (task["SLURM_LOCALID"], task["SLURM_STEP_NUM_TASKS"]) == ("0", "1")
    assert "SLURM_JOB_GPUS" not in task          # srun's own allocation: only the step variables
    assert task["Cpus_allowed_list"] == "0"
    # no memory binding without a cpuset cgroup: the container's own memory nodes
    assert task["Mems_allowed_list"] == launch.sh("sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/self/status").stdout.strip()


def test_gres_per_job_is_shared_by_all_tasks(launch):
    """--gres=gpu:2 with -n2: one GPU per socket (L3), and every task sees both: the step's GPUs, not its own."""
    tasks = launch.probe("-n2", "--gres=gpu:2")
    assert [gpus(t) for t in tasks] == [[0, 4], [0, 4]]
    assert [(t["SLURM_LOCALID"], t["SLURM_STEP_NUM_TASKS"], t["Cpus_allowed_list"]) for t in tasks] == [("0", "2", "0"), ("1", "2", "1")]
    for t in tasks:
        only_rocr(t)


def test_gpus_per_task_makes_step_gpus_per_task(launch):
    """--gpus-per-task: SLURM_STEP_GPUS and ROCR_VISIBLE_DEVICES differ per task (each task's own GPUs)."""
    tasks = launch.probe("-n4", "--overcommit", "--gpus-per-task=1")     # 4 tasks on 2 CPUs: --overcommit
    assert [gpus(t) for t in tasks] == [[0], [1], [2], [3]]
    assert {t["SLURM_GPUS_ON_NODE"] for t in tasks} == {"4"}
    for t in tasks:
        only_rocr(t)
    tasks = launch.probe("-n2", "--gpus-per-task=2")
    assert [gpus(t) for t in tasks] == [[0, 1], [4, 5]]
    assert [t["Cpus_allowed_list"] for t in tasks] == ["0", "1"]
    for t in tasks:
        only_rocr(t)


def test_gpu_bind_closest_and_single_follow_cores(launch):
    tasks = launch.probe("-n2", "--gres=gpu:8", "--gpu-bind=closest")
    assert [gpus(t) for t in tasks] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [t["Cpus_allowed_list"] for t in tasks] == ["0", "1"]
    tasks = launch.probe("-n2", "--gres=gpu:2", "--gpu-bind=closest")
    assert [gpus(t) for t in tasks] == [[0], [4]]
    tasks = launch.probe("-n2", "--gres=gpu:8", "--gpu-bind=single:1")
    assert [len(gpus(t)) for t in tasks] == [1, 1]
    assert gpus(tasks[0])[0] in range(4) and gpus(tasks[1])[0] in range(4, 8)
    for t in tasks:
        only_rocr(t)
    # with gpus-per-task, closest replaces the per-task GPUs by all of the task's socket
    tasks = launch.probe("-n4", "--overcommit", "--gpus-per-task=1", "--gpu-bind=closest")
    assert [gpus(t) for t in tasks] == [[0, 1, 2, 3]] * 4


def test_gpu_bind_map_gpu_uses_global_indices(launch):
    tasks = launch.probe("-n2", "--gres=gpu:8", "--gpu-bind=map_gpu:3,1")
    assert [gpus(t) for t in tasks] == [[3], [1]]


def test_indices_are_global_gres_indices_not_step_local(launch):
    """Another job holds GPUs 0-3: the step's GPUs 4,5 are named 4,5 in ROCR_VISIBLE_DEVICES (no device cgroup, so
    no renumbering). map_gpu:/mask_gpu: name global indices too; --gpu-bind does nothing to a single task."""
    blocker = launch.sbatch("--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 60")
    try:
        assert running(launch, [blocker])
        assert "GRES=gpu:mi300x:4(IDX:0-3)" in launch.scontrol("show", "job", "-d", blocker)
        [task] = launch.probe("--gres=gpu:2")
        assert gpus(task) == [4, 5] and task["ROCR_VISIBLE_DEVICES"] == "4,5"
        tasks = launch.probe("-n2", "--overcommit", "--gres=gpu:4", "--gpu-bind=map_gpu:5,6")
        assert [gpus(t) for t in tasks] == [[5], [6]]
        proc = launch.srun("-n2", "--overcommit", "--gres=gpu:4", "--gpu-bind=map_gpu:1,2", "/usr/local/bin/tt-probe")
        assert "Bind request gpu:map_gpu:1,2 does not specify any devices within the allocation for task 0. " \
               "Binding to the first device in the allocation instead." in proc.stderr
        [task] = launch.probe("--gres=gpu:4", "--gpu-bind=map_gpu:5")
        assert gpus(task) == [4, 5, 6, 7]
    finally:
        launch.run(["scancel", blocker])


def test_concurrent_jobs_get_disjoint_gpus(launch):
    script = "/usr/local/bin/tt-probe; srun /usr/local/bin/tt-probe; sleep 3"
    jobs = [launch.sbatch("--gres=gpu:4", "-o", "/tmp/tt-job-%j.out", "--wrap", script) for _job in range(2)]
    assert running(launch, jobs), [launch.job(j)["JobState"] for j in jobs]   # both at the same time
    assert set(launch.wait_jobs_done(jobs).values()) == {"COMPLETED"}
    seen = []
    for job in jobs:
        lines = parse_lines(launch.sh("cat /tmp/tt-job-%s.out" % job).stdout)
        batch, step = lines
        assert "SLURM_STEP_GPUS" not in batch and batch["SLURM_JOB_GPUS"] == batch["ROCR_VISIBLE_DEVICES"]
        assert step["SLURM_STEP_GPUS"] == step["SLURM_JOB_GPUS"] == step["ROCR_VISIBLE_DEVICES"] == batch["SLURM_JOB_GPUS"]
        seen.append((gpus(batch, "SLURM_JOB_GPUS"), batch["Cpus_allowed_list"]))
    assert sorted(seen) == [([0, 1, 2, 3], "0"), ([4, 5, 6, 7], "1")]


def test_salloc_shell_has_no_gpu_variables_its_steps_do(launch):
    proc = launch.run(["salloc", "--gres=gpu:4", "sh", "-c", "env; srun /usr/local/bin/tt-probe"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    shell = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line and not line.startswith("TTPROBE"))
    assert "SLURM_JOB_ID" in shell
    for var in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS") + GPU_VARS:
        assert var not in shell
    [task] = parse_lines(proc.stdout)
    assert gpus(task) == [0, 1, 2, 3]
    only_rocr(task)


def test_without_amd_gpu_env_every_runtime_gets_the_global_indices(launch):
    """No Flags=: ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL and ZE_AFFINITY_MASK all carry the
    same global indices (HIP would filter 4,5 a second time after ROCr renumbered them to 0,1). Never
    HIP_VISIBLE_DEVICES."""
    launch.configure(gres_conf("mi300x", TWO_CPU_CORES, ALL_TO_ALL, flags=""), TWO_CPU_NODE, extra=L3_AS_SOCKET)
    blocker = None
    try:
        [task] = launch.probe("--gres=gpu:2")
        assert gpus(task) == [0, 1]
        blocker = launch.sbatch("--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 60")
        assert running(launch, [blocker])
        [task] = launch.probe("--gres=gpu:2")
        for var in ("SLURM_STEP_GPUS", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ZE_AFFINITY_MASK"):
            assert task[var] == "4,5", (var, task)
        assert "HIP_VISIBLE_DEVICES" not in task
    finally:
        if blocker:
            launch.run(["scancel", blocker])
        launch.configure(gres_conf("mi300x", TWO_CPU_CORES, ALL_TO_ALL), TWO_CPU_NODE, extra=L3_AS_SOCKET)


def test_without_hwloc_fsroot_the_real_cpus_are_used(launch):
    """slurmd without HWLOC_FSROOT: the container's real CPUs; Cores= must then name real cores."""
    real = node_config(launch.slurmd("-C", hwloc_fsroot=False))
    cores = int(real["SocketsPerBoard"]) * int(real["CoresPerSocket"])
    node_line = "CPUs=%s Sockets=%s CoresPerSocket=%s ThreadsPerCore=%s Gres=gpu:mi300x:8" % (
        real["CPUs"], real["SocketsPerBoard"], real["CoresPerSocket"], real["ThreadsPerCore"])
    per_gpu = ["0"] * 4 + ["1" if cores > 1 else "0"] * 4
    try:
        launch.configure(gres_conf("mi300x", per_gpu, ALL_TO_ALL), node_line, hwloc_fsroot=False)
        assert launch.node_info()["CPUTot"] == real["CPUs"]
        tasks = launch.probe("-n2", "--overcommit", "--gres=gpu:2")
        assert [gpus(t) for t in tasks] == [[0, 1], [0, 1]]
        for t in tasks:
            only_rocr(t)
            assert set(map(int, re.split(r"[,-]", t["Cpus_allowed_list"]))) <= _real_cpus(launch)
    finally:
        launch.configure(gres_conf("mi300x", TWO_CPU_CORES, ALL_TO_ALL), TWO_CPU_NODE, extra=L3_AS_SOCKET)


def parse_lines(text):
    """Probe lines in output order (batch step and srun step both have SLURM_PROCID=0)."""
    return [dict(item.split("=", 1) for item in line.split()[1:]) for line in text.splitlines() if line.startswith("TTPROBE")]
