"""cpu_governor (the module run as Ansible runs it): one call sets the governor on every differing CPU of a tmp_path sysroot; check mode,
diff, unavailable governors, CPU lists and CPUs without cpufreq (VMs)."""

import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.state import cpufreq
from ansible_collections.topotune.instinct.plugins.modules import cpu_governor

AVAILABLE = "conservative ondemand userspace powersave performance schedutil"


def make_cpus(root, count, governor="schedutil", available=AVAILABLE, without=()):
    for cpu in range(count):
        base = root / "sys/devices/system/cpu" / ("cpu%d" % cpu)
        base.mkdir(parents=True)
        if cpu in without:
            continue
        (base / "cpufreq").mkdir()
        (base / "cpufreq/scaling_governor").write_text(governor + "\n")
        (base / "cpufreq/scaling_available_governors").write_text(available + "\n")
    (root / "sys/devices/system/cpu/online").write_text("0-%d\n" % (count - 1))
    return str(root)


def governor_of(root, cpu):
    with open(os.path.join(root, "sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor" % cpu)) as fh:
        return fh.read().strip()


@pytest.mark.parametrize("count", [1, 16, 256])
def test_sets_all_cpus_then_is_idempotent(tmp_path, run_module, count):
    root = make_cpus(tmp_path, count)
    code, res = run_module(cpu_governor, sysroot=root, governor="performance")
    assert code == 0 and res["changed"] and res["changed_count"] == count
    assert res["changed_cpus"] == ("0" if count == 1 else "0-%d" % (count - 1))
    assert res["governors"] == {"performance": res["cpus"]}
    assert res["diff"]["before"] == "schedutil: %s\n" % res["cpus"]
    assert all(governor_of(root, c) == "performance" for c in range(count))
    code, again = run_module(cpu_governor, sysroot=root, governor="performance")
    assert code == 0 and not again["changed"] and again["changed_cpus"] == "" and again["diff"]["before"] == again["diff"]["after"]


def test_check_mode_writes_nothing_but_reports(tmp_path, run_module):
    root = make_cpus(tmp_path, 8)
    code, res = run_module(cpu_governor, check_mode=True, sysroot=root, governor="performance")
    assert code == 0 and res["changed"] and res["changed_cpus"] == "0-7"
    assert res["diff"]["after"] == "performance: 0-7\n"
    assert governor_of(root, 0) == "schedutil"


def test_only_differing_cpus_of_a_list_change(tmp_path, run_module):
    root = make_cpus(tmp_path, 8)
    (tmp_path / "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor").write_text("performance\n")
    _code, res = run_module(cpu_governor, sysroot=root, governor="performance", cpus="0-3")
    assert res["changed_cpus"] == "0-1,3"
    assert governor_of(root, 5) == "schedutil"
    assert res["governors"] == {"performance": "0-3"}


def test_unavailable_governor_fails_before_writing(tmp_path, run_module):
    root = make_cpus(tmp_path, 4, available="powersave performance")
    code, res = run_module(cpu_governor, sysroot=root, governor="ondemand")
    msg = res["msg"]
    assert code == 1 and res["failed"] is True
    assert "'ondemand' is not available on CPUs 0-3" in msg and "performance powersave" in msg
    assert "cpu_governor_governor" in msg
    assert governor_of(root, 0) == "schedutil"


@pytest.mark.parametrize("cpus,message", [("2-5", "CPUs 4-5 do not exist"), ("1-x", "invalid cpulist")])
def test_unknown_cpus_fail_clearly(tmp_path, run_module, cpus, message):
    root = make_cpus(tmp_path, 4)
    code, res = run_module(cpu_governor, sysroot=root, governor="performance", cpus=cpus)
    assert code == 1 and message in res["msg"]
    assert governor_of(root, 2) == "schedutil"


def test_vm_without_cpufreq_is_ok_with_a_warning(tmp_path, run_module):
    root = make_cpus(tmp_path, 4, without=range(4))
    code, res = run_module(cpu_governor, sysroot=root, governor="performance")
    assert code == 0 and not res["changed"] and res["no_cpufreq"] == "0-3" and res["governors"] == {}
    assert res["warnings"] and "no cpufreq" in res["warnings"][0]


