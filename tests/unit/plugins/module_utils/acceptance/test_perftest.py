"""perftest output read into measurements (module_utils/acceptance/perftest.py), and AMD's network criteria
(knowledge/acceptance.yml ``network``) judged on it.

The real capture is tests/fixtures/acceptance/perftest_ib_write_bw-*.txt (its .source.md lists the facts asserted
here). No whole ib_read_bw, ib_send_lat or multi-QP output was found published: the SYNTHETIC_* inputs below are
written from perftest's own print formats (src/perftest_parameters.h RESULT_FMT*/REPORT_FMT*, perftest_parameters.c
ctx_print_test_info and print_full_bw_report / print_report_lat, perftest_communication.h BASIC_ADDR_FMT /
READ_FMT / PERF_GID_FMT), never copied from a run.
"""

import glob
import os
import re

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import judge
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.perftest import detect, parse
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
CAPTURE = "perftest_ib_write_bw-bidir-all-sizes-report-gbits-use-rocm__roce-loopback__rocm-cluster-networking.txt"
DASHES = "-" * 87


def _read(name=CAPTURE):
    with open(os.path.join(FIXTURES, "acceptance", name), newline="") as handle:
        return handle.read()


def _network():
    return {c["id"]: c for c in load_knowledge("acceptance")["network"]}


def _values(result, metric, case=None):
    return [m["value"] for m in result["measurements"] if m["metric"] == metric and (case is None or m["case"] == case)]


# ib_read_bw -q 4 -s 65536 --use_rocm=0 (MiB/s), client side, IB link: 4 QPs, so 4 local and 4 remote address lines
SYNTHETIC_READ_BW_MULTI_QP = "\n".join([
    DASHES,
    "                    RDMA_Read BW Test",
    " Dual-port       : OFF\t\tDevice         : mlx5_3",
    " Number of qps   : 4\t\tTransport type : IB",
    " Connection type : RC\t\tUsing SRQ      : OFF",
    " PCIe relax order: ON\t\tLock-free      : OFF",
    " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF",
    " TX depth        : 128",
    " CQ Moderation   : 1",
    " CQE Poll Batch  : 16",
    " Mtu             : 4096[B]",
    " Link type       : IB",
    " Outstand reads  : 16",
    " rdma_cm QPs\t : OFF",
    " Use ROCm memory : ON",
    " Data ex. method : Ethernet",
    DASHES,
    "Using ROCm Device with ID: 0, Name: AMD Instinct MI300X, PCI Bus ID: 0x1b, GCN Arch: gfx942:sramecc+:xnack-",
] + [" local address: LID 0x1d QPN 0x%04x PSN 0x5e30c8 OUT 0x10 RKey 0x2000201 VAddr 0x007fe663d20000" % (0x108 + q)
     for q in range(4)] + [
    " remote address: LID 0x2a QPN 0x%04x PSN 0xf40c3c OUT 0x10 RKey 0x2000301 VAddr 0x007f282a06e000" % (0x208 + q)
    for q in range(4)] + [
    DASHES,
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]",
    " 65536      20000            45012.34            44987.21\t\t     0.719795",
    DASHES, ""])

# perftest before March 2024 labelled the same 2^20 divisor [MB/sec]
SYNTHETIC_SEND_BW_OLD_MB = SYNTHETIC_READ_BW_MULTI_QP.replace("RDMA_Read", "Send").replace("MiB/sec", "MB/sec")

