"""topotune's own launch files under a real Slurm 22.05 (Debian bookworm) in simulated nodes.

- The generated gres.conf, node line and socket parameter: slurmd parses every GPU with the cores and links of
  the model, and the node registers IDLE with the sockets the file announces (MI250X NPS4 by NUMA node and by L3
  domain, MI300X SPX), under ``HWLOC_FSROOT=/sim`` so slurmd's hwloc reads the simulated machine.
- ``topotune-bind`` under ``srun`` on ``mi300x-8gpu-2cpu`` (CPUs 0 and 1 exist on the test host, one L3 domain each,
  GPUs 0-3 on the first, 4-7 on the second with ``cpu_binding: l3``): for each kind of request every rank reports
  its GPU, visible devices, allowed CPUs and memory policy, asserted against the model and Slurm's allocation.

- The same under ``srun`` on ``mi300x-8gpu-2cpu-minors``, whose render minors run against GPU order (GPU 0 is
  renderD135): the GPU id Slurm hands a step names the record whose ``File=`` is the rank's GPU, with link counts
  and without any link data (``Links=`` then only keeps each GPU's position).

Stand-in render nodes are character devices with /dev/null's numbers (1,3): slurmd only needs character devices,
and the wrapper can open them, as ROCm would open the GPUs a job may use.
"""

import copy
import os
import sys
import time

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import parse
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from slurm_node import SlurmNode, gres_records, parse_probe  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(REPO, "roles", "launch_templates", "files", "topotune-bind"), encoding="utf-8") as _handle:
    WRAPPER = _handle.read()
BIND = "/usr/local/bin/topotune-bind"
# numactl's view of the memory policy, then the probe line
BOUND_PROBE = "TT_POLICY=$(numactl --show | sed -n 's/^policy: //p') /usr/local/bin/tt-probe"


def _launch_files(node, options, model=None):
    model = model or load_capture(sysroot=node.tree)
    opts = {"dev_dir": "/dev", "node_name": node.name, "wrapper_content": WRAPPER}
    opts.update(options)
    result = render(model, opts)
    return model, {f["path"]: f["content"] for f in result["files"]}, result["plan"]


def _configure(node, options, model=None):
    """Install topotune's files in the node and start Slurm with its gres.conf, node line and socket parameter."""
    model, files, plan = _launch_files(node, options, model)
    for path, content in files.items():
        node.write(path, content)
    node.sh("chmod 0755 %s" % BIND)
    gres = plan["gres"]
    extra = ["SlurmdParameters=" + gres["socket_parameter"]] if gres["socket_parameter"] else []
    node.configure(files["/etc/topotune/launch/gres.conf"], gres["node_line"], extra=extra)
    return model, plan


def _stand_in_devices(node, count):
    node.sh("mkdir -p /dev/dri && for i in $(seq 0 %d); do m=$((128 + i)); rm -f /dev/dri/renderD$m; "
            "mknod -m 0666 /dev/dri/renderD$m c 1 3; done" % (count - 1))


@pytest.fixture(scope="module")
def mi250x():
    with SlurmNode("mi250x-8gcd") as node:
        _stand_in_devices(node, 8)
        yield node


@pytest.fixture(scope="module")
def mi300x():
    with SlurmNode("mi300x-8gpu-spx") as node:
        _stand_in_devices(node, 8)
        yield node


def _assert_slurm_takes_the_generated_gres(node, plan, gpu_type, sockets):
    out = node.slurmd("-G")
    assert "error" not in out, out
    records = gres_records(out)
    lines = plan["gres"]["lines"]
    assert [r["File"] for r in records] == [line["file"] for line in lines]
    assert [r["Cores"] for r in records] == [line["cores"] for line in lines]
    assert [r["Links"] for r in records] == [line["links"] for line in lines]
    assert {r["Type"] for r in records} == {gpu_type}
    info = node.node_info()
    assert info["State"] == "IDLE", info
    assert info["Sockets"] == str(sockets)
    assert info["Gres"] == "gpu:%s:8(S:%s)" % (gpu_type, "0-%d" % (sockets - 1) if sockets > 1 else "0")
    assert "Invalid GRES" not in node.sh("cat /var/log/slurm/slurmd.log").stdout


@pytest.mark.parametrize("binding,parameter,sockets", [("numa", "numa_node_as_socket", 4), ("l3", "l3cache_as_socket", 8)])
def test_mi250x_generated_gres_is_accepted_with_its_socket_parameter(mi250x, binding, parameter, sockets):
    _model, plan = _configure(mi250x, {"cpu_binding": binding, "gres_type": "mi250x"})
    assert plan["gres"]["socket_parameter"] == parameter
    _assert_slurm_takes_the_generated_gres(mi250x, plan, "mi250x", sockets)
    # Slurm now places GPUs by core: a one-GPU job on the first core (CPU 0) gets GCD 4, whose NUMA node (and
    # first L3 domain) holds core 0 (Frontier's table)
    [task] = mi250x.probe("--gres=gpu:1")
    assert task["SLURM_STEP_GPUS"] == "4"


