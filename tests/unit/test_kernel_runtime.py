"""kernel_runtime: sysctl values in procfs, cpuidle switches and the boot state (command line, bootloader tool) under a
tmp_path sysroot."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.filter.cmdline_pending import cmdline_pending
from ansible_collections.topotune.instinct.plugins.filter.settings_merge import settings_merge
from ansible_collections.topotune.instinct.plugins.module_utils import kernel_runtime as kr
from ansible_collections.topotune.instinct.plugins.modules.kernel_runtime import KernelRuntime


class FakeModule:
    def __init__(self, check_mode=False, bins=None, grubby_info="", **params):
        self.params = {"sysroot": "/", "sysctl": {}, "cpuidle": {}, "bootloader": None, **params}
        self.check_mode = check_mode
        self.warnings = []
        self.bins = bins or {}  # tool name -> path of the tools "installed" on the node
        self.grubby_info = grubby_info
        self.commands = []

    def warn(self, msg):
        self.warnings.append(msg)

    def get_bin_path(self, name):
        return self.bins.get(name)

    def run_command(self, argv):
        self.commands.append(argv)
        return 0, self.grubby_info, ""


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


def test_no_bootloader_reads_no_boot_state(tmp_path):
    root = make_node(tmp_path)
    res = KernelRuntime(FakeModule(sysroot=root)).run()
    assert (res["cmdline"], res["bootloader"], res["update_grub"], res["grubby_args"]) == (None, None, None, [])


def test_auto_on_debian_without_grub_picks_the_dropin(tmp_path, etc):
    root = make_node(tmp_path)
    etc()
    res = KernelRuntime(FakeModule(sysroot=root, bootloader="auto", sysctl={"kernel.numa_balancing": "0"})).run()
    assert res["bootloader"] == "grub_dropin" and res["update_grub"] is None and res["grubby_args"] == []
    assert res["cmdline"] == "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=0f3b ro quiet"
    assert res["changed"] and read(root, "proc/sys/kernel/numa_balancing") == "0"


def test_auto_with_grub_reports_update_grub(tmp_path, etc):
    root = make_node(tmp_path)
    etc(os_release=None, grub=True)
    res = KernelRuntime(FakeModule(sysroot=root, bootloader="auto", bins={"update-grub": "/usr/sbin/update-grub"})).run()
    assert res["bootloader"] == "grub_dropin" and res["update_grub"] == "/usr/sbin/update-grub"


@pytest.mark.parametrize("check_mode", [False, True])
def test_auto_with_grubby_reads_the_boot_entries(tmp_path, etc, check_mode):
    root = make_node(tmp_path)
    etc(os_release=ROCKY, grub=True)
    module = FakeModule(check_mode=check_mode, sysroot=root, bootloader="auto", bins={"grubby": "/usr/sbin/grubby"},
                        grubby_info=GRUBBY_INFO)
    res = KernelRuntime(module).run()
    assert res["bootloader"] == "grubby" and res["update_grub"] is None
    assert module.commands == [["/usr/sbin/grubby", "--info=ALL"]] and len(res["grubby_args"]) == 2
    assert cmdline_pending(res["grubby_args"][1], settings_merge(REQUIRED, key="token")) == ["+iommu=pt", "+pci=realloc=off"]


@pytest.mark.parametrize("given", ["grub_dropin", "none"])
def test_explicit_bootloader_is_returned_as_given(tmp_path, etc, given):
    root = make_node(tmp_path)
    etc(os_release=ROCKY)
    module = FakeModule(sysroot=root, bootloader=given, bins={"grubby": "/usr/sbin/grubby"})
    res = KernelRuntime(module).run()
    assert res["bootloader"] == given and module.commands == [] and res["cmdline"].endswith("ro quiet")


@pytest.mark.parametrize("bootloader,os_release,bins,match", [
    ("auto", 'ID=arch\n', {}, "no known bootloader tool on this node .*ID=arch.*kernel_tuning_bootloader"),
    ("auto", None, {}, "ID=unknown"),
    ("grubby", DEBIAN, {}, "grubby is not on the PATH"),
])
def test_boot_state_failures_write_nothing(tmp_path, etc, bootloader, os_release, bins, match):
    root = make_node(tmp_path)
    etc(os_release=os_release)
    module = FakeModule(sysroot=root, bootloader=bootloader, bins=bins, sysctl={"kernel.numa_balancing": "0"},
                        cpuidle={"C2": "disabled"})
    with pytest.raises(kr.KernelRuntimeError, match=match):
        KernelRuntime(module).run()
    assert read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert read(root, "sys/devices/system/cpu/cpu0/cpuidle/state2/disable") == "0"


def test_missing_cmdline_names_the_path(tmp_path, etc):
    root = make_node(tmp_path)
    etc()
    os.remove(os.path.join(root, "proc/cmdline"))
    with pytest.raises(kr.KernelRuntimeError, match="proc/cmdline: is sysroot"):
        KernelRuntime(FakeModule(sysroot=root, bootloader="auto")).run()


def test_grubby_failure_is_reported(tmp_path, etc):
    root = make_node(tmp_path)
    etc()
    module = FakeModule(sysroot=root, bootloader="grubby", bins={"grubby": "/usr/sbin/grubby"})
    module.run_command = lambda argv: (1, "", "grubby: no boot entries\n")
    with pytest.raises(kr.KernelRuntimeError, match=r"grubby --info=ALL failed \(rc=1\): grubby: no boot entries"):
        KernelRuntime(module).run()


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
