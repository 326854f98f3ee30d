"""amd-smi xgmi and amd-smi metric text tables read into measurements (module_utils/acceptance/amdsmi_tables.py).

The real captures are tests/fixtures/acceptance/amdsmi_*.txt (their .source.md lists the facts asserted here). The
SYNTHETIC_* inputs are written from amd-smi's own output code (amdsmi_cli xgmi: the LINK METRIC TABLE, GPU LINK
PORT STATUS and XGMI LINK STATUS tables and their legend, link statuses joined with '/'; metric_gpu's section and
key names, amdsmi_logger's 4-space YAML-like layout), never copied from a run.
"""

import glob
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.amdsmi_tables import (
    detect,
    parse,
    parse_metric,
    parse_xgmi,
)
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import judge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
MI300X = "amdsmi_xgmi__mi300x-8gpu__amdsmi-changelog.txt"
RX7900 = "amdsmi_xgmi__rx7900xtx-2gpu-no-xgmi__rocm-issue-6074.txt"
METRIC = "amdsmi_metric-pcie__mi300-2gpu-excerpt__amdsmi-changelog.txt"
OWN = (MI300X, RX7900, METRIC)
BDFS = ["0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0",
        "0000:bf:00.0", "0000:df:00.0"]


def _read(name):
    with open(os.path.join(FIXTURES, "acceptance", name), newline="") as handle:
        return handle.read()


def _by(result, metric):
    return {tuple(sorted(m["scope"].items())): m["value"] for m in result["measurements"] if m["metric"] == metric}


SYNTHETIC_XGMI_UP = """\
$ amd-smi xgmi

LINK METRIC TABLE:
       bdf           bit_rate  max_bandwidth  link_type  GPU0         GPU1
GPU0   0000:05:00.0  32 Gb/s   512 Gb/s       XGMI
 Read                                                    N/A          3.5 MB
 Write                                                   N/A          12 KB
GPU1   0000:15:00.0  32 Gb/s   512 Gb/s       XGMI
 Read                                                    1.25 GB      N/A
 Write                                                   0 B          N/A

GPU LINK PORT STATUS:
       bdf           port_num
GPU0   0000:05:00.0  U  U  U  U  U  U  U  D
GPU1   0000:15:00.0  U  U  U  U  U  U  U  U

XGMI LINK STATUS:
        bdf            GPU0          GPU1
GPU0\t0000:05:00.0   SELF          U/D
GPU1\t0000:15:00.0   U/U           SELF


Legend:
  SELF = Current GPU
  N/A = Not supported
  U / D / X = Link is Up / Down / Disabled
  Read / Write = GPU Metric Accumulated Read / Write
"""

SYNTHETIC_METRIC = """\
GPU: 0
    USAGE:
        GFX_ACTIVITY: 0 %
        UMC_ACTIVITY: 0 %
        MM_ACTIVITY: N/A
    POWER:
        SOCKET_POWER: 140 W
    PCIE:
        WIDTH: 16
        SPEED: 16 GT/s
        BANDWIDTH: 4 Mb/s
        REPLAY_COUNT: 3
        L0_TO_RECOVERY_COUNT: 1
        REPLAY_ROLL_OVER_COUNT: 0
        NAK_SENT_COUNT: 0
        NAK_RECEIVED_COUNT: 4294967295
        CURRENT_BANDWIDTH_SENT: 0 Mb/s
        CURRENT_BANDWIDTH_RECEIVED: 0 Mb/s
        MAX_PACKET_SIZE: 512 B
        LC_PERF_OTHER_END_RECOVERY: 0
    ECC:
        TOTAL_CORRECTABLE_COUNT: 0
        TOTAL_UNCORRECTABLE_COUNT: 0
    ECC_BLOCKS:
        UMC:
            CORRECTABLE_COUNT: 2
            UNCORRECTABLE_COUNT: 0
    MEM_USAGE:
        TOTAL_VRAM: 196592 MB
"""

SYNTHETIC_STATIC = """\
GPU: 0
    ASIC:
        MARKET_NAME: AMD Instinct MI300X
    BUS:
        BDF: 0000:05:00.0
        MAX_PCIE_WIDTH: 16
        MAX_PCIE_SPEED: 32 GT/s
    CLOCK:
        SYS:
            CURRENT LEVEL: 0
"""