def test_mi300x_spx_generated_gres_is_accepted_without_a_parameter(mi300x):
    _model, plan = _configure(mi300x, {"gres_type": "mi300x"})
    assert plan["gres"]["socket_parameter"] is None
    assert [line["cores"] for line in plan["gres"]["lines"]] == ["0-95"] * 4 + ["96-191"] * 4
    _assert_slurm_takes_the_generated_gres(mi300x, plan, "mi300x", 2)


# --- ranks under srun ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    with SlurmNode("mi300x-8gpu-2cpu") as node:
        _stand_in_devices(node, 8)
        model, plan = _configure(node, {"cpu_binding": "l3", "gres_type": "mi300x", "sizes": [2, 4, 8]})
        yield node, model, plan


def _ranks(node, *srun_args):
    """srun ... topotune-bind <probe>: per task, what it saw (sorted by SLURM_PROCID) and srun's stderr."""
    proc = node.srun(*srun_args, BIND, "sh", "-c", BOUND_PROBE)
    tasks = parse_probe(proc.stdout)
    assert tasks, proc.stderr
    return tasks, proc.stderr


def _check_rank(task, plan):
    """What every rank must satisfy, whatever the request: its GPU is one Slurm gave the task, the variables agree,
    and its CPUs are the GPU's L3 domain within what Slurm allowed (or all of what Slurm allowed, said on stderr)."""
    step = [int(g) for g in task["SLURM_STEP_GPUS"].split(",")]
    gpu = int(task["TOPOTUNE_GPU"])
    assert gpu in step
    # no device cgroup here: ROCm would see every GPU, so the indices are the host's, and only one variable is set
    assert task["ROCR_VISIBLE_DEVICES"] == task["TOPOTUNE_VISIBLE_GPUS"]
    assert set(int(g) for g in task["ROCR_VISIBLE_DEVICES"].split(",")) <= set(step)
    for var in ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "HIP_VISIBLE_DEVICES"):
        assert var not in task
    assert task["HSA_OVERRIDE_CPU_AFFINITY_DEBUG"] == "0"
    binding = plan["bindings"][gpu]
    # one NUMA node (0) on this machine: memory is confined to the GPU's node without a policy
    assert binding["numa_node"] == 0 and task["Mems_allowed_list"] == "0" and task["TT_POLICY"] == "default"
    return gpu, parse(task["Cpus_allowed_list"]), parse(binding["cpus"])


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_one_rank_per_step_gets_the_first_gpu_of_the_step_and_its_l3(small, count):
    node, _model, plan = small
    [task], _err = _ranks(node, "--gres=gpu:%d" % count)
    gpu, cpus, l3 = _check_rank(task, plan)
    assert gpu == 0 and task["ROCR_VISIBLE_DEVICES"] == ",".join(str(g) for g in range(count))
    assert cpus == l3 == [0]


def test_ranks_of_a_shared_step_take_its_gpus_in_order(small):
    node, _model, plan = small
    tasks, err = _ranks(node, "-n2", "--gres=gpu:2")
    seen = [_check_rank(t, plan) for t in tasks]
    # Slurm gives one GPU per L3 socket (0 and 4) and one CPU each; rank r takes the r-th GPU of the step
    assert [(gpu, cpus) for gpu, cpus, _l3 in seen] == [(0, [0]), (4, [1])]
    assert all(cpus == l3 for _gpu, cpus, l3 in seen) and "warning" not in err


def test_per_task_gpus_are_kept(small):
    node, _model, plan = small
    tasks, _err = _ranks(node, "-n2", "--gpus-per-task=2")
    seen = [_check_rank(t, plan) for t in tasks]
    # task 1 owns GPUs 4,5 and is local rank 1: the second of its own GPUs, on its own L3 (CPU 1)
    assert [(gpu, cpus) for gpu, cpus, _l3 in seen] == [(0, [0]), (5, [1])]
    tasks, _err = _ranks(node, "-n4", "--overcommit", "--gpus-per-task=1")
    seen = [_check_rank(t, plan) for t in tasks]
    assert [gpu for gpu, _cpus, _l3 in seen] == [0, 1, 2, 3]            # one GPU per task, whatever the local rank
    assert all(task["ROCR_VISIBLE_DEVICES"] == task["SLURM_STEP_GPUS"] for task in tasks)


def test_a_rank_whose_gpu_is_far_from_its_cpus_stays_on_its_cpus(small):
    node, _model, plan = small
    # map_gpu:3,1 puts GPU 1 (L3 of CPU 0) on the task Slurm runs on CPU 1
    tasks, err = _ranks(node, "-n2", "--gres=gpu:8", "--gpu-bind=map_gpu:3,1")
    seen = [_check_rank(t, plan) for t in tasks]
    assert [(gpu, cpus) for gpu, cpus, _l3 in seen] == [(3, [0]), (1, [1])]
    assert "GPU 1's CPUs 0 (NUMA node 0) are all outside the CPUs this process may use (1)" in err


