# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter turning platform check results into readable terminal lines."""

from __future__ import annotations

DOCUMENTATION = r"""
name: checks_report
author: topotune contributors (@topotune)
short_description: Format platform check results as aligned terminal lines
description:
  - Turns the C(results) of M(topotune.instinct.platform_checks) into one line per check
    (C(STATUS  id  observed (expected ...))) plus an indented remediation line for non-passing checks,
    headed by a summary line.
  - Given a node's whole report (the role's C(platform_checks_report), with C(host), C(generation) and C(results)), the
    lines are headed by C(platform checks on HOST (GENERATION)).
options:
  _input:
    description: The C(results) list, or a node's C(platform_checks_report).
    type: raw
    required: true
  only:
    description: C(all) lists every check; C(problems) lists only C(warn), C(fail) and C(unknown).
    type: str
    default: all
    choices: [all, problems]
"""

EXAMPLES = r"""
- name: Print the checks
  ansible.builtin.debug:
    msg: "{{ checks.results | topotune.instinct.checks_report(only='problems') }}"

- name: Print every node's checks in one task
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | map('extract', hostvars, 'platform_checks_report') | map('topotune.instinct.checks_report') }}"
"""

RETURN = r"""
_value:
  description: Lines of text, the first one a summary (counts per status), after the node's title for a report.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

_ORDER = {"fail": 0, "warn": 1, "unknown": 2, "pass": 3}


def checks_report(results, only="all"):
    if isinstance(results, dict) and isinstance(results.get("results"), list):
        title = "platform checks on %s (%s)" % (results.get("host", "?"), results.get("generation") or "unknown generation")
        return [title] + checks_report(results["results"], only)
    if not isinstance(results, list):
        raise AnsibleFilterError("checks_report: expected the list of check results, got %s" % type(results).__name__)
    if only not in ("all", "problems"):
        raise AnsibleFilterError("checks_report: only=%r is not one of all, problems" % (only,))
    counts = {status: 0 for status in _ORDER}
    for res in results:
        if not isinstance(res, dict) or res.get("status") not in _ORDER:
            raise AnsibleFilterError("checks_report: %r is not a check result with a known status" % (res,))
        counts[res["status"]] += 1
    lines = ["%d checks: %d fail, %d warn, %d unknown, %d pass"
             % (len(results), counts["fail"], counts["warn"], counts["unknown"], counts["pass"])]
    width = max([len(str(r.get("id", ""))) for r in results] or [0])
    for res in sorted(results, key=lambda r: _ORDER[r["status"]]):
        if only == "problems" and res["status"] == "pass":
            continue
        lines.append("%-7s %-*s %s (expected %s)" % (res["status"].upper(), width, res["id"],
                                                     res.get("observed", ""), res.get("expected", "")))
        if res["status"] != "pass" and res.get("remediation"):
            lines.append("%-7s %-*s -> %s" % ("", width, "", res["remediation"]))
    return lines


class FilterModule:
    def filters(self):
        return {"checks_report": checks_report}
