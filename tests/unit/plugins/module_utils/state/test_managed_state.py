"""managed_state: record and verify a manifest on tmp_path trees, for every entry kind, globs, cpulists and drift."""

import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.filter.drift_line import drift_line
from ansible_collections.topotune.instinct.plugins.filter.drift_reports import drift_reports
from ansible_collections.topotune.instinct.plugins.module_utils.state import drift_metrics
from ansible_collections.topotune.instinct.plugins.module_utils.state import managed_state as ms
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
    units = tmp_path / "units"
    unit_file(units, "/etc/systemd/system/topotune-cpu-governor.service", WANTED)
    enable(units, "topotune-cpu-governor.service")
    entries = [
        {"owner": "cpu_governor", "sysroot": str(root), "values": [{"path": GLOB, "value": "performance"}],
         "units": [{"name": "topotune-cpu-governor.service", "enabled": True, "active": None}]},
        {"owner": "kernel_tuning", "sysroot": str(root), "values": [["proc/sys/kernel/numa_balancing", 0]]},
        {"owner": "rocm_env", "files": [str(etc / "topotune.env")]},
        {"owner": "container_runtime", "json_keys": [{"path": str(etc / "daemon.json"), "keys": OWNED}],
         "groups": [["trainer", "render"], {"user": "bob", "group": "video"}]},
    ]
    return {"root": root, "etc": etc, "units": units, "entries": entries}


WANTED = "[Unit]\nDescription=x\n[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
STATIC = "[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n"


def unit_file(root, path, content):
    full = root / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(content)


def link(root, path, target):
    full = root / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, full)


def enable(root, name, config="/etc/systemd/system", target="multi-user.target"):
    """The link `systemctl enable` creates (``--runtime``: config /run/systemd/system)."""
    link(root, "%s/%s.wants/%s" % (config, target, name), "/etc/systemd/system/" + name)


def verify(node, manifest):
    db = ms.read_group_db(str(node["etc"] / "group"), str(node["etc"] / "passwd"))
    return ms.verify_manifest(manifest, group_db=db, unit_root=str(node["units"]))


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
    # the wants link removed by hand, without `systemctl daemon-reload`: the running manager would still say enabled
    os.unlink(node["units"] / "etc/systemd/system/multi-user.target.wants/topotune-cpu-governor.service")
    result = verify(node, manifest)
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


def test_units_active_from_systemctl_show_enabled_from_disk(tmp_path):
    text = "Id=a.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState=inactive\n\n" \
           "Id=b.service\nLoadState=not-found\nUnitFileState=\nActiveState=inactive\n"
    states = ms.parse_systemctl_show(text, ["a.service", "b.service"])
    assert states["a.service"]["active"] == "inactive" and states["b.service"]["load"] == "not-found"
    unit_file(tmp_path, "/etc/systemd/system/a.service", WANTED)
    enable(tmp_path, "a.service")
    units = [{"name": "a.service", "enabled": True, "active": True},
             {"name": "b.service", "enabled": True, "active": None}]
    asked = []
    manifest = {"owners": {"x": {"units": units}}}
    result = ms.verify_manifest(manifest, unit_states=lambda names: asked.append(names) or states, unit_root=str(tmp_path))
    assert {(d["item"], d["observed"]) for d in result["drifted"]} == {("a.service active", "inactive"), ("b.service enabled", "not-found")}
    assert result["checked"] == 3
    assert asked == [["a.service"]]  # systemctl is asked only about units whose active flag is watched


def test_no_systemctl_call_when_no_unit_is_watched_active(node):
    manifest = ms.build_manifest(node["entries"])
    db = ms.read_group_db(str(node["etc"] / "group"), str(node["etc"] / "passwd"))
    result = ms.verify_manifest(manifest, unit_states=lambda names: pytest.fail("systemctl asked about %s" % names),
                                group_db=db, unit_root=str(node["units"]))
    assert result["drifted"] == []


# (name, how the tree is built, what systemctl is-enabled says). Every case is also checked against the real
# `systemctl --root=<tree> is-enabled` below when systemctl is installed.
def _disabled_by_hand(t):
    unit_file(t, "/etc/systemd/system/x.service", WANTED)  # wants link never made, or removed without a reload


def _enabled(t):
    unit_file(t, "/etc/systemd/system/x.service", WANTED)
    enable(t, "x.service")


def _masked(t):
    link(t, "/etc/systemd/system/x.service", "/dev/null")  # what `rm` + `systemctl mask` leave
    enable(t, "x.service")


