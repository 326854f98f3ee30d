# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup plugin returning the roles that own managed settings, in bring-up order (their role metadata)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: owner_roles
author: topotune contributors (@topotune)
short_description: The topotune roles that own managed settings, in bring-up order
description:
  - >-
    Returns the roles of the collection whose C(meta/topotune.yml) says C(owner: true), in the order
    C(playbooks/site.yml) runs them. Each exports C(<role>_managed) for the manifest; the drift_capture callback
    records their check-mode changes; a drift correction re-runs them in this order.
  - The one declaration of the owner roles; C(playbooks/vars/topotune.yml) (C(__topotune_owners)) and the
    drift_capture callback read it.
options: {}
"""

EXAMPLES = r"""
- name: Show the owner roles
  ansible.builtin.debug:
    msg: "{{ query('topotune.instinct.owner_roles') }}"
"""

RETURN = r"""
_raw:
  description: The owner role names (without the collection prefix), in bring-up order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.owners import OwnersError, owner_roles


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if terms:
            raise AnsibleLookupError("owner_roles takes no terms, got %r" % (terms,))
        try:
            return owner_roles()
        except OwnersError as exc:
            raise AnsibleLookupError(str(exc)) from None