def test_the_rocm61_mi300x_xgmi_table_gives_its_facts():
    result = parse(_read(MI300X), MI300X)
    assert (result["tool"], result["test"], result["complete"], result["layout"]) == ("amd-smi", "xgmi", True,
                                                                                      "bdf-columns")
    assert [g["bdf"] for g in result["gpus"]] == BDFS and [g["gpu"] for g in result["gpus"]] == list(range(8))
    assert {(g["bit_rate_gbps"], g["max_bandwidth_gbps"], g["link_type"]) for g in result["gpus"]} == {
        (32.0, 512.0, "XGMI")}
    assert set(_by(result, "bit_rate").values()) == {32.0} and len(_by(result, "max_bandwidth")) == 8
    pairs = {(p["gpu"], p["peer"]): p for p in result["pairs"]}
    assert len(pairs) == 64 and all(pairs[(i, i)]["read"] == pairs[(i, i)]["write"] == "N/A" for i in range(8))
    assert pairs[(0, 1)]["read"] == "2 KB" and pairs[(0, 1)]["read_bytes"] == 2048.0
    assert pairs[(0, 1)]["peer_bdf"] == "0000:22:00.0"
    reads, writes = _by(result, "read"), _by(result, "write")
    assert len(reads) == len(writes) == 56 and set(reads.values()) | set(writes.values()) <= {0.0, 1024.0, 2048.0}
    assert [reads[(("gpu", 6), ("peer", peer))] for peer in range(8) if peer != 6] == [0.0] * 7
    assert not _by(result, "link_up") and not _by(result, "port_up")      # this layout has no status tables
    criterion = {"id": "xgmi_rate", "tool": "amd-smi", "test": "xgmi", "case": None, "metric": "bit_rate",
                 "unit": "Gb/s", "min": 32}
    assert judge(criterion, [result])["status"] == "pass"


def test_the_no_xgmi_layout_reads_its_sentinels_as_no_value():
    result = parse(_read(RX7900), RX7900)
    assert (result["test"], result["complete"], result["layout"]) == ("xgmi", True, "gpu-columns")
    assert [(g["gpu"], g["bdf"]) for g in result["gpus"]] == [(0, "0000:03:00.0"), (1, "0000:0c:00.0")]
    assert all(g["bit_rate_gbps"] is None and g["max_bandwidth_gbps"] is None and g["link_type"] is None
               for g in result["gpus"])
    assert sorted(s["value"] for s in result["sentinels"]) == [65535, 65535, 4294967295, 4294967295]
    assert not _by(result, "bit_rate") and not _by(result, "max_bandwidth")
    assert all(g["ports"] == ["X"] * 8 for g in result["gpus"])
    ports = _by(result, "port_up")
    assert len(ports) == 16 and set(ports.values()) == {False}
    assert {(p["gpu"], p["peer"]): p["status"] for p in result["pairs"]} == {
        (0, 0): "SELF", (0, 1): "N/A", (1, 0): "N/A", (1, 1): "SELF"}
    assert not _by(result, "link_up") and not _by(result, "read")
    assert any("sentinel" in w for w in result["warnings"])


def test_the_metric_pcie_excerpt_gives_its_facts():
    result = parse(_read(METRIC), METRIC)
    assert (result["tool"], result["test"], result["complete"]) == ("amd-smi", "metric", False)   # the '...' cut
    assert [g["gpu"] for g in result["gpus"]] == [0, 1]
    for gpu in (0, 1):
        found = {(m["metric"], m["unit"]): m["value"] for m in result["measurements"] if m["scope"] == {"gpu": gpu}}
        assert found == {("width", "count"): 16.0, ("speed", "GT/s"): 32.0, ("bandwidth", "Mb/s"): 18.0,
                         ("replay_count", "count"): 0.0, ("l0_to_recovery_count", "count"): 0.0,
                         ("replay_roll_over_count", "count"): 0.0, ("nak_sent_count", "count"): 0.0,
                         ("nak_received_count", "count"): 0.0, ("lc_perf_other_end_recovery", "count"): 0.0}
        assert result["gpus"][gpu]["sections"]["PCIE"]["MAX_PACKET_SIZE"] == "N/A"
    assert {m["case"] for m in result["measurements"]} == {"pcie"}
    width = {"id": "w", "tool": "amd-smi", "test": "metric", "case": "pcie", "metric": "width", "unit": "count",
             "equals": 16}
    speed = {"id": "s", "tool": "amd-smi", "test": "metric", "case": "pcie", "metric": "speed", "unit": "GT/s",
             "min": 32}
    replays = {"id": "r", "tool": "amd-smi", "test": "metric", "case": "pcie", "metric": "replay_count",
               "unit": "count", "max": 0}
    assert [judge(c, [result])["status"] for c in (width, speed, replays)] == ["pass", "pass", "pass"]
    degraded = parse_metric(SYNTHETIC_METRIC, "synthetic")
    assert [judge(c, [degraded])["status"] for c in (width, speed, replays)] == ["pass", "fail", "fail"]


