"""`bin/topotune parse FILE [--tool NAME] [--command LINE]`: any acceptance tool's saved output as JSON, the tool
recognized from the text by the one registry (module_utils/acceptance/tools.py) over every parser."""

import glob
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.tools import NAMES, detect, parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.path.join(REPO, "bin", "topotune")
ACCEPTANCE = os.path.join(REPO, "tests", "fixtures", "acceptance")
# capture name prefix -> the tool that printed it (the fixtures' name scheme: <tool>_<variant>__<machine>__<origin>)
PREFIX_TOOL = {"amdsmi": "amd-smi", "babelstream": "babelstream", "perftest": "perftest", "rccl-tests": "rccl-tests",
               "rocblas-bench": "rocblas-bench", "rvs": "rvs", "transferbench": "transferbench"}
CAPTURES = sorted(p for p in glob.glob(os.path.join(ACCEPTANCE, "*.txt"))
                  if os.path.basename(p).split("_")[0] in PREFIX_TOOL)
OTHERS = sorted(set(glob.glob(os.path.join(ACCEPTANCE, "*.txt")) + glob.glob(os.path.join(REPO, "tests", "fixtures",
                                                                                          "smi", "*.txt"))) - set(CAPTURES))


def _cli(*argv):
    return subprocess.run([sys.executable, CLI, "parse", *argv], capture_output=True, text=True, check=False)


def _text(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


@pytest.mark.parametrize("path", CAPTURES, ids=os.path.basename)
def test_every_capture_is_recognized_as_its_own_tool_only(path):
    want = PREFIX_TOOL[os.path.basename(path).split("_")[0]]
    assert detect(_text(path)) == [want]
    assert parse(_text(path), path)["tool"] == want


def test_other_tools_output_is_claimed_by_none_or_refused_in_one_line():
    """The smi captures (rocm-smi, amd-smi topology, numactl, lspci ...) and the RDMA tool captures: not acceptance
    tools' output, except the rccl-tests / nccl-tests runs kept there (a grep-filtered one keeps none of the lines
    that identify the tool: refused like any unknown text)."""
    for path in OTHERS:
        found = detect(_text(path))
        if "_perf" in os.path.basename(path) and "filtered" not in path:
            assert found == ["rccl-tests"], path
            continue
        assert found == [], path
        with pytest.raises(AcceptanceParseError, match="no acceptance tool's output recognized: give the tool"):
            parse(_text(path), path)


def test_cli_prints_json_and_takes_the_tool_and_the_command():
    rocblas = os.path.join(ACCEPTANCE, "rocblas-bench_gemm-fp32__mi300x__rocm-system-acceptance-rst.txt")
    run = _cli(rocblas)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert (out["tool"], out["test"]) == ("rocblas-bench", "gemm") and out["measurements"][0]["case"] is None
    command = ("rocblas-bench -f gemm -r s -m 4000 -n 4000 -k 4000 --lda 4000 --ldb 4000 --ldc 4000 "
               "--transposeA N --transposeB T")
    cased = json.loads(_cli(rocblas, "--command", command).stdout)
    assert {m["case"] for m in cased["measurements"]} == {"fp32"}
    assert json.loads(_cli(rocblas, "--tool", "hipblaslt-bench").stdout)["measurements"]
    assert "rccl-tests" in NAMES and "hipblaslt-bench" in NAMES


def test_cli_refusals_are_one_line_with_exit_2(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello\nworld\n")
    for argv in ((str(other),), (str(tmp_path / "absent"),), (str(other), "--tool", "rvs")):
        run = _cli(*argv)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, argv
        assert run.stderr.startswith("topotune parse: error: ")