# ib_send_lat -a (iterations run): the 9-column latency table
SYNTHETIC_SEND_LAT = "\n".join([
    DASHES,
    "                    Send Latency Test",
    " Dual-port       : OFF\t\tDevice         : mlx5_0",
    " Number of qps   : 1\t\tTransport type : IB",
    " Connection type : RC\t\tUsing SRQ      : OFF",
    " PCIe relax order: ON\t\tLock-free      : OFF",
    " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF",
    " TX depth        : 1",
    " RX depth        : 512",
    " Mtu             : 4096[B]",
    " Link type       : Ethernet",
    " GID index       : 3",
    " Max inline data : 236[B]",
    " rdma_cm QPs\t : OFF",
    " Data ex. method : Ethernet",
    DASHES,
    " local address: LID 0000 QPN 0x0111 PSN 0x1c2d3e",
    " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:01",
    " remote address: LID 0000 QPN 0x0222 PSN 0x4f5a6b",
    " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:02",
    DASHES,
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
    "99% percentile[usec]   99.9% percentile[usec] ",
    " 2       1000          1.02           3.41         1.05     \t       1.07     \t0.05\t\t1.29 \t\t3.41",
    " 4       1000          1.03           2.95         1.06     \t       1.08     \t0.04\t\t1.31 \t\t2.95",
    " 8       1000          1.03           4.12         1.06     \t       1.09     \t0.06\t\t1.33 \t\t4.12",
    DASHES, ""])

# the 2013 latency table: min/max/typical only (bce05ff "Moved perftest to autotools")
SYNTHETIC_WRITE_LAT_OLD = "\n".join([
    DASHES, "                    RDMA_Write Latency Test", " Dual-port       : OFF\t\tDevice         : mlx4_0",
    " Number of qps   : 1", " Connection type : RC", " Mtu             : 2048[B]", " Link type       : IB", DASHES,
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]",
    " 2       1000          0.91           5.34         0.94", DASHES, ""])

# ib_write_bw -b --report-both: the local and the remote table of a bidirectional run
SYNTHETIC_REPORT_BOTH = "\n".join([
    DASHES, "                    RDMA_Write Bidirectional BW Test", " Dual-port       : OFF\t\tDevice         : bnxt_re0",
    " Number of qps   : 1\t\tTransport type : IB", " Connection type : RC\t\tUsing SRQ      : OFF",
    " Link type       : Ethernet", " Use ROCm memory : OFF", DASHES,
    DASHES, "", " Local results: ", DASHES,
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    " 65536      5000             391.20             390.10\t\t     0.744057", DASHES, "",
    " Remote results: ", DASHES,
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    " 65536      5000             389.80             388.90\t\t     0.741768", DASHES, ""])

# ib_write_bw --output=bandwidth: one bare number per size (print_full_bw_report's "%lf\n"), no header
SYNTHETIC_OUTPUT_BANDWIDTH = ("+ ib_write_bw -d mlx5_2 -s 1048576 --report_gbits --output=bandwidth 192.168.10.2\n"
                              "391.834512\n")


def test_the_capture_gives_its_facts():
    result = parse(_read(), CAPTURE)
    assert (result["tool"], result["test"], result["complete"]) == ("perftest", "ib_write_bw", True)
    run = result["runs"][0]
    assert run["banner"] == "RDMA_Write Bidirectional BW Test" and result["bidirectional"] is True
    assert (result["qps"], result["connection"], result["mtu"], result["link_type"], result["gid_index"]) == (
        1, "RC", 4096, "Ethernet", 3)
    assert result["device"] == "<RDMA-NIC-2>" and result["report_unit"] == "Gb/s"
    rows = run["rows"]
    assert [r["#bytes"] for r in rows] == [2 ** i for i in range(1, 24)] and {r["#iterations"] for r in rows} == {5000}
    assert max(_values(result, "bw_average")) == 204.59
    assert _values(result, "bw_average", "2097152") == _values(result, "bw_average", "8388608") == [204.59]
    assert _values(result, "bw_average", "65536") == [203.85] and _values(result, "bw_average", "4096") == [188.56]
    assert _values(result, "msg_rate", "8") == [8.471791]
    assert _values(result, "bw_peak", "2") == [0.142947] and _values(result, "bw_average", "2") == [0.012281]
    units = {(m["metric"], m["unit"]) for m in result["measurements"]}
    assert units == {("bw_peak", "Gb/s"), ("bw_average", "Gb/s"), ("msg_rate", "Mpps"), ("bw_average_max", "Gb/s")}
    # the echoed shell line holds the server and the client; the client (its -d is the header's Device) ran
    # against localhost with --use_rocm: the run is GPU buffers, bidirectional, loopback
    assert result["commands"][1].endswith("-use_rocm=0 -F localhost") and result["port"] == 1
    assert (result["gpu_buffers"], result["gpu_buffers_from"], result["path"]) == (True, "command", "loopback")
    best = [m for m in result["measurements"] if m["metric"] == "bw_average_max"]
    assert best == [{"case": "gpu-bidir-loopback", "metric": "bw_average_max", "unit": "Gb/s", "value": 204.59,
                     "scope": {"device": "<RDMA-NIC-2>"}}]
    assert detect(_read())


