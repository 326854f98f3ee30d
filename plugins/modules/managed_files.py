#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge a set of root-owned files, symlinks and stale-file removals in one module call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: managed_files
author: topotune contributors (@topotune)
short_description: Write a role's configuration files, links and removals in one call, all or nothing
description:
  - Converges every file a role owns on a node in one round trip, where one M(ansible.builtin.template) or
    M(ansible.builtin.file) task per file costs a worker fork and a module transfer each (docs/performance.md).
    The role renders the contents on the controller (for example with C(lookup('ansible.builtin.template', ...)))
    and passes them here.
  - A file is rewritten only when its content, permission bits or (when run as root) C(root:root) ownership
    differ. Every new file is first staged beside its destination and checked with its O(files[].validate)
    command; only when all of them pass are they renamed into place, so a rejected file leaves every file of the
    call untouched.
  - O(prune) removes files in a directory matching a pattern that O(files) no longer lists (for example the flag
    file of a launch group that no longer exists).
  - Returns a diff per changed file and per removal; in check mode reports what would change.
version_added: "0.2.0"
options:
  files:
    description: The files to converge.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute destination path.
        type: path
        required: true
      content:
        description: The whole content of the file. Required unless O(files[].state=absent).
        type: str
      mode:
        description:
          - Octal permission bits in a quoted string such as V("0755") (an unquoted YAML V(0755), an integer, is read
            as the same mode).
          - World-writable modes are refused.
        type: raw
        default: "0644"
      state:
        description: C(absent) removes the file when it exists.
        type: str
        choices: [present, absent]
        default: present
      validate:
        description: Command checking the staged file before it is moved into place; C(%s) is its path.
        type: str
  links:
    description:
      - Symbolic links to converge, for example the C(multi-user.target.wants) link that
        C(systemctl enable) would create for a unit whose C([Install]) section says C(WantedBy=multi-user.target).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the link.
        type: path
        required: true
      src:
        description: What the link points to. Required unless O(links[].state=absent).
        type: str
      state:
        description: C(absent) removes the link.
        type: str
        choices: [present, absent]
        default: present
  prune:
    description: Directories in which files matching a pattern but not listed in O(files) are removed.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory (missing is fine).
        type: path
        required: true
      pattern:
        description: Shell pattern matched against file names in O(prune[].path), for example C(*.flags).
        type: str
        required: true
notes:
  - Files are created C(root:root) when the module runs as root; parent directories are created with mode 0755.
  - Each file and link is replaced by one rename, with its mode and owner already set, so a run interrupted at any
    point leaves each one old or new. The next run completes the set and first removes the temp files
    (C(.topotune-*.tmp)) that an interrupted run left in the directories it manages.
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.IDEMPOTENT
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Write the env file and the login-shell profile
  topotune.instinct.managed_files:
    files:
      - path: /etc/topotune/env/xgmi-training.env
        content: "{{ lookup('ansible.builtin.template', 'profile.env.j2') }}"
      - path: /etc/profile.d/topotune-rocm.sh
        content: "{{ lookup('ansible.builtin.template', 'topotune-rocm.sh.j2') }}"
        validate: /bin/sh -n %s

- name: Install and enable a timer unit without a systemctl call
  topotune.instinct.managed_files:
    files:
      - path: /etc/systemd/system/topotune-drift-check.timer
        content: "{{ lookup('ansible.builtin.template', 'topotune-drift-check.timer.j2') }}"
    links:
      - path: /etc/systemd/system/timers.target.wants/topotune-drift-check.timer
        src: /etc/systemd/system/topotune-drift-check.timer

- name: One flag file per launch group, stale ones removed
  topotune.instinct.managed_files:
    files: "{{ groups_plan | map(attribute='flag_file') | list }}"
    prune:
      - path: /etc/topotune/containers
        pattern: "*.flags"
"""

RETURN = r"""
files:
  description: The paths of the files present after the call (O(files) with C(state=present)).
  returned: success
  type: list
  elements: str
  sample: [/etc/topotune/env/xgmi-training.env]
changed_files:
  description: Files written (or, in check mode, that would be).
  returned: success
  type: list
  elements: str
  sample: [/etc/profile.d/topotune-rocm.sh]
created_files:
  description: The files of RV(changed_files) that did not exist before (a new unit, for example, that nothing can start yet).
  returned: success
  type: list
  elements: str
  sample: [/etc/systemd/system/topotune-drift-check.timer]
changed_links:
  description: Links created, replaced or removed.
  returned: success
  type: list
  elements: str
  sample: []
removed_files:
  description: Files removed, by O(files[].state=absent) or O(prune).
  returned: success
  type: list
  elements: str
  sample: [/etc/topotune/containers/size8-group1.flags]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.state.file_set import converge


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True},
                "content": {"type": "str"},
                "mode": {"type": "raw", "default": "0644"},
                "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
                "validate": {"type": "str"},
            }},
            "links": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True},
                "src": {"type": "str"},
                "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            }},
            "prune": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True},
                "pattern": {"type": "str", "required": True},
            }},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = converge(module, params["files"], params["links"], params["prune"], module.check_mode)
    except (TopotuneError, OSError) as err:
        module.fail_json(msg="managed_files: %s" % err)
    # contents are not echoed back (the diff shows what changed): results are post-processed on the controller
    result["invocation"] = {"module_args": dict(params, files=[{k: v for k, v in f.items() if k != "content"}
                                                               for f in params["files"]])}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
