# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: the container_runtime role's plan for one node, in the controller process.

Checks the input first (nothing is read from the node when it is wrong), takes the node's model by the one chain, runs
the read-only gpu_topology module only when that chain has none, reads the device nodes with the read-only
gpu_device_access module, and returns ``plugin_utils/container_flags.role_plan()``: every
launch group's flags, the compose fragment, the checks and their report, the files' text (for the role's one
managed_files call), the users to add to the device groups and what the role manages. Wrong input, and failed checks
with ``strict``, fail the task.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.plugin_utils.core import role_action
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.container_plan import (
    NODE_INPUTS,
    OPTIONS,
    FlagError,
    check_options,
    role_plan,
)

ARGUMENT_SPEC = argument_spec(OPTIONS)


def knowledge():
    with role_action.task_fails_on(ValueError, "container_runtime: "):
        return {"container_flags": load_knowledge("container_flags"), "env_profiles": load_knowledge("env_profiles")}


def discovered_access(args, found):
    """The device access the discovery read under the role's sysroot (the play's, else the role's own), when no
    container user's groups are asked for; None when a read on the node is needed."""
    if args["users"]:
        return None
    for discovery in (args.get("discovery"), found):
        access = (discovery or {}).get("device_access") if isinstance(discovery, dict) else None
        if isinstance(access, dict) and access.get("sysroot") == args["sysroot"] and "kfd" in access:
            return access
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args, options = role_action.plan_inputs(self, ARGUMENT_SPEC, OPTIONS, NODE_INPUTS)
        known = knowledge()
        with role_action.task_fails_on(FlagError):
            check_options(options, known["container_flags"])

        topology, found = role_action.node_model(self, task_vars, args, "container_runtime")
        devices = discovered_access(args, found)
        if devices is None:
            devices = self._execute_module(module_name="topotune.instinct.gpu_device_access",
                                           module_args={"sysroot": args["sysroot"], "users": args["users"]},
                                           task_vars=task_vars)
        if devices.get("failed"):
            raise AnsibleActionFail("container_runtime: cannot read the device nodes under %s: %s"
                                    % (args["sysroot"], devices.get("msg", "gpu_device_access failed")))
        with role_action.task_fails_on(FlagError):
            planned = role_plan(options, topology, devices, known, role_action.managed_header(task_vars, self._templar))
        # a task result's `warnings` are Ansible's own; the plan's are in its report too
        planned["flag_warnings"] = planned.pop("warnings")
        result.update(changed=False, **planned)
        return result
