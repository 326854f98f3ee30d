#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set the CPU frequency governor on all CPUs (or a cpulist) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cpu_governor
author: topotune contributors (@topotune)
short_description: Set the CPU frequency governor on many CPUs in one call
description:
  - Reads C(cpu<N>/cpufreq/scaling_governor) of the selected CPUs under O(sysroot) and writes O(governor)
    only where it differs, in one module call whatever the CPU count (no per-CPU Ansible loop).
  - Fails before writing anything, naming the CPUs and the available governors, when O(governor) is not in
    a CPU's C(scaling_available_governors).
  - CPUs without C(cpufreq) (virtual machines, cpufreq driver not loaded) are left alone and reported in
    RV(no_cpufreq) with a warning; that is not a failure.
  - Runtime only. Persistence across reboot is the job of the role C(topotune.instinct.cpu_governor).
options:
  governor:
    description: Governor to set, for example C(performance).
    type: str
    required: true
  cpus:
    description: CPUs to manage as a cpulist (C(0-63,128-191)), or C(all).
    type: str
    default: all
  sysroot:
    description: Directory under which sysfs is read and written (C(/) on a real node).
    type: path
    default: /
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Set the performance governor on every CPU
  topotune.instinct.cpu_governor:
    governor: performance

- name: Set it only on the first socket's CPUs of a simulated node
  topotune.instinct.cpu_governor:
    governor: performance
    cpus: "0-95,192-287"
    sysroot: /sim
"""

RETURN = r"""
changed_cpus:
  description: CPUs whose governor was (or, in check mode, would be) changed, as a cpulist.
  returned: always
  type: str
  sample: "0-383"
changed_count:
  description: Number of CPUs in RV(changed_cpus).
  returned: always
  type: int
  sample: 384
governors:
  description: Governor per group of CPUs after the run (the planned state in check mode).
  returned: always
  type: dict
  sample: {performance: "0-383"}
no_cpufreq:
  description: Selected CPUs without cpufreq, as a cpulist (empty when all have it).
  returned: always
  type: str
  sample: ""
cpus:
  description: The selected CPUs as a cpulist.
  returned: always
  type: str
  sample: "0-383"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import format_cpulist
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.state.cpufreq import apply, group, plan, read_state


def _diff_text(grouped):
    return "".join("%s: %s\n" % (gov, cpus) for gov, cpus in grouped.items()) or "no cpufreq\n"


class CpuGovernor:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self):
        sysroot, governor = self.params["sysroot"], self.params["governor"]
        state = read_state(sysroot, self.params["cpus"])
        todo = plan(state, governor)
        before = dict(state["governors"])
        after = dict(before)
        after.update((cpu, governor) for cpu in todo)
        if state["no_cpufreq"]:
            self.module.warn("CPUs %s have no cpufreq (VM, offline CPU, or cpufreq driver not loaded): governor not managed there"
                             % format_cpulist(state["no_cpufreq"]))
        if todo and not self.module.check_mode:
            apply(sysroot, todo, governor)
        return {
            "changed": bool(todo),
            "changed_cpus": format_cpulist(todo),
            "changed_count": len(todo),
            "governors": group(after),
            "no_cpufreq": format_cpulist(state["no_cpufreq"]),
            "cpus": format_cpulist(state["cpus"]),
            "diff": {"before": _diff_text(group(before)), "after": _diff_text(group(after))},
        }


def main():
    module = AnsibleModule(
        argument_spec={
            "governor": {"type": "str", "required": True},
            "cpus": {"type": "str", "default": "all"},
            "sysroot": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**CpuGovernor(module).run())
    except TopotuneError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
