"""managed_state: record and verify a manifest on tmp_path trees, for every entry kind, globs, cpulists and drift."""

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.topotune.instinct.plugins.module_utils import managed_state as ms
from ansible_collections.topotune.instinct.plugins.modules import managed_state as module

GLOB = "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
OWNED = {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}}


@pytest.fixture
def node(tmp_path):
    """A sysroot with 4 CPUs (cpu3 without cpufreq), NUMA balancing off, a managed file and a daemon.json."""
    root = tmp_path / "sim"
    for cpu in range(4):
        d = root / ("sys/devices/system/cpu/cpu%d" % cpu)
        d.mkdir(parents=True)
        if cpu < 3:
            (d / "cpufreq").mkdir()
            (d / "cpufreq/scaling_governor").write_text("performance\n")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/numa_balancing").write_text("0\n")
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "topotune.env").write_text("A=1\n")
    os.chmod(etc / "topotune.env", 0o644)
    (etc / "daemon.json").write_text(json.dumps(dict(OWNED, **{"log-driver": "journald"})))
    (etc / "group").write_text("root:x:0:\nrender:x:110:trainer,alice\nvideo:x:44:\ntrainer:x:1000:\n")
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\ntrainer:x:1000:1000::/home/trainer:/bin/sh\nbob:x:1001:44::/:/bin/sh\n")
    entries = [
        {"owner": "cpu_governor", "sysroot": str(root), "values": [{"path": GLOB, "value": "performance"}],
         "units": [{"name": "topotune-cpu-governor.service", "enabled": True, "active": None}]},
        {"owner": "kernel_tuning", "sysroot": str(root), "values": [["proc/sys/kernel/numa_balancing", 0]]},
        {"owner": "rocm_env", "files": [str(etc / "topotune.env")]},
        {"owner": "container_runtime", "json_keys": [{"path": str(etc / "daemon.json"), "keys": OWNED}],
         "groups": [["trainer", "render"], {"user": "bob", "group": "video"}]},
    ]
    return {"root": root, "etc": etc, "entries": entries}


def units(enabled="enabled"):
    return lambda names: {n: {"enabled": enabled, "active": "inactive", "load": "loaded"} for n in names}


def verify(node, manifest, enabled="enabled"):
    db = ms.read_group_db(str(node["etc"] / "group"), str(node["etc"] / "passwd"))
    return ms.verify_manifest(manifest, unit_states=units(enabled), group_db=db)


def test_record_then_verify_a_clean_node(node):
    manifest = ms.build_manifest(node["entries"])
    state = manifest["owners"]["rocm_env"]["files"][str(node["etc"] / "topotune.env")]
    assert state["mode"] == "0644" and len(state["sha256"]) == 64
    assert manifest["owners"]["cpu_governor"]["values"][0]["matched"] == 3  # cpu3 has no cpufreq
    result = verify(node, manifest)
    # 1 glob + 1 unit flag + 1 value + 1 file + 3 owned json leaves + 2 groups
    assert result == {"checked": 9, "drifted": [], "owners_drifted": []}


