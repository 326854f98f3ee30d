"""BabelStream output parser (module_utils/acceptance/babelstream.py) and the cards' BabelStream criteria judged on it.

The capture is BabelStream 5.0 (HIP) on one MI350X (tests/fixtures/acceptance/babelstream_hip__mi350x__mhilgema-ihc,
facts from its .source.md); multi-rank logs, slow kernels and the other layouts (develop's units, --csv,
--triad-only, --mibibytes) are derived from it, following BabelStream's own src/main.cpp."""

import glob
import os
import random

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import babelstream, rvs
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
ACC = os.path.join(REPO, "tests", "fixtures", "acceptance")
SMI = os.path.join(REPO, "tests", "fixtures", "smi")
NAME = "babelstream_hip__mi350x__mhilgema-ihc.txt"
with open(os.path.join(ACC, NAME), newline="") as _handle:
    TEXT = _handle.read()
LINES = TEXT.split("\n")
FIGURES = {"Copy": 5028393.719, "Mul": 5078096.032, "Add": 4891450.313, "Triad": 4809583.065, "Dot": 4384319.732}

VIEW = load_knowledge("acceptance")
MI355X = [c for c in criteria_of(VIEW, "MI355X") if c["tool"] == "babelstream"]
MI300X = [c for c in criteria_of(VIEW, "MI300X") if c["tool"] == "babelstream"]


def _bandwidth(result, **scope):
    return {m["case"]: m["value"] for m in result["measurements"] if m["metric"] == "bandwidth" and m["scope"] == scope
            and m["case"] not in ("Init", "Read")}


def _verdicts(criteria, results):
    return {c["key"]: judge(c, results) for c in criteria}


def test_the_capture_gives_every_kernel_and_the_run_facts():
    result = babelstream.parse(TEXT, NAME)
    assert (result["tool"], result["test"], result["source"], result["version"]) == ("babelstream", "stream", NAME,
                                                                                     "5.0")
    assert result["complete"] is True and result["warnings"] == []
    assert _bandwidth(result) == FIGURES
    assert {m["unit"] for m in result["measurements"] if m["metric"] == "bandwidth"} == {"MB/s"}
    triad = {m["metric"]: m["value"] for m in result["measurements"] if m["case"] == "Triad"}
    assert triad == {"bandwidth": 4809583.065, "min_runtime": 0.00134, "max_runtime": 0.0014, "avg_runtime": 0.00137}
    phases = {(m["case"], m["metric"]): m["value"] for m in result["measurements"] if m["case"] in ("Init", "Read")}
    assert phases == {("Init", "bandwidth"): 12410.230478, ("Init", "runtime"): 0.519124,
                      ("Read", "bandwidth"): 68522.07979, ("Read", "runtime"): 0.09402}
    assert result["device_names"] == ["AMD Instinct MI350X"] and result["implementation"] == "HIP"
    assert result["precision"] == "double" and result["num_times"] == 50
    assert result["array_size"] == {"value": 2147.5, "unit": "MB", "value2": 2.1, "unit2": "GB"}
    run = result["runs"][0]
    assert (run["driver"], run["memory"], run["kernels"]) == ("60550421", "DEFAULT", list(FIGURES))
    assert run["total_size"]["value"] == 6442.5 and run["scope"] == {}
    assert ("valid", True) in [(m["metric"], m["value"]) for m in result["measurements"]]


def test_detect_is_true_for_babelstream_only():
    assert babelstream.detect(TEXT) is True and rvs.detect(TEXT) is False
    others = [p for p in glob.glob(os.path.join(ACC, "*")) + glob.glob(os.path.join(SMI, "*"))
              if os.path.basename(p) != NAME and not p.endswith("README.md")]
    assert len(others) > 40
    for path in others:
        with open(path, encoding="utf-8", errors="replace") as handle:
            assert babelstream.detect(handle.read()) is False, path


