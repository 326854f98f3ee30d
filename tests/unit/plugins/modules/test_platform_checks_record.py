"""The platform_checks module records the options the checks ran with (option ``record``, which the role sets), so
the node-local drift check judges the node by what bring-up used; the record is written like every managed file:
atomically, only when it differs, with check mode and diff."""

import json

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.modules import platform_checks as module
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "etc" / "topotune" / "platform-checks.json"
    monkeypatch.setattr(module, "RECORD", str(path))
    return path


def test_the_options_are_recorded_once_and_the_pending_kernel_parameters_never(record, run_module, sim_tree):
    args = {"sysroot": sim_tree("mi300x-8gpu-spx"), "knowledge": load_knowledge("gpu_generations"), "gpu_count": 8,
            "skip": ["smt"], "expected": {"rocm_version": "6.4.*"}, "pending_cmdline": ["+iommu=pt"], "record": True}
    rc, checked = run_module(module, check_mode=True, diff=True, **args)
    assert rc == 0 and checked["changed"] is True and not record.exists()
    assert checked["diff"][0]["before"] == "" and json.loads(checked["diff"][0]["after"])["gpu_count"] == 8
    rc, first = run_module(module, **args)
    assert rc == 0 and first["changed"] is True
    assert json.loads(record.read_text()) == {
        "generation": None, "gpu_count": 8, "expected": {"rocm_version": "6.4.*"}, "cpu_governor": "",
        "transparent_hugepage": "", "virtualization_host": False, "rdma_gid_index": None, "skip": ["smt"]}
    assert oct(record.stat().st_mode & 0o777) == "0o644"
    assert pc.read_record(str(record)) == json.loads(record.read_text())
    # the node's pending kernel parameters are node state, read again by whoever reads the record
    rc, again = run_module(module, **dict(args, pending_cmdline=[]))
    assert rc == 0 and again["changed"] is False
    rc, changed = run_module(module, **dict(args, gpu_count=4))
    assert changed["changed"] is True and json.loads(record.read_text())["gpu_count"] == 4


def test_without_record_nothing_is_written(record, run_module, sim_tree):
    rc, result = run_module(module, sysroot=sim_tree("mi300x-8gpu-spx"), knowledge=load_knowledge("gpu_generations"))
    assert rc == 0 and result["changed"] is False and not record.exists()


def test_a_missing_record_is_none_and_a_bad_one_is_named(tmp_path):
    assert pc.read_record(str(tmp_path / "absent.json")) is None
    bad = tmp_path / "platform-checks.json"
    bad.write_text("{not json")
    with pytest.raises(pc.PlatformChecksError, match="platform-checks.json is not JSON .*platform_checks again"):
        pc.read_record(str(bad))
    bad.write_text("[1]")
    with pytest.raises(pc.PlatformChecksError, match="is not a JSON object"):
        pc.read_record(str(bad))
    bad.write_text('{"gpu_count": 8, "from_a_later_version": 1}')
    assert pc.read_record(str(bad)) == {"gpu_count": 8}


def test_a_record_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, run_module, sim_tree):
    blocker = tmp_path / "etc"
    blocker.write_text("a file where the record's directory belongs")
    monkeypatch.setattr(module, "RECORD", str(blocker / "topotune" / "platform-checks.json"))
    rc, result = run_module(module, sysroot=sim_tree("mi300x-8gpu-spx"), knowledge=load_knowledge("gpu_generations"),
                            record=True)
    assert rc == 1 and result["msg"].startswith("cannot record the options in %s" % (blocker / "topotune"))
    assert "Traceback" not in result["msg"]
