#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run AMD's acceptance tools on a node (or read their saved output) and judge the figures against AMD's criteria."""

from __future__ import annotations

DOCUMENTATION = r"""
module: acceptance
author: topotune contributors (@topotune)
short_description: Run AMD's acceptance tools on a GPU node and judge each figure against AMD's criterion
description:
  - >-
    The action (on the controller) takes the node's GPU generation from its topology model (O(topology), else the
    node is discovered as M(topotune.instinct.gpu_topology) does), and from C(knowledge/acceptance.yml) the runs its
    criteria need (TransferBench, RVS, BabelStream, rocblas-bench, rccl-tests all_reduce_perf...: each with AMD's
    documented arguments); the module (on the node) runs each installed tool without a shell, with a timeout, or
    parses the saved output O(outputs) names, and returns every run parsed.
  - >-
    The action then judges every criterion of the generation (C(module_utils/acceptance/criteria.py), the RCCL one by
    C(bench/rccl.py compare_busbw)) and returns the node's report: each verdict C(pass), C(fail) or C(unknown) (the
    tool is missing, its output does not contain the measured case, check mode: the reason says which, never
    C(pass)), the figure, its margin against the criterion, and the criterion's source.
  - >-
    The margin against the median of the node's hardware class, and the C(warn) of a node 5 % or more below it, need
    every node: C(playbooks/acceptance.yml) adds them afterwards (filter C(topotune.instinct.acceptance_cluster)).
  - Check mode parses saved outputs but runs no tool unless O(run_in_check_mode). Nothing on the node is changed.
version_added: "0.9.0"
options:
  outputs:
    description:
      - Saved outputs on the node to parse instead of running the tool, a mapping of run id to path. A run id is
        C(<tool>.<test>) of a distinct AMD command among the node's criteria (C(transferbench.a2a), C(rvs.gst),
        C(rccl-tests.all_reduce_perf)...; docs/acceptance.md, "The runs"). An unknown id fails naming the ids there are.
    type: dict
    default: {}
  topology:
    description:
      - The node's topology model (C(topotune_discovery.topology)); its C(identity) names the GPU generation. Empty,
        the node is discovered in the same task.
    type: dict
    default: {}
  sysroot:
    description: Root under which the node is discovered when O(topology) is empty.
    type: path
    default: /
  run_in_check_mode:
    description: Run the tools in check mode too (they change nothing, but hold the GPUs for minutes).
    type: bool
    default: false
  runs:
    description:
      - Set by the action (the module's own input), the run specs of C(module_utils/acceptance/run.py run_spec).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - name: AMD Instinct Customer Acceptance Guide
    description: The criteria, one page per GPU and the network pages.
    link: https://instinct.docs.amd.com/projects/system-acceptance/en/latest/
"""

EXAMPLES = r"""
- name: Judge a node on saved outputs of TransferBench and RVS
  topotune.instinct.acceptance:
    outputs:
      transferbench.a2a: /var/tmp/a2a.txt
      rvs.gst: /var/tmp/gst.txt
  register: node_acceptance
"""

RETURN = r"""
acceptance:
  description:
    - The node's report (C(plugin_utils/acceptance/verdicts.py node_report)), C(schema_version) 1.
    - C(verdicts) one per criterion of the generation (C(id), C(status), C(value), C(unit), C(margin_pct),
      C(observed), C(expected), C(failing), C(source)); C(runs) the runs (C(status) parsed, missing, skipped or error,
      C(reason), C(cmd), C(result) with the measurements); C(summary) the counts per status.
  returned: success
  type: dict
  sample:
    schema_version: 1
    host: node1
    generation: MI300X
    verdicts:
      - {id: transferbench.a2a, status: pass, value: 35.1, unit: GB/s, margin_pct: 6.69}
    summary: {pass: 1, warn: 0, fail: 0, unknown: 0}
records:
  description: The module's runs as it returned them (the action keeps them in C(acceptance.runs)).
  returned: never
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.run import run_spec


def main():
    module = AnsibleModule(
        argument_spec={
            "outputs": {"type": "dict", "default": {}},
            "topology": {"type": "dict", "default": {}},
            "sysroot": {"type": "path", "default": "/"},
            "run_in_check_mode": {"type": "bool", "default": False},
            "runs": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    records = [run_spec(spec, module.check_mode, module.params["run_in_check_mode"]) for spec in module.params["runs"]]
    module.exit_json(changed=False, records=records)


if __name__ == "__main__":
    main()
