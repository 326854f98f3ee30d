# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: the rocm_env role's plan for one node, in the controller process.

Checks the input first (nothing is read from the node when it is wrong), takes the node's model and ROCm version by
the one chain, runs the read-only gpu_topology module only when that chain lacks one of them, and returns
``plugin_utils/env_rules.role_plan()``: the findings, the text of both files (for the role's one managed_files call)
and what the role manages. Refused variables (with ``fail_on_refusal``) and wrong input fail the task, naming them.
"""

from __future__ import annotations

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
    with role_action.task_fails_on(ValueError, "rocm_env: "):
        return {"env_vars": load_knowledge("env_vars"), "env_profiles": load_knowledge("env_profiles"),
                "gpu_generations": {"generations": generations()}}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args, options = role_action.plan_inputs(self, ARGUMENT_SPEC, OPTIONS, NODE_INPUTS)
        with role_action.task_fails_on(EnvPlanError):
            check_options(options)

        discovery = args["discovery"]
        rocm = args["rocm_version"] or (discovery["rocm_version"] if "rocm_version" in discovery else None)
        # without a version the discovery runs for it alone when the topology is known: a node whose topology cannot
        # be read then has an unknown version (version-gated drops are skipped with a note) instead of failing
        topology, found = role_action.node_model(self, task_vars, args, "rocm_env", read_anyway=rocm is None)
        if rocm is None:
            rocm = found.get("rocm_version") or ""
        with role_action.task_fails_on(EnvPlanError):
            planned = role_plan(options, topology, rocm, knowledge(), role_action.managed_header(task_vars, self._templar))
        result.update(changed=False, **planned)
        return result
