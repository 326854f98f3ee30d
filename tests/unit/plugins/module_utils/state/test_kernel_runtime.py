"""kernel_runtime: sysctl values in procfs, cpuidle switches and the boot state (command line, bootloader tool) under a
tmp_path sysroot."""

import json
import os
import pathlib
import re
import shlex
import struct
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import basic

from ansible_collections.topotune.instinct.plugins.filter.cmdline_pending import cmdline_pending
from ansible_collections.topotune.instinct.plugins.filter.settings_merge import settings_merge
from ansible_collections.topotune.instinct.plugins.module_utils.checks import pcie_health as ph
from ansible_collections.topotune.instinct.plugins.module_utils.state import kernel_runtime as kr
from ansible_collections.topotune.instinct.plugins.modules import kernel_runtime
from ansible_collections.topotune.instinct.plugins.modules.kernel_runtime import KernelRuntime
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge


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


# ------------------------------------------------------------------ role kernel_tuning's plan (tuning=..., reboot=...)

CSTATE = "#!/bin/sh\nset -u\n"


@pytest.fixture
def role_paths(tmp_path, monkeypatch):
    """The role's files under tmp_path/etc (the module writes /etc and /usr/local on a node)."""
    base = tmp_path / "etc-role"
    paths = {"SYSCTL_FILE": base / "sysctl.d/90-topotune-kernel.conf", "GRUB_DROPIN": base / "default/grub.d/90-topotune.cfg",
             "CSTATE_UNIT_FILE": base / "systemd/system/topotune-cstate.service",
             "CSTATE_UNIT_LINK": base / "systemd/system/multi-user.target.wants/topotune-cstate.service",
             "CSTATE_SCRIPT": base / "sbin/topotune-cstate", "REBOOT_RECORD": base / "topotune/reboot-pending.json",
             "ACS_SCRIPT": base / "sbin/topotune-acs", "ACS_LIST": base / "topotune/acs-bridges.conf",
             "ACS_UNIT_FILE": base / "systemd/system/topotune-acs.service",
             "ACS_UNIT_LINK": base / "systemd/system/sysinit.target.wants/topotune-acs.service"}
    for name, path in paths.items():
        monkeypatch.setattr(kr, name, str(path))
    return paths


@pytest.mark.parametrize("tuning,sysroot,words", [
    ({}, "relative/path", "kernel_tuning_sysroot must be an absolute path without spaces, got relative/path"),
    ({}, "/sim root", "kernel_tuning_sysroot must be an absolute path"),
    ({"sysctl": [{"name": "vm.swappiness", "value": True}]}, "/", "kernel_tuning_sysctl: vm.swappiness has a YAML boolean"),
    ({"sysctl": [{"name": "vm.swappiness"}]}, "/", "kernel_tuning_sysctl: vm.swappiness has no value"),
    ({"cmdline": [{"value": "pt"}]}, "/", "kernel_tuning_cmdline: entry 0"),
    ({"cmdline_extra": [{"name": "quiet", "value": "a b"}]}, "/", "kernel_tuning_cmdline_extra: quiet='a b'"),
    ({"cmdline_extra": "iommu=pt"}, "/", "kernel_tuning_cmdline_extra: expected a list"),
    ({"c2_disable": True}, "/", "files/topotune-cstate"),
])
def test_check_tuning_names_the_variable(tuning, sysroot, words):
    with pytest.raises(kr.KernelRuntimeError) as info:
        kr.check_tuning(tuning, sysroot)
    assert str(info.value).startswith("kernel_tuning: invalid input. ") and words in str(info.value)


