"""Fixtures shared by the unit tests (the collection import set-up is in tests/conftest.py)."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args


@pytest.fixture
def run_module(capsys):
    """``run_module(module, check_mode=False, diff=False, **args) -> (rc, result)``: run ``module.main()`` the way
    Ansible does, a real ``AnsibleModule`` with ``args`` as its parameters (validated by its argument spec), in check
    mode and with ``--diff`` when asked. ``rc`` is the exit code (0 for ``exit_json``, 1 for ``fail_json``),
    ``result`` the JSON the module printed (``changed``, ``msg``, ``diff``...), its ``warnings`` as the messages
    Ansible shows."""

    def run(module, check_mode=False, diff=False, **args):
        args.update(_ansible_check_mode=check_mode, _ansible_diff=diff)
        capsys.readouterr()  # only what this run prints
        with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
            module.main()
        result = json.loads(capsys.readouterr().out)
        if "warnings" in result:
            result["warnings"] = [_message(warning) for warning in result["warnings"]]
        return exit_info.value.code, result
    return run


def _message(warning):
    # ansible-core 2.19 prints {"event": {"msg": ...}, "__ansible_type": "WarningSummary"}; earlier versions the string
    return warning["event"]["msg"] if isinstance(warning, dict) else warning
