"""playbooks/pull.yml corrects the machine it runs on (connection local): its first play refuses a run naming several
hosts, or a host that is not this machine. Run here in check mode with correction off, so that nothing could change
even if the guard let the run through."""

import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _pull(tmp_path, inventory):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(REPO, ".cache", "collections"),
                                                         os.path.join(REPO, ".vendor", "collections")]))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, "--check",
                           "-e", "topotune_correct=false", "-e", "topotune_report_dir=%s" % tmp_path,
                           "-e", "ansible_python_interpreter=%s" % sys.executable,
                           os.path.join(REPO, "playbooks", "pull.yml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("inventory, words", [
    ("localhost,127.0.0.1,", "names localhost, 127.0.0.1"),
    ("gpu-z999.example.invalid,", "names gpu-z999.example.invalid"),
])
def test_pull_refuses_other_or_several_hosts(tmp_path, inventory, words):
    proc = _pull(tmp_path, inventory)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "Refuse a pull run for another node or for several" in proc.stdout
    assert words in proc.stdout and "this machine is" in proc.stdout, proc.stdout[-3000:]
    # stopped there: the drift plays never ran
    assert "Verify the manifest in one call" not in proc.stdout
