# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: the rocm_env role's plan for one node, in the controller process.

Checks the input first (nothing is read from the node when it is wrong), takes the node's model and ROCm version by
the one chain, runs the read-only gpu_topology module only when that chain lacks one of them, and returns
``plugin_utils/env_rules.role_plan()``: the findings, the text of both files (for the role's one managed_files call)
and what the role manages. Refused variables (with ``fail_on_refusal``) and wrong input fail the task, naming them.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.plugin_utils.core import role_action
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import generations, load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.rules import (
    NODE_INPUTS,
    OPTIONS,
    EnvPlanError,
    check_options,
    role_plan,
)

ARGUMENT_SPEC = argument_spec(OPTIONS)


def knowledge():
    try:
        return {"env_vars": load_knowledge("env_vars"), "env_profiles": load_knowledge("env_profiles"),
                "gpu_generations": {"generations": generations()}}
    except ValueError as err:
        raise AnsibleActionFail("rocm_env: %s" % err) from None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        options = {k: args[k] for k in OPTIONS if k not in NODE_INPUTS}
        try:
            check_options(options)
        except EnvPlanError as err:
            raise AnsibleActionFail(str(err)) from None

        topology = role_action.known_model(args["topology"], args["inventory_topology"], args["discovery"])
        discovery = args["discovery"]
        rocm = args["rocm_version"] or (discovery["rocm_version"] if "rocm_version" in discovery else None)
        if not topology or rocm is None:
            found = role_action.discover(self, task_vars, args["sysroot"])
            # run only for the version (the topology is known): a node whose topology cannot be read has an unknown
            # version (version-gated drops are skipped with a note) instead of failing
            if found.get("failed") and not topology:
                raise AnsibleActionFail("rocm_env: cannot read the node's GPU topology under %s: %s"
                                        % (args["sysroot"], found.get("msg", "gpu_topology failed")))
            topology = topology or role_action.discovered_model(found)
            rocm = rocm if rocm is not None else (found.get("rocm_version") or "")
        try:
            planned = role_plan(options, topology, rocm, knowledge(), role_action.managed_header(task_vars, self._templar))
        except EnvPlanError as err:
            raise AnsibleActionFail(str(err)) from None
        result.update(changed=False, **planned)
        return result