def test_amds_network_criteria_on_the_capture():
    network = _network()
    assert sorted(network) == ["ib_write_bw_gpu_to_gpu", "ib_write_bw_gpu_to_nic", "ib_write_bw_nic_to_nic",
                               "nic_link_speed"]
    result = parse(_read(), CAPTURE)
    gpu_nic = judge(network["ib_write_bw_gpu_to_nic"], [result])
    assert (gpu_nic["status"], gpu_nic["value"]) == ("fail", 204.59) and gpu_nic["margin_pct"] == pytest.approx(
        -47.54, abs=0.01)
    assert gpu_nic["failing"] == ["device <RDMA-NIC-2>"] and "rdma-benchmarking.md" in gpu_nic["source"]
    assert network["ib_write_bw_gpu_to_nic"]["applies_to"]["nic_speed_gbps"] == 400
    # the capture is one node's loopback: the through-the-switch criteria have nothing to judge
    for key in ("ib_write_bw_nic_to_nic", "ib_write_bw_gpu_to_gpu"):
        assert judge(network[key], [result])["status"] == "unknown"
    # derived: the same run on a 400G NIC peaking at 392.10 Gb/s passes
    faster = re.sub(r"(?m)^(8388608 +5000 +)204\.59( +)204\.59", r"\g<1>392.10\g<2>392.10", _read())
    verdict = judge(network["ib_write_bw_gpu_to_nic"], [parse(faster, "faster")])
    assert (verdict["status"], verdict["value"]) == ("pass", 392.1)
    # AMD's own commands name the runs the criteria select (their placeholders are single arguments)
    for key, case in (("ib_write_bw_gpu_to_nic", "gpu-bidir-loopback"), ("ib_write_bw_nic_to_nic", "host-bidir-remote"),
                      ("ib_write_bw_gpu_to_gpu", "gpu-bidir-remote")):
        text = _read().split("\n", 1)[1]
        named = parse(text, key, command=network[key]["command"].replace("<NIC 0>", "<RDMA-NIC-2>"))
        assert [m["case"] for m in named["measurements"] if m["metric"] == "bw_average_max"] == [case], key
    speed = network["nic_link_speed"]
    assert (speed["min"], speed["unit"], speed["tool"]) == (400000, "Mb/s", "ethtool")


def test_synthetic_ib_read_bw_multi_qp_in_mib():
    result = parse(SYNTHETIC_READ_BW_MULTI_QP, "read")
    assert (result["test"], result["qps"], result["link_type"], result["complete"]) == ("ib_read_bw", 4, "IB", True)
    assert _values(result, "bw_average", "65536") == [44987.21] and _values(result, "bw_peak") == [45012.34]
    assert {m["unit"] for m in result["measurements"] if m["metric"].startswith("bw_")} == {"MiB/s"}
    run = result["runs"][0]
    assert len(run["local"]) == len(run["remote"]) == 4 and run["local"][0]["OUT"] == "0x10"
    assert (result["gpu_buffers"], result["gpu_buffers_from"]) == (True, "header")
    # no command and different LIDs: the path cannot be told, so the best average names no case
    assert result["path"] is None
    assert [m["case"] for m in result["measurements"] if m["metric"] == "bw_average_max"] == [None]
    # MiB/s converts: 44987.21 MiB/s is 377.38 Gb/s
    criterion = {"id": "x", "tool": "perftest", "test": "ib_read_bw", "case": "65536", "metric": "bw_average",
                 "unit": "Gb/s", "min": 370}
    verdict = judge(criterion, [result])
    assert verdict["status"] == "pass" and verdict["value"] == pytest.approx(377.38, abs=0.01)


