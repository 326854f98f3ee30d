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
  - With O(persist) it also writes, in the same call and all or nothing, what re-applies the governor at boot,
    the script O(boot_script) as C(/usr/local/sbin/topotune-cpu-governor), the oneshot unit
    C(/etc/systemd/system/topotune-cpu-governor.service) and its C(multi-user.target.wants) link (what
    C(systemctl enable) creates), and reloads systemd when one of them changed (RV(unit_changed)). This is the plan of role
    C(topotune.instinct.cpu_governor).
  - Every option is checked before anything is read or written (the message names the role variable,
    C(cpu_governor_<option>), its value and the fix).
  - Run as a task, the options are checked on the controller first, by the action of the same name with the module's
    own check, so a wrong one is named before anything reaches the node.
# BEGIN generated options: plugins/module_utils/state/cpufreq.py (scripts/gen-options)
options:
  sysroot:
    description: Directory under which sysfs is read and written (C(/) on a real node, C(/sim) on a simulated one).
    type: path
    default: /
  governor:
    description: Governor to set, for example C(performance); it must be in the CPUs' C(scaling_available_governors)
      (amd-pstate in active mode offers C(performance) and C(powersave)).
    type: str
    required: true
  cpus:
    description: "CPUs to manage: C(all), or a cpulist such as C(0-95,192-287)."
    type: str
    default: all
  persist:
    description: >-
      Install and enable, in the same call, what re-applies the governor at boot: the boot script (the role's
      C(files/topotune-cpu-governor), O(boot_script)) as C(/usr/local/sbin/topotune-cpu-governor), its oneshot unit and
      the unit's C(multi-user.target.wants) link (the role's README says why a unit).
    type: bool
    default: false
  boot_script:
    description: Content of the boot script (the role's C(files/topotune-cpu-governor)); required with O(persist).
    type: str
# END generated options
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

- name: Set it and re-apply it at boot
  topotune.instinct.cpu_governor:
    governor: performance
    persist: true
    boot_script: "{{ lookup('ansible.builtin.file', 'topotune-cpu-governor') }}"

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
changed_files:
  description: Boot-time files written (or, in check mode, that would be); empty without O(persist).
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/topotune-cpu-governor.service]
changed_links:
  description: The enable link when it was created or replaced.
  returned: always
  type: list
  elements: str
  sample: []
unit_changed:
  description: The unit file or its enable link changed; systemd was reloaded in the same call (not in check mode).
  returned: always
  type: bool
  sample: true
state:
  description: RV(governors), RV(changed_cpus) and RV(no_cpufreq), the role's C(cpu_governor_state).
  returned: always
  type: dict
  sample: {governors: {performance: "0-383"}, changed_cpus: "0-383", no_cpufreq: ""}
managed:
  description: What is managed (governor values, boot files, unit), the C(cpu_governor_managed) record of the manifest.
  returned: always
  type: dict
  sample: {owner: cpu_governor, sysroot: /, values: [], files: [], units: []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import format_cpulist
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.module_utils.state.cpufreq import OPTIONS, apply, group, plan, read_state, role_plan
from ansible_collections.topotune.instinct.plugins.module_utils.state.file_set import converge


def _diff_text(grouped):
    return "".join("%s: %s\n" % (gov, cpus) for gov, cpus in grouped.items()) or "no cpufreq\n"


class CpuGovernor:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self):
        sysroot, governor = self.params["sysroot"], self.params["governor"]
        # every option checked before anything is read
        role = role_plan(governor, self.params["cpus"], sysroot, self.params["persist"], self.params["boot_script"])
        state = read_state(sysroot, self.params["cpus"])
        todo = plan(state, governor)
        before = dict(state["governors"])
        after = dict(before)
        after.update((cpu, governor) for cpu in todo)
        if state["no_cpufreq"]:
            self.module.warn("CPUs %s have no cpufreq (VM, offline CPU, or cpufreq driver not loaded): governor not managed there"
                             % format_cpulist(state["no_cpufreq"]))
        # the boot-time files first: a file that cannot be written leaves the governors as they were
        files = converge(self.module, role["files"], role["links"], check_mode=self.module.check_mode, units=role["unit_paths"])
        if todo and not self.module.check_mode:
            apply(sysroot, todo, governor)
        governors = {"before": _diff_text(group(before)), "after": _diff_text(group(after))}
        return {
            "changed": bool(todo) or files["changed"],
            "changed_cpus": format_cpulist(todo),
            "changed_count": len(todo),
            "governors": group(after),
            "no_cpufreq": format_cpulist(state["no_cpufreq"]),
            "cpus": format_cpulist(state["cpus"]),
            "changed_files": files["changed_files"],
            "changed_links": files["changed_links"],
            "unit_changed": files["unit_changed"],
            "managed": role["managed"],
            "state": {"governors": group(after), "changed_cpus": format_cpulist(todo),
                      "no_cpufreq": format_cpulist(state["no_cpufreq"])},
            # with the boot-time files: a list, the governors' change (if any) then each file's
            "diff": ([dict(governors, before_header="governors", after_header="governors")] if todo else []) + files["diff"]
            if self.params["persist"] else governors,
        }


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(OPTIONS),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**CpuGovernor(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
