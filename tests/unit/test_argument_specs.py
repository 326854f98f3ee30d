"""Every role declares exactly its defaults in meta/argument_specs.yml, with a description and a type."""

import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
def test_argument_specs_match_defaults(role):
    defaults = _load(role, "defaults", "main.yml") or {}
    specs = (_load(role, "meta", "argument_specs.yml") or {}).get("argument_specs", {})
    options = (specs.get("main") or {}).get("options") or {}
    only_defaults, only_specs = sorted(set(defaults) - set(options)), sorted(set(options) - set(defaults))
    assert not only_defaults and not only_specs, "%s: only in defaults %s; only in argument_specs %s" % (role, only_defaults, only_specs)


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_prefixed_described_and_typed(role):
    specs = (_load(role, "meta", "argument_specs.yml") or {}).get("argument_specs", {})
    for entry, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            assert name.startswith(role + "_"), "%s.%s: option %s is not prefixed with %s_" % (role, entry, name, role)
            assert option.get("description"), "%s.%s: %s has no description" % (role, entry, name)
            assert option.get("type"), "%s.%s: %s has no type" % (role, entry, name)
