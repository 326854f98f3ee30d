"""Node-local drift metrics with the real Prometheus components (Debian bookworm's prometheus-node-exporter 1.5 and
prometheus 2.42 with promtool), in one simulated node of sim/image/build-prometheus-image.sh.

One node (``mi300x-8gpu-2cpu``, the lightest profile) for the whole file:

- bring-up with playbooks/site.yml (the manifest), then role topotune.instinct.drift_exporter through
  playbooks/drift_exporter.yml: in check mode on the fresh node, for real, and again (changed=0);
- node_exporter (the package's unit, its default textfile directory) serves the checker's metrics;
  ``promtool check metrics`` accepts them; a Prometheus server in the node scrapes node_exporter every second with the
  node's name as ``instance`` (as a fleet scrapes ``<node>:9100``) and loads the shipped alert rules;
- drift injected (NUMA balancing back on, the env file edited): the next check's metrics name the node in a
  Prometheus query, the drift alert is pending; after playbooks/pull.yml corrects the node, the query is empty;
- the unit's privileges against the real kernel: its processes read whole PCI config spaces of the host's devices
  (the kernel gives more than 64 bytes only to an opener with CAP_SYS_ADMIN, drivers/pci/pci-sysfs.c
  pci_read_config()), which the same probe under the unit's old bounding set cannot, and cannot remount /sys;
  the config-space checks are judged, and ACS turned back on is a failing check with its alert pending;
- topotune's metrics made unreadable (node_textfile_scrape_error, the per-node absence alert) and the timer turned
  off (interval 0): each alert pending in the real Prometheus, and gone again when the check and the timer are back.

The shipped rules pass ``promtool check rules`` and ``promtool test rules`` (tests/integration/prometheus/).
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

import pytest

from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.drift_exporter import shipped_modules, shipped_packages

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
IMAGE = os.environ.get("TOPOTUNE_PROMETHEUS_NODE_IMAGE", "local/topotune-node-prometheus:bookworm")
NODE = "tt-drift-exporter-%d" % os.getpid()
PROFILE = "mi300x-8gpu-2cpu"
RULES = "extensions/prometheus/topotune-rules.yml"
RULES_TEST = "tests/integration/prometheus/topotune-rules.test.yml"
TEXTFILE = "/var/lib/prometheus/node-exporter/topotune.prom"
UNIT = "topotune-drift-check"
PROMETHEUS_YML = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - /etc/prometheus/topotune-rules.yml
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:9100']
    relabel_configs:
      # a fleet scrapes <node>:9100; here node_exporter is on loopback, so the node's name is set as instance
      - target_label: instance
        replacement: %s
"""
# Fetch a URL inside the node (it has no network namespace shared with the host, and no curl).
FETCH = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"


