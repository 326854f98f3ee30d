"""kernel_runtime: sysctl values in procfs and cpuidle switches under a tmp_path sysroot."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.filter.cmdline_pending import cmdline_pending
from ansible_collections.topotune.instinct.plugins.filter.settings_merge import settings_merge
from ansible_collections.topotune.instinct.plugins.module_utils import kernel_runtime as kr
from ansible_collections.topotune.instinct.plugins.modules.kernel_runtime import KernelRuntime


class FakeModule:
    def __init__(self, check_mode=False, **params):
        self.params = {"sysroot": "/", "sysctl": {}, "cpuidle": {}, **params}
        self.check_mode = check_mode
        self.warnings = []

    def warn(self, msg):
        self.warnings.append(msg)


def make_node(root, cpus=4, states=("POLL", "C1", "C2"), numa_balancing="1"):
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/numa_balancing").write_text(numa_balancing + "\n")
    (root / "proc/sys/vm").mkdir(parents=True)
    (root / "proc/sys/vm/swappiness").write_text("60\n")
    for cpu in range(cpus):
        for k, name in enumerate(states):
            d = root / ("sys/devices/system/cpu/cpu%d/cpuidle/state%d" % (cpu, k))
            d.mkdir(parents=True)
            (d / "name").write_text(name + "\n")
            (d / "disable").write_text("0\n")
    return str(root)


def read(root, rel):
    with open(os.path.join(root, rel)) as fh:
        return fh.read().strip()


def test_sysctl_and_c2_then_idempotent(tmp_path):
    root = make_node(tmp_path)
    params = {"sysroot": root, "sysctl": {"kernel.numa_balancing": "0", "vm.swappiness": 10}, "cpuidle": {"C2": "disabled"}}
    res = KernelRuntime(FakeModule(**params)).run()
    assert res["changed"] and res["changed_paths"] == 2 + 4
    assert res["sysctl"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
    assert res["cpuidle"]["C2"] == {"state": "disabled", "cpus": "0-3", "changed_cpus": "0-3"}
    assert "kernel.numa_balancing = 1" in res["diff"]["before"] and "cpuidle C2: disabled on CPUs 0-3" in res["diff"]["after"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "0"
    assert read(root, "sys/devices/system/cpu/cpu3/cpuidle/state2/disable") == "1"
    assert read(root, "sys/devices/system/cpu/cpu3/cpuidle/state1/disable") == "0"
    again = KernelRuntime(FakeModule(**params)).run()
    assert not again["changed"] and again["diff"] == {"before": "", "after": ""}


def test_check_mode_does_not_write(tmp_path):
    root = make_node(tmp_path)
    res = KernelRuntime(FakeModule(check_mode=True, sysroot=root, sysctl={"kernel.numa_balancing": "0"})).run()
    assert res["changed"] and read(root, "proc/sys/kernel/numa_balancing") == "1"


def test_reenable(tmp_path):
    root = make_node(tmp_path)
    KernelRuntime(FakeModule(sysroot=root, cpuidle={"C2": "disabled"})).run()
    res = KernelRuntime(FakeModule(sysroot=root, cpuidle={"C2": "enabled"})).run()
    assert res["changed_paths"] == 4 and read(root, "sys/devices/system/cpu/cpu0/cpuidle/state2/disable") == "0"


def test_missing_sysctl_and_vm_without_cpuidle_warn(tmp_path):
    root = make_node(tmp_path, states=())
    module = FakeModule(sysroot=root, sysctl={"kernel.nope": "1"}, cpuidle={"C2": "disabled"})
    res = KernelRuntime(module).run()
    assert not res["changed"] and res["sysctl"] == {"kernel.nope": None}
    assert len(module.warnings) == 2 and "does not exist" in module.warnings[0] and "no CPU has" in module.warnings[1]


@pytest.mark.parametrize("params,match", [
    ({"sysctl": {"kernel/../../etc": "1"}}, "invalid"),
    ({"sysctl": {"kernel.numa_balancing": True}}, "quote it"),
    ({"cpuidle": {"C2": "off"}}, "not one of disabled, enabled"),
])
def test_bad_requests_fail_clearly(tmp_path, params, match):
    root = make_node(tmp_path)
    with pytest.raises(kr.KernelRuntimeError, match=match):
        KernelRuntime(FakeModule(sysroot=root, **params)).run()


def test_write_refused(tmp_path):
    root = make_node(tmp_path)
    target = os.path.join(root, "proc/sys/kernel/numa_balancing")
    # a directory in place of the file refuses the write even for root (permission bits would not)
    os.remove(target)
    os.mkdir(target)
    with pytest.raises(kr.KernelRuntimeError, match="cannot write"):
        kr.apply_writes([(target, "0")])


# ------------------------------------------------------------------ kernel_tuning's additive-list filters

REQUIRED = [{"name": "iommu", "value": "pt"}, {"name": "pci", "value": "realloc=off"}]


def test_sysctl_merge_later_wins_and_absent_removes():
    merged = settings_merge([
        {"name": "kernel.numa_balancing", "value": "0"},
        {"name": "vm.swappiness", "value": 10},
        {"name": "vm.swappiness", "value": 1},
        {"name": "kernel.numa_balancing", "state": "absent"},
    ])
    assert merged == {"present": [{"name": "vm.swappiness", "value": "1", "token": "vm.swappiness=1"}],
                      "absent": ["kernel.numa_balancing"]}


def test_cmdline_merge_keeps_several_pci_tokens_and_drops_by_name():
    merged = settings_merge(REQUIRED + [{"name": "pci", "value": "bfsort"}, {"name": "nokaslr"},
                                        {"name": "nokaslr", "state": "absent"}], key="token")
    assert [p["token"] for p in merged["present"]] == ["iommu=pt", "pci=realloc=off", "pci=bfsort"]
    assert merged["absent"] == ["nokaslr"]


@pytest.mark.parametrize("entry,match", [
    ({"name": "vm.swappiness", "value": True}, "YAML boolean"),
    ({"name": "quiet", "value": "a b"}, "no spaces"),
    ({"name": "x", "state": "gone"}, "present or absent"),
    ({"value": "1"}, "mapping with a 'name'"),
    ({"name": "bad name", "value": "1"}, "characters outside"),
])
def test_merge_rejects_malformed_entries(entry, match):
    with pytest.raises(AnsibleFilterError, match=match):
        settings_merge([entry], key="token")


@pytest.mark.parametrize("cmdline,pending", [
    ("BOOT_IMAGE=/vmlinuz ro quiet", ["+iommu=pt", "+pci=realloc=off"]),
    ("ro iommu=pt pci=realloc=off", []),
    ("ro iommu=pt pci=bfsort,realloc=off", []),
    ("ro iommu=pt pci=realloc=off nokaslr", ["-nokaslr"]),
])
def test_cmdline_pending(cmdline, pending):
    wanted = settings_merge(REQUIRED + [{"name": "nokaslr", "state": "absent"}], key="token")
    assert cmdline_pending(cmdline, wanted) == pending
