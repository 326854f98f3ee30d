# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check role kernel_tuning's variables with the module's own checks (``kernel_runtime.check_tuning``,
``check_reboot``) on the controller, then run the kernel_runtime module: a wrong role variable is named before
anything reaches the node."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_runtime import check_reboot, check_tuning


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        sysroot = args.get("sysroot", "/")
        try:
            if isinstance(args.get("tuning"), dict):
                tuning = dict(args["tuning"])
                for key, default in (("numa_balancing_disable", True), ("c2_disable", False)):
                    tuning[key] = boolean(tuning.get(key, default), strict=False)
                check_tuning(tuning, sysroot)
            if isinstance(args.get("reboot"), dict):
                check_reboot(args["reboot"], sysroot)
        except TopotuneError as err:
            return dict(result, failed=True, msg=str(err))
        result.update(self._execute_module(module_name="topotune.instinct.kernel_runtime", module_args=args,
                                           task_vars=task_vars))
        return result