def _masked_empty_file(t):
    unit_file(t, "/etc/systemd/system/x.service", "")


def _masked_runtime(t):
    unit_file(t, "/usr/lib/systemd/system/x.service", WANTED)
    link(t, "/run/systemd/system/x.service", "/dev/null")  # systemctl mask --runtime
    enable(t, "x.service")


def _runtime_mask_shadowed(t):
    # systemctl mask --runtime of a unit whose file is in /etc: /etc comes first on the search path, no effect
    _enabled(t)
    link(t, "/run/systemd/system/x.service", "/dev/null")


def _enabled_runtime(t):
    unit_file(t, "/etc/systemd/system/x.service", WANTED)
    enable(t, "x.service", config="/run/systemd/system")


def _static(t):
    unit_file(t, "/usr/lib/systemd/system/x.service", STATIC)


def _vendor_wants_only(t):
    # a package's own multi-user.target.wants link does not make a unit with [Install] "enabled"
    unit_file(t, "/usr/lib/systemd/system/x.service", WANTED)
    link(t, "/usr/lib/systemd/system/multi-user.target.wants/x.service", "../x.service")


def _vendor_wants_static(t):
    unit_file(t, "/usr/lib/systemd/system/x.service", STATIC)
    link(t, "/usr/lib/systemd/system/sysinit.target.wants/x.service", "../x.service")


def _indirect_also(t):
    unit_file(t, "/usr/lib/systemd/system/x.service", STATIC + "[Install]\nAlso=y.service\n")
    unit_file(t, "/usr/lib/systemd/system/y.service", WANTED)


def _install_in_dropin(t):
    unit_file(t, "/etc/systemd/system/x.service", STATIC)
    unit_file(t, "/etc/systemd/system/x.service.d/install.conf", "[Install]\nWantedBy=multi-user.target\n")


def _alias(t):
    unit_file(t, "/usr/lib/systemd/system/y.service", WANTED + "Alias=x.service\n")
    link(t, "/etc/systemd/system/x.service", "/usr/lib/systemd/system/y.service")


def _linked(t):
    unit_file(t, "/opt/units/x.service", WANTED)
    link(t, "/etc/systemd/system/x.service", "/opt/units/x.service")  # systemctl link


def _linked_and_enabled(t):
    _linked(t)
    link(t, "/etc/systemd/system/multi-user.target.wants/x.service", "/opt/units/x.service")


def _instance_enabled(t):
    unit_file(t, "/etc/systemd/system/x@.service", WANTED)
    link(t, "/etc/systemd/system/multi-user.target.wants/x@a.service", "/etc/systemd/system/x@.service")


def _alias_enabled(t):
    unit_file(t, "/etc/systemd/system/x.service", WANTED.replace("WantedBy", "Alias=z.service\nWantedBy"))
    link(t, "/etc/systemd/system/z.service", "/etc/systemd/system/x.service")


def _generated(t):
    unit_file(t, "/run/systemd/generator/x.service", STATIC)


def _not_found(t):
    unit_file(t, "/etc/systemd/system/other.service", WANTED)


def _dangling(t):
    link(t, "/etc/systemd/system/x.service", "/nowhere/x.service")


def _directory(t):
    (t / "etc/systemd/system/x.service").mkdir(parents=True)


UNIT_CASES = [
    ("x.service", _enabled, "enabled"),
    ("x.service", _disabled_by_hand, "disabled"),
    ("x.service", _masked, "masked"),
    ("x.service", _masked_empty_file, "masked"),
    ("x.service", _masked_runtime, "masked-runtime"),
    ("x.service", _runtime_mask_shadowed, "enabled"),
    ("x.service", _enabled_runtime, "enabled-runtime"),
    ("x.service", _static, "static"),
    ("x.service", _vendor_wants_only, "disabled"),
    ("x.service", _vendor_wants_static, "static"),
    ("x.service", _indirect_also, "indirect"),
    ("x.service", _install_in_dropin, "disabled"),
    ("x.service", _alias, "alias"),
    ("x.service", _linked, "linked"),
    ("x.service", _linked_and_enabled, "enabled"),
    ("x@a.service", _instance_enabled, "enabled"),
    ("x@b.service", _instance_enabled, "disabled"),
    ("x.service", _alias_enabled, "enabled"),
    ("x.service", _generated, "generated"),
    ("x.service", _not_found, "not-found"),
    ("x.service", _dangling, "not-found"),
    ("x.service", _directory, "bad"),
]


