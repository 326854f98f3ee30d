"""rail_consistency: the cluster-wide rail comparison (plugin_utils/fleet/consistency.py) on per-node inventories."""

import copy

from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import compare, lines, rail_value


def _rails(count=8, fw="28.39.1002", rate="400 Gb/sec (4X NDR)"):
    return [{"rail": i, "gpu": "0000:%02x:00.0" % (0x10 * (i + 1)), "nic": "mlx5_%d" % i,
             "netdev": "enp%ds0np0" % (0x11 * (i + 1)), "rate": rate, "firmware": fw, "subnet": "10.%d.0.0/24" % i}
            for i in range(count)]


def _inv(rails=None, product="MI300X"):
    return {"gpus": [{"bdf": "0000:10:00.0", "vbios": "113-M3000100-102", "firmware": {},
                      "compute_partition": "SPX", "memory_partition": "NPS1"}],
            "rocm_version": "6.4.1", "kernel_release": "6.8.0", "bios_version": "1.0",
            "identity": {"generation": product, "product": product, "kind": "physical"},
            "rails": _rails() if rails is None else rails}


def _swapped():
    """Rails 0 and 1 swapped: the NIC below GPU 0's switch is mlx5_1 on rail 1's subnet, and the other way round."""
    rails = _rails()
    rails[0], rails[1] = dict(rails[1], rail=0, gpu=rails[0]["gpu"]), dict(rails[0], rail=1, gpu=rails[1]["gpu"])
    return rails


def test_the_node_with_two_rails_swapped_is_named():
    report = compare({"n1": _inv(), "n2": _inv(), "n3": _inv(_swapped()), "n4": _inv()})
    verdicts = report["rail_consistency"]
    assert verdicts["n3"]["status"] == "fail"
    assert "rail 0 (GPU 0's NIC): mlx5_1 enp34s0np0" in verdicts["n3"]["observed"]
    assert "3 other node(s): mlx5_0 enp17s0np0 400 Gb/sec (4X NDR) fw 28.39.1002 10.0.0.0/24" in verdicts["n3"]["observed"]
    assert "rail 1" in verdicts["n3"]["observed"] and "rail 2" not in verdicts["n3"]["observed"]
    assert {h: v["status"] for h, v in verdicts.items()} == {"n1": "pass", "n2": "pass", "n3": "fail", "n4": "pass"}
    assert report["odd_nodes"] == {"n3": ["rail:0", "rail:1"]}
    # the terminal lines of the run summary name it too
    assert any(line.startswith("MI300X SPX/NPS1 rail 0 (GPU 0's NIC): mlx5_0") and "odd: n3 (mlx5_1" in line
               for line in lines(report))


def test_each_field_of_a_rail_is_compared():
    for field, value in (("rate", "200 Gb/sec (4X HDR)"), ("firmware", "28.36.1010"), ("subnet", "10.9.0.0/24"),
                         ("netdev", "eth5")):
        odd = _rails()
        odd[5][field] = value
        report = compare({"a": _inv(), "b": _inv(), "c": _inv(odd)})
        assert report["rail_consistency"]["c"]["status"] == "fail", field
        assert value in report["rail_consistency"]["c"]["observed"] and "rail 5" in report["rail_consistency"]["c"]["observed"]


def test_an_unreadable_field_is_unknown_there_never_odd():
    partial = _rails()
    partial[2]["firmware"] = None
    report = compare({"a": _inv(), "b": _inv(), "c": _inv(partial)})
    assert rail_value(partial[2]) is None
    assert report["rail_consistency"]["c"]["status"] == "unknown"
    assert "rail 2 (GPU 2's NIC) unreadable here" in report["rail_consistency"]["c"]["observed"]
    assert "c" not in report["odd_nodes"]


def test_a_gpu_without_a_nic_differs_from_one_with():
    missing = _rails()
    missing[7] = {"rail": 7, "gpu": missing[7]["gpu"], "nic": None}
    report = compare({"a": _inv(), "b": _inv(), "c": _inv(missing)})
    assert report["rail_consistency"]["c"]["status"] == "fail" and "no NIC" in report["rail_consistency"]["c"]["observed"]


def test_nothing_to_compare_is_unknown_with_the_reason():
    alone = compare({"a": _inv(), "x": _inv(product="MI308X")})
    assert alone["rail_consistency"]["a"]["status"] == "unknown"
    assert "the only node of class MI300X SPX/NPS1" in alone["rail_consistency"]["a"]["observed"]
    bare = compare({"a": _inv(rails=[]), "b": _inv(rails=[])})
    assert {v["status"] for v in bare["rail_consistency"].values()} == {"unknown"}
    assert "no RDMA rails read" in bare["rail_consistency"]["a"]["observed"]
    # two nodes that disagree: no majority, neither is named
    other = _rails()
    other[0]["subnet"] = "10.8.0.0/24"
    split = compare({"a": _inv(), "b": _inv(other)})
    assert {v["status"] for v in split["rail_consistency"].values()} == {"unknown"}
    assert "no value on more than half" in split["rail_consistency"]["a"]["observed"]


def test_rails_are_compared_within_a_hardware_class():
    mi308 = _rails(fw="28.40.1000")
    report = compare({"a": _inv(), "b": _inv(), "m1": _inv(mi308, "MI308X"), "m2": _inv(copy.deepcopy(mi308), "MI308X")})
    assert {v["status"] for v in report["rail_consistency"].values()} == {"pass"}
