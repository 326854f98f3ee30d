"""After converge: kernel_tuning, cpu_governor and platform_checks left each simulated node in the expected
state, and the JSON check reports on the controller hold the right fail/warn results for the fault nodes."""

import json
import os
import re
import sys

import pytest

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# the checkout as topotune.instinct (scripts/setup-controller): the ACS registers are decoded by the checks' own code
sys.path.insert(0, os.path.join(REPO, ".cache", "collections"))
from ansible_collections.topotune.instinct.plugins.module_utils.checks.pci_config import ConfigSpace  # noqa: E402

# kernel_tuning_acs_disable (tt-host-acs, profile fault-acs-enabled: ACS Control 0x001d on switch port 0000:37:00.0)
ACS_UNIT = "/etc/systemd/system/topotune-acs.service"
ACS_LINK = "/etc/systemd/system/sysinit.target.wants/topotune-acs.service"
ACS_PROGRAM = "/usr/local/sbin/topotune-acs"
ACS_LIST = "/etc/topotune/acs-bridges.conf"
PCI_DEVICES = "/sim/sys/bus/pci/devices"


@pytest.fixture(scope="module")
def name(host):
    return host.backend.get_hostname()


@pytest.fixture(scope="module")
def profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


@pytest.fixture(scope="module")
def report(name):
    path = os.path.join(EPHEMERAL, "platform-checks", "%s.json" % name)
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["by_id"] = {r["id"]: r for r in data["results"]}
    return data


def test_numa_balancing_off_now_and_persisted(host):
    assert host.file("/sim/proc/sys/kernel/numa_balancing").content_string.strip() == "0"
    conf = host.file("/etc/sysctl.d/90-topotune-kernel.conf")
    assert conf.user == "root" and conf.mode == 0o644
    assert "kernel.numa_balancing = 0" in conf.content_string


def test_kernel_parameters_persisted(host):
    if host.ansible.get_variables().get("kernel_tuning_bootloader") == "grubby":
        args = host.file("/var/lib/fake-grubby/args").content_string.split()
        assert args == ["ro", "quiet", "iommu=pt", "pci=realloc=off", "pci=bfsort"]
        assert not host.file("/etc/default/grub.d/90-topotune.cfg").exists
    else:
        cfg = host.file("/etc/default/grub.d/90-topotune.cfg").content_string
        assert 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt pci=realloc=off pci=bfsort"' in cfg


def test_c2_disabled_on_every_cpu(host):
    out = host.check_output("grep -l '^C2$' /sim/sys/devices/system/cpu/cpu*/cpuidle/state*/name | wc -l")
    disabled = host.check_output(
        "for n in $(grep -l '^C2$' /sim/sys/devices/system/cpu/cpu*/cpuidle/state*/name); do grep -h . ${n%/name}/disable; done"
        " | sort -u")
    assert int(out) > 0 and disabled == "1"
    assert host.service("topotune-cstate.service").is_enabled


def test_governor(host, profile):
    governors = host.check_output("grep -hs . /sim/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | sort -u")
    if profile == "fault-numa-minus1":  # a VM: no cpufreq, nothing set, no failure
        assert governors == ""
    else:
        assert governors == "performance"
    assert host.service("topotune-cpu-governor.service").is_enabled
    unit = host.file("/etc/systemd/system/topotune-cpu-governor.service").content_string
    assert "ExecStart=/bin/sh /usr/local/sbin/topotune-cpu-governor performance all /sim/sys/devices/system/cpu" in unit


def test_record_keeps_the_converge_options(host):
    """The enforcing run (other skip, platform_checks_record: false) left the converge's record alone."""
    record = host.file("/etc/topotune/platform-checks.json")
    assert record.user == "root" and record.mode == 0o644
    data = json.loads(record.content_string)
    assert data["skip"] == [] and data["virtualization_host"] is False


def test_report_is_complete(report, name):
    assert report["host"] == name
    for res in report["results"]:
        assert set(res) >= {"id", "status", "observed", "expected", "remediation", "source"}
        assert res["status"] in ("pass", "warn", "fail", "unknown")
        if res["status"] in ("warn", "fail"):
            assert res["remediation"], res
    assert report["summary"]["total"] == len(report["results"])


def test_tuned_settings_pass(report, profile):
    by_id = report["by_id"]
    assert by_id["numa_balancing"]["status"] == "pass"
    assert by_id["cstate_c2"]["status"] == "pass"
    if profile != "fault-numa-minus1":
        assert by_id["cpu_governor"]["status"] == "pass"
    # no reboot happened: the parameters are in the boot loader drop-in, the running command line lacks them
    assert by_id["iommu_pt"]["status"] == "warn" and by_id["iommu_pt"]["observed"] == "configured, pending reboot"
    assert "reboot" in by_id["iommu_pt"]["remediation"]


@pytest.fixture(scope="module")
def acs_fix(host):
    return bool(host.ansible.get_variables().get("kernel_tuning_acs_disable"))


