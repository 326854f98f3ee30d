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


NODE_SIDE = sorted(
    os.path.join(kind, name) for kind in ("modules", "module_utils")
    for name in os.listdir(os.path.join(PLUGINS, kind)) if name.endswith(".py"))


@pytest.mark.parametrize("relpath", NODE_SIDE)
def test_node_side_code_never_imports_plugin_utils(relpath):
    found = imports(os.path.join(PLUGINS, relpath))
    assert not [name for name in found if "plugin_utils" in name], (relpath, found)


def test_plugin_utils_is_used_only_by_controller_code():
    users = set()
    for kind in os.listdir(PLUGINS):
        directory = os.path.join(PLUGINS, kind)
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name.endswith(".py") and any("plugin_utils" in i for i in imports(os.path.join(directory, name))):
                users.add(kind)
    assert users and users <= {"filter", "action", "plugin_utils", "lookup", "callback"}, users