def test_synthetic_old_mb_header_is_mebibytes():
    result = parse(SYNTHETIC_SEND_BW_OLD_MB, "old")
    assert result["test"] == "ib_send_bw"
    assert {m["unit"] for m in result["measurements"] if m["metric"].startswith("bw_")} == {"MiB/s"}


def test_synthetic_ib_send_lat():
    result = parse(SYNTHETIC_SEND_LAT, "lat")
    assert (result["test"], result["complete"], result["bidirectional"]) == ("ib_send_lat", True, False)
    by_metric = {}
    for m in result["measurements"]:
        by_metric.setdefault(m["metric"], {})[m["case"]] = (m["value"], m["unit"])
    assert sorted(by_metric) == ["t_avg", "t_max", "t_min", "t_p99", "t_p99_9", "t_stdev", "t_typical"]
    assert by_metric["t_typical"]["2"] == (1.05, "us") and by_metric["t_avg"]["8"] == (1.09, "us")
    assert by_metric["t_p99"]["4"] == (1.31, "us") and by_metric["t_p99_9"]["2"] == (3.41, "us")
    assert result["runs"][0]["local"][0]["GID"].endswith(":10:00:00:01") and result["path"] is None
    latency = {"id": "lat", "tool": "perftest", "test": "ib_send_lat", "case": "2", "metric": "t_avg", "unit": "us",
               "max": 2.0}
    assert judge(latency, [result])["status"] == "pass"
    old = parse(SYNTHETIC_WRITE_LAT_OLD, "old-lat")
    assert old["test"] == "ib_write_lat" and sorted({m["metric"] for m in old["measurements"]}) == [
        "t_max", "t_min", "t_typical"]


def test_synthetic_report_both_adds_the_local_and_remote_averages():
    result = parse(SYNTHETIC_REPORT_BOTH, "both")
    sides = sorted((m["scope"]["side"], m["value"]) for m in result["measurements"] if m["metric"] == "bw_average")
    assert sides == [("local", 390.1), ("remote", 388.9)]
    best = [m for m in result["measurements"] if m["metric"] == "bw_average_max"]
    assert best[0]["value"] == pytest.approx(779.0) and best[0]["case"] is None     # no command: path unknown
    assert result["gpu_buffers"] is False and result["gpu_buffers_from"] == "header"


def test_synthetic_output_bandwidth_read_through_its_command():
    result = parse(SYNTHETIC_OUTPUT_BANDWIDTH, "bare")
    assert (result["test"], result["output"], result["device"], result["path"]) == ("ib_write_bw", "bandwidth",
                                                                                    "mlx5_2", "remote")
    assert result["measurements"] == [{"case": "1048576", "metric": "bw_average", "unit": "Gb/s", "value": 391.834512,
                                       "scope": {"device": "mlx5_2"}}]
    given = parse("391.834512\n", "given", command="ib_write_bw -d mlx5_2 -a --output=bandwidth 192.168.10.2")
    assert given["measurements"][0]["case"] == "2" and given["measurements"][0]["unit"] == "MiB/s"
    with pytest.raises(AcceptanceParseError, match="needs its command"):
        parse("391.834512\n", "alone")
    with pytest.raises(AcceptanceParseError, match="names no perftest program"):
        parse("391.834512\n", "options", command="-d mlx5_2 --output=bandwidth")
    # the options alone still describe a table's run
    options = parse(_read().split("\n", 1)[1], "options", command="-d <RDMA-NIC-2> -b --use_rocm=0 127.0.0.1")
    assert [m["case"] for m in options["measurements"] if m["metric"] == "bw_average_max"] == ["gpu-bidir-loopback"]