@pytest.mark.parametrize("name,build,state", UNIT_CASES, ids=[c[1].__name__.strip("_") + "-" + c[0] for c in UNIT_CASES])
def test_unit_file_state_reads_the_disk(tmp_path, name, build, state):
    build(tmp_path)
    assert ms.unit_file_state(name, str(tmp_path)) == state


SYSTEMCTL = shutil.which("systemctl")


@pytest.mark.skipif(SYSTEMCTL is None, reason="needs systemctl (its --root mode reads a tree without a manager)")
@pytest.mark.parametrize("name,build,state", UNIT_CASES, ids=[c[1].__name__.strip("_") + "-" + c[0] for c in UNIT_CASES])
def test_unit_file_state_agrees_with_systemctl(tmp_path, name, build, state):
    build(tmp_path)
    proc = subprocess.run([SYSTEMCTL, "--root=%s" % tmp_path, "is-enabled", name], capture_output=True, text=True, check=False)
    # systemctl prints nothing for a unit it cannot resolve ("No such file or directory", "Is a directory")
    expected = proc.stdout.strip() or ("bad" if "Is a directory" in proc.stderr else "not-found")
    assert (expected, ms.unit_file_state(name, str(tmp_path))) == (state, state)


@pytest.mark.skipif(SYSTEMCTL is None, reason="needs systemctl")
def test_unit_file_state_agrees_with_systemctl_on_this_machine():
    """Every unit file of the machine running the tests (Debian: ~200, every state but the runtime ones)."""
    out = subprocess.run([SYSTEMCTL, "--root=/", "list-unit-files", "--no-legend", "--no-pager"],
                         capture_output=True, text=True, check=False).stdout
    listed = [line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2]
    if not listed:
        pytest.skip("systemctl lists no unit files here")
    assert [(n, s) for n, s in listed if ms.unit_file_state(n, "/") != s] == []


def test_unit_disabled_by_hand_or_masked_drifts(node):
    manifest = ms.build_manifest(node["entries"])
    units = node["units"]
    os.unlink(units / "etc/systemd/system/multi-user.target.wants/topotune-cpu-governor.service")
    (item,) = verify(node, manifest)["drifted"]
    assert (item["item"], item["expected"], item["observed"]) == ("topotune-cpu-governor.service enabled", True, "disabled")
    enable(units, "topotune-cpu-governor.service")
    assert verify(node, manifest)["drifted"] == []
    os.unlink(units / "etc/systemd/system/topotune-cpu-governor.service")
    link(units, "/etc/systemd/system/topotune-cpu-governor.service", "/dev/null")
    (item,) = verify(node, manifest)["drifted"]
    assert item["observed"] == "masked"


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


def test_module_records_atomically_then_unchanged_then_verifies(node, tmp_path, run_module):
    path = tmp_path / "manifest" / "manifest.json"
    entries = node["entries"][:3]  # no groups: the module reads the real /etc/group
    code, result = run_module(module, state="recorded", path=str(path), entries=entries, check_mode=True)
    assert code == 0 and result["changed"] is True and not path.exists()
    assert result["diff"]["before"] == "" and "cpu_governor" in result["diff"]["after"]
    code, result = run_module(module, state="recorded", path=str(path), entries=entries)
    assert code == 0 and result["changed"] is True and path.exists()
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    code, result = run_module(module, state="recorded", path=str(path), entries=entries[:1])
    assert result["changed"] is False  # the other owners are kept, the content is the same
    (node["root"] / "proc/sys/kernel/numa_balancing").write_text("1\n")
    code, result = run_module(module, state="verified", path=str(path), check_mode=True)
    assert code == 0 and result["changed"] is False
    assert result["owners_drifted"] == sorted({"kernel_tuning"} | set(result["owners_drifted"]))
    assert "kernel_tuning: proc/sys/kernel/numa_balancing (1)" in result["summary"]
    previous = result["drifted"]
    (node["root"] / "proc/sys/kernel/numa_balancing").write_text("0\n")
    code, result = run_module(module, state="verified", path=str(path), previous=previous)
    numa = [d for d in result["drifted"] if d["item"] == "proc/sys/kernel/numa_balancing"]
    assert numa[0]["corrected"] is True


GOOD = {"version": 1, "owners": {"rocm_env": {"files": {"/etc/x": None}}}}


