"""Options declared once (module_utils/core/options.py): the argument spec, the role variables and the CLI flags built
from one declaration."""

import argparse

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core import options

DECLARED = {
    "sysroot": {"type": "path", "default": "/", "description": "Root.", "role": {"type": "str", "default": "{{ x }}"}},
    "count": {"type": "int", "default": 0, "description": "How many.", "cli": {"help": "how many"}},
    "names": {"type": "list", "elements": "str", "default": [], "description": "Names.", "cli": {"help": "a name"}},
    "sizes": {"type": "list", "elements": "int", "default": [2, 4], "description": "Sizes.",
              "cli": {"flag": "--size", "metavar": "K", "help": "a size"}},
    "pinned": {"type": "dict", "default": {}, "description": "Pinned.", "cli": {"help": "a file"}},
    "strict": {"type": "bool", "default": False, "description": "Strict.", "cli": {"help": "be strict"}},
    "bind": {"type": "bool", "default": True, "description": "Bind.", "cli": {"flag": "--no-bind", "help": "do not bind"}},
    "mode": {"type": "str", "default": "", "choices": ["a", "b"], "description": "Mode.",
             "cli": {"help": "the mode", "default": "a"}},
    "content": {"type": "str", "description": "Content.", "role": False},
    "show": {"type": "str", "default": "all", "description": "What to print.", "role_only": True},
    "reboot": {"type": "dict", "role": False, "role_prefix": "reboot_", "description": "Reboot.", "options": {
        "step": {"type": "str", "required": True, "choices": ["a"], "description": "Step.", "role": False},
        "batch": {"type": "raw", "description": "Batch.", "role": {"default": "10%"}},
        "timeout": {"type": "int", "default": 5, "description": "Timeout.", "role_only": True},
    }},
}


def test_the_argument_spec_is_the_module_options_with_ansibles_keys_only():
    spec = options.argument_spec(DECLARED)
    assert "show" not in spec  # role-only
    assert spec["sysroot"] == {"type": "path", "default": "/"}
    assert spec["mode"] == {"type": "str", "default": "", "choices": ["a", "b"]}
    assert spec["content"] == {"type": "str"}
    assert spec["reboot"] == {"type": "dict", "options": {"step": {"type": "str", "required": True, "choices": ["a"]},
                                                          "batch": {"type": "raw"}}}
    # a copy: the caller may change it
    spec["names"]["default"].append("x")
    assert DECLARED["names"]["default"] == []
    assert options.defaults(DECLARED)["sizes"] == [2, 4] and options.defaults(DECLARED)["content"] is None


def test_role_variables_are_derived_unless_declared_otherwise():
    found = options.role_variables(DECLARED, "role")
    assert found["sysroot"] == "role_sysroot" and found["show"] == "role_show"
    assert "content" not in found and "reboot" not in found and "reboot.step" not in found
    assert found["reboot.batch"] == "role_reboot_batch" and found["reboot.timeout"] == "role_reboot_timeout"
    renamed = dict(DECLARED, dest={"type": "path", "description": "Where.", "role": {"name": "role_dir"}})
    assert options.role_variables(renamed, "role")["dest"] == "role_dir"


def _parse(*argv):
    parser = argparse.ArgumentParser()
    options.add_cli_flags(parser, DECLARED)
    files = {}

    def read_mapping(path, flag):
        files[path] = flag
        return {"from": path}

    return options.cli_values(parser.parse_args(list(argv)), DECLARED, read_mapping), files, parser


def test_cli_flags_give_the_declared_defaults():
    values, files, parser = _parse()
    assert values == {"count": 0, "names": [], "sizes": [2, 4], "pinned": {}, "strict": False, "bind": True, "mode": "a"}
    assert not files
    helps = parser.format_help()
    assert "--size K" in helps and "--no-bind" in helps and "--names VALUE" in helps and "--pinned FILE" in helps
    assert "--content" not in helps and "--show" not in helps and "--sysroot" not in helps


def test_cli_flags_take_their_values():
    values, files, _parser = _parse("--count", "3", "--names", "a", "--names", "b", "--size", "8", "--pinned", "p.yml",
                                    "--strict", "--no-bind", "--mode", "b")
    assert values == {"count": 3, "names": ["a", "b"], "sizes": [8], "pinned": {"from": "p.yml"}, "strict": True,
                      "bind": False, "mode": "b"}
    assert files == {"p.yml": "--pinned"}  # the reader is told which flag gave the file
    with pytest.raises(SystemExit):
        _parse("--mode", "c")  # choices are the declaration's


def test_the_list_default_is_not_shared_between_runs():
    first, _files, _parser = _parse()
    first["sizes"].append(16)
    assert _parse()[0]["sizes"] == [2, 4]
