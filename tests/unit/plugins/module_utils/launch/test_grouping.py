"""GPU grouping: exact optimum against brute force on every capture and simulated profile, plus the
hardware facts the groups must reproduce (MI210 hives, MI250X in-package GCD pairs, CPX partitions)."""

import itertools
import os
import random
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.filter.gpu_groups import gpu_groups
from ansible_collections.topotune.instinct.plugins.module_utils.launch.grouping import (
    GroupingError,
    group_gpus,
    score_partition,
)
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import plan
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
KFD = os.path.join(REPO, "tests", "fixtures", "kfd")
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

PROFILES = [name for name, _unused in simsys.list_profiles()]
CAPTURES = ["mi210-8gpu-2hive", "mi300x-8gpu-cpx", "mi308x-cpx"]

# MI250X xgmi_num_links per GCD pair and GCD -> NUMA (tests/fixtures/mi250-topology-facts.md)
MI250X_LINKS = {(0, 1): 4, (2, 3): 4, (4, 5): 4, (6, 7): 4, (0, 6): 2, (2, 4): 2,
                (0, 2): 1, (1, 3): 1, (1, 5): 1, (3, 7): 1, (4, 6): 1, (5, 7): 1}
MI250X_NUMA = {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2}


def _model(n, link, numa, hive=lambda i: "h", physical=None):
    nodes = [numa(i) for i in range(n)]
    gpus = [{"index": i, "numa_node": nodes[i], "hive_id": hive(i), "render_minor": 128 + i,
             "physical_index": physical(i) if physical else i, "partition": None,
             "cpus": None if nodes[i] is None else "%d-%d" % (nodes[i] * 16, nodes[i] * 16 + 15)} for i in range(n)]
    links = [dict(link(a, b), a=a, b=b) for a in range(n) for b in range(a + 1, n)]
    return {"schema": 1, "source": "test", "gpus": gpus, "links": links}


def mi250x_model():
    def link(a, b):
        count = MI250X_LINKS.get((a, b), 0)
        return {"type": "xgmi", "hops": 1 if count else 2, "weight": 15 if count else 30, "xgmi_links": count,
                "bandwidth_mbps": {"min": 50000, "max": 50000 * count} if count else None}
    return _model(8, link, MI250X_NUMA.get)


