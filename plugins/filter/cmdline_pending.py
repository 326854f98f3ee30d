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
  ansible.builtin.set_fact:
    __kernel_tuning_pending: "{{ __cmdline | topotune.instinct.cmdline_pending(__kernel_tuning_cmdline) }}"
"""

RETURN = r"""
_value:
  description: Tokens to add (C(+iommu=pt)) and tokens or names to remove (C(-nokaslr)), in order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def _has(tokens, token):
    name, sep, value = token.partition("=")
    if not sep:
        return any(t == name or t.startswith(name + "=") for t in tokens)
    for tok in tokens:
        tname, _unused, tvalue = tok.partition("=")
        if tok == token or (tname == name == "pci" and value in tvalue.split(",")):
            return True
    return False


def cmdline_pending(cmdline, wanted):
    if not isinstance(wanted, dict) or "present" not in wanted:
        raise AnsibleFilterError("cmdline_pending: 'wanted' must be the result of settings_merge(key='token')")
    tokens = [t.replace('"', "") for t in str(cmdline or "").split()]
    pending = ["+" + p["token"] for p in wanted["present"] if not _has(tokens, p["token"])]
    for token in wanted.get("absent", []):
        if "=" in token:
            if token in tokens:
                pending.append("-" + token)
        elif any(t == token or t.startswith(token + "=") for t in tokens):
            pending.append("-" + token)
    return pending


class FilterModule:
    def filters(self):
        return {"cmdline_pending": cmdline_pending}