def test_the_mi350x_capture_passes_the_mi355x_card_and_a_slow_kernel_fails_naming_it():
    assert [c["case"] for c in MI355X] == ["Copy", "Mul", "Add", "Triad", "Dot"]
    verdicts = _verdicts(MI355X, [babelstream.parse(TEXT)])
    assert {k: v["status"] for k, v in verdicts.items()} == {
        "babelstream.%s" % k: "pass" for k in ("copy", "mul", "add", "triad", "dot")}
    slow = TEXT.replace("Triad       4809583.065", "Triad       3809583.065")
    verdicts = _verdicts(MI355X, [babelstream.parse(slow)])
    failed = {k: v for k, v in verdicts.items() if v["status"] == "fail"}
    assert list(failed) == ["babelstream.triad"]
    triad = failed["babelstream.triad"]
    assert triad["expected"] == "stream Triad bandwidth: >= 3885301 MB/s on every measurement"
    assert triad["value"] == 3809583.065 and triad["margin_pct"] < 0 and triad["failing"] == ["node"]
    assert "docs/index.md" in triad["source"] and "system-validation.md" in triad["source"]


def _tagged(ranks, slow_rank=None, seed=3):
    """The capture as ``mpirun --tag-output`` prints ``ranks`` ranks, their lines interleaved."""
    streams = []
    for rank in ranks:
        text = TEXT if rank != slow_rank else TEXT.replace("Copy        5028393.719", "Copy        4000000.000")
        streams.append(["[1,%d]<stdout>:%s" % (rank, line) for line in text.split("\n")])
    rng = random.Random(seed)
    out = []
    while any(streams):
        out.append(rng.choice([s for s in streams if s]).pop(0))
    return "\n".join(out)


def test_ranks_of_an_mpirun_log_are_scoped_and_judged_each():
    result = babelstream.parse(_tagged(range(8)), "mpirun.log")
    assert result["ranks"] == list(range(8)) and result["complete"] is True
    for rank in range(8):
        assert _bandwidth(result, rank=rank) == FIGURES
    assert result["prefixes"] == ["\\[\\d+,\\d+\\]<std(?:out|err|diag)>:"]
    slow = babelstream.parse(_tagged(range(8), slow_rank=5))
    verdict = judge(next(c for c in MI355X if c["case"] == "Copy"), [slow])
    assert verdict["status"] == "fail" and verdict["failing"] == ["rank 5"]
    assert verdict["observed"] == "1 of 8 miss the bound: rank 5 4000000 MB/s"


def test_untagged_runs_one_after_the_other_are_numbered():
    result = babelstream.parse("\n".join(LINES * 3))
    assert [r["scope"] for r in result["runs"]] == [{"run": 1}, {"run": 2}, {"run": 3}]
    assert _bandwidth(result, run=3) == FIGURES


def test_untagged_interleaved_runs_are_refused():
    streams = [list(LINES), list(LINES)]
    rng = random.Random(1)
    mixed = []
    while any(streams):
        mixed.append(rng.choice([s for s in streams if s]).pop(0))
    with pytest.raises(AcceptanceParseError) as err:
        babelstream.parse("\n".join(mixed), "mixed.log")
    assert "interleaved" in str(err.value) and "\n" not in str(err.value)


def test_a_cut_table_is_not_complete_and_its_missing_kernels_are_unknown():
    result = babelstream.parse("\n".join(LINES[:16]) + "\n...\n")
    assert result["complete"] is False and list(_bandwidth(result)) == ["Copy", "Mul", "Add"]
    verdicts = _verdicts(MI300X, [result])
    assert verdicts["babelstream.dot"]["status"] == "unknown"
    assert verdicts["babelstream.dot"]["observed"] == (
        "the babelstream stream output has no bandwidth for Dot (the output was cut)")
    assert verdicts["babelstream.copy"]["status"] == "pass"
    no_marker = babelstream.parse("\n".join(LINES[:16]))
    assert no_marker["complete"] is False and any("lacks kernels" in w for w in no_marker["warnings"])


def test_a_damaged_last_row_is_a_cut_and_a_damaged_row_before_others_is_refused():
    dot = next(i for i, line in enumerate(LINES) if line.startswith("Dot"))
    cut = babelstream.parse("\n".join(LINES[:dot] + ["Dot         4384319."]))
    assert cut["complete"] is False and "Dot" not in _bandwidth(cut)
    assert any(w.startswith("truncated run: line %d" % (dot + 1)) for w in cut["warnings"])
    damaged = list(LINES)
    damaged[14] = "Copy        5028393.719 0.00085     n/a         0.00087"
    with pytest.raises(AcceptanceParseError) as err:
        babelstream.parse("\n".join(damaged), "bs.log")
    message = str(err.value)
    assert message.startswith("bs.log line 15: not a result row") and "\n" not in message
    assert isinstance(err.value, TopotuneError)


