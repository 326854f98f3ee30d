# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the nodes' acceptance reports compared within their hardware class, with the JUnit XML and the blocking
verdicts of the run."""

from __future__ import annotations

DOCUMENTATION = r"""
name: acceptance_cluster
author: topotune contributors (@topotune)
short_description: Compare the nodes' acceptance figures with their class median; JUnit XML and the failing nodes
description:
  - >-
    Takes each host's registered M(topotune.instinct.acceptance) result (its C(acceptance) report), adds to every
    numeric verdict the median of the nodes of the same GPU product in this run and the node's margin against it, and
    turns a C(pass) 5 % or more below that median into C(warn) (ROCm CVS C(verify_bw_dip)); classes of fewer than
    three nodes have no median.
  - Returns the reports, their JUnit XML, the terminal lines and the hosts whose verdicts block for O(fail_on).
options:
  _input:
    description: Host names, e.g. C(ansible_play_hosts).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable; hosts without the registered result are left out.
    type: raw
    required: true
  result:
    description: The name the acceptance result is registered under.
    type: str
    default: __topotune_acceptance
  fail_on:
    description: C(fail) (a failing verdict blocks the node), C(warn) (a warn or a fail does) or C(never).
    type: str
    default: fail
  dip_pct:
    description: How far below its class median (percent) a passing figure warns.
    type: float
    default: 5.0
"""

EXAMPLES = r"""
- name: Compare the nodes once
  ansible.builtin.set_fact:
    acceptance_run: "{{ ansible_play_hosts | topotune.instinct.acceptance_cluster(hostvars, fail_on='warn') }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: C(reports) (host to report), C(junit) (XML text), C(lines) (terminal lines), C(blocking) (host to ids).
  type: dict
"""

import copy

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import host_variables
from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.verdicts import blocking, cluster, junit, lines


def acceptance_cluster(hosts, hostvars, result="__topotune_acceptance", fail_on="fail", dip_pct=5.0):
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("acceptance_cluster: input must be a list of host names, got %s" % type(hosts).__name__)
    reports = {}
    for host in hosts:
        registered = host_variables(hostvars, host).get(result)
        if isinstance(registered, dict) and isinstance(registered.get("acceptance"), dict):
            reports[host] = copy.deepcopy(registered["acceptance"])
    classes = {host: report.get("product") or report.get("generation") for host, report in reports.items()}
    try:
        reports = cluster(reports, classes, float(dip_pct))
        blocked = blocking(reports, fail_on)
    except TopotuneError as err:
        raise AnsibleFilterError("acceptance_cluster: %s" % err) from None
    return {"reports": reports, "junit": junit(reports), "lines": lines(reports), "blocking": blocked}


class FilterModule:
    def filters(self):
        return {"acceptance_cluster": acceptance_cluster}
