"""Pinned versions and sizes (platform_checks_expected, module_utils/checks/expected_values.py): a fleet uniformly on the
wrong ROCm, kernel, OS, BIOS, VBIOS or firmware fails, which cross-node consistency cannot see."""

import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import expected_values as ev
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
KNOWLEDGE = load_knowledge("gpu_generations")


def _by_id(results):
    return {r["id"]: r for r in results}


def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@pytest.fixture
def node(tmp_path):
    """A tree with the files these checks read: Ubuntu 22.04, 2 online blocks of 128 MiB and one offline, and one
    block with only ``state`` (online_movable, a kernel without ``online``)."""
    root = str(tmp_path)
    _write(root, "etc/os-release", 'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n')
    _write(root, ev.MEMORY_DIR + "/block_size_bytes", "8000000\n")
    for block, online in ((0, "1"), (1, "1"), (32, "0")):
        _write(root, "%s/memory%d/online" % (ev.MEMORY_DIR, block), online + "\n")
    _write(root, ev.MEMORY_DIR + "/memory40/state", "online_movable\n")
    return root


def test_gather_reads_os_release_and_online_memory(node):
    assert ev.gather(node) == {"os_release": "ubuntu 22.04", "online_memory_bytes": 3 * 0x8000000,
                               "offline_memory_bytes": 0x8000000,
                               "os_release_fields": {"PRETTY_NAME": "Ubuntu 22.04.5 LTS", "VERSION_ID": "22.04",
                                                     "ID": "ubuntu"}}
    assert ev.gather(os.path.join(node, "absent")) == {"os_release": None, "os_release_fields": None,
                                                       "online_memory_bytes": None, "offline_memory_bytes": None}


def _facts(node, **health):
    facts = {"bios_version": "1.2.3", "expected": ev.gather(node),
             "health": dict({"rocm_version": "6.4.1-112", "kernel_release": "6.8.0-45-generic",
                             "gpus": [{"bdf": "0000:0c:00.0", "vbios": "113-M3000100-102",
                                       "firmware": {"mec": "0x000000b1", "sos": "0x0036024b"}},
                                      {"bdf": "0000:22:00.0", "vbios": "113-M3000100-102",
                                       "firmware": {"mec": "0x000000a9", "sos": "0x0036024b"}}]}, **health)}
    return facts


def test_every_key_is_a_check_of_its_own(node):
    expected = ev.check_expected({"rocm_version": "6.4.*", "kernel_release": ["6.8.0-45-generic", "6.8.0-48-generic"],
                                  "os_release": "ubuntu 24.04", "bios_version": "1.2.3", "vbios": "113-M3000100-102",
                                  "firmware": {"mec": "0x000000b1", "sos": "0x0036024b"}, "min_online_memory_gib": 1})
    res = _by_id(ev.run_checks(_facts(node), expected))
    # min_online_memory_gib is no check of its own: it is the minimum of platform_checks' online_memory
    assert set(res) == {"expected_rocm_version", "expected_kernel_release", "expected_os_release", "bios_version",
                        "expected_vbios", "expected_firmware"}
    assert [res[i]["status"] for i in ("expected_rocm_version", "expected_kernel_release", "bios_version",
                                       "expected_vbios")] == ["pass"] * 4
    # a uniformly wrong OS, one GPU on other MEC firmware
    assert (res["expected_os_release"]["status"], res["expected_os_release"]["observed"]) == ("fail", "ubuntu 22.04")
    assert res["expected_firmware"]["status"] == "fail" and res["expected_firmware"]["observed"] == \
        "0000:22:00.0 mec 0x000000a9"
    assert res["bios_version"]["cvs"] == "test_check_bios_version"


def test_unreadable_values_are_unknown_never_pass(tmp_path):
    facts = {"bios_version": None, "expected": ev.gather(str(tmp_path)),
             "health": {"rocm_version": None, "kernel_release": None,
                        "gpus": [{"bdf": "0000:0c:00.0", "vbios": None, "firmware": {}}]}}
    expected = ev.check_expected({"rocm_version": "6.4.1", "os_release": "ubuntu 22.04", "bios_version": "1",
                                  "vbios": "x", "firmware": {"mec": "1"}, "min_online_memory_gib": 1})
    assert {r["status"] for r in ev.run_checks(facts, expected)} == {"unknown"}


def test_nothing_pinned_reports_the_bios_and_checks_nothing_else(node):
    facts = _facts(node)
    assert ev.run_checks(facts, ev.check_expected({})) == []
    assert ev.check_expected({"rocm_version": "", "firmware": {}}) == {}


@pytest.mark.parametrize("value,message", [
    ({"rocm": "6.4"}, "unknown key(s) rocm: use rocm_version"),
    ({"rocm_version": 6.4}, "platform_checks_expected.rocm_version must be a version string"),
    ({"firmware": "0xb1"}, "platform_checks_expected.firmware must map firmware names"),
    ({"firmware": {"mec": [""]}}, "platform_checks_expected.firmware.mec must be a version string"),
    ({"min_online_memory_gib": "2T"}, "min_online_memory_gib must be a positive number of GiB"),
    ("6.4", "platform_checks_expected must be a mapping"),
])
def test_wrong_values_name_the_variable_and_the_fix(value, message):
    with pytest.raises(ev.ExpectedError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ev.check_expected(value)


def test_platform_checks_run_them(sim_tree):
    # the simulated MI300X node: ROCm absent, kernel 6.8.0-45-generic, BIOS 1.0.0, VBIOS 113-M3000100-102
    facts = pc.gather(sim_tree("mi300x-8gpu-spx"))
    opts = {"expected": {"kernel_release": "6.8.*", "bios_version": "2.*", "vbios": "113-M3000100-102"}}
    res = _by_id(pc.run_checks(facts, KNOWLEDGE, opts))
    assert (res["expected_kernel_release"]["status"], res["bios_version"]["status"], res["expected_vbios"]["status"]) \
        == ("pass", "fail", "pass")
    assert "platform_checks_expected.bios_version" in res["bios_version"]["remediation"]
    assert res["expected_vbios"]["observed"] == "8 GPU(s) as expected"
    # without a pin the BIOS version is reported, any accepted
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["bios_version"]["expected"].startswith("any")
