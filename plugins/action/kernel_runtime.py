# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check role kernel_tuning's variables with the module's own checks (``kernel_runtime.check_tuning``,
``check_reboot``) on the controller, then run the kernel_runtime module: a wrong role variable is named before
anything reaches the node."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import defaults
from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_runtime import OPTIONS, check_reboot, check_tuning


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        sysroot = args.get("sysroot", "/")
        try:
            if isinstance(args.get("tuning"), dict):
                # the module's defaults for what the task leaves out; booleans as the module will read them
                tuning = dict(defaults(OPTIONS["tuning"]["options"]), **args["tuning"])
                for key in ("numa_balancing_disable", "c2_disable", "acs_disable", "virtualization_host"):
                    tuning[key] = boolean(tuning[key], strict=False)
                check_tuning(tuning, sysroot)
            if isinstance(args.get("reboot"), dict):
                check_reboot(args["reboot"], sysroot)
        except TopotuneError as err:
            return dict(result, failed=True, msg=str(err))
        result.update(self._execute_module(module_name="topotune.instinct.kernel_runtime", module_args=args,
                                           task_vars=task_vars))
        return result
