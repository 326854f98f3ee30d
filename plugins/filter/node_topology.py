# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the topology model a role works on, from the one chain every role and playbook uses."""

from __future__ import annotations

DOCUMENTATION = r"""
name: node_topology
author: topotune contributors (@topotune)
short_description: Pick the topology model of a node from the role's, the inventory's and the play's
description:
  - Returns the first non-empty model of, in this order, the input (the role's C(<role>_topology)), O(inventory)
    (C(topotune_topology), a model the inventory gives), O(discovery) (the play's discovery registered as
    C(topotune_discovery) by C(playbooks/topology.yml)); an empty mapping when none has one (a role then runs its
    own discovery).
  - The one place that says which model wins; the roles and playbooks pass their variables and never repeat the
    order.
  - A model without C(identity) (one the inventory gives, or an older capture) gets it as discovery adds it
    (C(module_utils/topology/identity.py) over C(knowledge/gpu_generations.yml)).
options:
  _input:
    description: The role's own topology variable (empty mapping for none).
    type: dict
    required: true
  inventory:
    description: C(topotune_topology | default({})).
    type: dict
  discovery:
    description: The play's discovery, C(topotune_discovery | default({})) (a M(topotune.instinct.gpu_topology) result).
    type: dict
"""

EXAMPLES = r"""
- name: Show the model the role would use
  ansible.builtin.debug:
    msg: >-
      {{ launch_templates_topology | topotune.instinct.node_topology(topotune_topology | default({}),
         topotune_discovery | default({})) }}
"""

RETURN = r"""
_value:
  description: The topology model, or an empty mapping.
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import identify_model
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import KnowledgeError, generations


def node_topology(given, inventory=None, discovery=None):
    for model in (given, inventory, discovery.get("topology") if isinstance(discovery, Mapping) else None):
        if isinstance(model, Mapping) and len(model) > 0:
            if isinstance(model.get("identity"), Mapping):
                return model
            # a model made without discovery's identity (an inventory's, an older capture): identified the same way
            try:
                known = generations()
            except KnowledgeError as err:
                raise AnsibleFilterError("node_topology: %s" % err) from None
            return dict(model, identity=identify_model(model, known))
    return {}


class FilterModule:
    def filters(self):
        return {"node_topology": node_topology}