def test_check_tuning_merges_the_additive_lists_in_order():
    extra = [{"name": "pci", "value": "realloc=off", "state": "absent"}, {"name": "nokaslr"}]
    inputs = kr.check_tuning({"numa_balancing_disable": True, "c2_disable": True, "cstate_script": CSTATE,
                              "sysctl": [{"name": "vm.swappiness", "value": 10}], "cmdline": REQUIRED,
                              "cmdline_extra": extra}, "/sim")
    assert inputs["runtime_sysctl"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
    assert inputs["runtime_cpuidle"] == {"C2": "disabled"}
    assert [p["token"] for p in inputs["cmdline"]["present"]] == ["iommu=pt", "nokaslr"]
    assert inputs["cmdline"]["absent"] == ["pci=realloc=off"]
    # a user's entry overrides the built-in one
    off = kr.check_tuning({"sysctl": [{"name": "kernel.numa_balancing", "state": "absent"}]}, "/")
    assert off["runtime_sysctl"] == {} and kr.check_tuning({"numa_balancing_disable": False}, "/")["runtime_sysctl"] == {}


def _boot(cmdline="ro quiet", bootloader="grub_dropin", grubby_args=()):
    return {"cmdline": cmdline, "bootloader": bootloader, "grubby_args": list(grubby_args), "update_grub": None}


def test_plan_tuning_files_for_a_grub_node_with_c2():
    inputs = kr.check_tuning({"cmdline": REQUIRED, "c2_disable": True, "cstate_script": CSTATE}, "/sim")
    plan = kr.plan_tuning(inputs, _boot())
    files = {f["path"]: f for f in plan["files"]}
    assert list(files) == [kr.SYSCTL_FILE, kr.GRUB_DROPIN, kr.CSTATE_SCRIPT, kr.CSTATE_UNIT_FILE, kr.ACS_SCRIPT, kr.ACS_LIST,
                           kr.ACS_UNIT_FILE, kr.REBOOT_RECORD]
    # without kernel_tuning_acs_disable the ACS files are removed where a run left them
    assert [path for path, f in files.items() if f.get("state") == "absent"] == [kr.ACS_SCRIPT, kr.ACS_LIST, kr.ACS_UNIT_FILE]
    assert files[kr.SYSCTL_FILE]["content"].splitlines()[-1] == "kernel.numa_balancing = 0"
    assert files[kr.GRUB_DROPIN]["content"].splitlines()[-1] == 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt pci=realloc=off"'
    assert "ExecStart=/bin/sh /usr/local/sbin/topotune-cstate /sim/sys/devices/system/cpu" in files[kr.CSTATE_UNIT_FILE]["content"]
    assert files[kr.CSTATE_SCRIPT]["validate"] == "/bin/sh -n %s" and files[kr.CSTATE_SCRIPT]["mode"] == "0755"
    record = json.loads(files[kr.REBOOT_RECORD]["content"])
    assert record == {"owner": "kernel_tuning", "pending": ["+iommu=pt", "+pci=realloc=off"], "wanted": inputs["cmdline"]}
    assert plan["pending"] == ["+iommu=pt", "+pci=realloc=off"] and plan["grubby_argv"] == []
    assert plan["links"] == [{"path": kr.CSTATE_UNIT_LINK, "src": kr.CSTATE_UNIT_FILE}, {"path": kr.ACS_UNIT_LINK, "state": "absent"}]
    assert plan["acs"] == {"bridges": [], "clear": [], "argv": [], "before": "", "after": ""}
    assert plan["managed"] == {"owner": "kernel_tuning", "sysroot": "/sim",
                               "values": [["proc/sys/kernel/numa_balancing", "0"]],
                               "files": [kr.SYSCTL_FILE, kr.GRUB_DROPIN, kr.CSTATE_SCRIPT, kr.CSTATE_UNIT_FILE],
                               "units": [{"name": "topotune-cstate.service", "enabled": True, "active": None}]}


def test_plan_tuning_without_sysctl_or_pending_removes_the_dropin_and_the_record():
    inputs = kr.check_tuning({"numa_balancing_disable": False, "cmdline": REQUIRED}, "/")
    plan = kr.plan_tuning(inputs, _boot(cmdline="ro iommu=pt pci=bfsort,realloc=off", bootloader="none"))
    assert plan["files"] == [{"path": path, "state": "absent"} for path in (
        kr.SYSCTL_FILE, kr.ACS_SCRIPT, kr.ACS_LIST, kr.ACS_UNIT_FILE, kr.REBOOT_RECORD)]
    assert plan["pending"] == [] and plan["managed"]["files"] == [] and plan["managed"]["values"] == []
    # with "none" a pending parameter is reported, but no record is kept: nothing carries it to the next boot
    plan = kr.plan_tuning(inputs, _boot(bootloader="none"))
    assert plan["pending"] and plan["files"][-1] == {"path": kr.REBOOT_RECORD, "state": "absent"}


def test_plan_tuning_with_grubby_updates_the_entries_lacking_a_parameter():
    inputs = kr.check_tuning({"cmdline": REQUIRED, "cmdline_extra": [{"name": "nokaslr", "state": "absent"}]}, "/")
    plan = kr.plan_tuning(inputs, _boot(bootloader="grubby", grubby_args=kr.parse_grubby_args(GRUBBY_INFO + "args=\"ro nokaslr\"\n")))
    assert plan["grubby"] == {"add": ["pci=realloc=off", "iommu=pt"], "remove": ["nokaslr"]}
    assert plan["grubby_argv"] == ["grubby", "--update-kernel=ALL", "--args=pci=realloc=off iommu=pt", "--remove-args=nokaslr"]
    assert kr.GRUB_DROPIN not in [f["path"] for f in plan["files"]] and plan["grub_dropin"] is None


def _tuning(**over):
    return dict({"cmdline": REQUIRED, "c2_disable": True, "cstate_script": CSTATE}, **over)


def test_tuning_in_one_call_check_mode_then_real_then_idempotent(tmp_path, etc, tools, role_paths, run_module):
    root = make_node(tmp_path)
    etc(grub=True)
    tools("update-grub")
    code, res = run_module(kernel_runtime, check_mode=True, diff=True, sysroot=root, tuning=_tuning())
    assert code == 0 and res["changed"] and res["bootloader"] == "grub_dropin" and res["unit_changed"]
    assert res["pending"] == ["+iommu=pt", "+pci=realloc=off"] and res["reboot_required"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "1" and not role_paths["GRUB_DROPIN"].exists()
    headers = [d["before_header"] for d in res["diff"]]
    assert headers[0] == "runtime values" and str(role_paths["CSTATE_UNIT_LINK"]) in headers
    assert tools.calls("update-grub") == []
    code, res = run_module(kernel_runtime, diff=True, sysroot=root, tuning=_tuning())
    assert code == 0 and read(root, "proc/sys/kernel/numa_balancing") == "0"
    assert read(root, "sys/devices/system/cpu/cpu1/cpuidle/state2/disable") == "1"
    assert 'pci=realloc=off"' in role_paths["GRUB_DROPIN"].read_text() and tools.calls("update-grub") == [""]
    assert json.loads(role_paths["REBOOT_RECORD"].read_text())["pending"] == res["pending"]
    assert os.readlink(role_paths["CSTATE_UNIT_LINK"]) == str(role_paths["CSTATE_UNIT_FILE"])
    assert res["managed"]["files"] == [str(role_paths[k]) for k in ("SYSCTL_FILE", "GRUB_DROPIN", "CSTATE_SCRIPT", "CSTATE_UNIT_FILE")]
    code, again = run_module(kernel_runtime, diff=True, sysroot=root, tuning=_tuning())
    assert code == 0 and not again["changed"] and again["diff"] == [] and tools.calls("update-grub") == [""]
    # the reboot brought the parameters: the record goes, nothing is pending
    (tmp_path / "proc/cmdline").write_text("ro quiet iommu=pt pci=realloc=off\n")
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_tuning())
    assert res["removed_files"] == [str(role_paths["REBOOT_RECORD"])] and res["pending"] == [] and not res["reboot_required"]


def test_tuning_without_update_grub_warns_that_grub_cfg_was_not_regenerated(tmp_path, etc, tools, role_paths, run_module):
    root = make_node(tmp_path)
    etc()
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_tuning(c2_disable=False))
    assert code == 0 and any("update-grub not found" in w and "grub.cfg was not regenerated" in w for w in res["warnings"])
    assert not res["unit_changed"]


