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
    description: File mode of the written file (never world-writable).
    type: str
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
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.container_flags import merge_owned, remove_owned


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

    def write(self, text):
        directory = os.path.dirname(self.path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            if self.params["validate"]:
                rc, out, err = self.module.run_command(self.params["validate"] % tmp)
                if rc != 0:
                    self.fail("validation of the new %s failed (rc=%d): %s" % (self.path, rc, (err or out).strip()))
            self.module.atomic_move(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def run(self):
        mode = self.params["mode"]
        if not mode.isdigit() or int(mode, 8) & 0o002 or int(mode, 8) > 0o777:
            self.fail("mode %r must be octal without the world-writable bit, e.g. '0644'" % mode)
        if self.params["validate"] and "%s" not in self.params["validate"]:
            self.fail("validate must contain %%s (the candidate file), got %r" % self.params["validate"])
        before_text, current = self.read()
        if self.params["state"] == "present":
            wanted = merge_owned(current, self.params["settings"])
        else:
            wanted = remove_owned(current, self.params["settings"])
        after_text = json.dumps(wanted, indent=2) + "\n"
        json.loads(after_text)  # what is written must parse
        content_changed = wanted != current and not (before_text is None and not wanted)
        result = {"changed": content_changed, "config": wanted, "path": self.path}
        result["diff"] = {
            "before": before_text or "",
            "after": after_text if content_changed else (before_text or ""),
            "before_header": self.path,
            "after_header": self.path,
        }
        if not self.module.check_mode:
            if content_changed:
                if self.params["backup"] and before_text is not None:
                    result["backup_file"] = self.module.backup_local(self.path)
                self.write(after_text)
            if os.path.exists(self.path):
                file_args = {"path": self.path, "mode": mode, "owner": "root", "group": "root", "secontext": None, "attributes": None}
                result["changed"] = self.module.set_fs_attributes_if_different(file_args, result["changed"])
        elif before_text is not None and not content_changed:
            st = os.stat(self.path)
            result["changed"] = (st.st_mode & 0o7777) != int(mode, 8) or st.st_uid != 0 or st.st_gid != 0
        return result


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/docker/daemon.json"},
            "settings": {"type": "dict", "required": True},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "backup": {"type": "bool", "default": True},
            "mode": {"type": "str", "default": "0644"},
            "validate": {"type": "str"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**DaemonConfig(module).run())


if __name__ == "__main__":
    main()
