"""Where code runs, in the layout: what runs on a node (plugins/modules, plugins/module_utils) never imports the
controller-only code of plugins/plugin_utils (it is not shipped to nodes by AnsiballZ), and plugin_utils holds
only code the controller runs (filters, actions, the CLI report)."""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(REPO, "plugins")


def imports(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def python_files(kind):
    """The .py files below plugins/<kind>, sub-packages included, relative to plugins/."""
    found = []
    for directory, _dirs, names in os.walk(os.path.join(PLUGINS, kind)):
        found.extend(os.path.relpath(os.path.join(directory, n), PLUGINS) for n in names if n.endswith(".py"))
    return sorted(found)


NODE_SIDE = python_files("modules") + python_files("module_utils")


@pytest.mark.parametrize("relpath", NODE_SIDE)
def test_node_side_code_never_imports_plugin_utils(relpath):
    found = imports(os.path.join(PLUGINS, relpath))
    assert not [name for name in found if "plugin_utils" in name], (relpath, found)


def test_plugin_utils_is_used_only_by_controller_code():
    users = set()
    for kind in os.listdir(PLUGINS):
        if not os.path.isdir(os.path.join(PLUGINS, kind)):
            continue
        for relpath in python_files(kind):
            if any("plugin_utils" in i for i in imports(os.path.join(PLUGINS, relpath))):
                users.add(kind)
    assert users and users <= {"filter", "action", "plugin_utils", "lookup", "callback"}, users