def test_tuning_with_grubby_updates_every_boot_entry(tmp_path, etc, tools, role_paths, run_module):
    root = make_node(tmp_path)
    etc(os_release=ROCKY)
    tools("grubby", stdout=GRUBBY_INFO)
    code, res = run_module(kernel_runtime, check_mode=True, diff=True, sysroot=root, tuning=_tuning(c2_disable=False))
    assert code == 0 and res["changed"] and tools.calls("grubby") == ["--info=ALL"]
    assert res["diff"][-1]["after"] == "grubby: --args=pci=realloc=off iommu=pt\n"
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_tuning(c2_disable=False))
    assert tools.calls("grubby")[-1] == "--update-kernel=ALL --args=pci=realloc=off iommu=pt"
    assert res["plan"]["grubby"] == {"add": ["pci=realloc=off", "iommu=pt"], "remove": []}


def test_a_wrong_role_variable_fails_before_anything_is_read(tmp_path, etc, tools, role_paths, run_module):
    root = make_node(tmp_path)
    etc(os_release="ID=arch\n")  # the boot state would fail too: the variable is named first
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_tuning(sysctl=[{"name": "vm.swappiness", "value": "1 0"}]))
    assert code == 1 and "kernel_tuning_sysctl" in res["msg"] and "no spaces" in res["msg"]
    assert read(root, "proc/sys/kernel/numa_balancing") == "1" and not role_paths["SYSCTL_FILE"].exists()
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_tuning(), sysctl={"vm.swappiness": "1"})
    assert code == 1 and "pass the values in tuning" in res["msg"]


REBOOT = {"batch": "10%", "max_fail_percentage": 0, "via": "none", "slurm_node": "node1", "drain_timeout": 3600,
          "drain_poll": 10, "command": ""}


