"""The node-local drift check (plugins/module_utils/state/drift_metrics.py) on a simulated node's tree: the metrics it writes
for a clean node, a drifted one, a missing or unreadable manifest, a failing stage, and the exposition format.
tests/integration/test_drift_exporter.py runs it as the installed systemd service with the real node_exporter,
promtool and Prometheus."""

import fcntl
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.state import drift_metrics
from ansible_collections.topotune.instinct.plugins.module_utils.state.managed_state import build_manifest, dumps
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import CHECK_TABLES, load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as sim  # noqa: E402 - sim/ is not a package

# a sample line of the text exposition format: name, optional labels, value
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (\S+)$')


@pytest.fixture
def node(tmp_path):
    """A simulated node: its sysroot, a manifest of two owners (a file and sysfs/procfs values), the knowledge JSON
    and the checker's configuration."""
    root = tmp_path / "sim"
    sim.build("mi300x-8gpu-2cpu", str(root))
    env_file = tmp_path / "etc" / "topotune" / "env" / "training.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text("HSA_FORCE_FINE_GRAIN_PCIE=1\n")
    (root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").write_text("performance\n")
    (root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").write_text("performance\n")
    (root / "proc/sys/kernel/numa_balancing").write_text("0\n")
    entries = [
        {"owner": "cpu_governor", "sysroot": str(root),
         "values": [{"path": "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", "value": "performance"}]},
        {"owner": "kernel_tuning", "sysroot": str(root), "values": [{"path": "proc/sys/kernel/numa_balancing", "value": "0"}]},
        {"owner": "rocm_env", "files": [str(env_file)]},
    ]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(dumps(build_manifest(entries, owned_root=str(tmp_path / "etc" / "topotune"))))
    (tmp_path / "knowledge.json").write_text(json.dumps(load_knowledge("gpu_generations")))
    dropin = tmp_path / "90-topotune.cfg"
    dropin.write_text('# managed\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt pci=realloc=off"\n')
    config = {"manifest": str(manifest), "sysroot": str(root), "knowledge": str(tmp_path / "knowledge.json"),
              "textfile": str(tmp_path / "textfile" / "topotune.prom"), "grub_dropin": str(dropin),
              "reboot_required_file": str(tmp_path / "reboot-required"), "interval_seconds": 180,
              "platform_checks": {"skip": []}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return {"root": root, "env_file": env_file, "manifest": manifest, "config": config, "tmp": tmp_path}


def samples(families):
    """``{(name, frozenset(labels)): value}`` of ``check()``'s families."""
    return {(name, frozenset(labels.items())): value for name, _kind, _help, rows in families for labels, value in rows}


def series(families, name):
    return {frozenset(k[1]): v for k, v in samples(families).items() if k[0] == name}


def drift(families):
    return {(dict(labels)["owner"], dict(labels)["kind"]): value
            for labels, value in series(families, "topotune_drift_items").items()}


def test_clean_node_exports_zero_per_watched_owner_and_kind(node):
    families, errors = drift_metrics.check(node["config"])
    assert errors == {}
    assert drift(families) == {("cpu_governor", "value"): 0, ("kernel_tuning", "value"): 0, ("rocm_env", "file"): 0,
                               ("rocm_env", "stale"): 0}
    assert series(families, "topotune_manifest_state") == {
        frozenset({("state", "ok")}): 1, frozenset({("state", "missing")}): 0, frozenset({("state", "unreadable")}): 0}
    assert series(families, "topotune_drift_check_success") == {frozenset(): 1}
    # every platform check once, with its status
    checks = series(families, "topotune_platform_check_status")
    ids = [dict(labels)["check"] for labels in checks]
    assert len(ids) == len(set(ids)) > 10 and set(checks.values()) == {1}
    counts = {dict(k)["status"]: v for k, v in series(families, "topotune_platform_checks").items()}
    assert sum(counts.values()) == len(ids)
    assert series(families, "topotune_info") == {frozenset({("version", "0.1.0"), ("generation", "MI300X")}): 1}


@pytest.mark.parametrize("change, expected", [
    (lambda n: (n["root"] / "proc/sys/kernel/numa_balancing").write_text("1\n"), {("kernel_tuning", "value"): 1}),
    (lambda n: (n["root"] / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").write_text("powersave\n"),
     {("cpu_governor", "value"): 1}),
    (lambda n: n["env_file"].write_text("HSA_ENABLE_SDMA=0\n"), {("rocm_env", "file"): 1}),
    (lambda n: (n["env_file"].parent / "old.env").write_text("X=1\n"), {("rocm_env", "stale"): 1}),
    # a copy of the env directory left beside it (cp -a env env.bak): a stale directory in the owned root
    (lambda n: (n["env_file"].parent.parent / "env.bak").mkdir(), {("rocm_env", "stale"): 1}),
    # the drift check's own configuration directory there is topotune's: no drift
    (lambda n: (n["env_file"].parent.parent / "drift-exporter").mkdir(), {}),
    (lambda n: os.chmod(n["env_file"], 0o666), {("rocm_env", "file"): 1}),
])
def test_drift_is_counted_by_owner_and_kind(node, change, expected):
    change(node)
    families, errors = drift_metrics.check(node["config"])
    assert errors == {}
    assert {key: value for key, value in drift(families).items() if value} == expected


@pytest.mark.parametrize("content, state", [(None, "missing"), ("", "unreadable"), ("{\"owners\": 3}", "unreadable"),
                                            ("{not json", "unreadable")])
def test_manifest_missing_or_unreadable_is_a_state_not_drift(node, content, state):
    if content is None:
        node["manifest"].unlink()
    else:
        node["manifest"].write_text(content)
    families, errors = drift_metrics.check(node["config"])
    assert errors == {}
    assert dict(next(iter(k for k, v in series(families, "topotune_manifest_state").items() if v == 1)))["state"] == state
    assert drift(families) == {}
    assert series(families, "topotune_drift_checked_items") == {frozenset(): 0}


@pytest.mark.parametrize("cmdline, dropin, pending", [
    ("BOOT_IMAGE=/vmlinuz root=/dev/sda1", 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt pci=realloc=off"',
     ["iommu=pt", "pci=realloc=off"]),
    ("root=/dev/sda1 iommu=pt pci=bfsort,realloc=off", 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt pci=realloc=off"', []),
    ("root=/dev/sda1 iommu=pt", 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt amd_iommu=on"', ["amd_iommu=on"]),
    ("root=/dev/sda1", "# no GRUB line\n", []),
    ("root=/dev/sda1", None, []),
])
def test_pending_kernel_parameters(cmdline, dropin, pending):
    assert drift_metrics.pending_kernel_parameters(dropin, cmdline) == pending


def test_reboot_pending_reasons(node):
    (node["root"] / "proc/cmdline").write_text("root=/dev/sda1 iommu=pt pci=realloc=off\n")
    families, _errors = drift_metrics.check(node["config"])
    assert {dict(k)["reason"]: v for k, v in series(families, "topotune_reboot_pending").items()} == {
        "kernel_parameters": 0, "system": 0}
    (node["root"] / "proc/cmdline").write_text("root=/dev/sda1\n")
    (node["tmp"] / "reboot-required").write_text("*** System restart required ***\n")
    families, _errors = drift_metrics.check(node["config"])
    assert {dict(k)["reason"]: v for k, v in series(families, "topotune_reboot_pending").items()} == {
        "kernel_parameters": 1, "system": 1}


def test_a_failing_stage_is_counted_and_leaves_the_others(node):
    os.unlink(node["config"]["knowledge"])
    families, errors = drift_metrics.check(node["config"], previous={"platform_checks": 4, "manifest": 1})
    assert list(errors) == ["platform_checks"] and "knowledge.json" in errors["platform_checks"]
    assert series(families, "topotune_platform_check_status") == {}
    assert drift(families)[("rocm_env", "file")] == 0
    assert {dict(k)["stage"]: v for k, v in series(families, "topotune_drift_check_errors_total").items()} == {
        "manifest": 1, "platform_checks": 5, "reboot": 0}
    assert series(families, "topotune_drift_check_success") == {frozenset(): 0}


def test_exposition_format_and_escaping():
    text = drift_metrics.render([
        ("topotune_x", "gauge", "Help with a \\ backslash\nand a newline.", [({"b": 'say "hi"\n', "a": "c:\\d"}, 1.5)]),
        ("topotune_y_total", "counter", "A counter.", [({}, 3)]),
    ])
    assert text == ('# HELP topotune_x Help with a \\\\ backslash and a newline.\n# TYPE topotune_x gauge\n'
                    'topotune_x{a="c:\\\\d",b="say \\"hi\\"\\n"} 1.5\n'
                    '# HELP topotune_y_total A counter.\n# TYPE topotune_y_total counter\ntopotune_y_total 3\n')


def test_main_writes_the_textfile_atomically_and_carries_the_counter(node, capsys):
    config = str(node["tmp"] / "config.json")
    os.unlink(node["config"]["knowledge"])
    assert drift_metrics.main(["--config", config]) == 1
    assert drift_metrics.main(["--config", config]) == 1
    textfile = node["config"]["textfile"]
    text = open(textfile, encoding="utf-8").read()
    assert 'topotune_drift_check_errors_total{stage="platform_checks"} 2' in text
    assert oct(os.stat(textfile).st_mode & 0o777) == "0o644"
    assert os.listdir(os.path.dirname(textfile)) == ["topotune.prom"]
    for line in text.splitlines():
        assert line.startswith("# ") or SAMPLE.match(line), line
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert all(name.startswith("topotune_") for name in names)
    assert [n for n in names if n.endswith("_total")] == ["topotune_drift_check_errors_total"]
    assert "stage platform_checks failed" in capsys.readouterr().err


def test_a_second_check_leaves_while_the_lock_is_held(node, capsys):
    config = str(node["tmp"] / "config.json")
    fd = os.open(config, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert drift_metrics.main(["--config", config]) == 0
    finally:
        os.close(fd)
    assert "another check holds the lock" in capsys.readouterr().out
    assert not os.path.exists(node["config"]["textfile"])


@pytest.mark.parametrize("content, words", [
    (None, "cannot read the checker configuration"),
    ("[]", "is not a JSON object"),
    ('{"manifest": "relative/path", "sysroot": "/", "knowledge": "/k", "textfile": "/t"}', "lacks manifest"),
])
def test_bad_configuration_is_one_line_naming_the_fix(tmp_path, capsys, content, words):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    assert drift_metrics.main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "drift_exporter" in err and len(err.strip().splitlines()) == 1


def test_version_is_the_collection_version():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        assert drift_metrics.TOPOTUNE_VERSION == yaml.safe_load(handle)["version"]


OPTIONS = {"sysroot": "/", "textfile_dir": "/var/lib/prometheus/node-exporter", "manifest": "/etc/topotune/manifest.json",
           "interval_seconds": 120, "randomized_delay_seconds": 60, "boot_delay_seconds": 60, "timer_enabled": True,
           "generation": "", "gpu_count": 0, "expected": {}, "virtualization_host": False, "cpu_governor": "",
           "transparent_hugepage": "", "skip": []}
PATHS = {"package": "/usr/local/lib/topotune/topotune_node", "knowledge": "/usr/local/lib/topotune/knowledge.json",
         "config": "/etc/topotune/drift-exporter/config.json", "script": "/usr/local/sbin/topotune-drift-check",
         "service": "/etc/systemd/system/topotune-drift-check.service",
         "timer": "/etc/systemd/system/topotune-drift-check.timer",
         "timer_link": "/etc/systemd/system/timers.target.wants/topotune-drift-check.timer",
         "healthcheck_script": "/usr/local/sbin/topotune-healthcheck",
         "healthcheck_config": "/etc/topotune/healthcheck.json", "healthcheck_log": "/var/log/topotune/healthcheck.log"}


def _plan(**over):
    return _plan_with({}, **over)


def _plan_with(extra_knowledge, **over):
    from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.drift_exporter import plan

    knowledge = {name: {"generations": []} if name == "gpu_generations" else {"name": name}
                 for name in ("gpu_generations",) + CHECK_TABLES}
    knowledge.update(extra_knowledge)
    return plan(dict(OPTIONS, **over), knowledge, {"script": "#!/usr/bin/python3 -I\n", "service": "[Unit]\n",
                                                   "timer": "[Timer]\n", "healthcheck_script": "# healthcheck\n"},
                PATHS)


def test_the_shipped_package_imports_on_its_own(tmp_path):
    """The role ships the checker's imports, found from the code: copied alone, the package imports and runs."""
    package = tmp_path / "lib" / "topotune_node"
    package.mkdir(parents=True)
    shipped = [f for f in _plan()["files"] if f["path"].startswith(PATHS["package"] + "/")]
    for item in shipped:
        target = package / os.path.relpath(item["path"], PATHS["package"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(item["content"])
    names = sorted(os.path.relpath(f["path"], PATHS["package"])[:-3] for f in shipped)
    assert "__init__" in names and "state/drift_metrics" in names and "state/kernel_settings" in names
    assert "state/healthcheck" in names  # Slurm's HealthCheckProgram, shipped with the check it runs
    assert "core/__init__" in names and "launch/render" not in names
    for item in shipped[1:]:
        source = os.path.join(REPO, "plugins", "module_utils", os.path.relpath(item["path"], PATHS["package"]))
        with open(source, encoding="utf-8") as handle:
            assert item["content"] == handle.read(), item["path"]  # byte for byte the collection's
    probe = "import sys; sys.path.insert(0, %r); from topotune_node.state.drift_metrics import main; print(main.__module__)" % str(
        tmp_path / "lib")
    proc = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=False, cwd=str(tmp_path))
    assert proc.returncode == 0 and proc.stdout.strip() == "topotune_node.state.drift_metrics", proc.stderr
    probe = probe.replace("drift_metrics", "healthcheck")
    proc = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=False, cwd=str(tmp_path))
    assert proc.returncode == 0 and proc.stdout.strip() == "topotune_node.state.healthcheck", proc.stderr


def test_the_health_check_program_is_installed_only_when_asked():
    off = {f["path"]: f for f in _plan()["files"]}
    assert off[PATHS["healthcheck_script"]] == {"path": PATHS["healthcheck_script"], "state": "absent"}
    assert off[PATHS["healthcheck_config"]]["state"] == "absent"
    knowledge = {"scheduler": {"healthcheck": {"reason_prefix": "topotune:", "drain": [{"check": "gpu_ecc_errors"}]}}}
    on = {f["path"]: f for f in _plan_with(knowledge, slurm_healthcheck=True, healthcheck_timeout_seconds=30)["files"]}
    config = json.loads(on[PATHS["healthcheck_config"]]["content"])
    assert config == {"drift_config": PATHS["config"], "drain": ["gpu_ecc_errors"], "timeout_seconds": 30,
                      "log": PATHS["healthcheck_log"], "scontrol": "scontrol", "reason_prefix": "topotune:"}
    assert on[PATHS["healthcheck_script"]]["mode"] == "0755" and "healthcheck" in on[PATHS["healthcheck_script"]]["content"]
    with pytest.raises(TopotuneError, match="drift_exporter_healthcheck_timeout_seconds 60: 1 to 55 seconds"):
        _plan_with(knowledge, slurm_healthcheck=True, healthcheck_timeout_seconds=60)
    with pytest.raises(TopotuneError, match="drift_exporter_healthcheck_drain: drain checks"):
        _plan_with(knowledge, slurm_healthcheck=True, healthcheck_drain=["ECC errors"])


def test_the_plan_writes_the_configuration_the_checker_loads(tmp_path):
    result = _plan(interval_seconds=300, randomized_delay_seconds=30, gpu_count=8, generation="MI300X", skip=["smt"])
    files = {f["path"]: f for f in result["files"]}
    config = json.loads(files[PATHS["config"]]["content"])
    assert config == result["config"] and config["interval_seconds"] == 330
    assert config["textfile"] == "/var/lib/prometheus/node-exporter/topotune.prom"
    assert config["grub_dropin"] == "/etc/default/grub.d/90-topotune.cfg" and config["knowledge"] == PATHS["knowledge"]
    assert config["platform_checks"] == {"generation": "MI300X", "gpu_count": 8, "expected": {}, "virtualization_host": False,
                                         "cpu_governor": "", "transparent_hugepage": "", "skip": ["smt"]}
    path = tmp_path / "config.json"
    path.write_text(files[PATHS["config"]]["content"])
    assert drift_metrics.load_config(str(path)) == config
    assert json.loads(files[PATHS["knowledge"]]["content"]) == {"generations": [], "pcie_health": {"name": "pcie_health"},
                                                                "gpu_health": {"name": "gpu_health"},
                                                                "rocm_compatibility": {"name": "rocm_compatibility"}}
    assert files[PATHS["script"]]["mode"] == "0755" and "py_compile" in files[PATHS["script"]]["validate"]
    assert result["links"] == [{"path": PATHS["timer_link"], "src": PATHS["timer"], "state": "present"}]
    off = _plan(timer_enabled=False)
    assert off["config"]["interval_seconds"] == 0 and off["links"][0]["state"] == "absent"
    assert _plan(generation="")["config"]["platform_checks"]["generation"] is None


@pytest.mark.parametrize("over,words", [
    ({"textfile_dir": "relative/dir"}, "drift_exporter_textfile_dir must be an absolute path of letters, digits and ._/@+-"),
    ({"manifest": "/etc/topotune/my manifest.json"}, "drift_exporter_manifest must be an absolute path"),
    ({"sysroot": "sim"}, "drift_exporter_sysroot must be an absolute path without spaces"),
    ({"interval_seconds": 5}, "drift_exporter_interval_seconds must be at least 10"),
    ({"randomized_delay_seconds": -1}, "drift_exporter_randomized_delay_seconds must be 0 or more"),
    ({"boot_delay_seconds": "soon"}, "drift_exporter_boot_delay_seconds must be 0 or more"),
    ({"gpu_count": -1}, "drift_exporter_gpu_count must be an integer >= 0"),
    ({"timer_enabled": "maybe"}, "drift_exporter_timer_enabled must be true or false"),
])
def test_build_config_names_each_wrong_variable(over, words):
    with pytest.raises(drift_metrics.CheckerError) as info:
        drift_metrics.build_config(dict(OPTIONS, **over), PATHS["knowledge"])
    assert str(info.value).startswith("drift_exporter: invalid input. ") and words in str(info.value)


def test_variables_given_as_text_with_minus_e_are_read_as_ansible_reads_them():
    # ansible-playbook -e drift_exporter_timer_enabled=false passes the text "false"
    off = _plan(timer_enabled="false", virtualization_host="yes", interval_seconds="300", gpu_count="8")
    assert off["config"]["interval_seconds"] == 0 and off["links"][0]["state"] == "absent"
    assert off["config"]["platform_checks"]["virtualization_host"] is True
    assert off["config"]["platform_checks"]["gpu_count"] == 8
    assert _plan(timer_enabled="True", interval_seconds="300")["config"]["interval_seconds"] == 360


def test_the_filter_names_the_variable():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.topotune.instinct.plugins.filter.drift_exporter_plan import drift_exporter_plan

    with pytest.raises(AnsibleFilterError, match="drift_exporter_interval_seconds"):
        drift_exporter_plan(dict(OPTIONS, interval_seconds=1), {}, {}, PATHS)
