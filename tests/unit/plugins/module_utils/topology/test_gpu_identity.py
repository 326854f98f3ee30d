"""One GPU identity per node (module_utils/topology/identity.py), and every consumer reading it.

Every device id of knowledge/gpu_generations.yml (physical parts, HF variants, SR-IOV virtual functions, the APU)
goes through every consumer: the platform checks (generation, GPU count, guest handling), the RCCL criterion, the
scale-out advice, gres.conf ``Type=``, the Node Feature Discovery labels, the HTML report, the kernel parameters
kernel_tuning requires, the offline CLI. The expected answers are the knowledge file's own ``devices`` entries
(their ids and names are ROCm/gpu-operator's NFD rule, read by hand).
"""

import copy
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.filter.kernel_params import kernel_params
from ansible_collections.topotune.instinct.plugins.filter.node_topology import node_topology
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.checks.nfd_labels import node_labels
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import (
    by_name,
    generation_entry,
    identify,
    identify_model,
)
from ansible_collections.topotune.instinct.plugins.modules import rccl_bench
from ansible_collections.topotune.instinct.plugins.plugin_utils.bench.advice import fabric_for
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.data import _topology_view

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CLI = os.path.join(REPO, "bin", "topotune")
MI300X_RUN = os.path.join(REPO, "tests", "fixtures", "smi",
                          "rccl-tests_all_reduce_perf__mi300x-8gpu-1node-mpi__rocm-blogs-rccl-xgmi.txt")


def _knowledge(name):
    return load_knowledge(name)


GPU_GENERATIONS = _knowledge("gpu_generations")
GENERATIONS = GPU_GENERATIONS["generations"]
DEVICES = [(gen["name"], dev) for gen in GENERATIONS for dev in gen["devices"]]
IDS = ["%s-%s" % (dev["id"], dev["kind"]) for _name, dev in DEVICES]


def _model(base, device_id):
    """The simulated MI300X node's model with every GPU showing ``device_id`` and no identity yet."""
    model = copy.deepcopy(base)
    model.pop("identity", None)
    for gpu in model["gpus"]:
        gpu["device_id"] = device_id
    return model


def _facts(gen, device_id):
    """Platform-check facts of a correctly set-up node of ``gen`` whose GPUs show ``device_id``."""
    pcie = gen["pcie"]
    count = gen["devices_per_node"] or 4
    return {
        "gpus": [{"bdf": "0000:%02x:00.0" % (0x10 * (i + 1)), "device_id": device_id, "numa_node": i * 2 // count,
                  "current_width": pcie["width"], "max_width": pcie["width"], "current_speed_gts": pcie["speed_gts"],
                  "max_speed_gts": pcie["speed_gts"]} for i in range(count)],
        "cmdline": "ro " + " ".join(gen["kernel_params"]["required"]), "iommu_units": 4, "numa_nodes": 2,
        "packages": 2, "smt_active": "0", "numa_balancing": "0", "thp": "always", "bios_version": "1",
        "cpu_vendor": "AuthenticAMD", "cpus": list(range(64)), "governors": {"performance": list(range(64))},
        "no_cpufreq": [], "cpuidle": None,
    }


@pytest.mark.parametrize("name,device", DEVICES, ids=IDS)
def test_identify_every_device_id(name, device):
    identity = identify([device["id"]] * 8, GENERATIONS)
    assert (identity["generation"], identity["product"], identity["kind"], identity["device_id"]) == (
        name, device["name"], device["kind"], device["id"])
    assert identity["device_ids"] == [device["id"]] and identity["other_device_ids"] == []
    assert identity["how"] == "device id" and identity["reason"] is None
    # the id in any spelling a reader may hand over
    assert identify([device["id"].upper().replace("0X", "")], GENERATIONS)["generation"] == name
    assert identify([int(device["id"], 16)], GENERATIONS)["generation"] == name


