# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup plugin returning one of the collection's knowledge files (AMD facts kept as data)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: knowledge
author: topotune contributors (@topotune)
short_description: Read a topotune knowledge file (AMD facts kept as data, each with its source)
description:
  - Returns the parsed content of C(knowledge/<name>.yml) shipped inside the topotune.instinct collection.
  - Knowledge files hold facts that change between ROCm releases (GPU generations, environment variables,
    container flags); keeping them as data lets roles and tests share one source of truth.
  - Read through the collection's one knowledge loader, C(plugins/plugin_utils/core/knowledge.py); each file is parsed
    once per controller process, and every call returns a copy of its own.
options:
  _terms:
    description: Names of knowledge files, without the C(.yml) suffix.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Load the GPU generation table
  ansible.builtin.set_fact:
    __platform_checks_generations: "{{ lookup('topotune.instinct.knowledge', 'gpu_generations') }}"
"""

RETURN = r"""
_raw:
  description: The parsed content of each requested knowledge file.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import KnowledgeError, load_knowledge


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            return [load_knowledge(term) for term in terms]
        except KnowledgeError as exc:
            raise AnsibleLookupError(str(exc)) from None
