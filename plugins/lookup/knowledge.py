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

import os
import re

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

KNOWLEDGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "knowledge")
_NAME = re.compile(r"^[a-z0-9_]+$")


def load_knowledge(name, directory=KNOWLEDGE_DIR):
    """Return the parsed knowledge file ``name`` (no suffix); raise ValueError with the reason."""
    if not _NAME.match(name or ""):
        raise ValueError("knowledge name %r is invalid: use lower-case letters, digits and _" % (name,))
    path = os.path.join(directory, name + ".yml")
    if not os.path.isfile(path):
        known = sorted(f[:-4] for f in os.listdir(directory) if f.endswith(".yml")) if os.path.isdir(directory) else []
        raise ValueError("no knowledge file %r (known: %s)" % (name, ", ".join(known) or "none"))
    with open(path, encoding="utf-8") as handle:
        try:
            return yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise ValueError("knowledge file %s is not valid YAML: %s" % (path, exc)) from exc


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            return [load_knowledge(term) for term in terms]
        except ValueError as exc:
            raise AnsibleLookupError(str(exc)) from exc
