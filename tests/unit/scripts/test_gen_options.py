"""scripts/gen-options: every copy of the options (module documentation, role argument specs, defaults, README
tables, task arguments) is generated from the engines' declarations, and nothing generated is out of date."""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "gen-options")


def _generator():
    loader = importlib.machinery.SourceFileLoader("topotune_gen_options", SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


gen = _generator()


def test_nothing_generated_is_out_of_date():
    run = subprocess.run([sys.executable, SCRIPT, "--check"], cwd=REPO, capture_output=True, text=True, check=False)
    assert run.returncode == 0, "run scripts/gen-options:\n" + run.stdout[-6000:] + run.stderr


def test_every_role_and_role_module_has_its_declaration():
    roles = sorted(name for name in os.listdir(os.path.join(REPO, "roles"))
                   if os.path.isdir(os.path.join(REPO, "roles", name, "tasks")))
    assert sorted(gen.ROLES) == roles
    for module, path in gen.MODULES.items():
        assert os.path.isfile(os.path.join(REPO, "plugins", "modules", module + ".py")), module
        assert isinstance(gen.declaration(path), dict), path


def _copy(tmp_path, role):
    for part in ("roles/%s" % role, "plugins/modules"):
        shutil.copytree(os.path.join(REPO, part), str(tmp_path / part))
    keep = {"plugins/modules/%s.py" % m for m in gen.MODULES}
    for name in os.listdir(str(tmp_path / "plugins" / "modules")):
        if "plugins/modules/" + name not in keep:
            os.unlink(str(tmp_path / "plugins" / "modules" / name))
    for other in gen.ROLES:
        if other != role:
            shutil.copytree(os.path.join(REPO, "roles", other), str(tmp_path / "roles" / other))
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(REPO, "docs", "acceptance.md"), str(tmp_path / "docs"))


def test_check_mode_names_what_is_stale_writes_nothing_and_a_run_restores_it(tmp_path, capsys):
    _copy(tmp_path, "platform_checks")
    role = tmp_path / "roles" / "platform_checks"
    defaults = role / "defaults" / "main.yml"
    readme = role / "README.md"
    defaults.write_text(defaults.read_text().replace("platform_checks_gpu_count: 0", "platform_checks_gpu_count: 8"))
    readme.write_text(readme.read_text().replace("| `platform_checks_skip` |", "| `platform_checks_skipped` |")
                      + "\nA paragraph of prose after the table.\n")
    stale = (defaults.read_text(), readme.read_text())
    assert gen.main(["--check"], root=str(tmp_path)) == 1
    out = capsys.readouterr()
    assert "roles/platform_checks/defaults/main.yml" in out.err and "roles/platform_checks/README.md" in out.err
    assert "-platform_checks_gpu_count: 8" in out.out and "+platform_checks_gpu_count: 0" in out.out
    assert (defaults.read_text(), readme.read_text()) == stale  # check mode writes nothing
    assert gen.main([], root=str(tmp_path)) == 0
    assert yaml.safe_load(defaults.read_text())["platform_checks_gpu_count"] == 0
    assert "| `platform_checks_skip` |" in readme.read_text()
    assert readme.read_text().endswith("\nA paragraph of prose after the table.\n")  # prose outside the markers kept
    assert gen.main(["--check"], root=str(tmp_path)) == 0  # idempotent


def test_a_file_without_its_markers_is_named(tmp_path, capsys):
    _copy(tmp_path, "platform_checks")
    readme = tmp_path / "roles" / "platform_checks" / "README.md"
    readme.write_text(readme.read_text().replace(gen.README_BEGIN + "\n", ""))
    assert gen.main(["--check"], root=str(tmp_path)) == 2
    assert "roles/platform_checks/README.md needs one line" in capsys.readouterr().err


def test_a_declaration_with_a_wrong_key_or_reference_is_refused():
    with pytest.raises(gen.GenError, match="option a has unknown keys descripton"):
        gen._check_declaration("x.py", {"a": {"type": "str", "descripton": "A."}})
    with pytest.raises(gen.GenError, match="option b has no description"):
        gen._check_declaration("x.py", {"b": {"type": "str"}})
    declared = {"a": {"type": "str", "description": "See O(b)."}}
    with pytest.raises(gen.GenError, match=r"names O\(b\), which is not declared"):
        gen.markup("See O(b).", gen.module_resolver("x.py", declared), "ansible")


@pytest.mark.parametrize("target,text", [
    ("ansible", "O(var=1) of C(x), O(mod) and L(the doc, https://example.org)"),
    ("markdown", "`var=1` of `x`, `mod` and [the doc](https://example.org)"),
    ("plain", "var=1 of x, mod and the doc (https://example.org)"),
])
def test_markup_per_target(target, text):
    def resolve(name):
        return {"opt": ("option", "var"), "mod": ("code", "mod")}[name]

    got = gen.markup("O(opt=1) of C(x), O(mod) and L(the doc, https://example.org)", resolve, target)
    assert got == text.replace("O(mod)", "C(mod)")


@pytest.mark.parametrize("value,wrapped", [
    ("plain words", True), ("", True), ("yes", True), ("10%", True), ("{{ a | default('/') }}", True),
    ("a: b # c", True), ("x\n  | y", True), (("a long text: " * 20).strip(), True), ("{{ x }} " * 30, False),
])
def test_text_values_read_back_as_written(value, wrapped):
    lines = gen.text_value("key", value, 2)
    assert yaml.safe_load("\n".join(line[2:] for line in lines)) == {"key": value}
    assert all(len(line) <= gen.WIDTH for line in lines) == wrapped  # a trailing blank needs one quoted line
