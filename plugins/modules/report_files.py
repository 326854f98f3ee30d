#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name, in the controller process.

DOCUMENTATION = r"""
module: report_files
author: topotune contributors (@topotune)
short_description: Write one JSON report per name into a directory on the controller
description:
  - >-
    Writes each C(name: document) pair of O(documents) to C(<directory>/<name>.json), with the layout of
    C(to_nice_json) (4-space indent, sorted keys) and a final newline, atomically (temporary file, then rename), and
    only when the content or mode differs.
  - >-
    Runs in the controller process, like M(ansible.builtin.debug): no module is shipped or run, and the node is not
    contacted. Used with C(run_once) it writes the reports of every host of a play in one task, where a delegated
    M(ansible.builtin.copy) per host would cost a module run per host (docs/performance.md).
  - >-
    Names must be inventory-style names (no C(/), not C(.) or C(..)); a bad one fails naming it, before any write.
version_added: "0.2.0"
options:
  directory:
    description: Controller directory for the files (C(~) expanded; a relative one is taken from the working directory).
    type: str
    required: true
  documents:
    description: Mapping of file name (without C(.json)) to the document.
    type: dict
    required: true
  texts:
    description:
      - Mapping of file name (with its extension, e.g. C(junit.xml)) to a text written as it is (a final newline added
        where it has none), after the documents, with the same rules.
    type: dict
    default: {}
  mode:
    description:
      - Octal permission bits of the files in a quoted string such as V("0644") (an unquoted YAML V(0644), an
        integer, is read as the same mode).
      - World-writable modes are refused.
    type: raw
    default: "0644"
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - >-
    Reports are usually wanted in check mode too (a check-mode run still reports); set C(check_mode: false) on the
    task.
"""

EXAMPLES = r"""
- name: Keep every node's topology model on the controller
  topotune.instinct.report_files:
    directory: "{{ topotune_report_dir }}/topology"
    documents: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'topotune_discovery')
         | map(attribute='topology'))) }}
  run_once: true
  check_mode: false
"""

RETURN = r"""
files:
  description: Every report path of the call.
  returned: success
  type: list
  elements: str
  sample: [/srv/topotune/out/drift/node-01.json]
changed_files:
  description: The reports written (in check mode, that would be written).
  returned: success
  type: list
  elements: str
  sample: []
"""
