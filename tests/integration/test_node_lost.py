"""A node lost in the middle of a bring-up does not stop the others, is named at the end, and a rerun converges."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PREFIX = "tt-lost"
PROFILES = ["mi250x-8gcd", "mi210-8gpu-2hive", "mi300x-8gpu-spx"]
VICTIM = "%s-02-%s" % (PREFIX, PROFILES[1])


def _cluster(*args):
    subprocess.run([sys.executable, os.path.join(REPO, "sim", "cluster.py"), *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("lost")
    inventory = work / "hosts.yml"
    (work / "group_vars").mkdir()
    # the simulated inventory's settings, with this test's own hosts and report directory
    with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
        settings = handle.read()
    (work / "group_vars" / "all.yml").write_text(settings + "\ntopotune_report_dir: %s\n" % (work / "out"))
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join(PROFILES), "--inventory", str(inventory))
    yield work, inventory
    _cluster("down", "--prefix", PREFIX)


def _site(inventory):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), os.path.join(REPO, "playbooks", "site.yml")],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _recap(output):
    recap = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1] == ":" and parts[2].startswith("ok="):
            recap[parts[0]] = {k: int(v) for k, v in (p.split("=") for p in parts[2:])}
    return recap


def test_lost_node_is_named_and_the_others_finish(cluster):
    work, inventory = cluster
    proc = _site(inventory)
    output = []
    killed = False
    for line in proc.stdout:
        output.append(line)
        # kill the node once the tuning roles have started, i.e. genuinely mid-run
        if not killed and "TASK [topotune.instinct.cpu_governor" in line:
            subprocess.run(["docker", "kill", VICTIM], check=True, capture_output=True)
            killed = True
    proc.wait(timeout=600)
    text = "".join(output)
    assert killed, text[-3000:]
    assert proc.returncode != 0
    recap = _recap(text)
    assert recap[VICTIM]["unreachable"] + recap[VICTIM]["failed"] >= 1
    for host, counts in recap.items():
        if host != VICTIM:
            assert counts["failed"] == 0 and counts["unreachable"] == 0, (host, counts, text[-3000:])
    summary = json.loads((work / "out" / "run" / "summary.json").read_text())
    assert summary["failed_hosts"] == [VICTIM]
    assert sorted(summary["completed_hosts"]) == sorted(h for h in recap if h != VICTIM)
    assert "failed or unreachable: %s" % VICTIM in text


def test_rerun_after_the_node_returns_converges(cluster):
    work, inventory = cluster
    subprocess.run(["docker", "start", VICTIM], check=True, capture_output=True)
    # "degraded" exits non-zero yet the node is usable; the site run below is the real check
    subprocess.run(["docker", "exec", VICTIM, "systemctl", "is-system-running", "--wait"], capture_output=True, check=False)
    proc = _site(inventory)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text[-3000:]
    assert all(c["failed"] == 0 and c["unreachable"] == 0 for c in _recap(text).values())
    summary = json.loads((work / "out" / "run" / "summary.json").read_text())
    assert summary["failed_hosts"] == [] and len(summary["completed_hosts"]) == len(PROFILES)