@pytest.mark.parametrize("over,words", [
    ({"batch": "0"}, "kernel_tuning_reboot_batch must be a count > 0"),
    ({"batch": "101%"}, "kernel_tuning_reboot_batch"),
    ({"batch": []}, "kernel_tuning_reboot_batch"),
    ({"batch": [1, "25%", "x"]}, "kernel_tuning_reboot_batch"),
    ({"max_fail_percentage": 101}, "kernel_tuning_reboot_max_fail_percentage must be 0-100"),
    ({"drain_poll": 0}, "kernel_tuning_reboot_drain_timeout and kernel_tuning_reboot_drain_poll must be > 0"),
    ({"via": "slurm", "slurm_node": "node 1"}, "kernel_tuning_reboot_slurm_node must be a Slurm NodeName"),
])
def test_check_reboot_names_the_variable(over, words):
    with pytest.raises(kr.KernelRuntimeError, match="^kernel_tuning: invalid input. ") as info:
        kr.check_reboot(dict(REBOOT, **over), "/")
    assert words in str(info.value)


def test_check_reboot_accepts_counts_percentages_and_lists():
    for batch in (2, "10%", "100%", [1, "25%"]):
        kr.check_reboot(dict(REBOOT, batch=batch), "/")
    kr.check_reboot(dict(REBOOT, via="none", slurm_node="not a node name"), "/")
    with pytest.raises(kr.KernelRuntimeError, match="kernel_tuning_sysroot"):
        kr.check_reboot(REBOOT, "sim")


def _record(role_paths):
    wanted = settings_merge(REQUIRED, key="token")
    role_paths["REBOOT_RECORD"].parent.mkdir(parents=True, exist_ok=True)
    role_paths["REBOOT_RECORD"].write_text(kr.reboot_record(wanted, ["+iommu=pt"]))


def test_reboot_pending_reads_the_record_and_the_running_command_line(tmp_path, role_paths, run_module):
    root = make_node(tmp_path)
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="pending"))
    assert code == 0 and res["reboot"] == {"pending": [], "record": str(role_paths["REBOOT_RECORD"]), "rebootable": False}
    _record(role_paths)
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="pending", command="/sbin/stub"))
    assert res["reboot"]["pending"] == ["+iommu=pt", "+pci=realloc=off"] and res["reboot"]["rebootable"] and not res["changed"]
    # rebooted by hand meanwhile: nothing to bring
    (tmp_path / "proc/cmdline").write_text("ro iommu=pt pci=realloc=off\n")
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="pending"))
    assert res["reboot"]["pending"] == []
    role_paths["REBOOT_RECORD"].write_text("{not json")
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="pending"))
    assert code == 1 and "is not a pending-reboot record" in res["msg"]


def test_reboot_verify_fails_with_a_reason_or_removes_the_record(tmp_path, role_paths, run_module):
    root = make_node(tmp_path)
    _record(role_paths)
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="verify"))
    assert code == 1 and res["reason"] == "parameters not live after reboot" and "+iommu=pt" in res["msg"]
    assert role_paths["REBOOT_RECORD"].exists()
    (tmp_path / "proc/cmdline").write_text("ro iommu=pt pci=bfsort,realloc=off\n")
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="verify"))
    assert code == 0 and res["changed"] and not role_paths["REBOOT_RECORD"].exists()
    os.remove(os.path.join(root, "proc/cmdline"))
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="verify"))
    assert code == 1 and res["reason"] == "command line unreadable after reboot"
    code, res = run_module(kernel_runtime, sysroot=root, reboot=dict(REBOOT, step="verify", batch="0"))
    assert code == 1 and "kernel_tuning_reboot_batch" in res["msg"]


def _action(args, reply):
    from unittest.mock import MagicMock

    from ansible_collections.topotune.instinct.plugins.action.kernel_runtime import ActionModule

    task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
    action = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    calls = []
    action._execute_module = lambda module_name=None, module_args=None, task_vars=None: calls.append(module_name) or dict(reply)
    return action, calls


@pytest.mark.parametrize("args,words", [
    ({"sysroot": "relative/path", "tuning": {}}, "kernel_tuning_sysroot"),
    ({"tuning": {"sysctl": [{"name": "vm.swappiness", "value": "1 0"}]}}, "kernel_tuning_sysctl"),
    ({"tuning": {"c2_disable": "true"}}, "files/topotune-cstate"),
    ({"tuning": {"acs_disable": "yes"}}, "files/topotune-acs"),
    ({"tuning": {"acs_disable": "true", "acs_script": "pass", "virtualization_host": "yes"}},
     "kernel_tuning_acs_disable: refused on a virtualization host, nothing was changed: "
     "platform_checks_virtualization_host is true"),
    ({"reboot": dict(REBOOT, step="pending", batch="0%")}, "kernel_tuning_reboot_batch"),
])
def test_the_action_names_a_wrong_variable_before_the_module_runs(args, words):
    action, calls = _action(args, {})
    result = action.run(task_vars={})
    assert result["failed"] and words in result["msg"] and calls == []


