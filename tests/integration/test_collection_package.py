"""The built collection tarball is lean and works in another project exactly as the repository does.

The package holds what users run and what `ansible-test sanity` reads (galaxy.yml `build_ignore` leaves out the
test suites and their captures, sim/, bench/, molecule/, scripts and tool configuration). Installed into an unrelated
project (no ansible.cfg of this repository, no collections path to the checkout), its modules and plugins document
themselves, its roles resolve, a module runs, and the playbooks `topotune.instinct.site` and `topotune.instinct.drift`
(fast and full) bring up and verify a simulated node (needs root, Docker and the node image; else skipped).
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile

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
# a few hundred entries (about 240 today; the fixtures alone were ~14,500): room to grow, not to ship a test tree
MAX_ENTRIES = 600
# what users run and what ansible-test sanity reads; nothing else at the top level
SHIPPED = {"MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "bin", "changelogs", "docs", "extensions",
           "inventory", "knowledge", "meta", "playbooks", "plugins", "roles", "tests"}
DEVELOPMENT = ("tests/fixtures", "tests/unit", "tests/integration", "tests/conftest.py", "sim", "bench", "molecule",
               "scripts", "inventory/sim", ".config", "ansible.cfg", "requirements.txt", "pyproject.toml")
IMAGE = os.environ.get("TOPOTUNE_NODE_IMAGE", "local/topotune-node:bookworm")
NODE_PREFIX = "tt-pkg"
NODE_PROFILE = "mi210-8gpu-2hive"


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


def test_tarball_is_lean(installed):
    work, _unused = installed
    (tarball,) = work.glob("topotune-instinct-*.tar.gz")
    with tarfile.open(str(tarball)) as archive:
        names = [member.name.rstrip("/") for member in archive.getmembers()]
    print("%s: %d entries" % (tarball.name, len(names)))
    assert len(names) < MAX_ENTRIES, "%d entries: galaxy.yml build_ignore lets development files in" % len(names)
    assert {name.split("/")[0] for name in names} == SHIPPED
    # the generation cards the knowledge views are built from ship with the files that hold the views
    assert {"knowledge/gpu_generations.yml", "knowledge/generations/mi300x.yml", "knowledge/generations/README.md"} <= set(names)
    assert {n for n in names if n.startswith("tests/")} == {"tests/sanity", "tests/sanity/ignore-2.19.txt", "tests/sanity/README.md"}
    for unwanted in DEVELOPMENT:
        assert [n for n in names if n == unwanted or n.startswith(unwanted + "/")] == [], unwanted


def test_tarball_leaves_out_development_files(installed):
    work, _unused = installed
    root = work / "collections" / "ansible_collections" / "topotune" / "instinct"
    assert (root / "plugins" / "modules" / "gpu_topology.py").is_file()
    assert (root / "tests" / "sanity" / "ignore-2.19.txt").is_file()
    for unwanted in (".venv", ".cache", ".vendor", ".git") + DEVELOPMENT:
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
    shutil.copytree(os.path.join(REPO, "tests", "fixtures", "kfd", NODE_PROFILE, "nodes"), nodes)
    out = _run(
        [os.path.join(BIN, "ansible"), "localhost", "-m", "topotune.instinct.gpu_topology", "-a", "sysroot=%s" % sysroot,
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-o"],
        work, env,
    )
    result = json.loads(out.split("=>", 1)[1])
    assert len(result["topology"]["gpus"]) == 8
    assert result["changed"] is False


def _docker_ok():
    if shutil.which("docker") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode == 0


def _cluster(*args):
    subprocess.run([sys.executable, os.path.join(REPO, "sim", "cluster.py"), *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def project(installed):
    """A project of its own around the installed collection: one simulated node, its inventory and group_vars (the
    simulated inventory's settings, reports under the project), community.docker for the connection."""
    if not _docker_ok():
        pytest.skip("needs root, a running Docker engine and the node image (scripts/setup)")
    work, env = installed
    env = dict(env, ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH="%s:%s" % (work / "collections", os.path.join(REPO, ".vendor", "collections")))
    (work / "group_vars").mkdir()
    with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
        settings = handle.read()
    (work / "group_vars" / "all.yml").write_text(settings + "\ntopotune_report_dir: %s\n" % (work / "out"))
    _cluster("up", "--prefix", NODE_PREFIX, "--profiles", NODE_PROFILE, "--inventory", str(work / "hosts.yml"))
    yield work, env
    _cluster("down", "--prefix", NODE_PREFIX)


def _playbook(project, playbook, *args, **env):
    work, base = project
    assert not (work / "ansible.cfg").exists()
    return _run([os.path.join(BIN, "ansible-playbook"), "-i", str(work / "hosts.yml"), playbook, *args], work, dict(base, **env))


def _drift(work):
    reports = [json.loads(path.read_text()) for path in sorted((work / "out" / "drift").glob("*.json"))]
    return {report["host"]: (report["mode"], report["drifted"]) for report in reports}


# Bring-up, then both drift modes, from the installed collection by FQCN; in this order (one node, one state).
@pytest.mark.parametrize("playbook,args,env,mode", [
    ("topotune.instinct.site", (), {}, None),
    ("topotune.instinct.drift", (), {}, "fast"),
    # full mode needs the capture callback, which only this repository's ansible.cfg enables; the preload callback
    # (README: recommended beside it) loads the plugins from the installed collection
    ("topotune.instinct.drift", ("-e", "topotune_drift_mode=full"),
     {"ANSIBLE_CALLBACKS_ENABLED": "topotune.instinct.drift_capture,topotune.instinct.preload"}, "full"),
], ids=["site", "drift-fast", "drift-full"])
def test_playbooks_run_from_the_installed_collection(project, playbook, args, env, mode):
    work, _unused = project
    out = _playbook(project, playbook, *args, **env)
    assert "failed=0" in out and "unreachable=0" in out, out[-3000:]
    if mode is None:
        summary = json.loads((work / "out" / "run" / "summary.json").read_text())
        assert summary["failed_hosts"] == [] and len(summary["completed_hosts"]) == 1, summary
    else:
        assert _drift(work) == {"%s-01-%s" % (NODE_PREFIX, NODE_PROFILE): (mode, [])}, out[-3000:]
