# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check the launch options, discover the node's topology when none is given, then run the launch_templates
module on the node: role launch_templates in one task.

The options are checked first, on the controller, with the module's own check (``launch_render.validate_options``):
a wrong role variable is named before the node is read, also when the discovery would fail on it (a wrong sysroot).
Without a topology (the role's chain found none) the node's model is discovered here, as the ``gpu_topology`` action
does it (the module, then the identity from ``knowledge/gpu_generations.yml``), instead of in a task of its own.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import DEFAULTS, LaunchRenderError, validate_options
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import identify_model
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import generations


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        try:
            validate_options({key: args[key] for key in DEFAULTS if key in args})
        except LaunchRenderError as err:
            return dict(result, failed=True, msg="launch_templates: %s" % err)
        warnings = []
        try:
            if not args.get("topology"):
                found = self._execute_module(module_name="topotune.instinct.gpu_topology",
                                             module_args={"sysroot": args.get("sysroot") or "/"}, task_vars=task_vars)
                if found.get("failed") or not isinstance(found.get("topology"), dict):
                    return dict(result, failed=True, msg="launch_templates: no topology given and none discovered: %s"
                                % found.get("msg", "gpu_topology returned no model"))
                warnings.extend(found.get("warnings") or [])
                args["topology"] = dict(found["topology"], identity=identify_model(found["topology"], generations()))
            result.update(self._execute_module(module_name="topotune.instinct.launch_templates", module_args=args,
                                               task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if warnings:
            result["warnings"] = warnings + list(result.get("warnings") or [])
        return result
