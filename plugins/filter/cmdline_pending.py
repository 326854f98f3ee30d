# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter telling which kernel parameters the running kernel's command line still lacks (a reboot is pending)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cmdline_pending
author: topotune contributors (@topotune)
short_description: Kernel parameters that differ between /proc/cmdline and the wanted state
description:
  - Compares the running kernel's command line with the C(present)/C(absent) result of
    P(topotune.instinct.settings_merge#filter) (O(key=token)) and lists what only a reboot can bring in line.
  - C(pci=realloc=off) is also satisfied by a combined C(pci=bfsort,realloc=off).
  - The comparison is C(module_utils/state/kernel_settings.py), the one M(topotune.instinct.kernel_runtime) and the platform
    checks use.
options:
  _input:
    description: Content of C(/proc/cmdline).
    type: str
    required: true
  wanted:
    description: Output of C(settings_merge(key='token')).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Parameters waiting for a reboot
  ansible.builtin.debug:
    msg: "{{ lookup('ansible.builtin.file', '/proc/cmdline') | topotune.instinct.cmdline_pending(wanted) }}"
  vars:
    wanted: "{{ [{'name': 'iommu', 'value': 'pt'}] | topotune.instinct.settings_merge(key='token') }}"
"""

RETURN = r"""
_value:
  description: Tokens to add (C(+iommu=pt)) and tokens or names to remove (C(-nokaslr)), in order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_settings import pending


def cmdline_pending(cmdline, wanted):
    """A front over ``module_utils/state/kernel_settings.py`` ``pending``, which role kernel_tuning runs on the node."""
    if not isinstance(wanted, dict) or "present" not in wanted:
        raise AnsibleFilterError("cmdline_pending: 'wanted' must be the result of settings_merge(key='token')")
    return pending(cmdline, wanted)


class FilterModule:
    def filters(self):
        return {"cmdline_pending": cmdline_pending}