@pytest.mark.parametrize("content,state,reason", [
    (None, "missing", "no such file"),
    (b"", "unreadable", "empty file (0 bytes)"),
    (b"\n  \n", "unreadable", "empty file (4 bytes)"),
    (json.dumps(GOOD).encode()[:25], "unreadable", "not valid JSON"),
    (b"{ this is not json", "unreadable", "not valid JSON"),
    (b"\xff\xfe{}", "unreadable", "not UTF-8"),
    (b"[1, 2]", "unreadable", "a JSON list, not an object"),
    (b"{}", "unreadable", "no owners mapping"),
    (b'{"owners": {"a": {"files": ["/x"]}}}', "unreadable", "owner a: files is not a mapping"),
    (b'{"owners": {"a": {"values": [{"path": "x"}]}}}', "unreadable", "owner a: values entry"),
    (b'{"owners": {"a": {"values": [{"path": "x", "value": "1", "cpus": "0-3"}]}}}', "unreadable", "cpus or matched"),
    (b'{"owners": {"a": {"units": [{"name": "u", "enabled": "yes"}]}}}', "unreadable", "not true, false or null"),
    (b'{"owners": {"a": {"json_keys": [{"path": "/d", "keys": []}]}}}', "unreadable", "json_keys entry"),
    (b'{"owners": {"a": {"dirs": "/etc/topotune/env"}}}', "unreadable", "dirs is not a list"),
    (b'{"owners": {"a": 3}}', "unreadable", "owner a: is not a mapping"),
    (json.dumps(GOOD).encode(), "ok", None),
])
def test_manifest_states(tmp_path, content, state, reason):
    path = tmp_path / "manifest.json"
    if content is not None:
        path.write_bytes(content)
    got_state, manifest, got_reason = ms.load_manifest(str(path))
    assert got_state == state and (manifest is not None) == (state == "ok")
    assert (got_reason is None) if reason is None else (reason in got_reason), got_reason
    result = ms.verify_path(str(path))
    assert result["manifest_state"] == state
    if state != "ok":
        # its own state, not a task failure: one item standing for the whole node, nothing else checked
        assert result["checked"] == 0 and result["owners_drifted"] == ["manifest"]
        (item,) = result["drifted"]
        assert item == {"owner": "manifest", "kind": "manifest", "item": str(path), "expected": "recorded by playbooks/site.yml",
                        "observed": state if state == "missing" else "unreadable: " + got_reason, "corrected": False}
        assert "run playbooks/site.yml" in ms.summarize(result["drifted"])


def test_manifest_unreadable_as_a_directory(tmp_path):
    (tmp_path / "manifest.json").mkdir()
    state, _manifest, reason = ms.load_manifest(str(tmp_path / "manifest.json"))
    assert state == "unreadable" and reason == "Is a directory"


