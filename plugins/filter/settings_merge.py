# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter merging additive setting lists ({name, value, state}) into the final state."""

from __future__ import annotations

DOCUMENTATION = r"""
name: settings_merge
author: topotune contributors (@topotune)
short_description: Merge additive lists of {name, value, state} settings
description:
  - Applies the entries of the input list in order, the way C(linux-system-roles/kernel_settings) treats its
    additive lists, so defaults, group_vars and host_vars can each contribute entries.
  - With O(key=name) (sysctl) an entry replaces an earlier entry of the same name; C(state=absent) removes it.
  - With O(key=token) (kernel command line, where C(pci=...) may appear several times) an entry is keyed by
    C(name=value); C(state=absent) with a value removes that token, without a value every token of that name.
  - Malformed entries raise an error naming the entry and the fix.
options:
  _input:
    description: Setting entries; C(value) may be omitted for flag-like kernel parameters (C(nokaslr)).
    type: list
    elements: dict
    required: true
  key:
    description: How entries are keyed, see above.
    type: str
    default: name
    choices: [name, token]
"""

EXAMPLES = r"""
- name: Final sysctl values
  ansible.builtin.set_fact:
    __kernel_tuning_sysctl: >-
      {{ ([{'name': 'kernel.numa_balancing', 'value': 0}] + kernel_tuning_sysctl) | topotune.instinct.settings_merge }}
"""

RETURN = r"""
_value:
  description: C(present) (list of C({name, value, token}) in first-seen order) and C(absent) (tokens or names removed).
  type: dict
"""

import re

from ansible.errors import AnsibleFilterError

_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.,:=+\-/@]*$")


def _entry(item, pos):
    if not isinstance(item, dict) or "name" not in item:
        raise AnsibleFilterError("settings_merge: entry %d (%r) is not a mapping with a 'name'" % (pos, item))
    name = str(item["name"])
    state = item.get("state", "present")
    if state not in ("present", "absent"):
        raise AnsibleFilterError("settings_merge: entry %s has state %r: use present or absent" % (name, state))
    if not _NAME.match(name):
        raise AnsibleFilterError("settings_merge: name %r has characters outside [A-Za-z0-9_.-/]" % name)
    value = item.get("value")
    if isinstance(value, bool):
        raise AnsibleFilterError("settings_merge: %s has a YAML boolean value %r: quote it ('0', 'on')" % (name, value))
    if value is not None:
        value = str(value)
        if not _VALUE.match(value):
            raise AnsibleFilterError("settings_merge: %s=%r has characters outside [A-Za-z0-9_.,:=+-/@] "
                                     "(no spaces or quotes)" % (name, value))
    return name, value, state


def settings_merge(items, key="name"):
    if key not in ("name", "token"):
        raise AnsibleFilterError("settings_merge: key=%r is not one of name, token" % (key,))
    if not isinstance(items, list):
        raise AnsibleFilterError("settings_merge: expected a list of {name, value, state}, got %s" % type(items).__name__)
    present, absent = {}, []
    for pos, item in enumerate(items):
        name, value, state = _entry(item, pos)
        token = name if value is None else "%s=%s" % (name, value)
        if key == "name":
            if state == "absent":
                present.pop(name, None)
                absent.append(name)
            else:
                if value is None:
                    raise AnsibleFilterError("settings_merge: %s has no value" % name)
                present[name] = {"name": name, "value": value, "token": token}
                if name in absent:
                    absent.remove(name)
        elif state == "absent":
            drop = [k for k, v in present.items() if (k == token if value is not None else v["name"] == name)]
            for k in drop:
                del present[k]
            absent.append(token)
        else:
            present[token] = {"name": name, "value": value, "token": token}
            if token in absent:
                absent.remove(token)
    return {"present": list(present.values()), "absent": absent}


class FilterModule:
    def filters(self):
        return {"settings_merge": settings_merge}
