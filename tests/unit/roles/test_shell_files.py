"""shellcheck on every shell file the project ships or generates: the static scripts (found by their #! line) and
the shell the roles render from templates (rendered here with representative values)."""

import os
import shutil
import subprocess

import pytest

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.rules import role_plan

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

pytestmark = pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (scripts/setup installs it)")


def _static_shell_files():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for path in listed:
        full = os.path.join(REPO, path)
        if not os.path.isfile(full) or path.startswith("tests/fixtures/"):
            continue
        with open(full, "rb") as handle:
            first = handle.readline()
        if first.startswith(b"#!") and (first.rstrip().endswith((b"/sh", b"/bash", b" bash", b" sh"))):
            found.append(path)
    return sorted(found)


def _shellcheck(path, shell=None):
    argv = ["shellcheck", "-x", "-P", "SCRIPTDIR"] + (["-s", shell] if shell else []) + [path]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_the_static_shell_files_are_found():
    files = _static_shell_files()
    assert "roles/launch_templates/files/topotune-bind" in files and "scripts/setup" in files and ".ci/run" in files


@pytest.mark.parametrize("path", _static_shell_files())
def test_static_shell_file(path):
    _shellcheck(path)


def _knowledge(name):
    return load_knowledge(name)


# cpu_governor's and kernel_tuning's boot scripts are static files (roles/*/files/), checked above; rocm_env's
# login-shell profile is rendered by its plan


def test_rocm_env_login_shell_profile(tmp_path):
    """The rocm_env plan renders /etc/profile.d/topotune-rocm.sh itself (plugin_utils/env/rules.py role_plan)."""
    options = {"profile": "xgmi-training", "overrides": {"NCCL_DEBUG": "INFO"}, "allow": {}, "fabric": "", "profile_d": True,
               "env_dir": "/etc/topotune/env", "fail_on_refusal": True}
    knowledge = {name: _knowledge(name) for name in ("env_vars", "env_profiles", "gpu_generations")}
    plan = role_plan(options, {"gpus": [{"index": 0, "gfx": "gfx942"}], "links": []}, "6.4.1", knowledge, "#\n# Ansible managed\n#")
    text = next(f["content"] for f in plan["files"] if f["path"] == "/etc/profile.d/topotune-rocm.sh")
    assert "export NCCL_DEBUG='INFO'" in text
    path = tmp_path / "topotune-rocm.sh"
    path.write_text(text)
    _shellcheck(str(path), "sh")