def test_the_action_runs_the_module_when_the_variables_are_right():
    action, calls = _action({"tuning": {"cmdline": REQUIRED, "numa_balancing_disable": "false"}}, {"changed": False})
    assert action.run(task_vars={})["changed"] is False and calls == ["topotune.instinct.kernel_runtime"]
    action, calls = _action({"sysctl": {"vm.swappiness": "1"}}, {"changed": True})
    assert action.run(task_vars={})["changed"] and calls == ["topotune.instinct.kernel_runtime"]


# ------------------------------------------------------------------ kernel_tuning_acs_disable (role files/topotune-acs)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
with open(os.path.join(REPO, "roles", "kernel_tuning", "files", "topotune-acs"), encoding="utf-8") as _handle:
    ACS_PROGRAM = _handle.read()
PCIE_KNOWLEDGE = load_knowledge("pcie_health")
FAULT = "fault-acs-enabled"
ENABLED = "0000:37:00.0"  # the switch downstream port with ACS Control 0x001d in the fault profile


def _acs_tuning(**over):
    return dict({"cmdline": REQUIRED, "acs_disable": True, "acs_script": ACS_PROGRAM}, **over)


def _pci_acs(root):
    return next(r for r in ph.run_checks(ph.gather(root), PCIE_KNOWLEDGE) if r["id"] == "pci_acs")


def _configs(root):
    base = os.path.join(root, "sys/bus/pci/devices")
    return {bdf: open(os.path.join(base, bdf, "config"), "rb").read() for bdf in sorted(os.listdir(base))}


def _set_acs(root, bdf, value):
    path = os.path.join(root, "sys/bus/pci/devices", bdf, "config")
    data = bytearray(open(path, "rb").read())
    struct.pack_into("<H", data, ph.ConfigSpace(bytes(data)).ext_capabilities()[0x000D] + 6, value)
    with open(path, "wb") as handle:
        handle.write(data)


def test_check_tuning_refuses_the_acs_fix_on_a_virtualization_host():
    with pytest.raises(kr.KernelRuntimeError, match="acs_script must hold the role's files/topotune-acs"):
        kr.check_tuning({"acs_disable": True}, "/")
    with pytest.raises(kr.KernelRuntimeError) as info:
        kr.check_tuning(_acs_tuning(virtualization_host=True), "/")
    msg = str(info.value)
    assert msg.startswith("kernel_tuning_acs_disable: refused on a virtualization host, nothing was changed: "
                          "platform_checks_virtualization_host is true.")
    assert "Set kernel_tuning_acs_disable: false for this node, or set platform_checks_virtualization_host: false" in msg
    # a virtualization host without the fix, and the fix without one, are fine
    assert not kr.check_tuning({"virtualization_host": True}, "/")["acs_disable"]
    assert kr.check_tuning(_acs_tuning(), "/")["acs_disable"]


def test_the_plan_lists_what_pci_acs_reads_and_clears_exactly_what_it_names(sim_pci_tree):
    root = sim_pci_tree(FAULT)
    plan = kr.plan_tuning(kr.check_tuning(_acs_tuning(), root), _boot(), dict(kr.read_acs(root), python="/usr/bin/python3"))
    named = re.findall(r"(\S+) ACSCtl", _pci_acs(root)["observed"])
    assert plan["acs"]["clear"] == named == [ENABLED]
    assert plan["acs"]["before"] == "ACS Control %s = 0x001d\n" % ENABLED and plan["acs"]["after"] == "ACS Control %s = 0x0000\n" % ENABLED
    # the list: every bridge pci_acs reads (above the 8 GPUs and 8 NICs), all with the capability here
    bridges = ph.acs_bridges(ph.gather(root))["bridges"]
    assert plan["acs"]["bridges"] == [b["bdf"] for b in bridges] and len(bridges) == 32
    files = {f["path"]: f for f in plan["files"]}
    assert [line for line in files[kr.ACS_LIST]["content"].splitlines() if not line.startswith("#")] == plan["acs"]["bridges"]
    assert files[kr.ACS_LIST]["mode"] == "0644" and files[kr.ACS_UNIT_FILE]["mode"] == "0644"
    assert files[kr.ACS_SCRIPT] == {"path": kr.ACS_SCRIPT, "content": ACS_PROGRAM, "mode": "0755", "validate":
                                    "/usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' %s"}
    unit = files[kr.ACS_UNIT_FILE]["content"].splitlines()
    devices = os.path.join(root, "sys/bus/pci/devices")
    assert "ExecStart=/usr/bin/python3 %s %s %s" % (kr.ACS_SCRIPT, devices, kr.ACS_LIST) in unit
    for line in ("DefaultDependencies=no", "Conflicts=shutdown.target", "Type=oneshot", "WantedBy=sysinit.target",
                 "Before=systemd-udev-trigger.service systemd-modules-load.service sysinit.target shutdown.target"):
        assert line in unit, line
    assert plan["acs"]["argv"] == ["/usr/bin/python3", kr.ACS_SCRIPT, devices, kr.ACS_LIST]
    assert plan["links"] == [{"path": kr.ACS_UNIT_LINK, "src": kr.ACS_UNIT_FILE}]
    assert kr.ACS_UNIT_FILE in plan["unit_paths"] and kr.ACS_UNIT_LINK in plan["unit_paths"]
    assert plan["managed"]["files"][-3:] == [kr.ACS_SCRIPT, kr.ACS_LIST, kr.ACS_UNIT_FILE]
    assert plan["managed"]["units"] == [{"name": "topotune-acs.service", "enabled": True, "active": None}]
    assert plan["warnings"] == []