@pytest.mark.parametrize("damage,state", [
    (lambda p: p.unlink(), "missing"),
    (lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), "unreadable"),
    (lambda p: p.write_text(""), "unreadable"),
    (lambda p: p.write_text("garbage{"), "unreadable"),
])
def test_module_reports_a_manifest_problem_without_failing(node, tmp_path, run_module, monkeypatch, damage, state):
    warned = []
    monkeypatch.setattr(module.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    path = tmp_path / "m" / "manifest.json"
    code, _result = run_module(module, state="recorded", path=str(path), entries=node["entries"][2:3])
    damage(path)
    code, result = run_module(module, state="verified", path=str(path))
    assert code == 0 and not result.get("failed") and result["changed"] is False
    assert result["manifest_state"] == state and result["checked"] == 0 and result["remaining"] == 1
    assert [d["kind"] for d in result["drifted"]] == ["manifest"]
    assert len(warned) == 1 and "run playbooks/site.yml" in warned[0] and "is %s" % state in warned[0]
    assert "nothing verified; run playbooks/site.yml" in result["summary"]
    # a correction records the manifest again; the item is then corrected
    previous = result["drifted"]
    run_module(module, state="recorded", path=str(path), entries=node["entries"][2:3])
    code, result = run_module(module, state="verified", path=str(path), previous=previous)
    assert result["manifest_state"] == "ok" and result["remaining"] == 0
    assert [(d["kind"], d["corrected"]) for d in result["drifted"]] == [("manifest", True)]


@pytest.mark.parametrize("replace,observed", [
    (lambda p: (p.unlink(), os.symlink("/dev/null", p)), {"type": "symlink", "target": "/dev/null"}),
    (lambda p: (p.rename(str(p) + ".orig"), os.symlink(str(p) + ".orig", p)), {"type": "symlink"}),
    (lambda p: (p.unlink(), p.mkdir()), {"type": "directory"}),
])
def test_file_replaced_by_a_symlink_or_a_directory(node, replace, observed):
    manifest = ms.build_manifest(node["entries"])
    path = node["etc"] / "topotune.env"
    replace(path)
    (item,) = verify(node, manifest)["drifted"]
    assert item["kind"] == "file" and item["expected"] == {"type": "file"}
    assert {k: v for k, v in item["observed"].items() if k in observed} == observed
    assert item["observed"]["type"] == observed["type"]


def test_file_owner_changed(node):
    manifest = ms.build_manifest(node["entries"])
    path = str(node["etc"] / "topotune.env")
    manifest["owners"]["rocm_env"]["files"][path]["owner"] = "someone-else"  # as if recorded under another owner
    (item,) = verify(node, manifest)["drifted"]
    assert item["expected"] == {"owner": "someone-else"} and set(item["observed"]) == {"owner"}


def test_a_symlink_recorded_as_such_does_not_drift(tmp_path):
    os.symlink("/etc/hostname", tmp_path / "link")
    manifest = ms.build_manifest([{"owner": "a", "files": [str(tmp_path / "link")]}])
    assert manifest["owners"]["a"]["files"][str(tmp_path / "link")] == {"type": "symlink", "target": "/etc/hostname"}
    assert ms.verify_manifest(manifest)["drifted"] == []


def owned_tree(tmp_path):
    """/etc/topotune-like tree: env/ (rocm_env), container/ (container_runtime), the manifest at the top."""
    top = tmp_path / "topotune"
    for sub in ("env", "container"):
        (top / sub).mkdir(parents=True)
    (top / "env/p.env").write_text("A=1\n")
    (top / "container/all.flags").write_text("--x\n")
    (top / "manifest.json").write_text("{}")
    (top / "run.lock").write_text("")  # the top directory is not watched: manifest, lock
    other = tmp_path / "profile.d"
    other.mkdir()
    (other / "topotune.sh").write_text("x\n")
    entries = [{"owner": "rocm_env", "files": [str(top / "env/p.env"), str(other / "topotune.sh")]},
               {"owner": "container_runtime", "files": [str(top / "container/all.flags")]}]
    return top, other, ms.build_manifest(entries, owned_root=str(top))


def test_owned_dirs_are_recorded_below_the_owned_root_only(tmp_path):
    top, _other, manifest = owned_tree(tmp_path)
    assert manifest["owners"]["rocm_env"]["dirs"] == [str(top / "env")]
    assert manifest["owners"]["container_runtime"]["dirs"] == [str(top / "container")]
    assert ms.build_manifest([{"owner": "a", "files": [str(top / "env/p.env")]}])["owners"]["a"]["dirs"] == []
    assert ms.owned_dirs(["/etc/topotune/manifest.json", "/etc/topotune/env/p.env", "/etc/topotune-x/y"], "/etc/topotune") \
        == ["/etc/topotune/env"]


def test_stale_entries_are_reported_for_the_owner_of_their_directory(tmp_path):
    top, other, manifest = owned_tree(tmp_path)
    clean = ms.verify_manifest(manifest)
    assert clean["drifted"] == [] and clean["checked"] == 3 + 2 + 1  # 3 files, 2 owned directories, the owned root
    (top / "env/old.env").write_text("B=2\n")
    (top / "container/retired.flags").write_text("")
    (top / "container/sub").mkdir()
    os.symlink("/etc/hostname", top / "env/link.env")
    (other / "unrelated.sh").write_text("")  # a directory topotune shares: never stale
    (top / "notes.txt").write_text("")  # the top directory: never stale
    drifted = ms.verify_manifest(manifest)["drifted"]
    assert [(d["owner"], d["kind"], d["item"], d["expected"], d["observed"]) for d in drifted] == [
        ("container_runtime", "stale", str(top / "container/retired.flags"), "absent", "file"),
        ("container_runtime", "stale", str(top / "container/sub"), "absent", "directory (empty)"),
        ("rocm_env", "stale", str(top / "env/link.env"), "absent", "symlink to /etc/hostname"),
        ("rocm_env", "stale", str(top / "env/old.env"), "absent", "file"),
    ]
    assert "stale %s (file)" % (top / "env/old.env") in ms.summarize(drifted).split("rocm_env: ")[1]


def stale_items(manifest):
    return [(d["owner"], d["item"], d["expected"], d["observed"]) for d in ms.verify_manifest(manifest)["drifted"]
            if d["kind"] == "stale"]


def test_a_directory_moved_aside_in_the_owned_root_is_stale_for_the_owner_it_was(tmp_path):
    top, _other, manifest = owned_tree(tmp_path)
    assert manifest["owned_root"] == str(top)
    os.rename(top / "container", top / "container.bak")  # an operator's mv container container.bak
    (top / "env.old").mkdir()
    (top / "env.old/sub").mkdir()
    (top / "env.old/sub/x.env").write_text("")
    (top / "scratch").mkdir()  # no owner's directory name begins it: the first owner by name
    (top / "drift-exporter").mkdir()  # the drift check's own configuration: written by topotune, never stale
    (top / "drift-exporter/config.json").write_text("{}")
    (top / "notes.txt").write_text("")  # files in the owned root are not watched (the manifest, the reboot record)
    os.symlink(str(top / "env"), top / "env-link")  # nor symlinks there: only directories left behind
    drifted = ms.verify_manifest(manifest)["drifted"]
    assert [(d["owner"], d["kind"], d["item"], d["expected"], d["observed"]) for d in drifted] == [
        ("container_runtime", "file", str(top / "container/all.flags"), ms.file_state(str(top / "container.bak/all.flags")),
         "absent"),
        ("container_runtime", "stale", str(top / "container.bak"), "absent", "directory (1 entry)"),
        ("container_runtime", "stale", str(top / "scratch"), "absent", "directory (empty)"),
        ("rocm_env", "stale", str(top / "env.old"), "absent", "directory (2 entries)"),
    ]
    assert "stale %s (directory (1 entry))" % (top / "container.bak") in ms.summarize(drifted)


def test_directories_on_the_way_to_an_owned_directory_are_watched_for_directories_only(tmp_path):
    top = tmp_path / "topotune"
    (top / "launch/groups").mkdir(parents=True)
    (top / "launch/groups/g0.env").write_text("")
    manifest = ms.build_manifest([{"owner": "launch_templates", "files": [str(top / "launch/groups/g0.env")]}],
                                 owned_root=str(top))
    assert manifest["owners"]["launch_templates"]["dirs"] == [str(top / "launch/groups")]
    assert ms.verify_manifest(manifest) == {"checked": 1 + 3, "drifted": [], "owners_drifted": []}
    (top / "launch/groups.2025").mkdir()
    (top / "launch/README").write_text("")  # a file on the way: not watched
    assert stale_items(manifest) == [("launch_templates", str(top / "launch/groups.2025"), "absent", "directory (empty)")]


def test_a_manifest_without_owned_root_watches_the_owned_directories_only(tmp_path):
    top, _other, manifest = owned_tree(tmp_path)
    del manifest["owned_root"]  # recorded before the owned root was kept
    (top / "container.bak").mkdir()
    (top / "env/old").mkdir()
    assert stale_items(manifest) == [("rocm_env", str(top / "env/old"), "absent", "directory (empty)")]


def test_an_owned_directory_replaced_by_a_symlink_is_stale_and_never_listed_through(tmp_path):
    top, _other, manifest = owned_tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "p.env").write_text("A=1\n")
    (outside / "precious").write_text("keep me\n")
    shutil.rmtree(top / "env")
    os.symlink(str(outside), top / "env")  # mv env /elsewhere; ln -s /elsewhere env
    assert stale_items(manifest) == [("rocm_env", str(top / "env"), "directory", "symlink to %s" % outside)]
    shutil.rmtree(top / "container")
    (top / "container").write_text("")  # a file where the owned directory belongs
    assert ("container_runtime", str(top / "container"), "directory", "file") in stale_items(manifest)
    drifted = ms.verify_manifest(manifest)["drifted"]
    plan = ms.prune_plan(manifest, drifted)
    assert plan == [(str(top / "container"), "file in place of a topotune directory"),
                    (str(top / "env"), "symlink to %s in place of a topotune directory" % outside)]
    for path, _why in plan:
        assert ms.remove_entry(path) is True
    assert sorted(os.listdir(outside)) == ["p.env", "precious"] and not os.path.lexists(top / "env")


