"""Run the rendered topotune-bind wrapper with bash and a fake numactl: exact argv and env per rank."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.launch_render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology import load_capture

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

FAKE_NUMACTL = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
               if k.endswith("VISIBLE_DEVICES") or k.startswith(("HSA_", "TOPOTUNE_"))}}, f)
"""
RANK_VARS = ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID",
             "TOPOTUNE_GROUP", "TOPOTUNE_GROUP_SIZE", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]


def _install(tmp_path, profile, options=None):
    dest = tmp_path / "sysroot"
    simsys.build(profile, str(dest), force=True)
    opts = {"dest": str(tmp_path / "etc"), "wrapper_path": str(tmp_path / "bin" / "topotune-bind")}
    opts.update(options or {})
    for f in render(load_capture(sysroot=str(dest)), opts)["files"]:
        os.makedirs(os.path.dirname(f["path"]), exist_ok=True)
        with open(f["path"], "w") as handle:
            handle.write(f["content"])
        os.chmod(f["path"], int(f["mode"], 8))
    fake = tmp_path / "fakebin" / "numactl"
    fake.parent.mkdir()
    fake.write_text(FAKE_NUMACTL)
    fake.chmod(0o755)
    return opts["wrapper_path"]


def _run(tmp_path, wrapper, args, env=None, expect_rc=0):
    record = tmp_path / "record.json"
    if record.exists():
        record.unlink()
    base = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    base.update({"PATH": "%s:%s" % (tmp_path / "fakebin", os.environ["PATH"]), "RECORD": str(record)})
    base.update(env or {})
    proc = subprocess.run(["bash", wrapper] + args, env=base, capture_output=True, text=True, check=False)
    assert proc.returncode == expect_rc, proc.stderr
    return (json.loads(record.read_text()) if record.exists() else None), proc


MI250X_NUMA = {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2}


@pytest.fixture()
def mi250x(tmp_path):
    return _install(tmp_path, "mi250x-8gcd")


@pytest.mark.parametrize("rank_var", ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"])
def test_every_rank_execs_numactl_on_its_gcds_numa_node(tmp_path, mi250x, rank_var):
    for rank in range(8):
        rec, _unused = _run(tmp_path, mi250x, ["python", "train.py", "--lr", "1e-4"], {rank_var: str(rank)})
        node = MI250X_NUMA[rank]
        assert rec["argv"] == ["--cpunodebind=%d" % node, "--membind=%d" % node, "--", "python", "train.py",
                               "--lr", "1e-4"]
        assert rec["env"]["ROCR_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        assert rec["env"]["HSA_OVERRIDE_CPU_AFFINITY_DEBUG"] == "0"
        assert rec["env"]["TOPOTUNE_GPU"] == str(rank)


def test_group_selection_and_rank_argument(tmp_path, mi250x):
    rec, _unused = _run(tmp_path, mi250x, ["--size", "2", "--group", "2", "--rank", "1", "--", "app"])
    assert rec["argv"] == ["--cpunodebind=0", "--membind=0", "--", "app"]
    assert rec["env"]["ROCR_VISIBLE_DEVICES"] == "4,5" and rec["env"]["TOPOTUNE_GPU"] == "5"
    rec, _unused = _run(tmp_path, mi250x, ["app"], {"TOPOTUNE_GROUP_SIZE": "4", "TOPOTUNE_GROUP": "1", "LOCAL_RANK": "2"})
    assert rec["env"]["TOPOTUNE_GPU"] == "6" and rec["argv"][:2] == ["--cpunodebind=2", "--membind=2"]


def test_explicit_rank_beats_environment(tmp_path, mi250x):
    rec, _unused = _run(tmp_path, mi250x, ["--rank", "4", "app"], {"LOCAL_RANK": "0"})
    assert rec["argv"][0] == "--cpunodebind=0"


def test_rank_scope_and_hip_variable(tmp_path):
    wrapper = _install(tmp_path, "mi210-8gpu-2hive", {"visible_devices_env": "HIP_VISIBLE_DEVICES",
                                                      "visible_devices_scope": "rank", "sizes": [4]})
    rec, _unused = _run(tmp_path, wrapper, ["--group", "1", "app"], {"SLURM_LOCALID": "3"})
    assert rec["env"]["HIP_VISIBLE_DEVICES"] == "7" and "ROCR_VISIBLE_DEVICES" not in rec["env"]
    assert rec["argv"] == ["--cpunodebind=1", "--membind=1", "--", "app"]


def test_print_mode_shows_the_command(tmp_path, mi250x):
    rec, proc = _run(tmp_path, mi250x, ["--print", "--rank", "0", "--", "python", "a b.py"])
    assert rec is None
    assert "numactl --cpunodebind=3 --membind=3 -- python a\\ b.py" in proc.stdout
    assert "ROCR_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in proc.stdout


def test_numactl_override_variable(tmp_path, mi250x):
    rec, _unused = _run(tmp_path, mi250x, ["app"], {"LOCAL_RANK": "1",
                                                    "TOPOTUNE_BIND_NUMACTL": str(tmp_path / "fakebin" / "numactl")})
    assert rec["argv"][:2] == ["--cpunodebind=3", "--membind=3"]


def test_unknown_numa_runs_unbound_with_a_warning(tmp_path):
    wrapper = _install(tmp_path, "fault-numa-minus1")
    script = tmp_path / "probe.sh"
    script.write_text('#!/bin/bash\necho "$ROCR_VISIBLE_DEVICES $HSA_OVERRIDE_CPU_AFFINITY_DEBUG $*"\n')
    script.chmod(0o755)
    rec, proc = _run(tmp_path, wrapper, [str(script), "x"], {"LOCAL_RANK": "3"})
    assert rec is None  # numactl never ran
    assert proc.stdout.strip() == "0,1,2,3,4,5,6,7 0 x"
    assert "no known NUMA node" in proc.stderr


@pytest.mark.parametrize("args,env,message", [
    (["app"], {}, "no local rank"),
    (["app"], {"LOCAL_RANK": "8"}, "local rank 8"),
    (["app"], {"LOCAL_RANK": "x"}, "not a number"),
    (["--size", "3", "app"], {"LOCAL_RANK": "0"}, "size 3 is not generated"),
    (["--size", "2", "--group", "4", "app"], {"LOCAL_RANK": "0"}, "group 4 does not exist"),
    ([], {"LOCAL_RANK": "0"}, "no command"),
    (["--bogus", "app"], {"LOCAL_RANK": "0"}, "unknown option"),
])
def test_errors_exit_2_with_a_message(tmp_path, mi250x, args, env, message):
    _unused, proc = _run(tmp_path, mi250x, args, env, expect_rc=2)
    assert message in proc.stderr


def test_list_and_help(tmp_path, mi250x):
    _unused, proc = _run(tmp_path, mi250x, ["--list"])
    assert "size 2 group 0: GPUs 0 1" in proc.stdout
    _unused, proc = _run(tmp_path, mi250x, ["--help"])
    assert "LOCAL_RANK" in proc.stdout