def test_the_plans_validate_command_accepts_the_program_and_rejects_broken_python(tmp_path):
    plan = kr.plan_tuning(kr.check_tuning(_acs_tuning(), "/"), _boot(),
                          {"bridges": [], "enabled": [], "unknown": None, "virtualized": [], "python": sys.executable})
    validate = next(f["validate"] for f in plan["files"] if f["path"] == kr.ACS_SCRIPT)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text(ACS_PROGRAM)
    bad.write_text("def (:\n")
    assert subprocess.run(shlex.split(validate % good), capture_output=True, check=False).returncode == 0
    assert subprocess.run(shlex.split(validate % bad), capture_output=True, check=False).returncode != 0
    assert not os.path.exists(tmp_path / "__pycache__")  # nothing compiled next to it


def test_the_plan_on_a_good_node_lists_the_bridges_and_clears_none(sim_pci_tree):
    root = sim_pci_tree("mi300x-8gpu-spx")
    plan = kr.plan_tuning(kr.check_tuning(_acs_tuning(), root), _boot(), dict(kr.read_acs(root), python="/usr/bin/python3"))
    assert len(plan["acs"]["bridges"]) == 32 and plan["acs"]["clear"] == [] and plan["acs"]["before"] == ""


@pytest.mark.parametrize("acs,words", [
    ({"unknown": ("flat", "sys/bus/pci/devices/<bdf> is not a link into sys/devices")},
     "cannot tell which bridges to clear, nothing was changed: sys/bus/pci/devices/<bdf> is not a link"),
    ({"unknown": ("unreadable", "0000:0b:00.0: config space is 64 bytes")}, "Run the role with become (root)"),
    ({"python": "python3"}, "the node's Python interpreter 'python3' is not an absolute path"),
    ({"python": "/opt/py%n/bin/python3"}, "set ansible_python_interpreter"),  # systemd would expand %n
    ({"python": None}, "set ansible_python_interpreter"),
    ({"bridges": [{"bdf": "0000:37:00.0\nExecStart=/bin/evil", "control": 0, "flags": []}]},
     "is not a PCI address (dddd:bb:dd.f), nothing was changed"),
    ({"virtualized": ["GPU 0000:0c:00.0 has 4 SR-IOV virtual function(s) (sriov_numvfs)"]},
     "refused on a virtualization host, nothing was changed: GPU 0000:0c:00.0 has 4 SR-IOV virtual function(s)"),
])
def test_the_plan_refuses_what_it_cannot_do_exactly(acs, words):
    state = dict({"bridges": [], "enabled": [], "unknown": None, "virtualized": [], "python": "/usr/bin/python3"}, **acs)
    with pytest.raises(kr.KernelRuntimeError) as info:
        kr.plan_tuning(kr.check_tuning(_acs_tuning(), "/"), _boot(), state)
    assert str(info.value).startswith("kernel_tuning_acs_disable: ") and words in str(info.value), str(info.value)


def test_a_sysroot_systemd_would_expand_is_refused_for_the_unit():
    state = {"bridges": [], "enabled": [], "unknown": None, "virtualized": [], "python": "/usr/bin/python3"}
    with pytest.raises(kr.KernelRuntimeError, match="kernel_tuning_sysroot '/sim%i' goes into the unit's command line"):
        kr.plan_tuning(kr.check_tuning(_acs_tuning(), "/sim%i"), _boot(), state)


def test_the_plan_reads_a_flat_tree_as_unknown_and_a_bare_node_as_nothing_to_clear(sim_pci_tree, tmp_path):
    flat = sim_pci_tree("mi210-8gpu-2hive")  # no PCI hierarchy in sysfs: the bridges cannot be told
    with pytest.raises(kr.KernelRuntimeError, match="cannot tell which bridges to clear"):
        kr.plan_tuning(kr.check_tuning(_acs_tuning(), flat), _boot(), dict(kr.read_acs(flat), python="/usr/bin/python3"))
    bare = str(tmp_path / "bare")
    plan = kr.plan_tuning(kr.check_tuning(_acs_tuning(), bare), _boot(), dict(kr.read_acs(bare), python="/usr/bin/python3"))
    assert plan["acs"]["bridges"] == [] and plan["acs"]["clear"] == []
    assert plan["warnings"] == ["kernel_tuning_acs_disable: no GPU or RDMA NIC on this node: the unit is installed with "
                                "an empty list and clears nothing"]


