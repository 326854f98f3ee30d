"""Rolling reboots (playbooks/reboot.yml, docs/scheduler.md) on simulated nodes, drained through a real Slurm.

Three nodes, started once for the file (light profile):

- the last one runs a real Slurm 22.05 (slurmctld, slurmd, munge; tests/integration/slurm_node.py). Its tests reboot
  it alone (``--limit``) through Slurm: drain, wait until drained, reboot, check the parameters, resume. Observed
  with ``sinfo``/``scontrol`` while the play runs, and at the moment of the reboot (the stand-in below logs the state).
- all three, without Slurm, ``kernel_tuning_reboot_batch=2``: batches [2, 1]; a failed node in the first batch stops
  the second.

Each node first gets its kernel parameters pending the real way: kernel_tuning runs on it (the simulated command
line lacks ``iommu=pt pci=realloc=off pci=bfsort``; the role writes the GRUB drop-in and the pending-reboot record).
The same play runs platform_checks with ``platform_checks_nfd_enabled``: the Node Feature Discovery file is checked
on the nodes (test_nfd_feature_file_on_the_nodes).

A container cannot reboot, so ``kernel_tuning_reboot_command`` points to REBOOT_STUB, which stands in for the reboot
syscall and nothing else of topotune: it makes the node's simulated kernel state what the next boot would make it
(the command line the GRUB drop-in gives, a new boot id under /sim) and logs the time and the node's Slurm state.
Everything else (ansible.builtin.reboot waiting for the new boot id, the checks, scontrol, sinfo) is real.
"""

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from slurm_node import SlurmNode, _cluster  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
PREFIX = "tt-rboot"
PROFILE = "mi300x-8gpu-2cpu"
PLAIN_NODES = ["%s-%d-%02d" % (PREFIX, os.getpid(), i + 1) for i in range(2)]
SLURM_NODE = "%s-%d-03slurm" % (PREFIX, os.getpid())
NODES = PLAIN_NODES + [SLURM_NODE]      # inventory order = batch order
NFD_FILE = "/etc/kubernetes/node-feature-discovery/features.d/topotune"
RECORD = "/etc/topotune/reboot-pending.json"
WANTED = ["iommu=pt", "pci=realloc=off", "pci=bfsort"]   # knowledge/gpu_generations.yml, every Instinct GPU
STUB = "/usr/local/sbin/tt-reboot-stub"
LOG = "/var/log/tt-reboot.log"
# What a reboot does to the simulated kernel state: the command line of the next boot (GRUB appends the drop-in's
# parameters to the running ones), a new boot id. `--lose-parameters` boots without them (a bootloader that ignored
# the drop-in). Each call logs: epoch time, node, the node's Slurm state and reason at that moment.
REBOOT_STUB = r"""#!/bin/sh
set -e
now=$(date +%s.%N)
state=$(scontrol show node "$(hostname)" -o 2>/dev/null | grep -o 'State=[^ ]*' || echo State=none)
echo "$now $(hostname) $state" >> /var/log/tt-reboot.log
if [ "$1" != --lose-parameters ]; then
  params=$(sed -n 's/^GRUB_CMDLINE_LINUX="\$GRUB_CMDLINE_LINUX \(.*\)"$/\1/p' /etc/default/grub.d/90-topotune.cfg)
  echo "$(cat /sim/proc/cmdline) $params" > /sim/proc/cmdline
fi
cat /proc/sys/kernel/random/uuid > /sim/proc/sys/kernel/random/boot_id
sleep "${TT_REBOOT_SECONDS:-1}"
"""
TUNE_PLAY = """\
- name: Tune the kernel (records the pending reboot), check the platform and label it for NFD
  hosts: all
  gather_facts: false
  vars:
    platform_checks_fail_on: never
    platform_checks_show: problems
    platform_checks_nfd_enabled: true
  roles:
    - role: topotune.instinct.kernel_tuning
    - role: topotune.instinct.platform_checks
"""


