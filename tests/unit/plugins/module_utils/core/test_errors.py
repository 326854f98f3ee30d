"""One error hierarchy: every exception class the project defines derives from errors.TopotuneError, so a module's
or the CLI's one ``except TopotuneError`` turns any of them into a clear message (never a traceback)."""

import importlib
import importlib.util
import inspect
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PACKAGE = "ansible_collections.topotune.instinct.plugins"


def plugin_modules():
    """Every Python module below plugins/, sub-packages included, by its dotted name."""
    names = []
    plugins = os.path.join(REPO, "plugins")
    for directory, dirs, files in os.walk(plugins):
        dirs.sort()
        package = ".".join([PACKAGE] + os.path.relpath(directory, plugins).split(os.sep))
        names += ["%s.%s" % (package, name[:-3]) for name in sorted(files)
                  if name.endswith(".py") and name != "__init__.py"]
    return names


def exception_classes(module):
    return [cls for _name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException)]


def test_the_base_lives_only_in_errors():
    from ansible_collections.topotune.instinct.plugins.module_utils.core import sysroot
    assert "TopotuneError" not in sysroot.__all__


@pytest.mark.parametrize("name", plugin_modules())
def test_every_plugin_exception_derives_from_topotune_error(name):
    module = importlib.import_module(name)
    bad = [cls.__name__ for cls in exception_classes(module) if not issubclass(cls, TopotuneError)]
    assert not bad, "%s: %s must derive from errors.TopotuneError" % (name, ", ".join(bad))


def test_the_check_sees_the_project_errors():
    # guard against a vacuous pass: the walk finds the known classes
    found = {cls.__name__ for name in plugin_modules() for cls in exception_classes(importlib.import_module(name))}
    assert {"SysrootError", "CommandError", "ValidationError", "FlagError", "SnapshotError", "LockError"} <= found


def test_the_simulator_errors_derive_from_topotune_error():
    spec = importlib.util.spec_from_file_location("sim_sysroot_errors", os.path.join(REPO, "sim", "sysroot.py"))
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    classes = exception_classes(sim)
    assert classes and all(issubclass(cls, TopotuneError) for cls in classes)
