"""Simulated nodes (sim/cluster.py containers) for the acceptance integration tests: put files on them, bring them up
and down, and run the topology and acceptance playbooks on them.

    cluster("up", "--prefix", "tt-acc", "--profiles", "mi300x-8gpu-2cpu,mi300x-8gpu-2cpu", "--inventory", path)
    put(node, "/usr/local/bin/all_reduce_perf", script, "0755")     # docker exec; the directory is created
    proc = play(inventory, "topotune_report_dir=/tmp/out", "--check")   # playbooks/topology.yml + acceptance.yml
    proc = play(inventory, "topotune_report_dir=/tmp/out", playbooks=["playbooks/site.yml"])
    cluster("down", "--prefix", "tt-acc")

``docker(*args, data=None)`` runs the docker client and returns its output; a failure raises AssertionError with
docker's message. ``play`` returns the finished ``ansible-playbook`` process (not checked), run from the repository
with its ansible.cfg; ``extra_vars`` is the ``-e`` argument (``key=value`` or JSON).
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def docker(*args, data=None):
    proc = subprocess.run(["docker", *args], input=data, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError("docker %s: %s" % (" ".join(args[:3]), proc.stderr))
    return proc.stdout


def put(node, path, text, mode="0644"):
    docker("exec", "-i", node, "sh", "-c", "mkdir -p %s && cat > %s && chmod %s %s" % (
        os.path.dirname(path), path, mode, path), data=text)


def cluster(*args):
    subprocess.run([sys.executable, os.path.join(REPO, "sim", "cluster.py"), *args], check=True, capture_output=True,
                   text=True)


def play(inventory, extra_vars, *args, playbooks=("playbooks/topology.yml", "playbooks/acceptance.yml")):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, *playbooks, "-e", extra_vars, *args],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
