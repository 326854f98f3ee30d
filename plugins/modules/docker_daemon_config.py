#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: docker_daemon_config
short_description: Merge the settings topotune owns into Docker's daemon.json, keeping every other key
version_added: "0.1.0"
description:
  - Reads O(path) as JSON, sets (O(state=present)) or removes (O(state=absent)) only the keys given in
    O(settings) and writes the result atomically, root-owned with O(mode). Keys it does not own survive;
    nested objects are merged key by key.
  - A file that is not valid JSON, or not a JSON object, is never overwritten; the module fails naming the
    file and the parse error.
  - The new content is re-parsed before it is written, and checked with O(validate) when given (for example
    C(dockerd --validate --config-file %s)).
  - With O(backup), the previous file is kept as a timestamped copy next to it.
  - The backup and the new file are written by topotune's shared writer, as a temp file beside the destination
    with its final mode and owner, then one rename each. A run interrupted at any point leaves C(daemon.json)
    whole, old or new, and the next run removes the temp files such a run left.
author:
  - topotune contributors (@topotune)
options:
  path:
    description: The daemon configuration file.
    type: path
    default: /etc/docker/daemon.json
  settings:
    description: The keys topotune owns, with their values (O(state=absent) uses only the key names).
    type: dict
    required: true
  state:
    description: Whether the owned keys are set or removed.
    type: str
    choices: [present, absent]
    default: present
  backup:
    description: Keep a timestamped copy of the previous file when it changes.
    type: bool
    default: true
  mode:
    description:
      - File mode of the written file, as octal permission bits in a quoted string such as V("0644") (an unquoted
        YAML V(0644), an integer, is read as the same mode).
      - Never world-writable; no setuid, setgid or sticky bit.
    type: raw
    default: "0644"
  validate:
    description: Command run on the candidate file before it replaces O(path); must contain C(%s).
    type: str
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Unlimited memlock for RDMA containers, keeping the rest of daemon.json
  topotune.instinct.docker_daemon_config:
    settings:
      default-ulimits:
        memlock: {Name: memlock, Soft: -1, Hard: -1}
"""

RETURN = r"""
config:
  description: The daemon configuration after the change (or as it would be, in check mode).
  returned: always
  type: dict
  sample: {log-driver: journald, default-ulimits: {memlock: {Name: memlock, Soft: -1, Hard: -1}}}
backup_file:
  description: The copy of the previous file, when one was made.
  returned: changed and backup
  type: str
  sample: /etc/docker/daemon.json.12345.2026-11-30@10:00:00~
path:
  description: The file managed.
  returned: always
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import (
    ValidationError,
    attributes_differ,
    commit_all,
    parse_mode,
    remove_stale_temps,
    stage_all,
)
from ansible_collections.topotune.instinct.plugins.module_utils.core.owned_keys import merge_owned, remove_owned


class DaemonConfig:
    """Reads daemon.json, computes the merged document, writes it once behind the check-mode guard."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.path = self.params["path"]

    def fail(self, msg):
        self.module.fail_json(msg="docker_daemon_config: %s" % msg, path=self.path)

    def read(self):
        if not os.path.exists(self.path):
            return None, {}
        try:
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as err:
            self.fail("cannot read %s: %s" % (self.path, err))
        if not text.strip():
            return text, {}
        try:
            data = json.loads(text)
        except ValueError as err:
            self.fail("%s is not valid JSON (%s); fix or move it, topotune does not overwrite a file it cannot parse" % (self.path, err))
        if not isinstance(data, dict):
            self.fail("%s holds a JSON %s, not an object; Docker expects an object" % (self.path, type(data).__name__))
        return text, data

    def write(self, text, mode, root_owned, backup):
        """The backup (a byte copy of the current file, its mode less world-write) and the new file, staged and
        validated before either is renamed into place: a failed validation changes nothing. Returns the backup's
        path, or None."""
        writes = []
        backup_file = None
        if backup:
            # the name Ansible's backup_local gives, written as a whole file (a copy killed half-way never shows)
            backup_file = "%s.%s.%s" % (self.path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S~", time.localtime()))
            with open(self.path, "rb") as handle:
                old = handle.read()
            writes.append((backup_file, old, os.stat(self.path).st_mode & 0o7775, None))
        writes.append((self.path, text, mode, self.params["validate"]))
        try:
            staged = stage_all(self.module, writes, root_owned)
        except ValidationError as err:
            self.fail("%s; %s was not changed" % (err, self.path))
        commit_all(self.module, staged)
        return backup_file

    def run(self):
        try:
            mode = parse_mode(self.params["mode"], "mode", special_bits=False)
        except TopotuneError as err:
            self.fail(str(err))
        if self.params["validate"] and "%s" not in self.params["validate"]:
            self.fail("validate must contain %%s (the candidate file), got %r" % self.params["validate"])
        root_owned = os.geteuid() == 0
        before_text, current = self.read()
        if self.params["state"] == "present":
            wanted = merge_owned(current, self.params["settings"])
        else:
            wanted = remove_owned(current, self.params["settings"])
        after_text = json.dumps(wanted, indent=2) + "\n"
        json.loads(after_text)  # what is written must parse
        # compared as JSON: a file holding the same settings in another layout is left as the user wrote it
        content_changed = wanted != current and not (before_text is None and not wanted)
        attributes_changed = before_text is not None and not content_changed and attributes_differ(self.path, mode, root_owned)
        result = {"changed": content_changed or attributes_changed, "config": wanted, "path": self.path}
        result["diff"] = {
            "before": before_text or "",
            "after": after_text if content_changed else (before_text or ""),
            "before_header": self.path,
            "after_header": self.path,
        }
        if self.module.check_mode:
            return result
        if content_changed:
            backup = self.params["backup"] and before_text is not None
            backup_file = self.write(after_text, mode, root_owned, backup)
            if backup_file:
                result["backup_file"] = backup_file
        else:
            remove_stale_temps([self.path])
            if attributes_changed:
                # same content: owner then mode set in place (each change is one atomic step; no content moves)
                if root_owned:
                    os.chown(self.path, 0, 0)
                os.chmod(self.path, mode)
        return result


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/docker/daemon.json"},
            "settings": {"type": "dict", "required": True},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "backup": {"type": "bool", "default": True},
            "mode": {"type": "raw", "default": "0644"},
            "validate": {"type": "str"},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**DaemonConfig(module).run())
    except OSError as err:
        module.fail_json(msg="docker_daemon_config: %s" % err, path=module.params["path"])


if __name__ == "__main__":
    main()
