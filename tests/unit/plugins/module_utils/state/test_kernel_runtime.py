"""kernel_runtime: sysctl values in procfs, cpuidle switches and the boot state (command line, bootloader tool) under a
tmp_path sysroot."""

import os
import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import basic

from ansible_collections.topotune.instinct.plugins.filter.cmdline_pending import cmdline_pending
from ansible_collections.topotune.instinct.plugins.filter.settings_merge import settings_merge
from ansible_collections.topotune.instinct.plugins.module_utils.state import kernel_runtime as kr
from ansible_collections.topotune.instinct.plugins.modules import kernel_runtime
from ansible_collections.topotune.instinct.plugins.modules.kernel_runtime import KernelRuntime


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """The node's tools: ``tools(name, stdout="", stderr="", rc=0)`` installs an executable that records its
    arguments in ``<name>.calls`` and prints ``stdout``; returns its path. The module finds only these (not the test
    machine's /usr/sbin), with its real ``get_bin_path`` and ``run_command``."""
    bindir = tmp_path / "tools"
    bindir.mkdir()

    def lookup(arg, opt_dirs=None):
        path = bindir / arg
        if not path.is_file():
            raise ValueError("Failed to find required executable %s" % arg)
        return str(path)
    monkeypatch.setattr(basic, "get_bin_path", lookup)

    def install(name, stdout="", stderr="", rc=0):
        path = bindir / name
        path.write_text("#!/bin/sh\necho \"$*\" >> %s.calls\nprintf '%%s' '%s'\nprintf '%%s' '%s' >&2\nexit %d\n"
                        % (path, stdout, stderr, rc))
        path.chmod(0o755)
        return str(path)
    install.calls = lambda name: (bindir / (name + ".calls")).read_text().splitlines() if (bindir / (name + ".calls")).exists() else []
    return install


def make_node(root, cpus=4, states=("POLL", "C1", "C2"), numa_balancing="1"):
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/numa_balancing").write_text(numa_balancing + "\n")
    (root / "proc/sys/vm").mkdir(parents=True)
    (root / "proc/sys/vm/swappiness").write_text("60\n")
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=0f3b ro quiet\n")
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