def sh(node, script, check=True):
    proc = subprocess.run(["docker", "exec", node, "sh", "-c", script], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s: %s failed: %s" % (node, script, proc.stderr or proc.stdout))
    return proc.stdout


def write_inventory(path, nodes, report_dir):
    hosts = {name: {} for name in nodes}
    data = {"all": {"hosts": hosts, "vars": {
        "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3",
        "topotune_sysroot": "/sim", "topotune_report_dir": str(report_dir),
        "kernel_tuning_reboot_command": STUB}}}
    path.write_text(json.dumps(data, indent=2))


def prepare(node):
    """The stand-in, a boot id, and the node's first command line kept to put back between tests."""
    subprocess.run(["docker", "exec", "-i", node, "sh", "-c", "cat > %s && chmod 0755 %s" % (STUB, STUB)],
                   input=REBOOT_STUB, text=True, check=True, capture_output=True)
    sh(node, "mkdir -p /sim/proc/sys/kernel/random && cat /proc/sys/kernel/random/uuid > /sim/proc/sys/kernel/random/boot_id"
             " && cp /sim/proc/cmdline /root/cmdline.first")


def start_playbook(inventory, playbook, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), str(playbook), *args]
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_playbook(inventory, playbook, *args):
    """(exit code, output)."""
    proc = start_playbook(inventory, playbook, *args)
    out = proc.communicate(timeout=300)[0]
    return proc.returncode, out


def set_pending(node, record):
    """Back to the state kernel_tuning left: the first command line, the pending-reboot record."""
    sh(node, "cp /root/cmdline.first /sim/proc/cmdline && mkdir -p /etc/topotune && cat > %s <<'EOF'\n%sEOF\n: > %s"
       % (RECORD, record, LOG))


def reboots(node):
    """The stand-in's log lines: [(epoch seconds, Slurm State=...)]."""
    return [(float(t), state) for t, _node, state in (line.split() for line in sh(node, "cat %s 2>/dev/null || true" % LOG).splitlines())]


def cmdline(node):
    return sh(node, "cat /sim/proc/cmdline").split()


def recap(output):
    counts = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1] == ":" and parts[2].startswith("ok="):
            counts[parts[0]] = {k: int(v) for k, v in (p.split("=") for p in parts[2:])}
    return counts


def tune(work, inventory, nodes):
    """Run kernel_tuning on the nodes: the kernel parameters are now pending; returns the record's text."""
    play = work / "tune.yml"
    play.write_text(TUNE_PLAY)
    rc, out = run_playbook(inventory, play)
    assert rc == 0, out[-3000:]
    texts = {node: sh(node, "cat %s" % RECORD) for node in nodes}
    for node, text in texts.items():
        record = json.loads(text)
        assert record["pending"] == ["+" + p for p in WANTED], record
        assert sh(node, "stat -c '%U %a' " + RECORD).split() == ["root", "644"]
    return texts


# --- Slurm ----------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    work = tmp_path_factory.mktemp("reboot")
    inventory = work / "hosts.yml"
    slurm = SlurmNode(PROFILE, name=SLURM_NODE)
    cluster = _cluster()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            started = [pool.submit(cluster.start_node, name, PROFILE) for name in PLAIN_NODES] + [pool.submit(slurm.start)]
            for future in started:
                future.result()
        slurm.configure("", "Sockets=1 CoresPerSocket=2 ThreadsPerCore=1")
        for node in NODES:
            prepare(node)
        write_inventory(inventory, NODES, work / "out")
        records = tune(work, inventory, NODES)
        yield {"slurm": slurm, "work": work, "inventory": inventory, "records": records}
    finally:
        subprocess.run(["docker", "rm", "-f", *NODES], check=False, capture_output=True)


def test_nfd_feature_file_on_the_nodes(nodes):
    """platform_checks_nfd_enabled wrote each node's labels: the simulated MI300X topology and its check report."""
    prefix = "topotune.feature.node.kubernetes.io/"
    for node in NODES:
        lines = [line for line in sh(node, "cat " + NFD_FILE).splitlines() if not line.startswith("#")]
        labels = dict(line.split("=", 1) for line in lines)
        report = json.loads((nodes["work"] / "out" / "checks" / ("%s.json" % node)).read_text())
        assert labels == {prefix + name: value for name, value in {
            "gpu.generation": "MI300X", "gpu.product": "MI300X", "gpu.kind": "physical", "gpu.count": "8",
            "gpu.logical-count": "8", "gpu.compute-partition": "SPX",
            "gpu.memory-partition": "NPS1", "gpu.xgmi-hives": "1", "numa.nodes": "1",
            "checks.passing": "yes" if report["summary"]["fail"] == 0 else "no",
            "checks.failing": str(report["summary"]["fail"]), "version": "0.1.0"}.items()}, labels
        assert report["generation"] == "MI300X"
        assert sh(node, "stat -c '%U %a' " + NFD_FILE).split() == ["root", "644"]
        assert sh(node, "ls -a $(dirname %s)" % NFD_FILE).split() == [".", "..", "topotune"]


