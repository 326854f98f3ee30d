"""Every role's argument specs (generated from the engines' declarations by scripts/gen-options, which
tests/unit/scripts/test_gen_options.py keeps up to date) give each option a prefixed name, a description and a type,
and hold the choices and types no other role file repeats."""

import json
import os
import re

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES_DIR = os.path.join(REPO, "roles")
ROLES = sorted(d for d in os.listdir(ROLES_DIR) if os.path.isdir(os.path.join(ROLES_DIR, d))) if os.path.isdir(ROLES_DIR) else []


def _load(role, *parts):
    path = os.path.join(ROLES_DIR, role, *parts)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


@pytest.mark.parametrize("role", ROLES)
def test_role_has_the_standard_layout(role):
    for part in ("defaults/main.yml", "meta/argument_specs.yml", "meta/main.yml", "tasks/main.yml", "README.md"):
        assert os.path.isfile(os.path.join(ROLES_DIR, role, part)), "%s lacks %s" % (role, part)


@pytest.mark.parametrize("role", ROLES)
def test_every_entry_point_has_its_tasks_file(role):
    specs = (_load(role, "meta", "argument_specs.yml") or {}).get("argument_specs", {})
    assert "main" in specs, role
    for entry in specs:
        assert os.path.isfile(os.path.join(REPO, "roles", role, "tasks", entry + ".yml")), "%s: entry point %s has no tasks/%s.yml" % (
            role, entry, entry)


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_prefixed_described_and_typed(role):
    specs = (_load(role, "meta", "argument_specs.yml") or {}).get("argument_specs", {})
    for entry, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            assert name.startswith(role + "_"), \
                "%s.%s: option %s is not prefixed with %s_" % (role, entry, name, role)
            assert option.get("description"), "%s.%s: %s has no description" % (role, entry, name)
            assert option.get("type"), "%s.%s: %s has no type" % (role, entry, name)


# One way to do each thing (issue 15): meta/argument_specs.yml owns types and choices, knowledge/ owns AMD facts and
# enums; vars/main.yml and the preflight asserts keep only policy and cross-field rules.

_TYPE_RECHECKS = {"bool": ("is not boolean", "is boolean"), "dict": ("is not mapping", "is mapping"),
                  "list": ("is not sequence", "is string or")}


def _options(role):
    return ((_load(role, "meta", "argument_specs.yml") or {}).get("argument_specs", {}).get("main") or {}).get("options") or {}


def _role_text(role):
    text = []
    for sub in ("vars", "tasks"):
        folder = os.path.join(ROLES_DIR, role, sub)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                text.append(handle.read())
    return "\n".join(text)


@pytest.mark.parametrize("role", ROLES)
def test_role_vars_hold_constants_only(role):
    """A template in vars/main.yml is a decision: it belongs to the role's plan or to an option's default."""
    for name, value in (_load(role, "vars", "main.yml") or {}).items():
        text = json.dumps(value)
        assert "{{" not in text and "{%" not in text, "%s: vars/main.yml %s is a template, not a constant" % (role, name)


@pytest.mark.parametrize("role", ROLES)
def test_choices_and_types_are_checked_only_by_the_argument_specs(role):
    internals = _load(role, "vars", "main.yml") or {}
    text = _role_text(role)
    for name, option in _options(role).items():
        if option.get("choices"):
            copies = [k for k, v in internals.items() if isinstance(v, list) and sorted(map(str, v)) == sorted(map(str, option["choices"]))]
            assert not copies, "%s: %s repeat the choices of %s (argument_specs owns them)" % (role, copies, name)
            assert not re.search(r"\b%s\s+(not\s+)?in\b" % name, text), "%s: %s is checked against its choices again" % (role, name)
        for phrase in _TYPE_RECHECKS.get(option.get("type"), ()):
            assert "%s %s" % (name, phrase) not in text, "%s: the type of %s (%s) is checked again" % (role, name, option["type"])


@pytest.mark.parametrize("option", ["rocm_env.rocm_env_profile", "container_runtime.container_runtime_profile"])
def test_profile_choices_are_the_knowledge_profiles(option):
    role, name = option.split(".")
    assert _options(role)[name]["choices"] == list(load_knowledge("env_profiles")["profiles"])


def test_refused_capabilities_are_the_knowledge_ones():
    from ansible_collections.topotune.instinct.plugins.plugin_utils.env.container_plan import FORBIDDEN_CAPS

    forbidden = {entry["name"] for entry in load_knowledge("container_flags")["forbidden"]} - {"privileged"}
    assert set(FORBIDDEN_CAPS) == forbidden
    assert "SYS_RAWIO" not in _role_text("container_runtime"), "container_runtime spells out a refused capability"


def test_required_kernel_parameters_come_fromload_knowledge():
    from ansible_collections.topotune.instinct.plugins.filter.kernel_params import kernel_params

    generations = load_knowledge("gpu_generations")
    default = _load("kernel_tuning", "defaults", "main.yml")["kernel_tuning_cmdline"]
    assert isinstance(default, str) and "topotune.instinct.kernel_params" in default
    assert _options("kernel_tuning")["kernel_tuning_cmdline"]["default"] == default
    tokens = [["%s=%s" % (e["name"], e["value"]) if "value" in e else e["name"] for e in kernel_params(topology, generations)]
              for topology in ({}, {"gpus": [{"device_id": "0x74A0"}]}, {"gpus": [{"device_id": "0x74a1"}]})]
    mi300a = next(g for g in generations["generations"] if g["name"] == "MI300A")
    assert tokens == [generations["tables"]["kernel_params_common"]["required"], mi300a["kernel_params"]["required"],
                      generations["tables"]["kernel_params_common"]["required"]]
    assert {"transparent_hugepage=always", "numa_balancing=disable"} <= set(tokens[1])
    # nowhere else: role files, the platform checks' fallback
    with open(os.path.join(REPO, "plugins", "module_utils", "checks", "platform_checks.py"), encoding="utf-8") as handle:
        assert "pci=bfsort" not in handle.read()
    for role in ROLES:
        values = [_load(role, "defaults", "main.yml"), [o.get("default") for o in _options(role).values()], _load(role, "vars", "main.yml")]
        assert "realloc" not in json.dumps(values), "%s spells out a kernel parameter (knowledge owns them)" % role


def test_topology_chain_is_the_filters():
    from ansible_collections.topotune.instinct.plugins.filter.node_topology import node_topology

    given, inventory = {"gpus": [1], "identity": {}}, {"gpus": [2], "identity": {}}
    discovery = {"topology": {"gpus": [3], "identity": {}}}
    assert node_topology(given, inventory, discovery) is given
    assert node_topology({}, inventory, discovery) is inventory
    assert node_topology({}, {}, discovery) == {"gpus": [3], "identity": {}}
    assert node_topology({}, {}, {"skipped": True}) == {}
    # a model without identity gets the one discovery would have given it
    assert node_topology({}, {"gpus": [{"index": 0, "device_id": "0x74a9"}]}, {})["identity"]["product"] == "MI300X HF"
    for top in ("roles", "playbooks"):
        for root, _dirs, files in os.walk(os.path.join(REPO, top)):
            for name in files:
                if name.endswith(".yml"):
                    with open(os.path.join(root, name), encoding="utf-8") as handle:
                        assert "topotune_discovery.topology if" not in handle.read(), os.path.join(root, name)
