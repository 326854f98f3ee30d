# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: one line per node that failed or was unreachable, naming the fault and the fix."""

from __future__ import annotations

from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import explain_failure, first_failure, host_variables

DOCUMENTATION = r"""
name: node_failures
author: topotune contributors (@topotune)
short_description: Why each failed node failed, one line each, with the fix
description:
  - >-
    For each host of the input, finds the registered result that failed it among its variables (Ansible keeps the
    registered result of a failed or unreachable task; the run lock's C(__topotune_run_lock) is looked at first) and
    says in one line what went wrong and the fix (topotune.instinct.run_lock's preflight already does; a module that
    could not start for want of Python, an unreachable node and OS errors such as a read-only or full filesystem get
    a fix added).
  - A host whose failing task registered nothing gets a line pointing at its C(fatal) line in the play output.
options:
  _input:
    description: The failed host names, e.g. C(ansible_play_hosts_all | difference(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Name why each lost node failed
  ansible.builtin.debug:
    msg: "{{ (ansible_play_hosts_all | difference(ansible_play_hosts) | topotune.instinct.node_failures(hostvars)).values() | list }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: "Host name to the line C(<host>: <what failed>; <fix>)."
  type: dict
  sample: {node-3: "node-3: node cannot take this run's writes, nothing was changed: /etc is mounted read-only (...)"}
"""

PREFERRED = ("__topotune_run_lock", "topotune_discovery")


def node_failures(hosts, hostvars):
    lines = {}
    for host in hosts or []:
        variables = host_variables(hostvars, host)
        _name, result = first_failure(variables, PREFERRED)
        interpreter = variables.get("ansible_python_interpreter") if hasattr(variables, "get") else None
        if not isinstance(interpreter, str) or "{{" in interpreter:
            interpreter = None
        why = explain_failure(result, interpreter) if result else (
            "failed at a task that kept no result; see its 'fatal: [%s]' line in the play output" % host)
        lines[host] = "%s: %s" % (host, why)
    return lines


class FilterModule:
    def filters(self):
        return {"node_failures": node_failures}