def test_a_shared_node_gives_each_job_its_own_gpus(small):
    node, _model, plan = small
    blocker = node.sbatch("--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 60")
    try:
        deadline = time.monotonic() + 30
        while node.job(blocker)["JobState"] != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        [task], _err = _ranks(node, "--gres=gpu:2")
        gpu, cpus, l3 = _check_rank(task, plan)
        # GPUs 0-3 (and CPU 0) belong to the other job: this step's GPUs 4,5 keep their host indices
        assert (task["SLURM_STEP_GPUS"], gpu, task["ROCR_VISIBLE_DEVICES"]) == ("4,5", 4, "4,5")
        assert cpus == l3 == [1]
    finally:
        node.run(["scancel", blocker])


def test_gpus_the_device_cgroup_hides_renumber_the_rest(small):
    """What ConstrainDevices does to a job: the other GPUs' render nodes exist but cannot be opened. Here Docker's
    device cgroup denies the DRM major (226) for GPUs 0-3, for real; ROCm would number GPUs 4-7 from 0, so the
    wrapper exports job-local indices while SLURM_STEP_GPUS stays global."""
    node, _model, plan = small
    node.sh("for m in 128 129 130 131; do rm -f /dev/dri/renderD$m; mknod -m 0666 /dev/dri/renderD$m c 226 $m; done")
    blocker = node.sbatch("--gres=gpu:4", "-o", "/dev/null", "--wrap", "sleep 60")
    try:
        assert node.sh("cat /dev/dri/renderD128", check=False).returncode != 0   # Operation not permitted
        deadline = time.monotonic() + 30
        while node.job(blocker)["JobState"] != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        tasks, _err = _ranks(node, "-n2", "--overcommit", "--gres=gpu:2")
        assert [t["SLURM_STEP_GPUS"] for t in tasks] == ["4,5", "4,5"]
        assert [(t["TOPOTUNE_GPU"], t["ROCR_VISIBLE_DEVICES"]) for t in tasks] == [("4", "0,1"), ("5", "0,1")]
        assert [t["TOPOTUNE_VISIBLE_GPUS"] for t in tasks] == ["4,5", "4,5"]
        assert all(plan["bindings"][int(t["TOPOTUNE_GPU"])]["cpus"] == t["Cpus_allowed_list"] for t in tasks)
    finally:
        node.run(["scancel", blocker])
        _stand_in_devices(node, 8)


# --- render minors against GPU order -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reversed_minors():
    with SlurmNode("mi300x-8gpu-2cpu-minors") as node:
        _stand_in_devices(node, 8)
        yield node


def _without_links(node):
    model = copy.deepcopy(load_capture(sysroot=node.tree))
    model["links"] = []
    return model


@pytest.mark.parametrize("links", ["xgmi counts", "no link data"])
def test_step_gpu_ids_name_the_ranks_gpu_when_minors_run_against_gpu_order(reversed_minors, links):
    node = reversed_minors
    model = _without_links(node) if links == "no link data" else None
    model, plan = _configure(node, {"cpu_binding": "l3", "gres_type": "mi300x", "sizes": [2, 4, 8]}, model)
    gres = node.sh("cat /etc/slurm/gres.conf").stdout
    assert all(line.startswith("NodeName=%s AutoDetect=off Name=gpu " % node.name)
               for line in gres.splitlines() if line and not line.startswith("#"))
    _assert_slurm_takes_the_generated_gres(node, plan, "mi300x", 2)
    assert plan["gres"]["links_known"] is (links == "xgmi counts")
    # the records slurmd keeps, in the order whose positions are the ids it hands out
    files = [r["File"] for r in gres_records(node.slurmd("-G"))]
    assert files == ["/dev/dri/renderD%d" % m for m in range(135, 127, -1)]
    minor_of = {g["index"]: g["render_minor"] for g in model["gpus"]}
    for request, want in ((("--gres=gpu:1",), [(0, [0])]), (("-n2", "--gres=gpu:2"), [(0, [0]), (4, [1])]),
                          (("-n2", "--gpus-per-task=2"), [(0, [0]), (5, [1])])):
        tasks, err = _ranks(node, *request)
        seen = [_check_rank(t, plan) for t in tasks]
        assert [(gpu, cpus) for gpu, cpus, _l3 in seen] == want, request
        assert all(cpus == l3 for _gpu, cpus, l3 in seen) and "warning" not in err
        for task, (gpu, _cpus, _l3) in zip(tasks, seen):
            ids = [int(i) for i in task["SLURM_STEP_GPUS"].split(",")]
            # the wrapper's GPU is the device of the record Slurm gave the task, not the one with that minor rank
            assert "/dev/dri/renderD%d" % minor_of[gpu] in [files[i] for i in ids]