def mi210_model():
    def link(a, b):
        if a // 4 == b // 4:
            return {"type": "xgmi", "hops": 1, "weight": 15, "xgmi_links": None,
                    "bandwidth_mbps": {"min": 50000, "max": 50000}}
        return {"type": "pcie", "hops": 3, "weight": 72, "xgmi_links": None, "bandwidth_mbps": None}
    return _model(8, link, lambda i: i // 4, hive=lambda i: "hive%d" % (i // 4))


def mi300x_model():
    return _model(8, lambda a, b: {"type": "xgmi", "hops": 1, "weight": 15, "xgmi_links": None,
                                   "bandwidth_mbps": None}, lambda i: i // 4)


@pytest.fixture(scope="session")
def profile_models(sim_model):
    # the session's shared trees and models (tests/conftest.py): read only
    return {name: sim_model(name) for name in PROFILES}


@pytest.fixture(scope="session")
def capture_models():
    return {name: load_capture(kfd=os.path.join(KFD, name)) for name in CAPTURES}


# ---- independent brute force -------------------------------------------------------------------------

def _pair_key(link, metric):
    """(strength, xgmi, -hops, -weight) written independently of grouping.py."""
    if link is None:
        return (0, 0, -3, 0)
    xgmi = link["type"] == "xgmi"
    if not xgmi:
        strength = 0
    elif metric == "links":
        strength = link["xgmi_links"] if link.get("xgmi_links") is not None else (1 if link["hops"] == 1 else 0)
    elif metric == "bandwidth":
        strength = (link.get("bandwidth_mbps") or {}).get("max") or 0
    else:
        strength = 1
    return (strength, int(xgmi), -(link["hops"] if link.get("hops") is not None else 3), -(link.get("weight") or 0))


def _brute_force(topology, size):
    links = {(link["a"], link["b"]): link for link in topology["links"]}
    if any(link.get("xgmi_links") is not None for link in topology["links"]):
        metric = "links"
    elif any(link["type"] == "xgmi" and (link.get("bandwidth_mbps") or {}).get("max") for link in topology["links"]):
        metric = "bandwidth"
    else:
        metric = "type"
    numa = {g["index"]: g["numa_node"] for g in topology["gpus"]}

    def score(partition):
        total = [0, 0, 0, 0, 0]
        for group in partition:
            for a, b in itertools.combinations(group, 2):
                for i, v in enumerate(_pair_key(links.get((a, b)), metric)):
                    total[i] += v
            total[4] -= len({numa[g] for g in group if numa[g] is not None})
        return tuple(total)

    def partitions(items):
        if not items:
            yield []
            return
        first, rest = items[0], items[1:]
        for combo in itertools.combinations(rest, size - 1):
            remaining = [x for x in rest if x not in combo]
            for tail in partitions(remaining):
                yield [[first, *combo], *tail]

    best = None
    for part in partitions(sorted(numa)):
        key = score(part)
        # maximize the score; among equals the lexicographically smallest partition
        if best is None or key > best[0] or (key == best[0] and part < best[1]):
            best = (key, part)
    return best[1]


def _divisors(n):
    return [k for k in range(2, n) if n % k == 0]


def test_exact_equals_brute_force_on_every_profile_and_capture(profile_models, capture_models):
    checked = 0
    for name, model in list(profile_models.items()) + list(capture_models.items()):
        n = len(model["gpus"])
        if n > 16:
            continue
        for size in _divisors(n):
            result = group_gpus(model, size)
            assert result["exact"], name
            assert result["groups"] == _brute_force(model, size), (name, size)
            checked += 1
    assert checked >= 15


@pytest.mark.parametrize("seed", range(12))
def test_exact_equals_brute_force_on_random_topologies(seed):
    rng = random.Random(seed)
    n = rng.choice([6, 8, 9, 10, 12])
    numa_count = rng.choice([1, 2, 4])

    def link(a, b):
        kind = rng.choice(["xgmi", "xgmi", "pcie"])
        return {"type": kind, "hops": rng.choice([1, 2, 3]), "weight": rng.choice([13, 15, 41]),
                "xgmi_links": rng.choice([0, 1, 2, 4]) if kind == "xgmi" and seed % 2 else None,
                "bandwidth_mbps": {"min": 0, "max": rng.choice([0, 50000, 100000])} if kind == "xgmi" else None}

    model = _model(n, link, lambda i: rng.choice([None] + list(range(numa_count))) if seed % 3 == 0 else i % numa_count)
    for size in _divisors(n):
        assert group_gpus(model, size)["groups"] == _brute_force(model, size), (seed, n, size)


def test_ties_take_the_smallest_indices():
    # all-to-all, one NUMA node: every partition scores the same, the index order wins
    model = _model(8, lambda a, b: {"type": "xgmi", "hops": 1, "weight": 15, "xgmi_links": None,
                                    "bandwidth_mbps": None}, lambda i: 0)
    assert group_gpus(model, 2)["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.parametrize("source", ["hand", "profile", "capture"])
def test_mi210_groups_of_four_are_the_hives(source, profile_models, capture_models):
    model = {"hand": mi210_model, "profile": lambda: profile_models["mi210-8gpu-2hive"],
             "capture": lambda: capture_models["mi210-8gpu-2hive"]}[source]()
    result = group_gpus(model, 4)
    hives = {}
    for gpu in model["gpus"]:
        hives.setdefault(gpu["hive_id"], []).append(gpu["index"])
    assert sorted(result["groups"]) == sorted(hives.values())
    assert all("one xGMI hive" in line for line in result["explanations"])


@pytest.mark.parametrize("source", ["hand", "profile"])
def test_mi250x_pairs_are_the_in_package_gcds(source, profile_models):
    model = mi250x_model() if source == "hand" else profile_models["mi250x-8gcd"]
    assert group_gpus(model, 2)["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # groups of 4: two packages each, the 2 x 10-link layouts tie on link count and {0-3},{4-7} wins on hops
    assert group_gpus(model, 4)["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_mi250x_hand_model_score_counts_links():
    result = group_gpus(mi250x_model(), 2)
    assert result["score"]["metric"] == "xgmi_links"
    assert result["score"]["link_strength"] == 16
    assert "(4 links per pair)" in result["explanations"][0]


RECIPE_SPX = "HIP_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0 --membind=0 <command>"


@pytest.mark.parametrize("name", ["mi300x-8gpu-spx", "mi210-8gpu-2hive"])
def test_article_recipe_appears_where_right(name, profile_models):
    p = plan(profile_models[name], {"sizes": [4], "visible_devices_env": "HIP_VISIBLE_DEVICES"})
    recipes = [r["recipe"] for r in p["sizes"][0]["recipes"]]
    assert recipes[0] == RECIPE_SPX
    assert recipes[1] == "HIP_VISIBLE_DEVICES=4,5,6,7 numactl --cpunodebind=1 --membind=1 <command>"


@pytest.mark.parametrize("model", ["hand", "profile"])
def test_article_recipe_does_not_appear_on_mi250x(model, profile_models):
    topo = mi250x_model() if model == "hand" else profile_models["mi250x-8gcd"]
    p = plan(topo, {"sizes": [2, 4], "visible_devices_env": "HIP_VISIBLE_DEVICES"})
    recipes = [r["recipe"] for s in p["sizes"] for r in s["recipes"]]
    assert RECIPE_SPX not in recipes
    # GCD order is not NUMA order: the in-package pair 0,1 sits on NUMA 3, 4,5 on NUMA 0
    assert "HIP_VISIBLE_DEVICES=0,1 numactl --cpunodebind=3 --membind=3 <command>" in recipes
    assert "HIP_VISIBLE_DEVICES=4,5 numactl --cpunodebind=0 --membind=0 <command>" in recipes
    assert "HIP_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=1,3 --membind=1,3 <command>" in recipes


def test_mi308x_cpx_keeps_partitions_of_one_gpu_together(capture_models):
    model = capture_models["mi308x-cpx"]
    physical = {g["index"]: g["physical_index"] for g in model["gpus"]}
    for size in (2, 4):
        result = group_gpus(model, size)
        assert result["method"] == "hierarchical"
        assert all(len({physical[g] for g in group}) == 1 for group in result["groups"])
    result = group_gpus(model, 8)
    # 8 = two whole physical GPUs (4 partitions each), never a split one
    for group in result["groups"]:
        devices = {physical[g] for g in group}
        assert len(devices) == 2
        assert all(sum(1 for g in group if physical[g] == d) == 4 for d in devices)


def test_mi300x_cpx_63_partitions_is_a_clear_error(capture_models):
    model = capture_models["mi300x-8gpu-cpx"]
    assert len(model["gpus"]) == 63
    with pytest.raises(GroupingError, match="does not divide the 63 GPUs.*use one of 1, 3, 7, 9, 21, 63"):
        group_gpus(model, 8)
    degraded = group_gpus(model, 7)
    assert degraded["method"] == "chunked" and not degraded["exact"] and degraded["warnings"]
    assert sorted(g for group in degraded["groups"] for g in group) == list(range(63))


def test_64_partitions_group_by_physical_gpu():
    model = _model(64, lambda a, b: {"type": "xgmi", "hops": 1, "weight": 13 if a // 8 == b // 8 else 41,
                                     "xgmi_links": None,
                                     "bandwidth_mbps": {"min": 0, "max": 819200} if a // 8 == b // 8 else None},
                   lambda i: i // 32, physical=lambda i: i // 8)
    assert group_gpus(model, 8)["groups"] == [list(range(i, i + 8)) for i in range(0, 64, 8)]
    sixteen = group_gpus(model, 16)["groups"]
    assert all(len({g // 8 for g in group}) == 2 and len({g // 32 for g in group}) == 1 for group in sixteen)


def test_numa_tie_break_prefers_fewer_numa_nodes():
    # all links equal, NUMA nodes interleaved: groups follow NUMA, not index
    model = _model(4, lambda a, b: {"type": "xgmi", "hops": 1, "weight": 15, "xgmi_links": None,
                                    "bandwidth_mbps": None}, lambda i: i % 2)
    assert group_gpus(model, 2)["groups"] == [[0, 2], [1, 3]]


def test_score_partition_matches_result():
    model = mi250x_model()
    result = group_gpus(model, 2)
    strength, xgmi, hops, weight, spread = score_partition(model, result["groups"])
    assert (strength, xgmi, hops, weight, spread) == (16, 4, 4, 60, 4)
    assert result["score"]["numa_spread"] == spread


@pytest.mark.parametrize("size,match", [(3, "does not divide the 8 GPUs"), (0, "positive integer"),
                                        (True, "positive integer")])
def test_bad_sizes(size, match):
    with pytest.raises(GroupingError, match=match):
        group_gpus(mi300x_model(), size)


@pytest.mark.parametrize("topology", [None, {}, {"gpus": []}, {"gpus": [{"index": 0}, {"index": 0}]}])
def test_bad_topologies(topology):
    with pytest.raises(GroupingError):
        group_gpus(topology, 1)


def test_filter_wraps_errors():
    from ansible.errors import AnsibleFilterError

    assert gpu_groups(mi210_model(), 4)["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(AnsibleFilterError, match="gpu_groups"):
        gpu_groups(mi210_model(), 3)


def test_cli_groups_prints_json():
    import json
    import subprocess

    out = subprocess.run([sys.executable, os.path.join(REPO, "bin", "topotune"), "groups", "--size", "4", "--kfd",
                          os.path.join(KFD, "mi210-8gpu-2hive")], check=True, capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert data["size"] == 4 and data["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]] and "score" in data
