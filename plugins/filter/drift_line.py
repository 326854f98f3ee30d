# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: one line naming a drifted node and what drifted on it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drift_line
author: topotune contributors (@topotune)
short_description: One line naming a drifted node and its drifted items
description:
  - >-
    C(<host>: <n> drifted of <m> checked[, <k> corrected] (<owner>: <item>, ...)) from a report of
    P(topotune.instinct.drift_reports#filter).
  - >-
    A node whose manifest could not be read (C(manifest) C(missing) or C(unreadable)) was not verified: its line
    says so and names the remedy, C(<host>: manifest <path> missing, nothing verified: run playbooks/site.yml (or
    playbooks/drift.yml -e topotune_correct=true)), or, after a correction, that it was recorded again.
options:
  _input:
    description: One report C({host, checked, drifted}).
    type: dict
    required: true
  corrected:
    description: Also count the items a correction fixed.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Name each drifted node and its items
  ansible.builtin.debug:
    msg: "{{ reports.values() | selectattr('drifted') | map('topotune.instinct.drift_line') | list }}"
"""

RETURN = r"""
_value:
  description: The line.
  type: str
  sample: "node-07: 2 drifted of 41 checked (kernel_tuning: proc/sys/kernel/numa_balancing, rocm_env: /etc/profile.d/topotune-rocm.sh)"
"""


def drift_line(report, corrected=False):
    """One line naming a drifted node and what drifted on it."""
    drifted = report.get("drifted") or []
    manifest = next((item for item in drifted if item.get("kind") == "manifest"), None)
    if manifest is not None:
        # observed: "missing", or "unreadable: <why>"
        state, _sep, why = str(manifest.get("observed")).partition(": ")
        head = "%s: manifest %s %s%s" % (report.get("host"), manifest.get("item"), state, " (%s)" % why if why else "")
        if not (corrected and manifest.get("corrected")):
            return head + ", nothing verified: run playbooks/site.yml (or playbooks/drift.yml -e topotune_correct=true)"
        rest = [item for item in drifted if item is not manifest]
        return head + ", recorded again by the correction; %d other item(s) drifted, %d corrected" % (
            len(rest), sum(1 for item in rest if item.get("corrected")))
    line = "%s: %d drifted of %d checked" % (report.get("host"), len(drifted), report.get("checked") or 0)
    if corrected:
        line += ", %d corrected" % sum(1 for item in drifted if item.get("corrected"))
    return line + " (%s)" % ", ".join(_name(item) for item in drifted)


def _name(item):
    # full-mode items are already "<role> : <task>"
    owner, name = str(item.get("owner")), str(item.get("item"))
    if item.get("kind") == "stale":
        name = "stale " + name
    return name if name.startswith(owner + " : ") else "%s: %s" % (owner, name)


class FilterModule:
    def filters(self):
        return {"drift_line": drift_line}
