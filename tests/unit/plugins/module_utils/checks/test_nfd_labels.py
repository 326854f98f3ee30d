"""Node Feature Discovery labels (module_utils/checks/nfd_labels.py, modules/nfd_features.py): table-driven on the simulated
profiles' topology models, the Kubernetes name and value rules, and the module's file handling."""

import os
import re
import stat

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.checks import nfd_labels as nfd
from ansible_collections.topotune.instinct.plugins.module_utils.core.version import COLLECTION_VERSION
from ansible_collections.topotune.instinct.plugins.modules import nfd_features

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PREFIX = "topotune.feature.node.kubernetes.io"
# k8s.io/apimachinery/pkg/util/validation: qualified name part and label value
K8S_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
PASSING = {"generation": "MI300X", "summary": {"pass": 12, "warn": 2, "fail": 0, "unknown": 6, "total": 20, "worst": "warn"}}
FAILING = {"generation": "MI210", "summary": {"pass": 10, "warn": 1, "fail": 3, "unknown": 6, "total": 20, "worst": "fail"}}


@pytest.mark.parametrize("profile, checks, expected", [
    ("mi300x-8gpu-spx", PASSING, {"gpu.count": "8", "gpu.logical-count": "8", "gpu.compute-partition": "SPX",
                                  "gpu.xgmi-hives": "1", "numa.nodes": "2", "checks.passing": "yes", "checks.failing": "0"}),
    # the real CPX capture: 63 of 64 partitions (one missing), one XCC each
    ("mi300x-8gpu-cpx", PASSING, {"gpu.count": "8", "gpu.logical-count": "63", "gpu.compute-partition": "CPX"}),
    ("mi308x-cpx", PASSING, {"gpu.count": "8", "gpu.logical-count": "32", "gpu.compute-partition": "CPX"}),
    ("mi250x-8gcd", PASSING, {"gpu.count": "8", "gpu.compute-partition": "SPX", "numa.nodes": "4"}),
    ("mi210-8gpu-2hive", FAILING, {"gpu.generation": "MI210", "gpu.xgmi-hives": "2", "checks.passing": "no",
                                   "checks.failing": "3"}),
    ("fault-missing-gpu", PASSING, {"gpu.count": "7", "gpu.logical-count": "7"}),
])
def test_labels_of_the_simulated_profiles(sim_model, profile, checks, expected):
    labels = nfd.node_labels(sim_model(profile), checks, "0.1.0")
    for name, value in expected.items():
        assert labels[name] == value, (name, labels)
    assert labels["gpu.generation"] == checks["generation"] and labels["version"] == "0.1.0"
    assert labels["gpu.memory-partition"] == "unknown"     # the model cannot tell it; no driver file given
    for name, value in labels.items():
        assert K8S_NAME.match(name) and len(name) <= 63
        assert K8S_NAME.match(value) and len(value) <= 63


@pytest.mark.parametrize("gpus, mode", [
    ([], "unknown"),
    ([{"partition": None, "num_xcc": 8}] * 8, "SPX"),
    ([{"partition": {"index": i % 2, "count": 2}, "num_xcc": 4} for i in range(16)], "DPX"),
    ([{"partition": {"index": i % 3, "count": 3}, "num_xcc": 2} for i in range(3)], "TPX"),
    ([{"partition": {"index": i % 4, "count": 4}, "num_xcc": 2} for i in range(32)], "QPX"),
    ([{"partition": {"index": i % 4, "count": 4}, "num_xcc": 1} for i in range(32)], "CPX"),
    # unequal counts of multi-XCC partitions: no single mode
    ([{"partition": {"index": 0, "count": 2}, "num_xcc": 4}, {"partition": {"index": 0, "count": 4}, "num_xcc": 2}], "unknown"),
    ([{"partition": {"index": i, "count": 5}, "num_xcc": 2} for i in range(5)], "unknown"),
])
def test_compute_partition_mode_from_the_model(gpus, mode):
    assert nfd.compute_partition_mode({"gpus": gpus}) == mode


@pytest.mark.parametrize("compute, memory, want_compute, want_memory", [
    ("CPX\n", "NPS4\n", "CPX", "NPS4"),
    ("spx", "nps1", "SPX", "NPS1"),
    # unreadable or unexpected driver text: the model's mode, unknown memory mode
    (None, None, "SPX", "unknown"),
    ("garbage", "NPS", "SPX", "unknown"),
])
def test_driver_partition_files_win(sim_model, compute, memory, want_compute, want_memory):
    labels = nfd.node_labels(sim_model("mi300x-8gpu-spx"), PASSING, "0.1.0", compute, memory)
    assert (labels["gpu.compute-partition"], labels["gpu.memory-partition"]) == (want_compute, want_memory)


