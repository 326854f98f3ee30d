# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roles' plan actions (rocm_env, container_runtime) share: their arguments checked and split into the
plan's options, the node's topology model by the one chain, the role's own read-only discovery when that chain has
none, the comment their files start with, and the project's errors failing the task.

Controller-only. The plans themselves are pure functions (env_rules.role_plan, container_flags.role_plan); this is
the part that talks to Ansible.
"""

from __future__ import annotations

import contextlib

from ansible.errors import AnsibleActionFail
from ansible.plugins.filter.core import comment

from ansible_collections.topotune.instinct.plugins.filter.node_topology import node_topology

DEFAULT_MANAGED = "Ansible managed"


def managed_header(task_vars, templar):
    """``{{ ansible_managed | comment }}`` as the template lookup gives it: the play's ``ansible_managed`` when set,
    else Ansible's default text (the configuration's ansible_managed is deprecated in ansible-core 2.19)."""
    managed = task_vars.get("ansible_managed")
    managed = DEFAULT_MANAGED if managed is None else templar.template(managed)
    return comment(str(managed))


def known_model(given, inventory, discovery):
    """The model the chain gives (the role's variable, topotune_topology, the play's topotune_discovery), or {}."""
    return node_topology(given or {}, inventory or {}, discovery or {})


def discover(action, task_vars, sysroot):
    """Run the read-only gpu_topology module on the node (as the role's own discovery); its result."""
    return action._execute_module(module_name="topotune.instinct.gpu_topology", module_args={"sysroot": sysroot},
                                  task_vars=task_vars)


def discovered_model(result):
    """The model of a gpu_topology result, with the identity discovery adds (node_topology), or {}."""
    if result.get("failed") or not isinstance(result.get("topology"), dict):
        return {}
    return node_topology({}, {}, {"topology": result["topology"]})


@contextlib.contextmanager
def task_fails_on(errors, prefix=""):
    """Errors of ``errors`` raised in the block fail the task with their message (after ``prefix``): one line naming
    the variable and the fix, no traceback."""
    try:
        yield
    except errors as err:
        raise AnsibleActionFail(prefix + str(err)) from None


def plan_inputs(action, spec, declared, node_inputs):
    """The task's arguments, checked against the argument spec ``spec``, and the plan's options among them: those of
    the declaration ``declared`` that are not ``node_inputs`` (what gives the node's model)."""
    _unused, args = action.validate_argument_spec(argument_spec=spec)
    return args, {name: args[name] for name in declared if name not in node_inputs}


def node_model(action, task_vars, args, role, read_anyway=False):
    """The node's model by the one chain (``args``' topology, inventory_topology, discovery), else by the role's own
    discovery on the node under ``args["sysroot"]``; and that discovery's result (``{}`` when it did not run).
    ``read_anyway`` runs the discovery for a known model too (for what else it reads, the ROCm version). Fails the
    task, naming ``role`` and the sysroot, when no model is known and the node's cannot be read."""
    topology = known_model(args["topology"], args["inventory_topology"], args["discovery"])
    if topology and not read_anyway:
        return topology, {}
    found = discover(action, task_vars, args["sysroot"])
    if found.get("failed") and not topology:
        raise AnsibleActionFail("%s: cannot read the node's GPU topology under %s: %s"
                                % (role, args["sysroot"], found.get("msg", "gpu_topology failed")))
    return topology or discovered_model(found), found
