"""Make the repository importable as the collection ``ansible_collections.topotune.instinct``.

Tests import collection code by its real name, as Ansible does. The repository is not checked out under an
``ansible_collections/<ns>/<name>`` path, so a symlink tree under ``.cache/collections`` provides one.
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
_COLLECTIONS = os.path.join(REPO, ".cache", "collections")
_LINK = os.path.join(_COLLECTIONS, "ansible_collections", "topotune", "instinct")

if not os.path.islink(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(REPO, _LINK)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)


import pytest  # noqa: E402 - after the path set-up above

sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as _sim  # noqa: E402 - sim/ is not a package


@pytest.fixture(scope="session")
def sim_tree(tmp_path_factory):
    """``sim_tree(profile)``: the profile's sysroot, built once per test session. Read it, never change it (tests
    that alter a tree build their own)."""
    cache = {}

    def get(name):
        if name not in cache:
            dest = tmp_path_factory.mktemp(name) / "root"
            _sim.build(name, str(dest))
            cache[name] = str(dest)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def sim_model(sim_tree):
    """``sim_model(profile)``: the topology model of the profile's sysroot (``load_capture``), once per session."""
    from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_capture(sysroot=sim_tree(name))
        return cache[name]
    return get


@pytest.fixture
def sim_pci_tree(sim_tree, tmp_path):
    """``sim_pci_tree(profile)``: a writable copy, under tmp_path, of the PCI part of the profile's sysroot (built by
    sim/sysroot.py): ``sys/bus/pci``, ``sys/devices/pci*`` and ``sys/class/infiniband``, the links between them kept
    (relative, as the kernel's). What a test that writes config space (the ACS fix) may change; returns its root."""
    import shutil

    def copy(name):
        source, dest = sim_tree(name), tmp_path / ("pci-" + name)
        for rel in ["sys/bus/pci", "sys/class/infiniband"] + [
                os.path.join("sys/devices", d) for d in os.listdir(os.path.join(source, "sys/devices"))
                if d.startswith("pci")]:
            if os.path.isdir(os.path.join(source, rel)):
                shutil.copytree(os.path.join(source, rel), str(dest / rel), symlinks=True)
        return str(dest)
    return copy