def _slurm_args(nodes, extra):
    return (nodes["inventory"], os.path.join(REPO, "playbooks", "reboot.yml"), "--limit", SLURM_NODE,
            "-e", "kernel_tuning_reboot_via=slurm", "-e", "kernel_tuning_reboot_drain_poll=1") + extra


def reboot_via_slurm(nodes, *extra):
    return run_playbook(*_slurm_args(nodes, extra))


def start_reboot_via_slurm(nodes, *extra):
    return start_playbook(*_slurm_args(nodes, extra))


def watch_states(node, proc):
    """sinfo's state of the node every 0.2 s while proc runs, and once after it ends (the play's last task may
    resume the node within a poll interval of its end): the distinct states in the order seen."""
    seen = []

    def sample():
        state = node.run(["sinfo", "--noheader", "--Node", "--nodes=" + node.name, "--format=%T"]).stdout.strip()
        state = state.rstrip("*~#!%$@^-")   # flags: not responding, powered down, ...
        if state and (not seen or seen[-1] != state):
            seen.append(state)

    def poll():
        while proc.poll() is None:
            sample()
            time.sleep(0.2)
        sample()
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return seen, thread


def test_pending_node_is_drained_for_the_reboot_then_resumed(nodes):
    node = nodes["slurm"]
    assert flags(node.node_info()["State"]) == {"IDLE"}
    proc = start_reboot_via_slurm(nodes)
    seen, thread = watch_states(node, proc)
    out = proc.communicate(timeout=300)[0]
    thread.join()
    assert proc.returncode == 0, out[-3000:]
    # at the reboot, Slurm had the node drained (idle, no jobs), with topotune's reason
    [(_when, state)] = reboots(node.name)
    assert flags(state) == {"IDLE", "DRAIN"}, state
    assert "drained" in seen and seen[-1] == "idle", seen
    ok, info = resumed(node)
    assert ok, info
    # the parameters are live, the record gone, and a second run has nothing to reboot
    assert set(WANTED) <= set(cmdline(node.name))
    assert sh(node.name, "test -e %s && echo present || echo absent" % RECORD).strip() == "absent"
    rc, out = reboot_via_slurm(nodes)
    assert rc == 0 and "skipping: no hosts matched" in out and reboots(node.name) == [(_when, state)], out[-2000:]


def flags(state):
    """scontrol's State=IDLE+DRAIN as {"IDLE", "DRAIN"}. NOT_RESPONDING comes and goes with slurmctld's pings of a
    slurmd on a busy test host: it is Slurm's, not the drain's, so the tests look at the other flags."""
    return set(state.replace("State=", "").split("+")) - {"NOT_RESPONDING"}


def resumed(node):
    info = node.node_info()
    return flags(info["State"]) == {"IDLE"} and not info.get("Reason", "").startswith("topotune"), info


def in_order(seen, wanted):
    """wanted appear in seen in this order (other states may come between)."""
    positions = [seen.index(w) if w in seen else -1 for w in wanted]
    return -1 not in positions and positions == sorted(positions)


def test_drain_waits_for_the_running_job_and_a_timeout_leaves_the_node_drained(nodes):
    """A job runs until the test releases it. First run: the drain times out (3 s): the node stays drained, saying
    why, not rebooted. Second run: Slurm shows the node draining and no reboot happens until the job ends; then
    drained, rebooted, resumed."""
    node = nodes["slurm"]
    set_pending(node.name, nodes["records"][node.name])
    node.sh("rm -f /tmp/tt-release")
    job = node.sbatch("-o", "/dev/null", "--wrap", "while [ ! -e /tmp/tt-release ]; do sleep 0.2; done")
    try:
        deadline = time.monotonic() + 30
        while node.job(job).get("JobState") != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        rc, out = reboot_via_slurm(nodes, "-e", "kernel_tuning_reboot_drain_timeout=3")
        assert rc != 0
        info = node.node_info()
        assert flags(info["State"]) in ({"MIXED", "DRAIN"}, {"ALLOCATED", "DRAIN"}), info
        reason = node.scontrol("show", "node", node.name)
        assert "Reason=topotune: jobs still running after 3s; kernel parameters pending reboot" in reason, reason
        fatal = [line for line in out.splitlines() if line.startswith("fatal: [%s]" % node.name)][-1]
        assert "jobs still running after 3s (Wait until Slurm reports the node drained" in fatal, fatal
        assert "Left drained in Slurm (%s)" % node.name in fatal and "State=RESUME" in fatal
        assert reboots(node.name) == [] and "iommu=pt" not in cmdline(node.name)

        proc = start_reboot_via_slurm(nodes)
        seen, thread = watch_states(node, proc)
        time.sleep(2)
        deadline = time.monotonic() + 120
        while "draining" not in seen and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)   # two sinfo polls of the play: still draining, still not rebooted
        assert seen[-1] == "draining" and reboots(node.name) == [] and proc.poll() is None, seen
    finally:
        node.sh("touch /tmp/tt-release")
    out = proc.communicate(timeout=300)[0]
    thread.join()
    assert proc.returncode == 0, out[-3000:]
    assert in_order(seen, ["draining", "drained", "idle"]) and seen[-1] == "idle", seen
    end = node.job(job)
    assert end["JobState"] == "COMPLETED", end
    # the reboot came after the job ended, on a drained node
    [(when, state)] = reboots(node.name)
    assert flags(state) == {"IDLE", "DRAIN"}, state
    ended = subprocess.run(["date", "-d", end["EndTime"], "+%s"], capture_output=True, text=True, check=True).stdout
    assert when >= int(ended)
    ok, info = resumed(node)
    assert ok, info


