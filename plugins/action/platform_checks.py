# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check role platform_checks' variables with the module's own check (``platform_checks.check_role_options``)
on the controller, then run the read-only platform_checks module: a wrong role variable is named before anything
reaches the node."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import check_role_options
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        options = {key: args[key] for key in ("sysroot", "report_dir", "fail_on") if key in args}
        if "gpu_count" in args:
            options["gpu_count"] = _int(args["gpu_count"])
        try:
            check_role_options(options)
        except TopotuneError as err:
            return dict(result, failed=True, msg=str(err))
        result.update(self._execute_module(module_name="topotune.instinct.platform_checks", module_args=args,
                                           task_vars=task_vars))
        return result