@pytest.mark.parametrize("text, needle", [
    ("", "the output is empty"),
    ("hello\n", "no BabelStream output"),
    (b"\xff\xfe", "no BabelStream output"),
    (42, "expected text"),
    ("Invalid device index.\n", "failed before printing a result table: line 1: 'Invalid device index.'"),
    ("\n".join(LINES[13:]), "without their 'Function ... Min (sec)' header"),
    ("\n".join(LINES[:12]).replace("Init:", "Init_").replace("Read:", "Read_"), "printed no result row"),
    ("Function    furlongs/s  Min (sec)   Max         Average\nCopy 1 2 3 4\n", "unknown bandwidth unit"),
])
def test_output_without_a_result_table_is_refused_in_one_line(text, needle):
    with pytest.raises(AcceptanceParseError) as err:
        babelstream.parse(text, "bs.log")
    message = str(err.value)
    assert needle in message and "\n" not in message and message.startswith("bs.log")


def test_rvs_output_is_not_babelstream():
    with open(os.path.join(ACC, "rvs_gst_single__mi300x-8gpu__rocm-system-acceptance.txt")) as handle:
        with pytest.raises(AcceptanceParseError):
            babelstream.parse(handle.read())


DEVELOP = """\
BabelStream
Version: 5.0
Implementation: HIP
Running  All kernels 100 times in  Classic order
Number of elements: 268435456
Precision: double
Array size: {array} {unit}
Total size: 6.4 {unit}
Using HIP device AMD Instinct MI300X
Driver: 60342131
Memory: DEFAULT
Function    {unit}/s{pad}Min (sec)   Max         Average
Copy        {copy}     0.00052     0.00054     0.00053
Mul         {copy}     0.00052     0.00055     0.00053
Add         {copy}     0.00078     0.00080     0.00079
Triad       {copy}     0.00078     0.00080     0.00079
Dot         {copy}     0.00060     0.00062     0.00061
Nstream     {copy}     0.00104     0.00106     0.00105
"""


@pytest.mark.parametrize("unit, copy, expected", [
    ("MB", "4123456.789", ("MB/s", 4123456.789)),
    ("GB", "4123.457", ("GB/s", 4123.457)),
    ("MiB", "3932358.875", ("MiB/s", 3932358.875)),
    ("TiB", "3.750", ("GiB/s", 3840.0)),
])
def test_the_develop_layout_reads_its_unit_and_nstream(unit, copy, expected):
    text = DEVELOP.format(array="2.1", unit=unit, copy=copy, pad=" " * (12 - len(unit) - 2))
    result = babelstream.parse(text)
    assert result["complete"] is True and result["runs"][0]["selection"] == "all"
    assert list(_bandwidth(result)) == ["Copy", "Mul", "Add", "Triad", "Dot", "Nstream"]
    copy_m = next(m for m in result["measurements"] if m["case"] == "Copy" and m["metric"] == "bandwidth")
    assert (copy_m["unit"], copy_m["value"]) == expected
    assert result["runs"][0]["num_elements"] == 268435456
    verdict = judge(next(c for c in MI300X if c["case"] == "Copy"), [result])
    assert verdict["status"] == "fail" and verdict["unit"] == "MB/s"     # 4.12 TB/s < 4,177,285 MB/s


def test_a_develop_table_without_nstream_is_cut():
    text = DEVELOP.format(array="2.1", unit="MB", copy="4200000.000", pad="  ").rsplit("Nstream", 1)[0]
    assert babelstream.parse(text)["complete"] is False


def test_the_csv_layouts_are_read():
    csv = ("BabelStream\nVersion: 5.0\nImplementation: HIP\nRunning kernels 50 times\nPrecision: double\n"
           "phase,n_elements,sizeof,max_mbytes_per_sec,runtime\nInit,268435456,8,12410.2,0.519124\n"
           "function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,max_runtime,avg_runtime\n"
           + "".join("%s,50,268435456,8,%s,0.00085,0.0009,0.00087\n" % kv for kv in FIGURES.items()))
    result = babelstream.parse(csv)
    assert _bandwidth(result) == FIGURES and result["complete"] is True and result["format"] == "csv"
    assert [m["value"] for m in result["measurements"] if m["case"] == "Init"] == [12410.2, 0.519124]
    assert babelstream.detect(csv) is True