def test_several_runs_a_cut_table_and_prefixes():
    two = parse(_read() + "\n" + SYNTHETIC_READ_BW_MULTI_QP, "two")
    assert two["test"] is None and {m["scope"].get("run") for m in two["measurements"]} == {1, 2}
    lines = _read().split("\n")
    cut = parse("\n".join(lines[:-3]), "cut")         # the last row and the closing line are gone
    assert cut["complete"] is False and "8388608" not in {m["case"] for m in cut["measurements"]}
    assert not [m for m in cut["measurements"] if m["metric"] == "bw_average_max"]
    assert any("closing line" in w for w in cut["warnings"])
    truncated = parse("\n".join(lines[:-2] + [lines[-2][:20]]), "truncated")
    assert truncated["complete"] is False and any("cut" in w for w in truncated["warnings"])
    assert parse(_read() + "...\n", "dots")["complete"] is False
    noted = parse("#bytes are counted per message\n" + _read(), "note")        # no column header: not read
    assert noted["measurements"] == parse(_read(), "plain")["measurements"]
    plain = parse(_read(), "p")
    prefixed = "\n".join("node-7: " + line for line in _read().split("\n"))
    assert parse(prefixed, "p")["measurements"] == plain["measurements"]
    failed = parse(_read().replace(DASHES + "\n#bytes", " Completion with error at client\n" + DASHES + "\n#bytes"), "f")
    assert failed["complete"] is False and failed["failures"][0]["text"] == "Completion with error at client"


@pytest.mark.parametrize("text, why", [
    ("", "no perftest result table"),
    ("hca_id: rxe0\n    transport:          InfiniBand (0)\n", "no perftest result table"),
    ("2          5000           0.14            0.01            0.76\n4          5000           0.28   0.26   8.2\n",
     "result rows without their column header"),
    (" Couldn't connect to 10.0.0.2:18515\n", "the run failed before printing a result table"),
    (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 2 5000 0.1 x 0.7\n 4 5000 0.2 "
     "0.2 8.2\n", "BW average[Gb/sec] 'x' is not a number"),
    (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 2 5000 0.1 0.7\n 4 5000 0.2 "
     "0.2 8.2\n", "4 fields, the column header on line 1 has 5"),
    (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n", "has no row"),
])
def test_refusals_are_one_line_naming_source_line_and_why(text, why):
    with pytest.raises(AcceptanceParseError) as error:
        parse(text, "node.log")
    message = str(error.value)
    assert "\n" not in message and message.startswith("node.log line ") and why in message


def test_detect_claims_perftest_output_only():
    synthetic = [SYNTHETIC_READ_BW_MULTI_QP, SYNTHETIC_SEND_BW_OLD_MB, SYNTHETIC_SEND_LAT, SYNTHETIC_WRITE_LAT_OLD,
                 SYNTHETIC_REPORT_BOTH, SYNTHETIC_OUTPUT_BANDWIDTH]
    assert all(detect(text) for text in [_read()] + synthetic)
    others = sorted(p for folder in ("acceptance", "smi") for p in glob.glob(os.path.join(FIXTURES, folder, "*"))
                    if not p.endswith(".md") and os.path.basename(p) != CAPTURE)
    claimed = []
    for path in others:
        with open(path, newline="", errors="replace") as handle:
            if detect(handle.read()):
                claimed.append(os.path.basename(path))
    assert claimed == [] and len(others) > 40
    assert not detect(None) and not detect("hca_id: rxe0\n\ttransport: InfiniBand (0)\n")
