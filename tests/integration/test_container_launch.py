"""A real Docker engine runs a container with the flags container_runtime generates for one launch group: it sees
exactly its group's GPU devices, topotune-bind inside selects them with in-range indices, and numactl --membind
works (Docker's default seccomp profile allows set_mempolicy only with the SYS_NICE the flags add).

Stand-in device nodes are made for the test: character devices with /dev/null's numbers (1,3), which Docker's
default device rules let a container open, at the paths the flags name (/dev/kfd, /dev/dri/renderD<N>)."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.launch.grouping import group_gpus
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture
from ansible_collections.topotune.instinct.plugins.plugin_utils.env import container_plan as cf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

IMAGE = os.environ.get("TOPOTUNE_NODE_IMAGE", "local/topotune-node:bookworm")
# CPUs 0-1 on NUMA node 0 exist on every test machine, so the generated --cpuset-* flags are valid here
PROFILE = "mi300x-8gpu-2cpu"
GROUP_SIZE = 4


def _docker_ok():
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(not _docker_ok() or os.geteuid() != 0,
                                reason="needs root, a running Docker engine and the node image (scripts/setup)")


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    work = tmp_path_factory.mktemp("container")
    root = work / "sysroot"
    simsys.build(PROFILE, str(root))
    model = load_capture(sysroot=str(root))
    dest, wrapper = work / "launch", work / "bin" / "topotune-bind"
    with open(os.path.join(REPO, "roles", "launch_templates", "files", "topotune-bind"), encoding="utf-8") as handle:
        files = render(model, {"dest": str(dest), "wrapper_path": str(wrapper), "dev_dir": "/dev", "sizes": [GROUP_SIZE],
                               "wrapper_content": handle.read()})["files"]
    for f in files:
        os.makedirs(os.path.dirname(f["path"]), exist_ok=True)
        with open(f["path"], "w", encoding="utf-8") as handle:
            handle.write(f["content"])
        os.chmod(f["path"], int(f["mode"], 8))
    groups = group_gpus(model, GROUP_SIZE)["groups"]
    facts = {"kfd": {"path": "/dev/kfd", "exists": True, "char_device": True, "gid": 0, "group": "root", "mode": "0666"},
             "render_nodes": [], "docker": {"present": True}, "amd_ctk": {"present": False}, "users": {}}
    plan = cf.plan(model, groups, facts, {"profile": "xgmi-training", "launch_dir": str(dest), "wrapper_path": str(wrapper),
                                          "ipc_host": False, "shm_size": ""})
    made = []
    for path in ["/dev/kfd"] + ["/dev/dri/renderD%d" % g["render_minor"] for g in model["gpus"]]:
        if os.path.exists(path):
            if not stat.S_ISCHR(os.stat(path).st_mode):
                pytest.skip("%s exists and is not a character device" % path)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        made.append(path)
    yield model, plan, str(wrapper)
    for path in made:
        os.unlink(path)
    if os.path.isdir("/dev/dri") and not os.listdir("/dev/dri"):
        os.rmdir("/dev/dri")


def _run(flags, script, env=None):
    argv = ["docker", "run", "--rm", "--network", "none"] + flags
    for key, value in (env or {}).items():
        argv += ["-e", "%s=%s" % (key, value)]
    proc = subprocess.run(argv + [IMAGE, "bash", "-c", script], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_generated_flags_are_least_privilege(launch):
    _model, plan, _wrapper = launch
    for group in plan["groups"]:
        assert not any("privileged" in f or "SYS_RAWIO" in f or "ALL" in f for f in group["flags"])
        assert [f for f in group["flags"] if f.startswith("--cap-add")] == ["--cap-add=SYS_NICE"]
        assert "--cpuset-mems=0" in group["flags"] and "--cpuset-cpus=0-1" in group["flags"]


@pytest.mark.parametrize("number", [0, 1])
def test_a_group_container_sees_only_its_gpus_and_selects_them_in_range(launch, number):
    model, plan, wrapper = launch
    group = plan["groups"][number]
    minors = sorted("renderD%d" % model["gpus"][g]["render_minor"] for g in group["gpus"])
    out = _run(group["flags"], "ls /dev/dri; echo ROCR=$ROCR_VISIBLE_DEVICES GROUP=$TOPOTUNE_GROUP")
    lines = out.stdout.split()
    assert sorted(lines[:-2]) == minors  # exactly the group's render nodes
    assert lines[-2:] == ["ROCR=0,1,2,3", "GROUP=%d" % number]  # the env file: container-local indices
    for rank, gpu in enumerate(group["gpus"]):
        shown = _run(group["flags"], "%s --print -- app" % wrapper, {"LOCAL_RANK": rank}).stdout
        values = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line and not line.startswith("numactl"))
        assert values["TOPOTUNE_GPU"] == str(gpu)
        assert values["ROCR_VISIBLE_DEVICES"] == "0,1,2,3"
        assert values["TOPOTUNE_VISIBLE_GPUS"] == ",".join(str(g) for g in group["gpus"])


def test_membind_works_inside_and_the_wrapper_binds_for_real(launch):
    _model, plan, wrapper = launch
    flags = plan["groups"][1]["flags"]
    out = _run(flags, "numactl --membind=0 true && echo membind-ok; "
                      "%s -- sh -c 'grep Cpus_allowed_list /proc/self/status; numactl --show | grep ^membind'" % wrapper,
               {"LOCAL_RANK": "0"})
    assert "membind-ok" in out.stdout
    assert "Cpus_allowed_list:\t0-1" in out.stdout and "membind: 0" in out.stdout
    # without the capability Docker's seccomp profile refuses it: the reason SYS_NICE is in the flags
    bare = [f for f in flags if f != "--cap-add=SYS_NICE"]
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none"] + bare + [IMAGE, "numactl", "--membind=0", "true"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode != 0 and "Operation not permitted" in proc.stderr
