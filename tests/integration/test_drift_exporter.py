"""Node-local drift metrics with the real Prometheus components (Debian bookworm's prometheus-node-exporter 1.5 and
prometheus 2.42 with promtool), in one simulated node of sim/image/build-prometheus-image.sh.

One node (``mi300x-8gpu-2cpu``, the lightest profile) for the whole file:

- bring-up with playbooks/site.yml (the manifest), then role topotune.instinct.drift_exporter through
  playbooks/drift_exporter.yml: in check mode on the fresh node, for real, and again (changed=0);
- node_exporter (the package's unit, its default textfile directory) serves the checker's metrics;
  ``promtool check metrics`` accepts them; a Prometheus server in the node scrapes node_exporter every second with the
  node's name as ``instance`` (as a fleet scrapes ``<node>:9100``) and loads the shipped alert rules;
- drift injected (NUMA balancing back on, the env file edited): the next check's metrics name the node in a
  Prometheus query, the drift alert is pending; after playbooks/pull.yml corrects the node, the query is empty.

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
    """Run the check as the timer does (systemctl start waits for the oneshot service to finish)."""
    sh("systemctl start %s.service" % UNIT)
    props = dict(line.split("=", 1) for line in sh("systemctl show -p Result -p ExecMainStatus %s.service" % UNIT).stdout.split())
    return props


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
    assert "SUCCESS: 6 rules found" in proc.stdout and proc.stdout.rstrip().endswith("SUCCESS"), proc.stdout


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
    out = sh("stat -c '%U:%G %a %n' /usr/local/sbin/topotune-drift-check /usr/local/lib/topotune/topotune_node/*.py "
             "/usr/local/lib/topotune/knowledge.json /etc/topotune/drift-exporter/config.json "
             "/etc/systemd/system/topotune-drift-check.service /etc/systemd/system/topotune-drift-check.timer").stdout
    rows = [line.split(" ", 2) for line in out.splitlines()]
    assert len(rows) == 17, out  # the script, 12 module files with __init__.py, knowledge, config, 2 units
    for owner, mode, path in rows:
        assert owner == "root:root" and not int(mode, 8) & 0o022, (owner, mode, path)
    # the node's copy is the collection's code, byte for byte
    with open(os.path.join(REPO, "plugins", "module_utils", "managed_state.py"), encoding="utf-8") as handle:
        assert sh("cat /usr/local/lib/topotune/topotune_node/managed_state.py").stdout == handle.read()


def test_service_runs_hardened_and_writes_the_textfile(node):
    props = run_check()
    assert props == {"Result": "success", "ExecMainStatus": "0"}, props
    unit = dict(line.split("=", 1) for line in sh(
        "systemctl show -p ProtectSystem -p NoNewPrivileges -p PrivateTmp -p ReadWritePaths -p Nice "
        "-p IOSchedulingClass %s.service" % UNIT).stdout.splitlines())
    assert unit == {"ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
                    "ReadWritePaths": "/var/lib/prometheus/node-exporter", "Nice": "19", "IOSchedulingClass": "3"}, unit
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
    # docs/fleet-metrics.md: (owner, kind) pairs + platform checks + 19; 11 pairs and 36 checks after site.yml here
    assert len(series) == 11 + 36 + 19, series


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
