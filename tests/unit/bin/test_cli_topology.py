"""bin/topotune topology, run as a subprocess with a bare python3 -S (no venv, no site-packages)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.path.join(REPO, "bin", "topotune")
FIXTURES = os.path.join(REPO, "tests", "fixtures")
SMI = os.path.join(FIXTURES, "smi")
PYTHON = shutil.which("python3") or sys.executable


def _cli(*args, cwd=None):
    proc = subprocess.run([PYTHON, "-S", CLI, *args], capture_output=True, text=True, cwd=cwd or "/", check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    ("args", "gpus", "source"),
    [
        (["--kfd", os.path.join(FIXTURES, "kfd", "mi210-8gpu-2hive")], 8, "kfd"),
        (["--kfd", os.path.join(FIXTURES, "kfd", "mi300x-8gpu-cpx", "topology")], 63, "kfd"),
        (["--rocm-smi", os.path.join(SMI, "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt")], 8, "rocm-smi"),
        (["--rocm-smi", os.path.join(SMI, "rocm-smi_showtoponuma__mi250x-8gcd-lumi-g__lumi-userguide.txt"),
          "--rocm-smi", os.path.join(SMI, "rocm-smi_shownodesbw__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt")],
         8, "rocm-smi"),
        (["--amd-smi", os.path.join(SMI, "amd-smi_topology__mi355x-8gpu-spx__oci-gpu-quickstarts.txt")], 8,
         "amd-smi"),
        (["--amd-smi-json", os.path.join(SMI, "amd-smi_topology_-a-t_json__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json")],
         2, "amd-smi"),
    ],
    ids=["kfd-mi210", "kfd-mi300x-cpx", "rocm-smi-mi308x", "rocm-smi-merge", "amd-smi-text", "amd-smi-json"],
)
def test_json_output(args, gpus, source):
    code, out, err = _cli("topology", *args, "--format", "json")
    assert code == 0, err
    model = json.loads(out)
    assert len(model["gpus"]) == gpus and model["source"] == source and model["schema"] == 1


def test_sysroot_layout(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, "kfd", "mi210-8gpu-2hive", "nodes"),
                    str(tmp_path / "sys/class/kfd/kfd/topology/nodes"))
    node = tmp_path / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("0-31,64-95\n")
    code, out, err = _cli("topology", "--sysroot", str(tmp_path), "--format", "text")
    assert code == 0, err
    assert "NUMA 0: CPUs 0-31,64-95, GPUs 0,1,2,3" in out
    assert "xGMI clique: GPUs 4,5,6,7" in out
    assert "GPU0  -       xgmi/1  xgmi/1  xgmi/1  pcie/3" in out


def test_json_is_the_default_format(tmp_path):
    shutil.copytree(os.path.join(FIXTURES, "kfd", "mi210-8gpu-2hive", "nodes"),
                    str(tmp_path / "sys/class/kfd/kfd/topology/nodes"))
    code, out, err = _cli("topology", "--sysroot", str(tmp_path))
    assert code == 0, err
    assert len(json.loads(out)["gpus"]) == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sysroot", "/nonexistent"], "topotune topology: error: --sysroot /nonexistent is not a directory\n"),
        (["--rocm-smi", "/nonexistent/x.txt"], "topotune topology: error: cannot read rocm-smi file /nonexistent/x.txt\n"),
        (["--amd-smi", os.path.join(SMI, "rocm-smi_concise__mi300x-4gpu-spx__thamada-nvidia-smi.txt")],
         "topotune topology: error: rocm-smi_concise__mi300x-4gpu-spx__thamada-nvidia-smi.txt: no 'XXX TABLE:' "
         "section found (not amd-smi topology output?)\n"),
        (["--kfd", SMI], "topotune topology: error: KFD topology not found: %s has no nodes/ directory\n" % SMI),
    ],
    ids=["missing-sysroot", "missing-file", "wrong-tool", "not-a-kfd-tree"],
)
def test_unusable_input_exits_2_with_one_line(args, message):
    code, out, err = _cli("topology", *args)
    assert code == 2 and out == ""
    assert err == message


def test_empty_sysroot(tmp_path):
    code, _out, err = _cli("topology", "--sysroot", str(tmp_path))
    assert code == 2 and "KFD topology not found" in err and err.count("\n") == 1


def test_symlinked_cli_finds_plugins(tmp_path):
    link = tmp_path / "topotune"
    link.symlink_to(CLI)
    proc = subprocess.run([PYTHON, "-S", str(link), "topology", "--kfd",
                           os.path.join(FIXTURES, "kfd", "single-gpu-dup"), "--format", "json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["gpus"]) == 1


def test_no_subcommand_prints_help():
    code, _out, err = _cli()
    assert code == 2 and "topology" in err