@pytest.mark.parametrize("value, label", [
    ("MI300X", "MI300X"),
    (True, "yes"),
    (False, "no"),
    (0, "0"),
    (None, "unknown"),
    ("", "unknown"),
    ("MI300X (HF)", "MI300X-HF"),
    ("--x--", "x"),
    ("a" * 70, "a" * 63),
    ("v1.2.3+build/7", "v1.2.3-build-7"),
    ("ümlaut", "mlaut"),
])
def test_values_become_valid_label_values(value, label):
    assert nfd.label_value(value) == label
    assert K8S_NAME.match(label)


@pytest.mark.parametrize("prefix, ok", [
    (PREFIX, True),
    ("amd.com", True),
    ("Topotune.example.com", False),     # upper case
    ("topotune_x.example.com", False),
    ("-bad.example.com", False),
    ("", False),
    ("a." * 130 + "com", False),          # longer than 253
])
def test_prefix_must_be_a_dns_subdomain(prefix, ok):
    if ok:
        assert nfd.check_prefix(prefix) == prefix
    else:
        with pytest.raises(nfd.LabelError, match="is not a DNS subdomain"):
            nfd.check_prefix(prefix)


@pytest.mark.parametrize("name", ["-gpu", "gpu.", "gpu count", "x" * 64, ""])
def test_bad_names_are_refused(name):
    with pytest.raises(nfd.LabelError, match="is not valid"):
        nfd.check_name(name)


def test_rendered_file_is_sorted_name_value_lines(sim_model):
    text = nfd.render(nfd.node_labels(sim_model("mi210-8gpu-2hive"), FAILING, "0.1.0"), PREFIX)
    lines = text.splitlines()
    assert lines[0].startswith("# ") and text.endswith("\n")
    body = lines[1:]
    assert body == sorted(body) and len(body) == 12
    assert "%s/gpu.xgmi-hives=2" % PREFIX in body and "%s/checks.passing=no" % PREFIX in body
    for line in body:
        name, value = line.split("=", 1)
        prefix, short = name.split("/")
        assert prefix == PREFIX and K8S_NAME.match(short) and K8S_NAME.match(value)


def test_version_is_galaxy_version():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        assert COLLECTION_VERSION == yaml.safe_load(handle)["version"]


# --- the module ----------------------------------------------------------------------------------------------------

def test_module_writes_once_with_check_mode_and_diff(run_module, sim_model, tmp_path):
    path = str(tmp_path / "features.d" / "topotune")
    args = {"path": path, "topology": sim_model("mi308x-cpx"), "checks": PASSING}
    rc, result = run_module(nfd_features, check_mode=True, diff=True, **args)
    assert rc == 0 and result["changed"] and not os.path.exists(path)
    assert "%s/gpu.compute-partition=CPX" % PREFIX in result["diff"][0]["after"]
    rc, result = run_module(nfd_features, diff=True, **args)
    assert rc == 0 and result["changed"] and result["labels"]["gpu.logical-count"] == "32"
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == result["diff"][0]["after"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert os.listdir(os.path.dirname(path)) == ["topotune"]      # no temp file left for nfd-worker
    rc, result = run_module(nfd_features, **args)
    assert rc == 0 and not result["changed"]
    rc, result = run_module(nfd_features, **dict(args, checks=FAILING))
    assert result["changed"] and "%s/checks.failing=3" % PREFIX in open(path, encoding="utf-8").read()
    rc, result = run_module(nfd_features, path=path, state="absent")
    assert rc == 0 and result["changed"] and not os.path.exists(path)


def test_module_reads_the_model_and_driver_files_under_the_sysroot(run_module, sim_tree, tmp_path):
    """No model given: the module reads the KFD topology itself; the driver's partition files win when present."""
    import shutil
    root = str(tmp_path / "root")
    shutil.copytree(sim_tree("mi300x-8gpu-spx"), root, symlinks=True)
    model = nfd_features.load_capture(sysroot=root)
    device = os.path.join(root, "sys/bus/pci/devices", model["physical_devices"][0]["bdf"])
    with open(os.path.join(device, "current_memory_partition"), "w", encoding="utf-8") as handle:
        handle.write("NPS1\n")
    rc, result = run_module(nfd_features, path=str(tmp_path / "topotune"), sysroot=root, checks=PASSING)
    assert rc == 0, result
    assert (result["labels"]["gpu.count"], result["labels"]["gpu.memory-partition"]) == ("8", "NPS1")


def test_module_refuses_a_bad_prefix_naming_it(run_module, tmp_path):
    rc, result = run_module(nfd_features, path=str(tmp_path / "topotune"), prefix="Bad_Prefix", checks=PASSING,
                            topology={"gpus": []})
    assert rc == 1 and "label prefix 'Bad_Prefix' is not a DNS subdomain" in result["msg"]
    assert not os.path.exists(str(tmp_path / "topotune"))


def test_module_without_a_readable_model_says_so(run_module, tmp_path):
    (tmp_path / "empty").mkdir()
    rc, result = run_module(nfd_features, path=str(tmp_path / "topotune"), sysroot=str(tmp_path / "empty"))
    assert rc == 0, result
    assert result["labels"]["gpu.count"] == "0" and result["labels"]["checks.passing"] == "unknown"
