# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check the options with the module's own check (``cpufreq.role_plan``) on the controller, then run the
cpu_governor module: a wrong role variable is named before anything reaches the node."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import defaults
from ansible_collections.topotune.instinct.plugins.module_utils.state.cpufreq import OPTIONS, role_plan


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(defaults(OPTIONS), **self._task.args)
        try:
            role_plan(args["governor"], args["cpus"], args["sysroot"], boolean(args["persist"], strict=False),
                      args["boot_script"])
        except TopotuneError as err:
            return dict(result, failed=True, msg=str(err))
        result.update(self._execute_module(module_name="topotune.instinct.cpu_governor", module_args=self._task.args,
                                           task_vars=task_vars))
        return result