# --- batches, without Slurm ------------------------------------------------------------------------------------------

def batches(output):
    """The hosts of each batch, in order: one 'PLAY [Reboot in batches]' section per batch."""
    sections = output.split("PLAY [Reboot in batches]")[1:]
    return [sorted(set(re.findall(r"^(?:ok|changed|fatal): \[([^\]]+)\]", s.split("PLAY RECAP")[0], re.M))) for s in sections]


def test_reboots_in_batches_one_after_the_other(nodes):
    for node in NODES:
        set_pending(node, nodes["records"][node])
    rc, out = run_playbook(nodes["inventory"], os.path.join(REPO, "playbooks", "reboot.yml"),
                           "-e", "kernel_tuning_reboot_batch=2")
    assert rc == 0, out[-3000:]
    assert batches(out) == [NODES[:2], NODES[2:]]
    first, second = ([t for node in group for t, _state in reboots(node)] for group in (NODES[:2], NODES[2:]))
    assert len(first) == 2 and len(second) == 1
    # each stand-in takes 1 s: the second batch's reboot starts after the first batch's both ended
    assert second[0] >= max(first) + 1, (first, second)
    for node in NODES:
        assert set(WANTED) <= set(cmdline(node))
        assert sh(node, "test -e %s && echo present || echo absent" % RECORD).strip() == "absent"


def test_check_mode_names_the_nodes_and_reboots_nothing(nodes):
    for node in NODES:
        set_pending(node, nodes["records"][node])
    rc, out = run_playbook(nodes["inventory"], os.path.join(REPO, "playbooks", "reboot.yml"), "--check",
                           "-e", "kernel_tuning_reboot_batch=2")
    assert rc == 0, out[-3000:]
    assert "check mode: would reboot 3 node(s) in batches of 2 (max_fail_percentage 0) via none: %s" % ", ".join(NODES) in out
    assert "PLAY [Reboot in batches]" in out and not batches(out)[0]
    for node in NODES:
        assert reboots(node) == [] and "iommu=pt" not in cmdline(node)


def test_failed_node_stops_the_remaining_batches(nodes):
    for node in NODES:
        set_pending(node, nodes["records"][node])
    # the first node boots without the parameters (as with a bootloader that ignored the drop-in)
    (nodes["work"] / "host_vars").mkdir(exist_ok=True)
    (nodes["work"] / "host_vars" / ("%s.yml" % NODES[0])).write_text(
        "kernel_tuning_reboot_command: %s --lose-parameters\n" % STUB)
    try:
        rc, out = run_playbook(nodes["inventory"], os.path.join(REPO, "playbooks", "reboot.yml"),
                               "-e", "kernel_tuning_reboot_batch=2")
    finally:
        (nodes["work"] / "host_vars" / ("%s.yml" % NODES[0])).unlink()
    assert rc != 0
    assert batches(out) == [NODES[:2]]
    fatal = [line for line in out.splitlines() if line.startswith("fatal: [%s]" % NODES[0])][-1]
    assert "parameters not live after reboot" in fatal and "+iommu=pt" in fatal, fatal
    # the other node of the batch finished; the second batch never started
    assert len(reboots(NODES[1])) == 1 and set(WANTED) <= set(cmdline(NODES[1]))
    assert reboots(NODES[2]) == [] and "iommu=pt" not in cmdline(NODES[2])
    # the failed node keeps its record: a later run reboots it again
    assert json.loads(sh(NODES[0], "cat %s" % RECORD))["pending"] == ["+" + p for p in WANTED]