def test_partial_cpufreq(tmp_path, run_module):
    root = make_cpus(tmp_path, 4, without=(3,))
    _code, res = run_module(cpu_governor, sysroot=root, governor="performance")
    assert res["changed_cpus"] == "0-2" and res["no_cpufreq"] == "3"


def test_kernel_refusing_the_value_is_reported(tmp_path, monkeypatch):
    root = make_cpus(tmp_path, 2)
    monkeypatch.setattr(cpufreq, "read_text", lambda path, default=None: "schedutil")
    with pytest.raises(cpufreq.GovernorError, match="kept another governor"):
        cpufreq.apply(root, [0, 1], "performance")


def test_group():
    assert cpufreq.group({0: "a", 1: "a", 2: "b", 5: "a"}) == {"a": "0-1,5", "b": "2"}


# ------------------------------------------------------------------------------------- the role's plan (role_plan)
@pytest.mark.parametrize("args,variable,words", [
    ({"governor": "perf ormance"}, "cpu_governor_governor", "such as performance"),
    ({"governor": "Performance"}, "cpu_governor_governor", "lower-case"),
    ({"cpus": "0-3,x"}, "cpu_governor_cpus", "'x' is not a CPU number"),
    ({"cpus": "5-2"}, "cpu_governor_cpus", "reversed"),
    ({"cpus": ""}, "cpu_governor_cpus", 'must be "all" or a cpulist'),
    ({"sysroot": "relative/path"}, "cpu_governor_sysroot", "absolute path"),
    ({"sysroot": "/sim root"}, "cpu_governor_sysroot", "without spaces"),
    ({"persist": True, "boot_script": None}, "boot_script", "files/topotune-cpu-governor"),
])
def test_role_plan_names_each_wrong_variable(args, variable, words):
    call = dict({"governor": "performance", "cpus": "all", "sysroot": "/", "persist": False, "boot_script": None}, **args)
    with pytest.raises(cpufreq.GovernorError) as info:
        cpufreq.role_plan(**call)
    assert str(info.value).startswith("cpu_governor: invalid input. ") and variable in str(info.value)
    assert words in str(info.value)


def test_role_plan_lists_every_wrong_variable_at_once():
    with pytest.raises(cpufreq.GovernorError) as info:
        cpufreq.role_plan("x y", "z", "rel", False)
    assert all(name in str(info.value) for name in ("cpu_governor_governor", "cpu_governor_cpus", "cpu_governor_sysroot"))


