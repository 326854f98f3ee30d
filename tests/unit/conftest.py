"""Fixtures shared by the unit tests (the collection import set-up is in tests/conftest.py)."""

import json
from unittest import mock

import pytest
from ansible.module_utils import _internal
from ansible.module_utils.common import warnings as ansible_warnings
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
        # As in its own process on a node: not the controller (once a test session imports controller code,
        # module_utils would send warnings to the controller's display) and no warnings of earlier runs.
        with patch_module_args(args), mock.patch.object(_internal, "is_controller", False), \
                mock.patch.dict(ansible_warnings._global_warnings, clear=True), \
                mock.patch.dict(ansible_warnings._global_deprecations, clear=True), \
                pytest.raises(SystemExit) as exit_info:
            module.main()
        result = json.loads(capsys.readouterr().out)
        if "warnings" in result:
            result["warnings"] = [_message(warning) for warning in result["warnings"]]
        return exit_info.value.code, result
    return run


def _message(warning):
    # ansible-core 2.19 prints {"event": {"msg": ...}, "__ansible_type": "WarningSummary"}; earlier versions the string
    return warning["event"]["msg"] if isinstance(warning, dict) else warning