def test_triad_only_runs_are_read():
    text = ("BabelStream\nVersion: 5.0\nImplementation: HIP\nRunning triad 100 times\nNumber of elements: 268435456\n"
            "Precision: double\nArray size: 2097152.0 KB (=2097.2 MB)\nTotal size: 6291456.0 KB (=6291.5 MB)\n"
            "Using HIP device AMD Instinct MI350X\n--------------------------------\nRuntime (seconds): 0.13912\n"
            "Bandwidth (GB/s):  4628.913\n")
    result = babelstream.parse(text)
    assert [(m["case"], m["metric"], m["unit"], m["value"]) for m in result["measurements"][:2]] == [
        ("Triad", "bandwidth", "GB/s", 4628.913), ("Triad", "runtime", "s", 0.13912)]
    assert result["complete"] is True and result["format"] == "triad"
    assert judge(next(c for c in MI355X if c["case"] == "Triad"), [result])["status"] == "pass"


def test_mibibytes_and_validation_failures():
    text = TEXT.replace("MBytes/sec", "MiBytes/sec") + "\nValidation failed on a[]. Average error 0.5\n"
    result = babelstream.parse(text)
    assert {m["unit"] for m in result["measurements"] if m["metric"] == "bandwidth"} == {"MiB/s"}
    assert ("valid", False) in [(m["metric"], m["value"]) for m in result["measurements"]]
    assert result["failures"][0]["text"].startswith("Validation failed on a[]")
    assert any("validation" in w for w in result["warnings"])
    # MiB/s converts: 5028393.719 MiB/s = 5272652.97 MB/s
    verdict = judge(next(c for c in MI300X if c["case"] == "Copy"), [result])
    assert verdict["status"] == "pass" and round(verdict["value"]) == 5272653


def test_srun_labels_and_timestamps_are_removed():
    labelled = "\n".join("%2d: %s" % (3, line) for line in LINES)
    result = babelstream.parse(labelled)
    assert _bandwidth(result) == FIGURES and result["ranks"] == []
    stamped = "\n".join("2025-07-11T10:00:%02d.123456Z %s" % (i % 60, line) for i, line in enumerate(LINES))
    assert babelstream.parse(stamped)["measurements"] == babelstream.parse(TEXT)["measurements"]


def test_the_cards_babelstream_criteria_are_amds_figures():
    cards = {entry["name"]: entry for entry in VIEW["generations"]}
    expected = {
        "MI210": (1230000, 1225000, 1115000, 1115000, 1170000),
        "MI250X": (1200000, 1200000, 1100000, 1100000, 1200000),
        "MI300A": (2900000, 3000000, 3250000, 3250000, 2200000),
        "MI300X": (4177285, 4067069, 3920853, 3885301, 3660781),
        "MI325X": (4177285, 4067069, 3920853, 3885301, 3660781),
        "MI355X": (4177285, 4067069, 3920853, 3885301, 3660781),
    }
    for name, figures in expected.items():
        criteria = cards[name]["babelstream"]
        assert [(c["case"], c["min"]) for c in criteria] == list(zip(("Copy", "Mul", "Add", "Triad", "Dot"), figures))
        for c in criteria:
            assert (c["test"], c["metric"], c["unit"], c["per"]) == ("stream", "bandwidth", "MB/s", "each")
            assert c["command"].startswith("mpiexec -n ") and c["sources"] and c["notes"]
            assert all(len(s["commit"]) == 40 and s["says"] for s in c["sources"])
        # the product page's own card where it has one; the guide's index and summary where it has none
        first = criteria[0]["sources"][0]["document"]
        if name in ("MI325X", "MI355X"):
            assert first.endswith("docs/index.md") and "no BabelStream card" in criteria[0]["disagreement"]
        else:
            assert "docs/gpus/" in first
    assert "MI308X" not in cards or "babelstream" not in cards["MI308X"]