def test_every_kind_drifts(node):
    manifest = ms.build_manifest(node["entries"])
    root, etc = node["root"], node["etc"]
    (root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").write_text("powersave\n")
    (root / "proc/sys/kernel/numa_balancing").write_text("1\n")
    os.chmod(etc / "topotune.env", 0o666)
    daemon = json.loads((etc / "daemon.json").read_text())
    daemon["default-ulimits"]["memlock"]["Soft"] = 1024
    daemon["debug"] = True  # unrelated key: never drift
    (etc / "daemon.json").write_text(json.dumps(daemon))
    (etc / "group").write_text("root:x:0:\nrender:x:110:alice\nvideo:x:44:\ntrainer:x:1000:\n")
    result = verify(node, manifest, enabled="disabled")
    by_item = {d["item"]: d for d in result["drifted"]}
    assert set(by_item) == {
        GLOB, "proc/sys/kernel/numa_balancing", str(etc / "topotune.env"),
        "%s#/default-ulimits/memlock/Soft" % (etc / "daemon.json"), "trainer in render", "topotune-cpu-governor.service enabled",
    }
    assert by_item[GLOB]["observed"] == {"powersave": ["sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"]}
    assert by_item["proc/sys/kernel/numa_balancing"] == {
        "owner": "kernel_tuning", "kind": "value", "item": "proc/sys/kernel/numa_balancing",
        "expected": "0", "observed": "1", "corrected": False}
    assert by_item[str(etc / "topotune.env")]["expected"] == {"mode": "0644"}
    assert by_item[str(etc / "topotune.env")]["observed"] == {"mode": "0666"}
    assert by_item["%s#/default-ulimits/memlock/Soft" % (etc / "daemon.json")]["observed"] == 1024
    assert by_item["trainer in render"]["kind"] == "group" and by_item["trainer in render"]["observed"] is False
    assert by_item["topotune-cpu-governor.service enabled"]["observed"] == "disabled"
    assert result["owners_drifted"] == ["container_runtime", "cpu_governor", "kernel_tuning", "rocm_env"]
    summary = ms.summarize(result["drifted"])
    assert "cpu_governor: 1 path(s) of" in summary and "rocm_env: %s mode" % (etc / "topotune.env") in summary


@pytest.mark.parametrize(
    "change,observed",
    [
        (lambda p: p.write_text("A=2\n"), {"sha256"}),
        (lambda p: p.unlink(), "absent"),
    ],
)
def test_file_edited_or_deleted(node, change, observed):
    manifest = ms.build_manifest(node["entries"])
    change(node["etc"] / "topotune.env")
    (item,) = verify(node, manifest)["drifted"]
    assert item["kind"] == "file" and item["owner"] == "rocm_env"
    assert (set(item["observed"]) if isinstance(observed, set) else item["observed"]) == observed


def test_unrelated_json_keys_and_missing_file(node):
    manifest = ms.build_manifest(node["entries"])
    path = node["etc"] / "daemon.json"
    path.write_text(json.dumps(dict(OWNED, **{"debug": True, "registry-mirrors": ["x"]})))
    assert verify(node, manifest)["drifted"] == []
    path.unlink()
    drifted = verify(node, manifest)["drifted"]
    assert len(drifted) == 3 and {d["observed"] for d in drifted} == {"absent"}


def test_glob_that_matched_nothing_and_glob_that_lost_its_matches(node):
    entries = [{"owner": "cpu_governor", "sysroot": str(node["root"]), "values": [{"path": "sys/nothing*/x", "value": "1"}]}]
    assert verify(node, ms.build_manifest(entries))["drifted"] == []
    manifest = ms.build_manifest(node["entries"][:1])
    for cpu in range(3):
        os.unlink(node["root"] / ("sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor" % cpu))
    (item,) = verify(node, manifest)["drifted"]
    assert "no path matches (3 at record time)" == item["observed"]


def test_cpulist_values_skip_cpus_without_the_file(node):
    path = "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
    entries = [{"owner": "cpu_governor", "sysroot": str(node["root"]), "values": [{"path": path, "value": "performance", "cpus": "1-3"}]}]
    manifest = ms.build_manifest(entries)
    assert manifest["owners"]["cpu_governor"]["values"][0]["cpus"] == [1, 2]
    (node["root"] / "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor").write_text("ondemand\n")
    (item,) = verify(node, manifest)["drifted"]
    assert item["observed"] == {"ondemand": ["sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"]}


def test_primary_group_counts_as_membership(node):
    entries = [{"owner": "container_runtime", "groups": [["trainer", "trainer"], ["bob", "video"], ["bob", "nogroup"]]}]
    (item,) = verify(node, ms.build_manifest(entries))["drifted"]
    assert item["item"] == "bob in nogroup" and "does not exist" in item["observed"]


def test_units_parse_and_drift():
    text = "Id=a.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\n\n" \
           "Id=b.service\nLoadState=not-found\nUnitFileState=\nActiveState=inactive\n"
    states = ms.parse_systemctl_show(text, ["a.service", "b.service"])
    assert states["a.service"]["enabled"] == "enabled" and states["b.service"]["load"] == "not-found"
    units = [{"name": "a.service", "enabled": True, "active": True},
             {"name": "b.service", "enabled": True, "active": None}]
    manifest = {"owners": {"x": {"units": units}}}
    result = ms.verify_manifest(manifest, unit_states=lambda names: states)
    assert {(d["item"], d["observed"]) for d in result["drifted"]} == {("a.service active", "inactive"), ("b.service enabled", "not-found")}
    assert result["checked"] == 3


@pytest.mark.parametrize(
    "entries,message",
    [
        ([{"files": []}], "needs owner"),
        ([{"owner": "a", "bogus": []}], "unknown keys bogus"),
        ([{"owner": "a", "files": ["relative"]}], "absolute paths"),
        ([{"owner": "a", "values": [{"path": "x"}]}], "lacks value"),
        ([{"owner": "a", "units": [{"name": "u", "enabled": "yes"}]}], "true, false or null"),
        ([{"owner": "a", "values": [{"path": "x", "value": 1, "cpus": "0-1"}]}], "{cpu} placeholder"),
        ([{"owner": "a", "values": [{"path": "c{cpu}", "value": 1, "cpus": "x"}]}], "not a cpulist"),
        ([{"owner": "a"}, {"owner": "a"}], "given twice"),
        ("nope", "must be a list"),
    ],
)
def test_malformed_entries_name_the_problem(entries, message):
    with pytest.raises(ms.ManifestError, match=message.replace("{", r"\{").replace("}", r"\}")):
        ms.normalize_entries(entries)


def test_merge_keeps_other_owners_and_mark_corrected():
    old = {"owners": {"a": {"files": {}}, "b": {"files": {}}}}
    new = {"owners": {"b": {"files": {"/x": None}}}}
    assert set(ms.merge_manifest(old, new)["owners"]) == {"a", "b"}
    assert set(ms.merge_manifest(old, new, keep_other_owners=False)["owners"]) == {"b"}
    before = [{"owner": "a", "kind": "file", "item": "/x"}, {"owner": "a", "kind": "file", "item": "/y"}]
    after = [{"owner": "a", "kind": "file", "item": "/y", "corrected": False}, {"owner": "b", "kind": "unit", "item": "u"}]
    marked = ms.mark_corrected(before, after)
    assert [(d["item"], d["corrected"]) for d in marked] == [("/x", True), ("/y", False), ("u", False)]


def run(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_module_records_atomically_then_unchanged_then_verifies(node, tmp_path, capsys):
    path = tmp_path / "manifest" / "manifest.json"
    entries = node["entries"][:3]  # no groups: the module reads the real /etc/group
    code, result = run(capsys, state="recorded", path=str(path), entries=entries, _ansible_check_mode=True)
    assert code == 0 and result["changed"] is True and not path.exists()
    assert result["diff"]["before"] == "" and "cpu_governor" in result["diff"]["after"]
    code, result = run(capsys, state="recorded", path=str(path), entries=entries)
    assert code == 0 and result["changed"] is True and path.exists()
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    code, result = run(capsys, state="recorded", path=str(path), entries=entries[:1])
    assert result["changed"] is False  # the other owners are kept, the content is the same
    (node["root"] / "proc/sys/kernel/numa_balancing").write_text("1\n")
    code, result = run(capsys, state="verified", path=str(path), _ansible_check_mode=True)
    assert code == 0 and result["changed"] is False
    assert result["owners_drifted"] == sorted({"kernel_tuning"} | set(result["owners_drifted"]))
    assert "kernel_tuning: proc/sys/kernel/numa_balancing (1)" in result["summary"]
    previous = result["drifted"]
    (node["root"] / "proc/sys/kernel/numa_balancing").write_text("0\n")
    code, result = run(capsys, state="verified", path=str(path), previous=previous)
    numa = [d for d in result["drifted"] if d["item"] == "proc/sys/kernel/numa_balancing"]
    assert numa[0]["corrected"] is True


def test_module_missing_manifest_says_run_site(tmp_path, capsys):
    code, result = run(capsys, state="verified", path=str(tmp_path / "none.json"))
    assert code == 1 and result["failed"] and "run playbooks/site.yml first" in result["msg"]


def test_module_bad_entries_fail_cleanly(tmp_path, capsys):
    code, result = run(capsys, state="recorded", path=str(tmp_path / "m.json"), entries=[{"owner": "a", "files": ["x"]}])
    assert code == 1 and "owner a" in result["msg"]
