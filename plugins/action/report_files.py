# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: write named JSON documents into a controller directory, in the controller process (no module run)."""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.filter.core import to_nice_json

from ansible_collections.topotune.instinct.plugins.module_utils.files import differs, read_text

ARGUMENT_SPEC = {
    "directory": {"type": "str", "required": True},
    "documents": {"type": "dict", "required": True},
    "mode": {"type": "str", "default": "0644"},
}


def plan(documents, directory):
    """[(path, text)] in name order: <directory>/<name>.json with to_nice_json's layout and a final newline."""
    if not isinstance(directory, str) or not directory.strip():
        raise AnsibleActionFail("report_files: directory must be a path, got %r" % (directory,))
    directory = os.path.abspath(os.path.expanduser(directory))
    entries = []
    for name in sorted(documents):
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise AnsibleActionFail("report_files: %r cannot be a file name (a host name without '/')" % (name,))
        entries.append((os.path.join(directory, name + ".json"), to_nice_json(documents[name]) + "\n"))
    return entries


def write(path, text, mode):
    """Temp file beside path, then rename: a reader sees the old report or the new one."""
    directory = os.path.dirname(path)
    os.makedirs(directory, 0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".report-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        mode_text = args["mode"]
        if not mode_text.isdigit() or set(mode_text) - set("01234567") or int(mode_text, 8) & 0o002:
            raise AnsibleActionFail("report_files: mode %r must be octal without the world-writable bit, e.g. '0644'" % mode_text)
        mode = int(mode_text, 8)
        entries = plan(args["documents"], args["directory"])
        todo = [(path, text) for path, text in entries if differs(path, text, mode, root_owned=False)]
        before = {path: read_text(path) for path, _text in todo} if self._task.diff else {}
        if not self._task.check_mode:
            try:
                for path, text in todo:
                    write(path, text, mode)
            except OSError as err:
                raise AnsibleActionFail("report_files: cannot write %s: %s; pick a writable directory" % (
                    getattr(err, "filename", None) or args["directory"], err.strerror or err)) from err
        result.update(changed=bool(todo), files=[path for path, _text in entries], changed_files=[path for path, _text in todo])
        if self._task.diff:
            result["diff"] = [{"before_header": path, "after_header": path, "before": before.get(path) or "", "after": text}
                              for path, text in todo]
        return result
