"""After converge: the RDMA checks in each node's JSON report (each RDMA fault node fails exactly its check), and the
cluster-wide rail_consistency, in the run summary and in the HTML report, naming the node whose two rails' NICs are
swapped (tt-h16r-swapped, profile fault-rail-swapped) and no other as swapped."""

import json
import os
import shutil
import sys

import pytest

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# the checkout as topotune.instinct (scripts/setup-controller): the report is rendered by the collection's own code
sys.path.insert(0, os.path.join(REPO, ".cache", "collections"))
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.data import load_report_dir  # noqa: E402
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.render import render_report  # noqa: E402

RDMA_IDS = ("rdma_nic_pcie_link", "rdma_port_state", "rdma_gid")
# profile -> the check its fault trips and text its observation holds
FAULTS = {
    "fault-nic-x8": ("rdma_nic_pcie_link", "downgraded: mlx5_2 (0000:39:00.0) x8 16.0 GT/s"),
    "fault-rdma-port-down": ("rdma_port_state", "mlx5_5:1 (0000:b0:00.0) state 1: DOWN, phys_state 2: Polling"),
    "fault-gid-missing": ("rdma_gid", "mlx5_6:1 (0000:c0:00.0): only link-local RoCE v2 GIDs"),
}
SWAPPED = "tt-h16r-swapped"


@pytest.fixture(scope="module")
def profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


@pytest.fixture(scope="module")
def report(host):
    path = os.path.join(EPHEMERAL, "platform-checks", "%s.json" % host.backend.get_hostname())
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def summary():
    with open(os.path.join(EPHEMERAL, "reports", "run", "site.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_rdma_checks_match_the_profile(profile, report):
    """Every node with the MI300X tree passes the three RDMA checks but the fault node of each, which fails its own
    (the swapped-rails node passes all three: nothing on the node itself is wrong)."""
    results = {r["id"]: r for r in report["results"]}
    want = FAULTS.get(profile)
    for check_id in RDMA_IDS:
        if want and check_id == want[0]:
            assert results[check_id]["status"] == "fail" and want[1] in results[check_id]["observed"], results[check_id]
            assert results[check_id]["remediation"] and results[check_id]["source"]
        else:
            assert results[check_id]["status"] == "pass", results[check_id]
    rails = report["inventory"]["rails"]
    assert [r["rail"] for r in rails] == list(range(8))
    if profile == "fault-rail-swapped":
        assert [(r["nic"], r["ipv4_subnet"]) for r in rails[:2]] == [("mlx5_1", "10.1.0.0/24"), ("mlx5_0", "10.0.0.0/24")]


def test_rail_consistency_names_the_swapped_node(summary, host):
    consistency = summary["consistency"]
    verdicts = consistency["rail_consistency"]
    assert set(verdicts) == set(host.ansible.get_variables()["groups"]["all"])
    swapped = verdicts[SWAPPED]
    assert swapped["status"] == "fail", swapped
    assert swapped["observed"].startswith("rail 0 (GPU 0's NIC): mlx5_1 enp13s0np0 400 Gb/sec (4X NDR) fw 28.39.1002 "
                                          "10.1.0.0/24, "), swapped
    assert "rail 1 (GPU 1's NIC): mlx5_0 enp35s0np0" in swapped["observed"] and "rail 2 " not in swapped["observed"]
    assert consistency["odd_nodes"][SWAPPED] == ["rail:0", "rail:1"]
    for good in ("tt-h16g-good1", "tt-h16g-good2", "tt-h16r-nicx8"):
        assert verdicts[good]["status"] == "pass", verdicts[good]
    # a node whose own checks fail differs on the rail they name: the port down at 10 Gb/s (rail 5)
    assert verdicts["tt-h16r-portdown"]["status"] == "fail" and "rail 5 " in verdicts["tt-h16r-portdown"]["observed"]
    # rail 6 of the node without an IPv4 address has no subnet: unknown there, never odd
    assert verdicts["tt-h16r-gid"]["status"] == "unknown" and "rail 6 (GPU 6's NIC) unreadable here" in \
        verdicts["tt-h16r-gid"]["observed"]
    # classes of one (the HF node, the node with one GPU in CPX): nothing to compare with
    assert verdicts["tt-h16g-hf"]["status"] == "unknown"


def test_the_report_names_the_swapped_node(tmp_path):
    """The HTML report built from these nodes' check reports (playbooks/report.yml's code) says it too."""
    checks = tmp_path / "checks"
    shutil.copytree(os.path.join(EPHEMERAL, "platform-checks"), checks)
    page = render_report(load_report_dir(str(tmp_path)))
    section = page.split('<section class="consistency"')[1].split("</section>")[0]
    assert "Odd node out: %s (rail:0, rail:1)" % SWAPPED in section
    assert '<span class="badge s-fail">fail</span> %s: rail 0 (GPU 0&#39;s NIC): mlx5_1' % SWAPPED in section
    assert "tt-h16g-good1:" not in section


def test_nccl_ib_hca_is_withheld_on_the_swapped_node_only(host):
    """The launch_templates role on the four nodes of group rdma_launch, after the play discovered them: the group env
    files of the nodes whose rails agree name their NICs; the swapped node's have neither NCCL_IB_HCA nor
    NCCL_IB_GID_INDEX, and its launch README says why, naming the two rails."""
    hostname = host.backend.get_hostname()
    if "rdma_launch" not in host.ansible.get_variables()["group_names"]:
        pytest.skip("not a launch node")
    readme = host.file("/etc/topotune/launch/README").content_string
    group0 = host.file("/etc/topotune/launch/size8-group0.env").content_string
    if hostname == SWAPPED:
        assert "NCCL_IB_HCA" not in group0 and "NCCL_IB_GID_INDEX" not in group0
        line = next(line for line in readme.splitlines() if line.startswith("RDMA: NCCL_IB_HCA"))
        assert line.startswith("RDMA: NCCL_IB_HCA not set: withheld: its rails differ from the other nodes of its "
                               "hardware class in this run (rail_consistency: rail 0 (GPU 0's NIC): mlx5_1 "), line
        assert "3 other node(s): mlx5_0 " in line and "rail 1 (GPU 1's NIC): mlx5_0 " in line
    else:
        assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1\n" in group0
        assert "NCCL_IB_GID_INDEX=3\n" in group0 and "withheld" not in readme