def test_a_symlink_on_the_way_hides_nothing_and_is_itself_stale(tmp_path):
    top = tmp_path / "topotune"
    (top / "launch/groups").mkdir(parents=True)
    (top / "launch/groups/g0.env").write_text("")
    manifest = ms.build_manifest([{"owner": "launch_templates", "files": [str(top / "launch/groups/g0.env")]}],
                                 owned_root=str(top))
    outside = tmp_path / "etc"
    (outside / "groups").mkdir(parents=True)
    (outside / "groups/g0.env").write_text("")
    (outside / "groups/passwd").write_text("root:x:0:0\n")
    shutil.rmtree(top / "launch")
    os.symlink(str(outside), top / "launch")
    assert stale_items(manifest) == [("launch_templates", str(top / "launch"), "directory", "symlink to %s" % outside)]


def test_a_stale_directory_is_removed_with_its_content_but_never_through_a_link(tmp_path, run_module):
    top = tmp_path / "topotune"
    (top / "container").mkdir(parents=True)
    (top / "container/all.flags").write_text("--x\n")
    path = top / "manifest.json"
    run_module(module, state="recorded", path=str(path),
               entries=[{"owner": "container_runtime", "files": [str(top / "container/all.flags")]}])
    assert json.loads(path.read_text())["owned_root"] == str(top)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data").write_text("keep\n")
    shutil.copytree(top / "container", top / "container.bak")
    (top / "container.bak/nested").mkdir()
    os.symlink(str(victim), top / "container.bak/nested/out")  # a link out of topotune's directories
    os.symlink(str(victim / "data"), top / "container.bak/data-link")
    code, found = run_module(module, state="verified", path=str(path))
    assert [(d["kind"], d["item"], d["observed"]) for d in found["drifted"]] == [
        ("stale", str(top / "container.bak"), "directory (4 entries)")]
    code, result = run_module(module, state="pruned", path=str(path), previous=found["drifted"], check_mode=True)
    assert result["removed"] == [{"path": str(top / "container.bak"), "why": "stale directory (4 entries)"}]
    assert (top / "container.bak").is_dir()
    code, result = run_module(module, state="pruned", path=str(path), previous=found["drifted"])
    assert code == 0 and result["changed"] is True and not os.path.lexists(top / "container.bak")
    assert (victim / "data").read_text() == "keep\n"
    code, after = run_module(module, state="verified", path=str(path))
    assert after["drifted"] == [] and after["manifest_state"] == "ok"


