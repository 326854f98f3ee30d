"""The built collection tarball works in another project exactly as the repository does."""

import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "modules")) if f.endswith(".py"))
OTHER_PLUGINS = sorted(
    (kind, f[:-3])
    for kind in ("filter", "lookup", "callback")
    for f in os.listdir(os.path.join(REPO, "plugins", kind))
    if f.endswith(".py")
)
ROLES = sorted(d for d in os.listdir(os.path.join(REPO, "roles")) if not d.startswith("_"))


def _run(args, cwd, env):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (" ".join(args), proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the tarball, install it into an empty collections dir of an unrelated project."""
    work = tmp_path_factory.mktemp("elsewhere")
    env = dict(os.environ)
    env.pop("ANSIBLE_CONFIG", None)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(work / "collections")
    env["ANSIBLE_ROLES_PATH"] = str(work / "roles")
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", REPO, "--output-path", str(work)], work, env)
    tarballs = list(work.glob("topotune-instinct-*.tar.gz"))
    assert len(tarballs) == 1
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", str(tarballs[0]), "-p", str(work / "collections")], work, env)
    return work, env


def test_tarball_leaves_out_development_files(installed):
    work, _unused = installed
    root = work / "collections" / "ansible_collections" / "topotune" / "instinct"
    assert (root / "plugins" / "modules" / "gpu_topology.py").is_file()
    for unwanted in (".venv", ".cache", ".vendor", ".git"):
        assert not (root / unwanted).exists(), unwanted


@pytest.mark.parametrize("module", MODULES)
def test_module_documentation_renders(installed, module):
    work, env = installed
    out = _run([os.path.join(BIN, "ansible-doc"), "--json", "topotune.instinct." + module], work, env)
    doc = json.loads(out)["topotune.instinct." + module]
    assert doc["doc"]["short_description"]
    assert doc["examples"].strip()
    assert doc["return"]


@pytest.mark.parametrize("kind,name", OTHER_PLUGINS)
def test_plugin_documentation_renders(installed, kind, name):
    work, env = installed
    out = _run([os.path.join(BIN, "ansible-doc"), "-t", kind, "--json", "topotune.instinct." + name], work, env)
    doc = json.loads(out)["topotune.instinct." + name]
    assert doc["doc"]["short_description"]


def test_roles_resolve_by_fqcn(installed):
    work, env = installed
    play = work / "uses_roles.yml"
    play.write_text(
        "- name: Every role resolves by FQCN\n  hosts: localhost\n  gather_facts: false\n  roles:\n"
        + "".join("    - role: topotune.instinct.%s\n" % role for role in ROLES)
    )
    _run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", str(play)], work, env)


def test_module_runs_from_installed_collection(installed):
    work, env = installed
    sysroot = work / "sysroot"
    nodes = sysroot / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    shutil.copytree(os.path.join(REPO, "tests", "fixtures", "kfd", "mi210-8gpu-2hive", "nodes"), nodes)
    out = _run(
        [os.path.join(BIN, "ansible"), "localhost", "-m", "topotune.instinct.gpu_topology", "-a", "sysroot=%s" % sysroot,
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-o"],
        work, env,
    )
    result = json.loads(out.split("=>", 1)[1])
    assert len(result["topology"]["gpus"]) == 8
    assert result["changed"] is False
