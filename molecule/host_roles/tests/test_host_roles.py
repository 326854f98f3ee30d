"""After converge: kernel_tuning, cpu_governor and platform_checks left each simulated node in the expected
state, and the JSON check reports on the controller hold the right fail/warn results for the fault nodes."""

import json
import os

import pytest

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")


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


EXPECTED = {
    "mi300x-8gpu-cpx": ("MI300X", {"gpu_pcie_speed_width": "pass", "pci_accelerators": "pass", "numa_nps": "pass"}),
    "mi250x-8gcd": ("MI250X", {"gpu_pcie_speed_width": "pass", "pci_accelerators": "pass", "numa_nps": "pass"}),
    "fault-x8-gen3": ("MI300X", {"gpu_pcie_speed_width": "fail", "pci_accelerators": "pass"}),
    "fault-numa-minus1": ("MI300X", {"gpu_numa_affinity": "warn", "cpu_governor": "unknown", "iommu_state": "fail"}),
    "fault-missing-gpu": ("MI300X", {"pci_accelerators": "fail", "gpu_pcie_speed_width": "pass"}),
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