def test_sysctl_and_c2_then_idempotent(tmp_path, run_module):
    root = make_node(tmp_path)
    params = {"sysroot": root, "sysctl": {"kernel.numa_balancing": "0", "vm.swappiness": 10}, "cpuidle": {"C2": "disabled"}}
    code, res = run_module(kernel_runtime, **params)
    assert code == 0 and res["changed"] and res["changed_paths"] == 2 + 4
    assert res["sysctl"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
    assert res["cpuidle"]["C2"] == {"state": "disabled", "cpus": "0-3", "changed_cpus": "0-3"}
    assert "kernel.numa_balancing = 1" in res["diff"]["before"] and "cpuidle C2: disabled on CPUs 0-3" in res["diff"]["after"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "0"
    assert read(root, "sys/devices/system/cpu/cpu3/cpuidle/state2/disable") == "1"
    assert read(root, "sys/devices/system/cpu/cpu3/cpuidle/state1/disable") == "0"
    code, again = run_module(kernel_runtime, **params)
    assert code == 0 and not again["changed"] and again["diff"] == {"before": "", "after": ""}


def test_check_mode_does_not_write(tmp_path, run_module):
    root = make_node(tmp_path)
    code, res = run_module(kernel_runtime, check_mode=True, sysroot=root, sysctl={"kernel.numa_balancing": "0"})
    assert code == 0 and res["changed"] and read(root, "proc/sys/kernel/numa_balancing") == "1"


def test_reenable(tmp_path, run_module):
    root = make_node(tmp_path)
    run_module(kernel_runtime, sysroot=root, cpuidle={"C2": "disabled"})
    _code, res = run_module(kernel_runtime, sysroot=root, cpuidle={"C2": "enabled"})
    assert res["changed_paths"] == 4 and read(root, "sys/devices/system/cpu/cpu0/cpuidle/state2/disable") == "0"


def test_missing_sysctl_and_vm_without_cpuidle_warn(tmp_path, run_module):
    root = make_node(tmp_path, states=())
    code, res = run_module(kernel_runtime, sysroot=root, sysctl={"kernel.nope": "1"}, cpuidle={"C2": "disabled"})
    assert code == 0 and not res["changed"] and res["sysctl"] == {"kernel.nope": None}
    warnings = res["warnings"]
    assert len(warnings) == 2 and "does not exist" in warnings[0] and "no CPU has" in warnings[1]


@pytest.mark.parametrize("params,match", [
    ({"sysctl": {"kernel/../../etc": "1"}}, "invalid"),
    ({"sysctl": {"kernel.numa_balancing": True}}, "quote it"),
    ({"cpuidle": {"C2": "off"}}, "not one of disabled, enabled"),
])
def test_bad_requests_fail_clearly(tmp_path, run_module, params, match):
    root = make_node(tmp_path)
    code, res = run_module(kernel_runtime, sysroot=root, **params)
    assert code == 1 and re.search(match, res["msg"]), res["msg"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"


def test_write_refused(tmp_path):
    root = make_node(tmp_path)
    target = os.path.join(root, "proc/sys/kernel/numa_balancing")
    # a directory in place of the file refuses the write even for root (permission bits would not)
    os.remove(target)
    os.mkdir(target)
    with pytest.raises(kr.KernelRuntimeError, match="cannot write"):
        kr.apply_writes([(target, "0")])


# ------------------------------------------------------------------ boot state (bootloader=...)

GRUBBY_INFO = """index=0
kernel="/boot/vmlinuz-5.14.0-427.el9.x86_64"
args="ro crashkernel=1G-4G:192M rhgb quiet iommu=pt"
root="UUID=0f3b"
index=1
kernel="/boot/vmlinuz-0-rescue"
args="ro crashkernel=1G-4G:192M rhgb quiet"
"""

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nID=debian\n'
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'


@pytest.fixture
def etc(tmp_path, monkeypatch):
    """The node's /etc/default/grub and os-release, under tmp_path; returns a function writing them."""
    etc_dir = tmp_path / "etc"
    (etc_dir / "default").mkdir(parents=True)
    monkeypatch.setattr(KernelRuntime, "GRUB_DEFAULTS", str(etc_dir / "default/grub"))
    monkeypatch.setattr(KernelRuntime, "OS_RELEASE", (str(etc_dir / "os-release"),))

    def write(os_release=DEBIAN, grub=False):
        if os_release is not None:
            (etc_dir / "os-release").write_text(os_release)
        if grub:
            (etc_dir / "default/grub").write_text('GRUB_CMDLINE_LINUX=""\n')
    return write


@pytest.mark.parametrize("grubby,grub,os_release,tool", [
    (True, True, {"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, "grubby"),  # EL has /etc/default/grub too
    (True, False, {"ID": "debian"}, "grubby"),
    (False, True, {"ID": "debian"}, "grub_dropin"),
    (False, True, {}, "grub_dropin"),
    (False, False, {"ID": "debian"}, "grub_dropin"),  # minimal Debian (containers): no GRUB installed
    (False, False, {"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}, "grub_dropin"),
    (False, False, {"ID": "almalinux", "ID_LIKE": "rhel centos fedora"}, "grubby"),
    (False, False, {"ID": "fedora"}, "grubby"),
    (False, False, {"ID": "arch"}, None),
    (False, False, {}, None),
])
def test_pick_bootloader(grubby, grub, os_release, tool):
    assert kr.pick_bootloader(grubby, grub, os_release) == tool


def test_parse_os_release_and_grubby_args():
    assert kr.parse_os_release(ROCKY + "# comment\n\n") == {
        "NAME": "Rocky Linux", "ID": "rocky", "ID_LIKE": "rhel centos fedora", "VERSION_ID": "9.4"}
    assert kr.parse_grubby_args(GRUBBY_INFO) == ["ro crashkernel=1G-4G:192M rhgb quiet iommu=pt",
                                                 "ro crashkernel=1G-4G:192M rhgb quiet"]


def test_no_bootloader_reads_no_boot_state(tmp_path, run_module):
    root = make_node(tmp_path)
    _code, res = run_module(kernel_runtime, sysroot=root)
    assert (res["cmdline"], res["bootloader"], res["update_grub"], res["grubby_args"]) == (None, None, None, [])


def test_auto_on_debian_without_grub_picks_the_dropin(tmp_path, etc, tools, run_module):
    root = make_node(tmp_path)
    etc()
    _code, res = run_module(kernel_runtime, sysroot=root, bootloader="auto", sysctl={"kernel.numa_balancing": "0"})
    assert res["bootloader"] == "grub_dropin" and res["update_grub"] is None and res["grubby_args"] == []
    assert res["cmdline"] == "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=0f3b ro quiet"
    assert res["changed"] and read(root, "proc/sys/kernel/numa_balancing") == "0"


def test_auto_with_grub_reports_update_grub(tmp_path, etc, tools, run_module):
    root = make_node(tmp_path)
    etc(os_release=None, grub=True)
    update_grub = tools("update-grub")
    _code, res = run_module(kernel_runtime, sysroot=root, bootloader="auto")
    assert res["bootloader"] == "grub_dropin" and res["update_grub"] == update_grub
    assert tools.calls("update-grub") == []  # reported, not run


@pytest.mark.parametrize("check_mode", [False, True])
def test_auto_with_grubby_reads_the_boot_entries(tmp_path, etc, tools, run_module, check_mode):
    root = make_node(tmp_path)
    etc(os_release=ROCKY, grub=True)
    tools("grubby", stdout=GRUBBY_INFO)
    _code, res = run_module(kernel_runtime, check_mode=check_mode, sysroot=root, bootloader="auto")
    assert res["bootloader"] == "grubby" and res["update_grub"] is None
    assert tools.calls("grubby") == ["--info=ALL"] and len(res["grubby_args"]) == 2
    assert cmdline_pending(res["grubby_args"][1], settings_merge(REQUIRED, key="token")) == ["+iommu=pt", "+pci=realloc=off"]


@pytest.mark.parametrize("given", ["grub_dropin", "none"])
def test_explicit_bootloader_is_returned_as_given(tmp_path, etc, tools, run_module, given):
    root = make_node(tmp_path)
    etc(os_release=ROCKY)
    tools("grubby", stdout=GRUBBY_INFO)
    _code, res = run_module(kernel_runtime, sysroot=root, bootloader=given)
    assert res["bootloader"] == given and tools.calls("grubby") == [] and res["cmdline"].endswith("ro quiet")


@pytest.mark.parametrize("bootloader,os_release,bins,match", [
    ("auto", 'ID=arch\n', {}, "no known bootloader tool on this node .*ID=arch.*kernel_tuning_bootloader"),
    ("auto", None, {}, "ID=unknown"),
    ("grubby", DEBIAN, {}, "grubby is not on the PATH"),
])
def test_boot_state_failures_write_nothing(tmp_path, etc, tools, run_module, bootloader, os_release, bins, match):
    root = make_node(tmp_path)
    etc(os_release=os_release)
    for name in bins:
        tools(name)
    code, res = run_module(kernel_runtime, sysroot=root, bootloader=bootloader, sysctl={"kernel.numa_balancing": "0"},
                           cpuidle={"C2": "disabled"})
    assert code == 1 and re.search(match, res["msg"]), res["msg"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert read(root, "sys/devices/system/cpu/cpu0/cpuidle/state2/disable") == "0"


def test_missing_cmdline_names_the_path(tmp_path, etc, tools, run_module):
    root = make_node(tmp_path)
    etc()
    os.remove(os.path.join(root, "proc/cmdline"))
    code, res = run_module(kernel_runtime, sysroot=root, bootloader="auto")
    assert code == 1 and "proc/cmdline: is sysroot" in res["msg"]


def test_grubby_failure_is_reported(tmp_path, etc, tools, run_module):
    root = make_node(tmp_path)
    etc()
    tools("grubby", stderr="grubby: no boot entries\n", rc=1)
    code, res = run_module(kernel_runtime, sysroot=root, bootloader="grubby")
    assert code == 1 and "grubby --info=ALL failed (rc=1): grubby: no boot entries" in res["msg"]


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