def test_role_plan_without_persist_manages_only_the_values():
    plan = cpufreq.role_plan("performance", "0-95,192-287", "/sim", False)
    assert plan["files"] == plan["links"] == plan["unit_paths"] == []
    assert plan["managed"] == {"owner": "cpu_governor", "sysroot": "/sim", "files": [], "units": [], "values": [
        {"path": "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "value": "performance", "cpus": "0-95,192-287"}]}


def test_role_plan_with_persist_is_the_script_the_unit_and_its_enable_link():
    plan = cpufreq.role_plan("performance", "all", "/sim", True, "#!/bin/sh\n")
    script, unit = plan["files"]
    assert (script["path"], script["mode"], script["validate"]) == ("/usr/local/sbin/topotune-cpu-governor", "0755", "/bin/sh -n %s")
    assert unit["path"] == "/etc/systemd/system/topotune-cpu-governor.service" and unit["mode"] == "0644"
    lines = unit["content"].splitlines()
    assert "ExecStart=/bin/sh /usr/local/sbin/topotune-cpu-governor performance all /sim/sys/devices/system/cpu" in lines
    assert "ConditionPathExistsGlob=/sim/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor" in lines
    assert lines[-1] == "WantedBy=multi-user.target" and unit["content"].endswith("\n")
    assert plan["links"] == [{"path": "/etc/systemd/system/multi-user.target.wants/topotune-cpu-governor.service",
                              "src": "/etc/systemd/system/topotune-cpu-governor.service"}]
    # "all" is watched as a glob, so CPUs brought online later are watched too
    assert plan["managed"]["values"][0]["path"] == "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
    assert plan["managed"]["files"] == [script["path"], unit["path"]]
    assert plan["managed"]["units"] == [{"name": "topotune-cpu-governor.service", "enabled": True, "active": None}]
    assert cpufreq.role_plan("performance", "all", "/", False)["cpu_dir"] == "/sys/devices/system/cpu"


def test_the_role_ships_the_boot_script_it_passes():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    with open(os.path.join(root, "roles", "cpu_governor", "files", "topotune-cpu-governor"), encoding="utf-8") as handle:
        text = handle.read()
    assert text.startswith("#!/bin/sh\n") and 'governor=$1' in text and 'cpu_dir=$3' in text


@pytest.fixture
def etc(tmp_path, monkeypatch):
    """The boot-time paths moved under tmp_path/etc (the module writes /etc and /usr/local on a node)."""
    base = tmp_path / "etc"
    paths = {"SCRIPT": base / "sbin/topotune-cpu-governor", "UNIT_FILE": base / "system/topotune-cpu-governor.service",
             "UNIT_LINK": base / "system/multi-user.target.wants/topotune-cpu-governor.service"}
    for name, path in paths.items():
        monkeypatch.setattr(cpufreq, name, str(path))
    return paths


def test_persist_writes_the_boot_files_in_the_same_call(tmp_path, run_module, etc):
    root = make_cpus(tmp_path / "root", 4)
    args = {"sysroot": root, "governor": "performance", "persist": True, "boot_script": "#!/bin/sh\nexit 0\n"}
    code, res = run_module(cpu_governor, check_mode=True, diff=True, **args)
    assert code == 0 and res["changed"] and res["unit_changed"] and not etc["UNIT_FILE"].exists()
    headers = [d["before_header"] for d in res["diff"]]
    assert headers == ["governors", str(etc["SCRIPT"]), str(etc["UNIT_FILE"]), str(etc["UNIT_LINK"])]
    code, res = run_module(cpu_governor, diff=True, **args)
    assert code == 0 and res["changed_files"] == [str(etc["SCRIPT"]), str(etc["UNIT_FILE"])]
    assert res["changed_links"] == [str(etc["UNIT_LINK"])] and res["unit_changed"]
    assert os.readlink(etc["UNIT_LINK"]) == str(etc["UNIT_FILE"]) and os.stat(etc["SCRIPT"]).st_mode & 0o777 == 0o755
    assert "ExecStart=/bin/sh %s performance all %s/sys/devices/system/cpu" % (etc["SCRIPT"], root) in etc["UNIT_FILE"].read_text()
    assert res["state"] == {"governors": {"performance": "0-3"}, "changed_cpus": "0-3", "no_cpufreq": ""}
    assert res["managed"]["files"] == [str(etc["SCRIPT"]), str(etc["UNIT_FILE"])]
    code, again = run_module(cpu_governor, diff=True, **args)
    assert code == 0 and not again["changed"] and not again["unit_changed"] and again["diff"] == []
    # the script alone changing needs no systemd reload
    code, res = run_module(cpu_governor, **dict(args, boot_script="#!/bin/sh\nexit 1\n"))
    assert res["changed_files"] == [str(etc["SCRIPT"])] and not res["unit_changed"]


def test_a_wrong_variable_fails_before_anything_is_read_or_written(tmp_path, run_module, etc):
    root = make_cpus(tmp_path / "root", 2)
    code, res = run_module(cpu_governor, sysroot=root, governor="perf ormance", persist=True, boot_script="#!/bin/sh\n")
    assert code == 1 and "cpu_governor_governor" in res["msg"] and "such as performance" in res["msg"]
    assert governor_of(root, 0) == "schedutil" and not etc["UNIT_FILE"].exists()


def _action(module, args, reply):
    """The module's action with its one module run answered by ``reply``; the runs are recorded."""
    from unittest.mock import MagicMock

    task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
    action = module.ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    calls = []
    action._execute_module = lambda module_name=None, module_args=None, task_vars=None: calls.append(module_name) or dict(reply)
    return action, calls


def test_the_action_names_a_wrong_variable_before_the_module_runs():
    from ansible_collections.topotune.instinct.plugins.action import cpu_governor as action_plugin

    action, calls = _action(action_plugin, {"governor": "perf ormance", "cpus": "0-3,x", "persist": "yes"}, {})
    result = action.run(task_vars={})
    assert result["failed"] and "cpu_governor_governor" in result["msg"] and "cpu_governor_cpus" in result["msg"]
    assert "files/topotune-cpu-governor" in result["msg"] and calls == []
    action, calls = _action(action_plugin, {"governor": "performance", "sysroot": "/sim"}, {"changed": True})
    assert action.run(task_vars={})["changed"] and calls == ["topotune.instinct.cpu_governor"]
