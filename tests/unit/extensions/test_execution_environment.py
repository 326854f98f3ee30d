"""execution-environment.yml: the real ansible-builder (requirements.txt pin) accepts it and writes a build context
that installs this checkout's collection with the controller toolchain's pins; no image is built (no registry here).

The collection tarball is built as docs/fleet-awx.md says (`ansible-galaxy collection build`), into a copy of the EE
inputs so the checkout is left as it is.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml
from packaging.specifiers import SpecifierSet

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.dirname(sys.executable)


def _pins():
    pins = {}
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        for line in handle:
            found = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", line.strip())
            if found:
                pins[found.group(1).lower()] = found.group(2)
    return pins


def _galaxy():
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def tarballs(tmp_path_factory):
    """The collection built once (the slow part: ansible-galaxy walks the whole checkout)."""
    dest = tmp_path_factory.mktemp("collections")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dest),
                    REPO], check=True, capture_output=True, text=True)
    return dest


def _ee_copy(dest, tarballs, mutate=None):
    """The EE inputs (execution-environment.yml, ee/) copied to dest, with the built collection in ee/collections."""
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), str(dest))
    shutil.copytree(os.path.join(REPO, "ee"), str(dest / "ee"), ignore=shutil.ignore_patterns("collections"))
    shutil.copytree(str(tarballs), str(dest / "ee" / "collections"))
    if mutate:
        path = dest / "execution-environment.yml"
        definition = yaml.safe_load(path.read_text())
        mutate(definition)
        path.write_text(yaml.safe_dump(definition))
    return dest / "execution-environment.yml"


def _create(definition, context):
    return subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", str(definition), "-c", str(context),
                           "--output-filename", "Containerfile"], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def context(tmp_path_factory, tarballs):
    work = tmp_path_factory.mktemp("ee")
    proc = _create(_ee_copy(work, tarballs), work / "context")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work / "context"


def test_definition_is_schema_version_3():
    with open(os.path.join(REPO, "execution-environment.yml")) as handle:
        assert yaml.safe_load(handle)["version"] == 3


def test_pins_are_the_controller_toolchain(context):
    """ansible-core and ansible-runner in the image are the versions the tests ran (requirements.txt)."""
    pins = _pins()
    containerfile = (context / "Containerfile").read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"', containerfile, re.M).group(1).split()
    assert sorted(refs) == sorted(["ansible-core==" + pins["ansible-core"], "ansible-runner==" + pins["ansible-runner"]])
    assert "RUN $PYCMD -m pip install --no-cache-dir $ANSIBLE_INSTALL_REFS" in containerfile


def test_interpreter_satisfies_ansible_core(context):
    """The EE's Python is one the pinned ansible-core supports (2.19 needs 3.11+; the base image's python3 is 3.9)."""
    from importlib.metadata import metadata

    containerfile = (context / "Containerfile").read_text()
    pycmd = re.search(r'^ARG PYCMD="([^"]*)"', containerfile, re.M).group(1)
    version = re.search(r"python(\d+\.\d+)$", pycmd).group(1)
    assert metadata("ansible-core")["Version"] == _pins()["ansible-core"]
    assert version + ".0" in SpecifierSet(metadata("ansible-core")["Requires-Python"])
    assert re.search(r'^ARG PYPKG="python%s"' % re.escape(version), containerfile, re.M)


def test_collection_is_installed_from_this_checkout(context):
    containerfile = (context / "Containerfile").read_text()
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    [entry] = requirements["collections"]
    assert entry["type"] == "file"
    # the galaxy stage copies _build/ to /build and installs requirements.yml from there
    assert "COPY _build /build" in containerfile
    assert re.search(r"ansible-galaxy collection install .*-r requirements.yml", containerfile)
    assert entry["name"].startswith("/build/")
    tarball = context / "_build" / os.path.relpath(entry["name"], "/build")
    assert tarball.is_file(), "ee/requirements.yml names %s; galaxy.yml's version builds another name" % entry["name"]
    galaxy = _galaxy()
    with tarfile.open(str(tarball)) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))["collection_info"]
        names = set(archive.getnames())
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == (
        galaxy["namespace"], galaxy["name"], galaxy["version"])
    # what users run is in it, development material and the EE's own inputs are not
    assert {"playbooks/site.yml", "playbooks/report.yml", "plugins/action/report_files.py",
            "roles/platform_checks/tasks/main.yml"} <= names
    assert not [n for n in names if n.startswith(("tests/unit", "sim/", "ee/", "execution-environment"))]


def test_system_packages(context):
    bindep = (context / "_build" / "bindep.txt").read_text()
    # the EE reaches nodes over SSH
    assert re.search(r"^openssh-clients \[platform:rpm\]$", bindep, re.M)
    assert "--user-bindep=bindep.txt" in (context / "Containerfile").read_text()


def _unknown_key(definition):
    definition["dependencies"]["pip"] = ["jinja2"]


def _no_requirements(definition):
    definition["dependencies"]["galaxy"] = "ee/missing.yml"


# (ansible-builder only warns when additional_build_files match nothing: test_collection_is_installed_from_this_checkout
# checks the tarball itself)
@pytest.mark.parametrize(("mutate", "words"), [
    (_unknown_key, "Additional properties are not allowed"),
    (_no_requirements, "ee/missing.yml does not exist"),
])
def test_builder_rejects_a_broken_definition(tmp_path, tarballs, mutate, words):
    """The acceptance above means something: ansible-builder validates the definition and its files."""
    proc = _create(_ee_copy(tmp_path, tarballs, mutate), tmp_path / "context")
    assert proc.returncode != 0
    assert words in proc.stdout + proc.stderr, proc.stdout + proc.stderr