def test_a_large_stale_directory_is_counted_up_to_a_limit(tmp_path):
    top, _other, manifest = owned_tree(tmp_path)
    big = top / "env.bak"
    big.mkdir()
    for i in range(ms._COUNT_LIMIT + 5):
        (big / ("f%d" % i)).write_text("")
    assert stale_items(manifest) == [("rocm_env", str(big), "absent", "directory (%d+ entries)" % ms._COUNT_LIMIT)]


def test_owned_root_is_kept_by_merges_and_checked():
    new = {"version": 1, "owners": {"a": {"files": {}}}, "owned_root": "/etc/topotune"}
    assert ms.merge_manifest({"owners": {"b": {}}}, new)["owned_root"] == "/etc/topotune"
    assert ms.merge_manifest(new, {"version": 1, "owners": {"c": {}}})["owned_root"] == "/etc/topotune"
    assert "owned_root" not in ms.merge_manifest(None, {"version": 1, "owners": {}})
    assert ms.manifest_problem(dict(new, owned_root="etc/topotune")) == "owned_root is not an absolute path"
    assert ms.manifest_problem(new) is None
    with pytest.raises(ms.ManifestError, match="owned_root must be an absolute path"):
        ms.build_manifest([], owned_root="topotune")


def test_unrecorded_dirs_are_the_drift_exporter_configuration_directory():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
    with open(os.path.join(root, "roles/drift_exporter/vars/main.yml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle)["__drift_exporter_config_file"]
    assert os.path.dirname(config) == os.path.dirname(drift_metrics.DEFAULT_CONFIG) == "/etc/topotune/drift-exporter"
    assert ms.UNRECORDED_DIRS == (os.path.basename(os.path.dirname(config)),)


def test_prune_plan_removes_only_reported_stale_entries_and_directories_in_the_way(tmp_path):
    top, other, manifest = owned_tree(tmp_path)
    (top / "env/old.env").write_text("B=2\n")
    (top / "env/later.env").write_text("")  # appeared after the report: not removed without being reported
    (top / "container/all.flags").unlink()
    (top / "container/all.flags").mkdir()
    (other / "topotune.sh").unlink()
    (other / "topotune.sh").mkdir()
    drifted = ms.verify_manifest(manifest)["drifted"]
    reported = [d for d in drifted if d["item"] != str(top / "env/later.env")]
    forged = [{"owner": "rocm_env", "kind": "stale", "item": "/etc/passwd"},
              {"owner": "rocm_env", "kind": "stale", "item": str(top / "env/p.env")}]  # managed: never removed
    plan = ms.prune_plan(manifest, reported + forged)
    assert plan == sorted([
        (str(top / "container/all.flags"), "directory in place of a managed file"),
        (str(top / "env/old.env"), "stale file"),
        (str(other / "topotune.sh"), "directory in place of a managed file"),
    ])
    # only the owners the report names
    assert ms.prune_plan(manifest, [d for d in reported if d["owner"] == "container_runtime"]) == [
        (str(top / "container/all.flags"), "directory in place of a managed file")]
    assert ms.prune_plan({"owners": []}, reported) == []


def test_module_prunes_in_check_mode_and_for_real(tmp_path, run_module):
    top = tmp_path / "topotune"
    (top / "env").mkdir(parents=True)
    (top / "env/p.env").write_text("A=1\n")
    path = top / "manifest.json"
    run_module(module, state="recorded", path=str(path), entries=[{"owner": "rocm_env", "files": [str(top / "env/p.env")]}])
    assert json.loads(path.read_text())["owners"]["rocm_env"]["dirs"] == [str(top / "env")]
    (top / "env/old.env").write_text("B=2\n")
    (top / "env/p.env").unlink()
    (top / "env/p.env").mkdir()
    (top / "env/p.env/inside").write_text("")
    code, found = run_module(module, state="verified", path=str(path))
    assert {(d["kind"], d["item"]) for d in found["drifted"]} == {("stale", str(top / "env/old.env")), ("file", str(top / "env/p.env"))}
    code, result = run_module(module, state="pruned", path=str(path), previous=found["drifted"], check_mode=True)
    assert code == 0 and result["changed"] is True and (top / "env/old.env").exists() and (top / "env/p.env").is_dir()
    assert [r["path"] for r in result["removed"]] == [str(top / "env/old.env"), str(top / "env/p.env")]
    code, result = run_module(module, state="pruned", path=str(path), previous=found["drifted"])
    assert result["changed"] is True and not (top / "env/old.env").exists() and not (top / "env/p.env").exists()
    code, result = run_module(module, state="pruned", path=str(path), previous=found["drifted"])
    assert result["changed"] is False and result["removed"] == []


def test_module_prune_without_a_manifest_removes_nothing(tmp_path, run_module):
    victim = tmp_path / "x"
    victim.write_text("")
    code, result = run_module(module, state="pruned", path=str(tmp_path / "none.json"),
                              previous=[{"owner": "a", "kind": "stale", "item": str(victim)}])
    assert code == 0 and result["changed"] is False and victim.exists()


def test_module_bad_entries_fail_cleanly(tmp_path, run_module):
    code, result = run_module(module, state="recorded", path=str(tmp_path / "m.json"), entries=[{"owner": "a", "files": ["x"]}])
    assert code == 1 and "owner a" in result["msg"]


def test_drift_report_and_line_of_a_manifest_problem(tmp_path):
    path = str(tmp_path / "manifest.json")
    found = ms.verify_path(path)
    hostvars = {"n1": {"__topotune_drift_fast": found}, "n2": {"__topotune_drift_fast": {"checked": 3, "drifted": []}}}
    reports = drift_reports(["n1", "n2"], hostvars, "fast")
    assert reports["n1"]["manifest"] == "missing" and reports["n1"]["checked"] == 0
    assert "manifest" not in reports["n2"]  # results without a manifest state (older module) keep the old shape
    assert "manifest" not in drift_reports(["n1"], hostvars, "full", capture={"hosts": {}})["n1"]  # full: not read
    assert drift_line(reports["n1"]) == (
        "n1: manifest %s missing, nothing verified: run playbooks/site.yml (or playbooks/drift.yml -e topotune_correct=true)" % path)
    (tmp_path / "manifest.json").write_text("{,")
    line = drift_line(drift_reports(["n1"], {"n1": {"__topotune_drift_fast": ms.verify_path(path)}}, "fast")["n1"])
    assert line.startswith("n1: manifest %s unreadable (not valid JSON (Expecting property name" % path) and "nothing verified" in line
    # after a correction the report keeps what was found, its item says corrected
    hostvars["n1"]["__topotune_drift_corrected"] = {"checked": 29, "drifted": [dict(found["drifted"][0], corrected=True)]}
    report = drift_reports(["n1"], hostvars, "fast")["n1"]
    assert report["manifest"] == "missing" and report["checked"] == 29
    assert drift_line(report, True) == (
        "n1: manifest %s missing, recorded again by the correction; 0 other item(s) drifted, 0 corrected" % path)


def test_drift_line_names_stale_entries():
    report = {"host": "n", "checked": 9, "drifted": [{"owner": "rocm_env", "kind": "stale", "item": "/etc/topotune/env/old.env"}]}
    assert drift_line(report) == "n: 1 drifted of 9 checked (rocm_env: stale /etc/topotune/env/old.env)"
