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