def _gpu_dir(root, bdf="0000:0c:00.0"):
    return os.path.join(root, "sys/bus/pci/devices", bdf)


@pytest.mark.parametrize("sign,words", [
    ("sriov", "GPU 0000:0c:00.0 has 4 SR-IOV virtual function(s) (sriov_numvfs)"),
    ("vfio", "GPU 0000:0c:00.0 is bound to vfio-pci (passed through to a VM)"),
])
def test_the_module_refuses_on_a_node_that_hands_a_gpu_to_vms_and_changes_nothing(sim_pci_tree, etc, tools, role_paths,
                                                                                  run_module, sign, words):
    root = sim_pci_tree(FAULT)
    make_node(pathlib.Path(root))
    etc()
    if sign == "sriov":
        with open(os.path.join(_gpu_dir(root), "sriov_numvfs"), "w") as handle:
            handle.write("4\n")
    else:
        os.symlink("../../../../bus/pci/drivers/vfio-pci", os.path.join(_gpu_dir(root), "driver"))
    # a NIC's virtual functions are no sign: containers use them with the host's driver
    with open(os.path.join(root, "sys/bus/pci/devices/0000:0d:00.0/sriov_numvfs"), "w") as handle:
        handle.write("8\n")
    before = _configs(root)
    code, res = run_module(kernel_runtime, check_mode=False, sysroot=root, tuning=_acs_tuning())
    assert code == 1 and res["msg"].startswith("kernel_tuning_acs_disable: refused on a virtualization host, nothing was "
                                               "changed: " + words + ".")
    assert "0000:0d:00.0" not in res["msg"] and "Set kernel_tuning_acs_disable: false for this node" in res["msg"]
    assert _configs(root) == before and read(root, "proc/sys/kernel/numa_balancing") == "1"
    assert not any(path.exists() for path in role_paths.values())


def test_the_module_clears_acs_now_and_installs_the_unit_idempotently(sim_pci_tree, etc, tools, role_paths, run_module):
    root = sim_pci_tree(FAULT)
    make_node(pathlib.Path(root))
    etc()
    before = _configs(root)
    code, res = run_module(kernel_runtime, check_mode=True, diff=True, sysroot=root, tuning=_acs_tuning())
    assert code == 0 and res["changed"] and res["acs"] == {"bridges": res["acs"]["bridges"], "cleared": [ENABLED],
                                                           "list": str(role_paths["ACS_LIST"])}
    runtime = res["diff"][0]
    assert runtime["before_header"] == "runtime values" and "ACS Control %s = 0x001d\n" % ENABLED in runtime["before"]
    assert "ACS Control %s = 0x0000\n" % ENABLED in runtime["after"]
    headers = [d["before_header"] for d in res["diff"]]
    for name in ("ACS_SCRIPT", "ACS_LIST", "ACS_UNIT_FILE", "ACS_UNIT_LINK"):
        assert str(role_paths[name]) in headers and not role_paths[name].exists()
    assert _configs(root) == before
    # the real run: the files, then the unit's own program on the list, then pci_acs passes
    code, res = run_module(kernel_runtime, diff=True, sysroot=root, tuning=_acs_tuning())
    assert code == 0 and res["changed"] and res["acs"]["cleared"] == [ENABLED] and res["unit_changed"]
    assert _pci_acs(root)["status"] == "pass"
    assert [bdf for bdf in before if _configs(root)[bdf] != before[bdf]] == [ENABLED]
    assert oct(role_paths["ACS_SCRIPT"].stat().st_mode & 0o7777) == "0o755" and role_paths["ACS_SCRIPT"].read_text() == ACS_PROGRAM
    assert oct(role_paths["ACS_LIST"].stat().st_mode & 0o7777) == "0o644"
    assert os.readlink(role_paths["ACS_UNIT_LINK"]) == str(role_paths["ACS_UNIT_FILE"])
    assert "ExecStart=%s %s %s/sys/bus/pci/devices %s" % (sys.executable, role_paths["ACS_SCRIPT"], root, role_paths["ACS_LIST"]) \
        in role_paths["ACS_UNIT_FILE"].read_text()
    assert [str(role_paths[k]) for k in ("ACS_SCRIPT", "ACS_LIST", "ACS_UNIT_FILE")] == res["managed"]["files"][-3:]
    assert {"name": "topotune-acs.service", "enabled": True, "active": None} in res["managed"]["units"]
    # again: nothing to do
    code, again = run_module(kernel_runtime, diff=True, sysroot=root, tuning=_acs_tuning())
    assert code == 0 and not again["changed"] and again["diff"] == [] and again["acs"]["cleared"] == []
    # a reboot set it again (the firmware, the kernel): cleared again, the files untouched
    _set_acs(root, ENABLED, 0x001D)
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_acs_tuning())
    assert code == 0 and res["changed"] and res["acs"]["cleared"] == [ENABLED] and res["changed_files"] == []
    assert _pci_acs(root)["status"] == "pass"
    # turned off: the unit, its link, program and list go (ACS itself is left as it is until the next boot)
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_acs_tuning(acs_disable=False))
    assert code == 0 and res["unit_changed"] and res["acs"] == {"bridges": [], "cleared": [], "list": None}
    assert sorted(res["removed_files"]) == sorted(str(role_paths[k]) for k in ("ACS_SCRIPT", "ACS_LIST", "ACS_UNIT_FILE"))
    assert res["changed_links"] == [str(role_paths["ACS_UNIT_LINK"])] and not os.path.lexists(role_paths["ACS_UNIT_LINK"])
    assert not any(u["name"] == "topotune-acs.service" for u in res["managed"]["units"])


