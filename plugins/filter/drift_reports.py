# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: every host's drift report of a playbooks/drift.yml run, built on the controller in one pass."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drift_reports
author: topotune contributors (@topotune)
short_description: The drift report of every host of a drift run
description:
  - >-
    For each host of the input, the report C({host, mode, checked, drifted}) that C(playbooks/drift.yml) writes to
    C(drift/<host>.json), from the first of - the host's corrected result (fact O(corrected_var), set when
    C(topotune_correct=true) ran), the fast verification's registered result (O(fast_var), mode C(fast)), the
    capture of the full run (O(capture), mode C(full)). A host with none of them reports 0 checked, nothing drifted.
  - >-
    Fast mode also says what the manifest was found in, C(manifest) - C(ok), C(missing) or C(unreadable) (the
    verification's C(manifest_state); nothing else was checked then, and the one drifted item of kind C(manifest)
    names the remedy). Full mode does not read the manifest, so its reports have no C(manifest).
options:
  _input:
    description: Host names (normally C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) magic variable.
    type: raw
    required: true
  mode:
    description: The drift mode.
    type: str
    choices: [fast, full]
    required: true
  capture:
    description: >-
      The C(drift_capture) callback's document (C({hosts: {host: {checked, drifted}}})), full mode.
    type: dict
  fast_var:
    description: Name of the registered M(topotune.instinct.managed_state) result.
    type: str
    default: __topotune_drift_fast
  corrected_var:
    description: Name of the per-host fact holding the result after a correction.
    type: str
    default: __topotune_drift_corrected
"""

EXAMPLES = r"""
- name: Summarize
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | topotune.instinct.drift_reports(hostvars, 'fast') }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Mapping of host name to C({host, mode, checked, drifted}), plus C(manifest) in fast mode.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from jinja2 import Undefined

EMPTY = {"checked": 0, "drifted": []}


def _get(hostvars, host, name):
    try:
        value = hostvars[host][name]
    except (KeyError, AttributeError):
        return None
    return None if value is None or isinstance(value, Undefined) or (isinstance(value, dict) and value.get("skipped")) else value


def drift_reports(hosts, hostvars, mode, capture=None, fast_var="__topotune_drift_fast",
                  corrected_var="__topotune_drift_corrected"):
    if mode not in ("fast", "full"):
        raise AnsibleFilterError("drift_reports: mode must be fast or full, got %r" % (mode,))
    captured = (capture or {}).get("hosts") or {} if isinstance(capture, dict) else {}
    reports = {}
    for host in hosts:
        fast = _get(hostvars, host, fast_var) if mode == "fast" else None
        found = _get(hostvars, host, corrected_var)
        if found is None:
            found = fast if mode == "fast" else captured.get(host)
        found = found if isinstance(found, dict) else EMPTY
        reports[host] = {"host": host, "mode": mode, "checked": int(found.get("checked") or 0),
                         "drifted": list(found.get("drifted") or [])}
        # what the check found the manifest in (a correction records it again: its item then says corrected)
        state = fast.get("manifest_state") if isinstance(fast, dict) else None
        if state:
            reports[host]["manifest"] = state
    return reports


class FilterModule:
    def filters(self):
        return {"drift_reports": drift_reports}