def _acs_control(host, bdf):
    return ConfigSpace(host.file("%s/%s/config" % (PCI_DEVICES, bdf)).content).acs_control


def _acs_bridges(host):
    return [line for line in host.file(ACS_LIST).content_string.splitlines() if line and not line.startswith("#")]


def test_the_acs_fix_is_on_the_nodes_that_ask_for_it_only(host, acs_fix):
    for path in (ACS_UNIT, ACS_LINK, ACS_PROGRAM, ACS_LIST):
        assert host.file(path).exists == acs_fix, path


def test_acs_unit_installed_enabled_and_every_listed_bridge_clear(host, acs_fix, report):
    if not acs_fix:
        pytest.skip("kernel_tuning_acs_disable is not set on this node")
    for path, mode in ((ACS_UNIT, 0o644), (ACS_PROGRAM, 0o755), (ACS_LIST, 0o644)):
        managed = host.file(path)
        assert (managed.user, managed.group, managed.mode) == ("root", "root", mode), path
    # run by the interpreter Ansible found on the node (an absolute path), with the program, the devices and the list
    exec_start = [line for line in host.file(ACS_UNIT).content_string.splitlines() if line.startswith("ExecStart=")]
    assert len(exec_start) == 1 and re.match(r"^ExecStart=/\S*python3\S* %s %s %s$" % (
        re.escape(ACS_PROGRAM), re.escape(PCI_DEVICES), re.escape(ACS_LIST)), exec_start[0]), exec_start
    assert host.file(ACS_LINK).is_symlink and host.file(ACS_LINK).linked_to == ACS_UNIT
    assert host.service("topotune-acs.service").is_enabled
    # the bridges check pci_acs reads (above 8 GPUs and 8 NICs), the fault's switch port among them, all clear now
    bridges = _acs_bridges(host)
    assert len(bridges) == 32 and "0000:37:00.0" in bridges
    assert {bdf: _acs_control(host, bdf) for bdf in bridges} == {bdf: 0 for bdf in bridges}
    assert report["by_id"]["pci_acs"]["status"] == "pass", report["by_id"]["pci_acs"]


def test_acs_unit_clears_what_the_next_boot_sets_again(host, acs_fix):
    """The unit as systemd runs it at boot: the firmware or the kernel set ACS again (0x001d, Linux's
    pci_std_enable_acs), the unit clears it and logs one line per bridge."""
    if not acs_fix:
        pytest.skip("kernel_tuning_acs_disable is not set on this node")
    bdf = "0000:37:00.0"
    config = "%s/%s/config" % (PCI_DEVICES, bdf)
    offset = ConfigSpace(host.file(config).content).ext_capabilities()[0x000D] + 6
    host.check_output("printf '\\035\\000' | dd of=%s bs=1 seek=%d conv=notrunc status=none" % (config, offset))
    assert _acs_control(host, bdf) == 0x001D
    restart = host.run("systemctl restart topotune-acs.service")
    journal = host.run("journalctl -u topotune-acs.service -o cat --no-pager").stdout
    assert restart.rc == 0, restart.stderr + journal
    assert host.check_output("systemctl is-active topotune-acs.service") == "active"
    assert _acs_control(host, bdf) == 0, journal
    assert "topotune-acs: %s ACS Control 0x001d -> 0x0000" % bdf in journal.splitlines(), journal
    assert all(_acs_control(host, b) == 0 for b in _acs_bridges(host))


EXPECTED = {
    "mi300x-8gpu-cpx": ("MI300X", {"gpu_pcie_speed_width": "pass", "pci_accelerators": "pass", "numa_nps": "pass"}),
    "mi250x-8gcd": ("MI250X", {"gpu_pcie_speed_width": "pass", "pci_accelerators": "pass", "numa_nps": "pass"}),
    "fault-x8-gen3": ("MI300X", {"gpu_pcie_speed_width": "fail", "pci_accelerators": "pass"}),
    "fault-numa-minus1": ("MI300X", {"gpu_numa_affinity": "warn", "cpu_governor": "unknown", "iommu_state": "fail"}),
    "fault-missing-gpu": ("MI300X", {"pci_accelerators": "fail", "gpu_pcie_speed_width": "pass"}),
    # the fault fixed by kernel_tuning_acs_disable in the same converge
    "fault-acs-enabled": ("MI300X", {"pci_acs": "pass", "gpu_pcie_speed_width": "pass", "pci_accelerators": "pass"}),
}


def test_profile_specific_results(report, profile):
    generation, statuses = EXPECTED[profile]
    assert report["generation"] == generation
    for check_id, status in statuses.items():
        assert report["by_id"][check_id]["status"] == status, report["by_id"][check_id]
    if profile == "fault-x8-gen3":
        res = report["by_id"]["gpu_pcie_speed_width"]
        assert "0000:5c:00.0 x8 8.0 GT/s" in res["observed"] and "reseat" in res["remediation"]
    if profile == "fault-numa-minus1":
        assert "numa_node -1" in report["by_id"]["gpu_numa_affinity"]["observed"]