@pytest.mark.parametrize("name,device", DEVICES, ids=IDS)
def test_every_consumer_reads_the_identity(name, device, sim_model, run_module):
    gen = generation_entry(GENERATIONS, {"generation": name})
    # discovery: the model carries the identity (the gpu_topology action adds it with this function)
    model = _model(sim_model("mi300x-8gpu-spx"), device["id"])
    model["identity"] = identify_model(model, GENERATIONS)
    assert model["identity"]["product"] == device["name"]

    # platform checks: the generation, every variant counted as a GPU, a guest's host-level checks left to the host
    facts = _facts(gen, device["id"])
    results = {r["id"]: r for r in pc.run_checks(facts, GPU_GENERATIONS)}
    assert results["gpu_generation"]["status"] == "pass" and results["gpu_generation"]["expected"] == name
    assert device["name"] in results["gpu_generation"]["observed"]
    assert results["pci_accelerators"]["observed"] == "%d GPU device(s)" % len(facts["gpus"])
    assert results["pci_accelerators"]["status"] == ("pass" if gen["devices_per_node"] else "unknown")
    guest = results["gpu_pcie_speed_width"]["status"] == "unknown"
    assert guest == (device["kind"] == "vf")

    # the RCCL criterion of the generation is found through the topology's identity
    rc, out = run_module(rccl_bench, output_file=MI300X_RUN, topology=model, gpu_generations=GPU_GENERATIONS,
                         expectations=_knowledge("rccl_expectations"))
    assert rc == 0 and out["comparison"]["generation"] == name
    assert out["comparison"]["generation_from"].startswith("topology identity")
    assert "no expectation entry" not in (out["comparison"].get("reason") or "")

    # scale-out advice: the fabric model of the generation
    assert fabric_for(_knowledge("advice"), topology=model)["generation"] == name

    # a model without identity (an inventory's) gets the same one on the roles' topology chain (gres Type=)
    chained = node_topology({}, _model(model, device["id"]), {})
    assert chained["identity"] == model["identity"]
    assert chained["identity"]["generation"].lower() == name.lower()

    # NFD labels, the report, kernel_tuning's required parameters
    labels = node_labels(model, None, "1.0")
    assert labels["gpu.generation"] == name and labels["gpu.kind"] == device["kind"]
    assert _topology_view(model)["identity"].startswith(name)
    required = ["%s=%s" % (p["name"], p["value"]) if "value" in p else p["name"]
                for p in kernel_params(model, GPU_GENERATIONS)]
    assert required == gen["kernel_params"]["required"]


def test_names_aliases_and_printed_device_names():
    assert identify([], GENERATIONS, "mi250")["generation"] == "MI250X"
    assert identify([], GENERATIONS, "MI350X")["generation"] == "MI355X"
    forced = identify(["0x74a1"], GENERATIONS, "MI999")
    assert forced["generation"] is None and forced["how"] == "given" and "MI999" in forced["reason"]
    # rccl-tests rank lines name the device: "AMD Instinct MI300X VF" is an MI300X
    assert by_name(GENERATIONS, "AMD Instinct MI300X VF")["name"] == "MI300X"
    assert by_name(GENERATIONS, "AMD Radeon RX 7900 XTX") is None


def test_unknown_and_mixed_nodes():
    none = identify([], GENERATIONS)
    assert none["generation"] is None and none["reason"] == "no AMD GPU found"
    radeon = identify(["0x744c", "0x744c"], GENERATIONS)
    assert radeon["generation"] is None and "0x744c" in radeon["reason"]
    mixed = identify(["0x74a1"] * 6 + ["0x740f"] * 2, GENERATIONS)
    assert mixed["generation"] == "MI300X" and mixed["other_device_ids"] == ["0x740f"]
    # an HF node with one non-HF board is still one MI300X node, its ids all counted
    hf = identify(["0x74a9"] * 7 + ["0x74a1"], GENERATIONS)
    assert (hf["generation"], hf["kind"], hf["device_ids"]) == ("MI300X", "hf", ["0x74a1", "0x74a9"])


def test_partitions_count_once(sim_model):
    # CPX: 64 logical GPUs on 8 physical devices, all 0x74a1
    model = sim_model("mi300x-8gpu-cpx64")
    identity = identify_model(model, GENERATIONS)
    assert identity["generation"] == "MI300X" and identity["device_ids"] == ["0x74a1"]


def test_cli_prints_the_identity_and_uses_it_for_gres_type(sim_tree):
    root = sim_tree("mi308x-cpx")
    text = subprocess.run([sys.executable, CLI, "topology", "--sysroot", root, "--format", "text"],
                          capture_output=True, text=True, check=True).stdout
    assert "identity: MI308X (MI308X, physical 0x74a2)" in text
    model = json.loads(subprocess.run([sys.executable, CLI, "topology", "--sysroot", root],
                                      capture_output=True, text=True, check=True).stdout)
    assert model["identity"]["generation"] == "MI308X"
    gres = subprocess.run([sys.executable, CLI, "launch", "--sysroot", root, "--format", "gres"],
                          capture_output=True, text=True, check=True).stdout
    assert " Type=mi308x " in gres


def test_hf_node_is_judged_as_the_mi300x_node_it_is(sim_tree):
    # the simulated HF node (sim/profiles/mi300x-hf-8gpu-spx.yml): 8 GPUs of 0x74a9 under PCI and KFD
    root = sim_tree("mi300x-hf-8gpu-spx")
    facts = pc.gather(root)
    results = {r["id"]: r for r in pc.run_checks(facts, GPU_GENERATIONS)}
    assert results["gpu_generation"]["status"] == "pass" and "0x74a9 MI300X HF" in results["gpu_generation"]["observed"]
    assert (results["pci_accelerators"]["status"], results["pci_accelerators"]["observed"]) == ("pass", "8 GPU device(s)")
    gres = subprocess.run([sys.executable, CLI, "launch", "--sysroot", root, "--format", "gres"],
                          capture_output=True, text=True, check=True).stdout
    assert gres.count(" Type=mi300x ") == 8
