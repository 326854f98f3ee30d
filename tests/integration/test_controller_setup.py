"""The real-cluster controller set-up (scripts/setup-controller) touches only the checkout: run in a throwaway copy of
the repository with every system tool it must not call (package managers, Docker, sysctl, the image build) shadowed by
a shim that records the call and fails, it must not call any, and it must leave a working toolchain in the copy.

The copy holds every tracked (and new, not ignored) file of this checkout, as a clone would, less tests/fixtures (14,000
captures the set-up never reads). The venv is installed from PyPI as a user's would be (pip's download cache makes
the second time quick).
"""

import os
import shutil
import stat
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
# what a controller set-up must never run: system packages, the Docker engine, kernel settings, the node image
FORBIDDEN = ["apt", "apt-get", "dpkg", "debootstrap", "docker", "dockerd", "containerd", "sysctl", "systemctl",
             "service", "modprobe", "mount", "useradd", "usermod", "groupadd"]
SHIM = """#!/bin/sh
printf '%s %s\\n' "$(basename "$0")" "$*" >> "{log}"
echo "$(basename "$0") is not to be called by the controller set-up" >&2
exit 97
"""


def _copy_checkout(dest):
    names = subprocess.run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        if name.startswith("tests/fixtures/"):
            continue
        src = os.path.join(REPO, name)
        if not os.path.lexists(src):
            continue  # deleted in the working tree
        target = os.path.join(str(dest), name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    work = tmp_path_factory.mktemp("controller")
    clone = work / "topotune"
    _copy_checkout(clone)
    shims, calls = work / "shims", work / "forbidden-calls.log"
    shims.mkdir()
    for tool in FORBIDDEN:
        path = shims / tool
        path.write_text(SHIM.format(log=calls))
        path.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    # the shims first; no venv of this checkout on the PATH (the copy must make its own)
    path = [str(shims)] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(BIN)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "TOPOTUNE_", "VIRTUAL_ENV"))}
    env.update(PATH=os.pathsep.join(path), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["bash", "-c", ". scripts/setup-controller && env"], cwd=str(clone), env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    yield {"clone": clone, "proc": proc, "calls": calls, "env": env}


def test_setup_succeeds_without_touching_the_system(controller):
    proc = controller["proc"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    calls = controller["calls"].read_text() if controller["calls"].exists() else ""
    assert calls == "", "the controller set-up called system tools:\n" + calls


def test_everything_lands_inside_the_checkout(controller):
    clone = controller["clone"]
    assert (clone / ".venv" / "bin" / "ansible-playbook").is_file()
    assert (clone / ".vendor" / "collections" / "ansible_collections" / "ansible" / "posix").is_dir()
    link = clone / ".cache" / "collections" / "ansible_collections" / "topotune" / "instinct"
    assert link.is_symlink() and os.path.realpath(str(link)) == os.path.realpath(str(clone))
    exported = dict(line.split("=", 1) for line in controller["proc"].stdout.splitlines() if "=" in line)
    assert exported["PATH"].split(os.pathsep)[0] == str(clone / ".venv" / "bin")
    assert exported["ANSIBLE_COLLECTIONS_PATH"] == "%s/.cache/collections:%s/.vendor/collections" % (clone, clone)


def _in_clone(controller, *argv):
    clone = controller["clone"]
    env = dict(controller["env"], PATH=os.pathsep.join([str(clone / ".venv" / "bin"), controller["env"]["PATH"]]),
               ANSIBLE_COLLECTIONS_PATH="%s/.cache/collections:%s/.vendor/collections" % (clone, clone))
    return subprocess.run(list(argv), cwd=str(clone), env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_venv_runs_the_pinned_ansible(controller):
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        pin = [line.split("==")[1].strip() for line in handle if line.startswith("ansible-core==")][0]
    proc = _in_clone(controller, "ansible-playbook", "--version")
    assert proc.returncode == 0, proc.stderr
    assert "ansible-playbook [core %s]" % pin in proc.stdout
    assert str(controller["clone"] / ".venv") in proc.stdout  # the copy's own venv, not this checkout's


def test_the_collection_resolves(controller):
    proc = _in_clone(controller, "ansible-doc", "topotune.instinct.platform_checks")
    assert proc.returncode == 0, proc.stderr
    assert "TOPOTUNE.INSTINCT.PLATFORM_CHECKS" in proc.stdout.upper()
    assert str(controller["clone"]) in proc.stdout  # documented from the copy
    proc = _in_clone(controller, "ansible-playbook", "--syntax-check", "-i", "localhost,", "playbooks/site.yml")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_second_run_is_quick_and_installs_nothing(controller):
    proc = subprocess.run(["bash", "scripts/setup-controller"], cwd=str(controller["clone"]), env=controller["env"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "installing" not in proc.stdout and "extracting" not in proc.stdout
