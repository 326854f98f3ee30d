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
  - The merge is C(module_utils/state/kernel_settings.py), the one role C(topotune.instinct.kernel_tuning) runs on the node
    through M(topotune.instinct.kernel_runtime).
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
  ansible.builtin.debug:
    msg: >-
      {{ ([{'name': 'kernel.numa_balancing', 'value': 0}] + kernel_tuning_sysctl) | topotune.instinct.settings_merge }}
"""

RETURN = r"""
_value:
  description: C(present) (list of C({name, value, token}) in first-seen order) and C(absent) (tokens or names removed).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_settings import SettingsError, merge


def settings_merge(items, key="name"):
    """A front over ``module_utils/state/kernel_settings.py`` ``merge``, which role kernel_tuning's plan runs on the node."""
    if key not in ("name", "token"):
        raise AnsibleFilterError("settings_merge: key=%r is not one of name, token" % (key,))
    try:
        return merge([("settings_merge", items)], key)
    except SettingsError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    def filters(self):
        return {"settings_merge": settings_merge}