@pytest.mark.parametrize("script,words", [
    ("import sys\nsys.exit('topotune-acs: 0000:37:00.0: boom; no bridge was written')\n",
     "failed (rc=1): topotune-acs: 0000:37:00.0: boom; no bridge was written"),
    ("pass\n", "ran, but ACS Control still reads non-zero on 0000:37:00.0 (0x001d)"),
])
def test_the_module_fails_when_the_program_fails_or_the_bridges_keep_acs(sim_pci_tree, etc, tools, role_paths, run_module,
                                                                         script, words):
    root = sim_pci_tree(FAULT)
    make_node(pathlib.Path(root))
    etc()
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_acs_tuning(acs_script=script))
    assert code == 1 and words in res["msg"], res["msg"]
    assert _pci_acs(root)["status"] == "fail"
    # the files are complete (the clear comes last); the next run, with the role's program, clears
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_acs_tuning())
    assert code == 0 and res["acs"]["cleared"] == [ENABLED] and _pci_acs(root)["status"] == "pass"


def test_a_program_that_is_not_python_changes_no_file(sim_pci_tree, etc, tools, role_paths, run_module):
    root = sim_pci_tree(FAULT)
    make_node(pathlib.Path(root))
    etc()
    before = _configs(root)
    code, res = run_module(kernel_runtime, sysroot=root, tuning=_acs_tuning(acs_script="#!/bin/sh\necho (\n"))
    assert code == 1 and "validation" in res["msg"] and "no file was changed" in res["msg"], res["msg"]
    assert not any(role_paths[k].exists() for k in ("ACS_SCRIPT", "ACS_LIST", "ACS_UNIT_FILE", "SYSCTL_FILE"))
    assert _configs(root) == before


def test_the_acs_unit_is_enabled_by_its_link_as_systemctl_reads_it_and_drift_sees_it_go(tmp_path):
    """The manifest's unit entry against unit files laid out as on a node (managed_state reads enablement as
    `systemctl is-enabled` does): enabled by the plan's sysinit.target.wants link, drift once the link is gone."""
    from ansible_collections.topotune.instinct.plugins.module_utils.state import managed_state as ms

    state = {"bridges": [{"bdf": ENABLED, "control": 0x001D, "flags": []}], "enabled": [], "unknown": None,
             "virtualized": [], "python": "/usr/bin/python3"}
    plan = kr.plan_tuning(kr.check_tuning(_acs_tuning(), "/"), _boot(), state)
    unit = next(f for f in plan["files"] if f["path"] == kr.ACS_UNIT_FILE)
    link = plan["links"][-1]
    root = tmp_path / "node"
    (root / kr.ACS_UNIT_FILE.lstrip("/")).parent.mkdir(parents=True)
    (root / kr.ACS_UNIT_FILE.lstrip("/")).write_text(unit["content"])
    (root / link["path"].lstrip("/")).parent.mkdir(parents=True)
    os.symlink(link["src"], root / link["path"].lstrip("/"))
    assert ms.unit_file_state(kr.ACS_UNIT, str(root)) == "enabled"
    manifest = ms.build_manifest([{"owner": "kernel_tuning", "sysroot": "/", "units": plan["managed"]["units"]}])
    assert ms.verify_manifest(manifest, unit_root=str(root))["drifted"] == []
    os.unlink(root / link["path"].lstrip("/"))
    drifted = ms.verify_manifest(manifest, unit_root=str(root))["drifted"]
    assert [(d["kind"], d["item"], d["expected"], d["observed"]) for d in drifted] == [
        ("unit", "topotune-acs.service enabled", True, "disabled")]
