# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roles' plan actions (rocm_env, container_runtime) share: the node's topology model by the one chain,
the role's own read-only discovery when that chain has none, and the comment their files start with.

Controller-only. The plans themselves are pure functions (env_rules.role_plan, container_flags.role_plan); this is
the part that talks to Ansible.
"""

from __future__ import annotations

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
