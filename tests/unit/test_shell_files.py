"""shellcheck on every shell file the project ships or generates: the static scripts (found by their #! line) and
the shell the roles render from templates (rendered here with representative values)."""

import os
import shutil
import subprocess

import jinja2
import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.plugin_utils.env_rules import resolve

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
    with open(os.path.join(REPO, "knowledge", name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _render(template, **values):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(REPO, "roles")), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: "#\n# %s\n#" % text
    return env.get_template(template).render(ansible_managed="Ansible managed", **values)


def _rocm_values():
    result = resolve("xgmi-training", {"NCCL_DEBUG": "INFO"}, [], {"gfx": ["gfx942"], "rocm": "6.4.1", "xgmi": True},
                     _knowledge("env_vars"), _knowledge("env_profiles"))
    return {"rocm_env_profile": "xgmi-training", "__rocm_env_resolved": result}


# cpu_governor's and kernel_tuning's boot scripts are static files (roles/*/files/), checked above
RENDERED = [
    ("rocm_env/templates/topotune-rocm.sh.j2", "sh", None),
]


@pytest.mark.parametrize("template,shell,values", RENDERED)
def test_rendered_shell_template(tmp_path, template, shell, values):
    text = _render(template, **(values if values is not None else _rocm_values()))
    assert "export " in text or values is not None
    path = tmp_path / os.path.basename(template)[:-3]
    path.write_text(text)
    _shellcheck(str(path), shell)
