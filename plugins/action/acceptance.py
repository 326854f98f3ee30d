# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: the node's acceptance runs planned from its GPU generation's criteria, run (or read) on the node by the
acceptance module, and judged here against AMD's criteria (plugin_utils/acceptance/verdicts.py).

The criteria stay on the controller (knowledge/acceptance.yml, knowledge/rccl_expectations.yml); the node gets only
the run specs and returns the parsed runs.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.verdicts import node_report, plan_runs
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.role_action import discover, discovered_model, known_model

SPEC = {
    "outputs": {"type": "dict", "default": {}},
    "topology": {"type": "dict", "default": {}},
    "sysroot": {"type": "path", "default": "/"},
    "run_in_check_mode": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=SPEC)
        try:
            knowledge = {"acceptance": load_knowledge("acceptance"), "rccl_expectations": load_knowledge("rccl_expectations")}
            topology = known_model(args["topology"], {}, {})
            if not topology:
                found = discover(self, task_vars, args["sysroot"])
                topology = discovered_model(found)
                if not topology:
                    raise AnsibleActionFail("acceptance: cannot read the node's GPU topology under %s: %s" % (
                        args["sysroot"], found.get("msg", "gpu_topology returned no model")))
            identity = topology.get("identity") or {}
            specs = plan_runs(knowledge, identity, args["outputs"])
            ran = self._execute_module(module_name="topotune.instinct.acceptance",
                                       module_args=dict(args, topology={}, runs=specs), task_vars=task_vars)
            if ran.get("failed"):
                return dict(result, failed=True, msg="acceptance: %s" % ran.get("msg", "the module failed"))
            report = node_report(task_vars.get("inventory_hostname"), identity, ran["records"], knowledge)
        except TopotuneError as err:
            raise AnsibleActionFail("acceptance: %s" % err) from None
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return dict(result, changed=False, acceptance=report, msg="acceptance of %s: %s" % (
            identity.get("generation") or "an unidentified GPU", ", ".join(
                "%d %s" % (n, s) for s, n in report["summary"].items() if n)))