def test_synthetic_xgmi_with_links_up_and_down():
    result = parse(SYNTHETIC_XGMI_UP, "up")
    assert result["complete"] and result["layout"] == "gpu-columns"
    assert _by(result, "link_up") == {(("gpu", 0), ("peer", 1)): False, (("gpu", 1), ("peer", 0)): True}
    ports = _by(result, "port_up")
    assert ports[(("gpu", 0), ("port", 7))] is False and sum(ports.values()) == 15
    reads, writes = _by(result, "read"), _by(result, "write")
    assert reads == {(("gpu", 0), ("peer", 1)): 3.5 * 2 ** 20, (("gpu", 1), ("peer", 0)): 1.25 * 2 ** 30}
    assert writes == {(("gpu", 0), ("peer", 1)): 12 * 1024.0, (("gpu", 1), ("peer", 0)): 0.0}
    up = {"id": "up", "tool": "amd-smi", "test": "xgmi", "case": None, "metric": "link_up", "unit": "bool",
          "equals": True}
    verdict = judge(up, [result])
    assert verdict["status"] == "fail" and verdict["failing"] == ["gpu 0,peer 1"]


def test_synthetic_metric_sections():
    result = parse(SYNTHETIC_METRIC, "metric")
    assert result["complete"] is True
    cases = {(m["case"], m["metric"]): (m["value"], m["unit"]) for m in result["measurements"]}
    assert cases[("pcie", "max_packet_size")] == (512.0, "B")
    assert cases[("ecc_blocks.umc", "correctable_count")] == (2.0, "count")
    assert cases[("ecc", "total_uncorrectable_count")] == (0.0, "count")
    assert ("pcie", "nak_received_count") not in cases            # 4294967295: amd-smi's no-value sentinel
    assert ("usage", "gfx_activity") not in cases                  # %: no unit of criteria.UNITS
    assert cases[("power", "socket_power")] == (140.0, "W")
    assert ("mem_usage", "total_vram") not in cases               # MB: a unit criteria.UNITS does not know
    assert result["gpus"][0]["sections"]["USAGE"]["GFX_ACTIVITY"] == "0 %"


def test_prefixes_and_cuts():
    plain = parse(_read(MI300X), "plain")
    prefixed = "\n".join("2025-03-02T10:00:%02d.000Z " % (n % 60) + line
                         for n, line in enumerate(_read(MI300X).split("\n")))
    assert parse(prefixed, "p")["measurements"] == plain["measurements"]
    metric = parse_metric(_read(METRIC), "m")
    tagged = "\n".join("[1,0]<stdout>:" + line for line in _read(METRIC).split("\n"))
    assert parse_metric(tagged, "m")["measurements"] == metric["measurements"]
    lines = _read(MI300X).rstrip("\n").split("\n")
    cut = parse("\n".join(lines[:-1]), "cut")                     # GPU7's Write row is gone
    assert cut["complete"] is False and any("GPU7" in w for w in cut["warnings"])
    assert parse(_read(MI300X) + "...\n", "dots")["complete"] is False


def test_a_log_with_both_commands():
    result = parse(_read(METRIC) + "\n" + SYNTHETIC_XGMI_UP, "both")
    assert result["test"] == "metric" and any("parse_xgmi" in w for w in result["warnings"])
    assert parse_xgmi(_read(METRIC) + "\n" + SYNTHETIC_XGMI_UP, "both")["test"] == "xgmi"


@pytest.mark.parametrize("call, text, why", [
    (parse, "", "no amd-smi metric output"),
    (parse, SYNTHETIC_STATIC, "no amd-smi metric output"),
    (parse_xgmi, _read(METRIC), "no amd-smi xgmi table"),
    (parse, "LINK METRIC TABLE:\n       bdf  bit_rate max_bandwidth link_type 0000:0c:00.0 nonsense\n",
     "not an amd-smi xgmi column header"),
    (parse, _read(MI300X).replace(_read(MI300X).split("\n")[4], " Read     N/A     2 KB     2 KB"),
     "3 values, the header has 8 GPU columns"),
    (parse, "LINK METRIC TABLE:\nGPU0   0000:0c:00.0 32 Gb/s  512 Gb/s      XGMI\nmore\n", "before its column header"),
])
def test_refusals_are_one_line_naming_source_line_and_why(call, text, why):
    with pytest.raises(AcceptanceParseError) as error:
        call(text, "smi.txt")
    message = str(error.value)
    assert "\n" not in message and message.startswith("smi.txt line ") and why in message


def test_detect_claims_amdsmi_xgmi_and_metric_output_only():
    assert all(detect(text) for text in [_read(name) for name in OWN] + [SYNTHETIC_XGMI_UP, SYNTHETIC_METRIC])
    assert not detect(SYNTHETIC_STATIC) and not detect(None)
    others = sorted(p for folder in ("acceptance", "smi") for p in glob.glob(os.path.join(FIXTURES, folder, "*"))
                    if not p.endswith(".md") and os.path.basename(p) not in OWN)
    claimed = []
    for path in others:
        with open(path, newline="", errors="replace") as handle:
            if detect(handle.read()):
                claimed.append(os.path.basename(path))
    assert claimed == [] and len(others) > 40
