# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: run the gpu_topology module on the node, then add the node's GPU identity to the model it returns.

The identity (generation, product, kind) is decided here, once per node, by ``module_utils/topology/identity.py`` over
``knowledge/gpu_generations.yml``, which stays on the controller: every later consumer reads ``topology.identity``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import identify_model
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import KnowledgeError, generations


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result.update(self._execute_module(module_name="topotune.instinct.gpu_topology",
                                           module_args=self._task.args, task_vars=task_vars))
        topology = result.get("topology")
        if not result.get("failed") and isinstance(topology, dict):
            try:
                known = generations()
            except KnowledgeError as err:
                raise AnsibleActionFail("gpu_topology: cannot read knowledge/gpu_generations.yml: %s" % err) from None
            topology["identity"] = identify_model(topology, known)
        return result
