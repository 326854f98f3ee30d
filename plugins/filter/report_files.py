# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters: the per-host report documents of a run, as managed_files entries written in one controller call."""

from __future__ import annotations

DOCUMENTATION = r"""
name: report_files
author: topotune contributors (@topotune)
short_description: Turn named JSON documents into M(topotune.instinct.managed_files) entries
description:
  - >-
    Each C(name: document) pair of the input becomes C({path: <directory>/<name>.json, content: <JSON>, mode: 0644})
    with the layout of C(to_nice_json) (4-space indent, sorted keys) and a final newline.
  - Lets a playbook write the report of every host with one C(run_once) module call on the controller, instead of
    one delegated task per host (docs/performance.md).
  - Names must be inventory-style names (no C(/), not C(.) or C(..)); a bad one fails naming it.
options:
  _input:
    description: Mapping of file name (without C(.json)) to the document.
    type: dict
    required: true
  directory:
    description: >-
      Directory the files go into (C(~) expanded); a relative one is taken from the controller's working directory.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Keep every node's topology model on the controller
  topotune.instinct.managed_files:
    files: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'topotune_discovery')
         | map(attribute='topology')))
         | topotune.instinct.report_files(topotune_report_dir ~ '/topology') }}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_value:
  description: One C({path, content, mode}) entry per document, in name order.
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import to_nice_json


def report_files(documents, directory):
    if not isinstance(documents, dict):
        raise AnsibleFilterError("report_files expects a mapping of name to document, got %s" % type(documents).__name__)
    if not isinstance(directory, str) or not directory:
        raise AnsibleFilterError("report_files: the directory must be a path, got %r" % (directory,))
    directory = os.path.abspath(os.path.expanduser(directory))
    entries = []
    for name in sorted(documents):
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise AnsibleFilterError("report_files: %r cannot be a file name (a host name without '/')" % (name,))
        entries.append({"path": os.path.join(directory, name + ".json"),
                        "content": to_nice_json(documents[name]) + "\n", "mode": "0644"})
    return entries


class FilterModule:
    def filters(self):
        return {"report_files": report_files}