def _cluster():
    import importlib.util

    spec = importlib.util.spec_from_file_location("topotune_sim_cluster", os.path.join(REPO, "sim", "cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(script, check=True, timeout=120):
    proc = subprocess.run(["docker", "exec", NODE, "sh", "-c", script], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%d): %s%s" % (script, proc.returncode, proc.stdout, proc.stderr))
    return proc


def fetch(url):
    return sh("python3 -c %s %s" % (_quote(FETCH), _quote(url))).stdout


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def query(promql):
    """The result vector of an instant query against the node's Prometheus."""
    answer = json.loads(fetch("http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def wait_for(what, probe, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.5)


def playbook(work, name, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(work / "hosts.yml"), *extra,
                           os.path.join(REPO, "playbooks", name)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    (work / ("%s.log" % name)).write_text(proc.stdout + proc.stderr)
    recap = re.search(r"^%s\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)" % re.escape(NODE),
                      proc.stdout, re.MULTILINE)
    assert recap, "%s: no recap (rc=%d): %s" % (name, proc.returncode, (proc.stdout + proc.stderr)[-3000:])
    return {"rc": proc.returncode, "changed": int(recap.group(2)), "failed": int(recap.group(4)), "log": proc.stdout}


def run_check():
    """Run the check as the timer does (systemctl start waits for the oneshot service to finish). The tests start it
    more often than systemd's default start limit (5 in 10 s) allows: reset-failed resets that counter."""
    sh("systemctl reset-failed %s.service; systemctl start %s.service" % (UNIT, UNIT))
    props = dict(line.split("=", 1) for line in sh("systemctl show -p Result -p ExecMainStatus %s.service" % UNIT).stdout.split())
    return props


def alerts(name):
    """The node's Prometheus alerts named ``name`` (pending or firing), as ``[(state, labels)]``."""
    found = json.loads(fetch("http://127.0.0.1:9090/api/v1/alerts"))["data"]["alerts"]
    return [(a["state"], a["labels"]) for a in found if a["labels"]["alertname"] == name]


def drifted_nodes():
    return {r["metric"]["instance"]: float(r["value"][1]) for r in query("sum by (instance) (topotune_drift_items) > 0")}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    built = subprocess.run([os.path.join(REPO, "sim", "image", "build-prometheus-image.sh")], capture_output=True,
                           text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    work = tmp_path_factory.mktemp("drift-exporter")
    inventory = {"all": {"hosts": {NODE: {}}, "vars": {
        "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3",
        "topotune_sysroot": "/sim", "topotune_report_dir": str(work / "out")}}}
    (work / "hosts.yml").write_text(json.dumps(inventory))
    started = time.monotonic()
    try:
        _cluster().start_node(NODE, PROFILE, image=IMAGE)
    except SystemExit as exc:
        pytest.fail(str(exc))
    try:
        site = playbook(work, "site.yml")
        assert site["rc"] == 0 and site["failed"] == 0, site["log"][-3000:]
        runs = {name: playbook(work, "drift_exporter.yml", *extra)
                for name, extra in (("check", ["--check", "--diff"]), ("real", []), ("again", []))}
        sh("systemctl start prometheus-node-exporter.service")
        subprocess.run(["docker", "exec", "-i", NODE, "sh", "-c", "cat > /etc/prometheus/prometheus.yml"],
                       input=PROMETHEUS_YML % NODE, text=True, check=True)
        subprocess.run(["docker", "cp", os.path.join(REPO, RULES), NODE + ":/etc/prometheus/topotune-rules.yml"], check=True)
        sh("chmod 0644 /etc/prometheus/topotune-rules.yml && promtool check config /etc/prometheus/prometheus.yml")
        sh("systemctl start prometheus.service")
        # the HTTP API answers 503 until the TSDB is open
        wait_for("Prometheus to be ready", lambda: sh("python3 -c %s http://127.0.0.1:9090/-/ready" % _quote(FETCH),
                                                      check=False).returncode == 0, timeout=120)
        yield {"work": work, "runs": runs, "started": started}
    finally:
        subprocess.run(["docker", "rm", "-f", NODE], capture_output=True, check=False)
        print("\ntest_drift_exporter: node set up and used for %.0f s" % (time.monotonic() - started))


def test_shipped_rules_pass_promtool_check_and_test():
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", REPO + ":/repo:ro", IMAGE, "sh", "-c",
                           "promtool check rules /repo/%s && promtool test rules /repo/%s" % (RULES, RULES_TEST)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout and proc.stdout.rstrip().endswith("SUCCESS"), proc.stdout


def test_role_check_mode_then_idempotent(node):
    runs = node["runs"]
    for name in ("check", "real", "again"):
        assert runs[name]["rc"] == 0 and runs[name]["failed"] == 0, (name, runs[name]["log"][-3000:])
    # check mode on the fresh node predicts the install; the real run installs; the second run changes nothing
    assert runs["check"]["changed"] >= 1 and "/etc/systemd/system/topotune-drift-check.timer" in runs["check"]["log"]
    assert runs["real"]["changed"] >= 1
    assert runs["again"]["changed"] == 0, runs["again"]["log"][-3000:]
    assert sh("systemctl is-enabled %s.timer; systemctl is-active %s.timer" % (UNIT, UNIT)).stdout.split() == ["enabled", "active"]


def test_installed_files_are_root_owned_and_not_writable_by_others(node):
    out = sh("stat -c '%U:%G %a %n' /usr/local/sbin/topotune-drift-check "
             "$(find /usr/local/lib/topotune/topotune_node -name '*.py') "
             "/usr/local/lib/topotune/knowledge.json /etc/topotune/drift-exporter/config.json "
             "/etc/systemd/system/topotune-drift-check.service /etc/systemd/system/topotune-drift-check.timer").stdout
    rows = [line.split(" ", 2) for line in out.splitlines()]
    # the script, the module files the checker imports with the package's and each sub-package's __init__.py,
    # knowledge, config, 2 units
    modules = shipped_modules()
    assert len(rows) == 1 + len(modules) + 1 + len(shipped_packages(modules)) + 4, out
    for owner, mode, path in rows:
        assert owner == "root:root" and not int(mode, 8) & 0o022, (owner, mode, path)
    # the node's copy is the collection's code, byte for byte
    with open(os.path.join(REPO, "plugins", "module_utils", "state", "managed_state.py"), encoding="utf-8") as handle:
        assert sh("cat /usr/local/lib/topotune/topotune_node/state/managed_state.py").stdout == handle.read()


def test_service_runs_hardened_and_writes_the_textfile(node):
    props = run_check()
    assert props == {"Result": "success", "ExecMainStatus": "0"}, props
    unit = dict(line.split("=", 1) for line in sh(
        "systemctl show -p ProtectSystem -p NoNewPrivileges -p PrivateTmp -p ReadWritePaths -p Nice "
        "-p IOSchedulingClass -p ProtectKernelTunables -p User -p CapabilityBoundingSet -p AmbientCapabilities "
        "-p SystemCallErrorNumber %s.service" % UNIT).stdout.splitlines())
    # root (no User=) with the bounding set as its effective set: CAP_SYS_ADMIN is what pci_read_config() asks of
    # the opener of a config file for more than 64 bytes, CAP_DAC_READ_SEARCH reads managed files of any mode
    assert unit == {"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
                    "ReadWritePaths": "/var/lib/prometheus/node-exporter", "Nice": "19", "IOSchedulingClass": "3",
                    "ProtectKernelTunables": "yes", "User": "", "CapabilityBoundingSet": "cap_dac_read_search cap_sys_admin",
                    "AmbientCapabilities": "", "SystemCallErrorNumber": "1"}, unit
    # a deny list (~) holding the mount calls, which would let CAP_SYS_ADMIN undo the read-only mounts
    denied = sh("systemctl show -p SystemCallFilter %s.service" % UNIT).stdout.strip().split("=", 1)[1]
    wanted = {"mount", "umount2", "fsopen", "move_mount", "pivot_root", "swapon", "bpf", "open_by_handle_at"}
    assert denied.startswith("~") and wanted <= set(denied[1:].split()), denied
    assert sh("stat -c '%U:%G %a' " + TEXTFILE).stdout.split() == ["root:root", "644"]
    # written by rename: no temp file left in the collector's directory
    assert sh("ls -A /var/lib/prometheus/node-exporter").stdout.split() == ["topotune.prom"]


def test_a_second_check_waits_for_none_while_one_holds_the_lock(node):
    hold = ("python3 -c 'import fcntl, os, subprocess; fd = os.open(\"/etc/topotune/drift-exporter/config.json\", os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print(subprocess.run([\"/usr/local/sbin/topotune-drift-check\"], "
            "capture_output=True, text=True).stdout)'")
    assert "another check holds the lock" in sh(hold).stdout


def test_node_exporter_serves_metrics_that_promtool_accepts(node):
    run_check()
    exposition = fetch("http://127.0.0.1:9100/metrics")
    ours = "\n".join(line for line in exposition.splitlines() if "topotune_" in line) + "\n"
    series = [line for line in ours.splitlines() if not line.startswith("#")]
    names = {re.match(r"[a-z_]+", line).group(0) for line in series}
    assert names == {"topotune_drift_items", "topotune_drift_checked_items", "topotune_manifest_state",
                     "topotune_platform_check_status", "topotune_platform_checks", "topotune_reboot_pending",
                     "topotune_info", "topotune_drift_check_errors_total", "topotune_drift_check_success",
                     "topotune_drift_check_interval_seconds", "topotune_drift_check_duration_seconds",
                     "topotune_drift_check_cpu_seconds", "topotune_drift_check_last_end_time_seconds"}, names
    assert 'topotune_manifest_state{state="ok"} 1' in series
    assert 'topotune_drift_check_success 1' in series
    assert 'topotune_drift_check_interval_seconds 180' in series
    # the textfile collector read it without error
    assert re.search(r'^node_textfile_scrape_error 0$', exposition, re.MULTILINE)
    lint = subprocess.run(["docker", "exec", "-i", NODE, "promtool", "check", "metrics"], input=ours, text=True,
                          capture_output=True, check=False)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr
    # docs/fleet-metrics.md: (owner, kind) pairs + platform checks + 19; 11 pairs and 53 checks after site.yml here
    assert len(series) == 11 + 53 + 19, series


def test_prometheus_names_the_drifted_node_and_clears_after_correction(node):
    wait_for("Prometheus to scrape the node", lambda: query('topotune_manifest_state{state="ok"} == 1'), timeout=60)
    assert drifted_nodes() == {}
    # the node is tuned: kernel parameters only a reboot brings in (a container cannot) are pending
    assert query('topotune_reboot_pending{reason="kernel_parameters"} == 1')[0]["metric"]["instance"] == NODE
    sh("echo 1 > /sim/proc/sys/kernel/numa_balancing; for f in /etc/topotune/env/*.env; do echo HSA_ENABLE_SDMA=0 >> $f; done")
    run_check()
    drifted = wait_for("the drift in Prometheus", drifted_nodes)
    assert drifted == {NODE: 2.0}, drifted
    owners = {(r["metric"]["owner"], r["metric"]["kind"]) for r in query("topotune_drift_items > 0")}
    assert owners == {("kernel_tuning", "value"), ("rocm_env", "file")}, owners
    # joined with node_exporter's own uname: the node's name as the kernel has it
    joined = query("sum by (nodename) (topotune_drift_items * on (instance) group_left (nodename) node_uname_info) > 0")
    assert [r["metric"]["nodename"] for r in joined] == [NODE]
    alerts = json.loads(fetch("http://127.0.0.1:9090/api/v1/alerts"))["data"]["alerts"]
    assert any(a["labels"]["alertname"] == "TopotuneDriftPresent" and a["labels"]["instance"] == NODE for a in alerts) or \
        wait_for("the drift alert", lambda: any(a["labels"]["alertname"] == "TopotuneDriftPresent" for a in json.loads(
            fetch("http://127.0.0.1:9090/api/v1/alerts"))["data"]["alerts"]))

    # playbooks/pull.yml as ansible-pull runs it (limited to the node), reaching the node with docker exec instead of
    # connection local: the node image has no Ansible (docs/fleet-metrics.md, "Correction with ansible-pull")
    pull = playbook(node["work"], "pull.yml", "--limit", NODE, "-e", "ansible_connection=community.docker.docker")
    assert pull["rc"] == 0 and pull["failed"] == 0, pull["log"][-3000:]
    assert "corrected" in pull["log"]
    run_check()
    wait_for("the corrected node in Prometheus",
             lambda: query("sum by (instance) (topotune_drift_items) == 0") and not drifted_nodes())
    assert sh("cat /sim/proc/sys/kernel/numa_balancing").stdout.strip() == "0"


# Run in the unit's sandbox (a runtime drop-in adds it as ExecStartPost=), and under the unit's bounding set before
# issue 22 (systemd-run): which config-space sizes the kernel gives the process, its capabilities, and whether it can
# remount /sys read-write (the mount calls are filtered).
PROBE = r"""
import ctypes, glob, json, os, sys
sizes = {}
for path in sorted(glob.glob("/sys/bus/pci/devices/*/config")):
    with open(path, "rb") as handle:
        sizes[path.split("/")[-2]] = len(handle.read())
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.mount(None, b"/sys", None, ctypes.c_ulong(32 | 1), None)  # MS_REMOUNT | MS_RDONLY: asks for CAP_SYS_ADMIN
with open(sys.argv[1], "w") as handle:
    json.dump({"sizes": sizes, "cap_eff": int(status["CapEff"].strip(), 16), "remount_errno": ctypes.get_errno() if rc else 0}, handle)
"""
PROBE_OUT = "/var/lib/prometheus/node-exporter/probe-%s.json"
CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN = 2, 21  # linux/capability.h


def test_the_unit_reads_whole_config_spaces_from_the_kernel(node):
    subprocess.run(["docker", "exec", "-i", NODE, "sh", "-c", "cat > /run/topotune-probe.py"], input=PROBE, text=True,
                   check=True)
    sh("mkdir -p /run/systemd/system/%s.service.d && printf '[Service]\\nExecStartPost=/usr/bin/python3 -I "
       "/run/topotune-probe.py %s\\n' > /run/systemd/system/%s.service.d/probe.conf && systemctl daemon-reload"
       % (UNIT, PROBE_OUT % "unit", UNIT))
    try:
        assert run_check() == {"Result": "success", "ExecMainStatus": "0"}
        unit = json.loads(sh("cat " + PROBE_OUT % "unit").stdout)
        # the same probe as a unit with the bounding set the checker had before (CAP_DAC_READ_SEARCH only), and as
        # one with the new set but no system call filter (in a mount namespace of its own: its remount stays there)
        sh("systemd-run --quiet --wait --collect -p CapabilityBoundingSet=CAP_DAC_READ_SEARCH -p NoNewPrivileges=yes "
           "/usr/bin/python3 -I /run/topotune-probe.py " + PROBE_OUT % "before")
        before = json.loads(sh("cat " + PROBE_OUT % "before").stdout)
        sh("systemd-run --quiet --wait --collect -p 'CapabilityBoundingSet=CAP_DAC_READ_SEARCH CAP_SYS_ADMIN' "
           "-p NoNewPrivileges=yes -p PrivateMounts=yes /usr/bin/python3 -I /run/topotune-probe.py "
           + PROBE_OUT % "unfiltered")
        unfiltered = json.loads(sh("cat " + PROBE_OUT % "unfiltered").stdout)
    finally:
        sh("rm -rf /run/systemd/system/%s.service.d /run/topotune-probe.py %s && systemctl daemon-reload"
           % (UNIT, " ".join(PROBE_OUT % n for n in ("unit", "before", "unfiltered"))))
    # the unit's effective set is its bounding set within the node's (a container without CAP_DAC_READ_SEARCH here;
    # a real node's PID 1 has every capability)
    node_set = int(sh("sed -n 's/^CapBnd:[[:space:]]*//p' /proc/1/status").stdout.strip(), 16)
    assert node_set & (1 << CAP_SYS_ADMIN)
    assert unit["cap_eff"] == ((1 << CAP_DAC_READ_SEARCH) | (1 << CAP_SYS_ADMIN)) & node_set, hex(unit["cap_eff"])
    assert before["cap_eff"] == (1 << CAP_DAC_READ_SEARCH) & node_set, hex(before["cap_eff"])
    assert unfiltered["cap_eff"] == unit["cap_eff"]
    # the host's real PCI functions (the simulated GPUs are ordinary files under /sim): whole with CAP_SYS_ADMIN
    wide = {bdf: size for bdf, size in unit["sizes"].items() if size > 64}
    assert wide, "no PCI function of this machine gave more than 64 bytes of config space: %s" % unit["sizes"]
    assert unit["sizes"] == unfiltered["sizes"] and set(before["sizes"]) == set(unit["sizes"])
    assert {bdf: before["sizes"][bdf] for bdf in wide} == {bdf: 64 for bdf in wide}
    # CAP_SYS_ADMIN does not reopen /sys: the mount call is refused by the unit's filter (EPERM), not by the kernel
    assert unit["remount_errno"] == 1 and unfiltered["remount_errno"] == 0, (unit, unfiltered)


CONFIG_SPACE_CHECKS = ("pci_acs", "pcie_aspm", "pcie_10bit_tags", "pcie_ari_forwarding", "gpu_large_bar")
# ACS Control (capability 0x000D, register +0x06) set on every bridge that has ACS, as a BIOS or reboot leaves it
SET_ACS = r"""
import glob, struct, sys
saved = {}
for path in glob.glob("/sim/sys/bus/pci/devices/*/config"):
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    offset = 0x100
    while 0x100 <= offset < len(data) - 8:
        header = struct.unpack_from("<I", data, offset)[0]
        if header & 0xFFFF == 0x000D:
            saved[path] = bytes(data)
            struct.pack_into("<H", data, offset + 6, int(sys.argv[1], 0))
            with open(path, "wb") as handle:
                handle.write(data)
            break
        offset = header >> 20
print(len(saved))
"""


def judged():
    """``{check: status}`` of the config-space checks in Prometheus."""
    return {r["metric"]["check"]: r["metric"]["status"] for r in query(
        'topotune_platform_check_status{check=~"%s"} == 1' % "|".join(CONFIG_SPACE_CHECKS))}


def test_config_space_checks_are_judged_and_acs_turned_on_is_alerted(node):
    run_check()
    wait_for("the config-space checks", lambda: len(judged()) == len(CONFIG_SPACE_CHECKS), timeout=60)
    assert judged() == {check: "pass" for check in CONFIG_SPACE_CHECKS}
    backup = "/root/sim-config-backup.tar"
    sh("tar -cf %s /sim/sys/devices" % backup)
    try:
        assert int(sh("python3 -c %s 0x001d" % _quote(SET_ACS)).stdout) > 0
        run_check()
        wait_for("pci_acs failing in Prometheus", lambda: judged().get("pci_acs") == "fail")
        pending = wait_for("the failing-check alert", lambda: [a for a in alerts("TopotunePlatformCheckFailing")
                                                               if a[1].get("check") == "pci_acs"])
        assert pending[0][1]["severity"] == "warning" and pending[0][1]["instance"] == NODE
    finally:
        sh("tar -xf %s -C / && rm -f %s" % (backup, backup))
    run_check()
    wait_for("pci_acs passing again", lambda: judged().get("pci_acs") == "pass")


def test_vanished_metrics_and_the_timer_off_are_alerted(node):
    run_check()
    wait_for("the node's metrics", lambda: query('topotune_drift_check_last_end_time_seconds{instance="%s"}' % NODE))
    # a textfile node_exporter cannot parse: its series are dropped and the collector says so
    sh("printf 'topotune_drift_items{owner=\\n' > %s" % TEXTFILE)
    try:
        wait_for("node_textfile_scrape_error 1", lambda: query('node_textfile_scrape_error{instance="%s"} == 1' % NODE))
        assert wait_for("the unreadable-textfile alert", lambda: alerts("TopotuneTextfileUnreadable"))[0][1]["instance"] == NODE
        assert wait_for("the absence alert", lambda: alerts("TopotuneMetricsAbsent"))[0][1] == {
            "alertname": "TopotuneMetricsAbsent", "instance": NODE, "severity": "warning"}
        assert alerts("TopotuneMetricsAbsentEverywhere") == []
    finally:
        run_check()
    wait_for("both alerts gone", lambda: not alerts("TopotuneTextfileUnreadable") and not alerts("TopotuneMetricsAbsent"))
    assert query('node_textfile_scrape_error{instance="%s"} == 0' % NODE)

    # the timer off: the node states interval 0 at its next (manual) check
    off = playbook(node["work"], "drift_exporter.yml", "-e", "drift_exporter_timer_enabled=false")
    assert off["rc"] == 0 and off["failed"] == 0, off["log"][-3000:]
    assert sh("systemctl is-active %s.timer" % UNIT, check=False).stdout.strip() == "inactive"
    run_check()
    wait_for("interval 0", lambda: query('topotune_drift_check_interval_seconds{instance="%s"} == 0' % NODE))
    assert wait_for("the timer-off alert", lambda: alerts("TopotuneDriftCheckTimerOff"))[0][1]["instance"] == NODE
    assert alerts("TopotuneDriftCheckStale") == []
    on = playbook(node["work"], "drift_exporter.yml")
    assert on["rc"] == 0 and on["failed"] == 0, on["log"][-3000:]
    assert sh("systemctl is-active %s.timer" % UNIT).stdout.strip() == "active"
    run_check()
    wait_for("interval 180", lambda: query('topotune_drift_check_interval_seconds{instance="%s"} == 180' % NODE))
    wait_for("the timer-off alert gone", lambda: not alerts("TopotuneDriftCheckTimerOff"))
