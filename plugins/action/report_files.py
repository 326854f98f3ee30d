# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: write named JSON documents (and texts as they are) into a controller directory, in the controller process
(no module run)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.filter.core import to_nice_json

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import (
    commit_all,
    differs,
    parse_mode,
    read_text,
    stage_all,
)

ARGUMENT_SPEC = {
    "directory": {"type": "str", "required": True},
    "documents": {"type": "dict", "required": True},
    "texts": {"type": "dict", "default": {}},
    "mode": {"type": "raw", "default": "0644"},
}


def _file_name(name):
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise AnsibleActionFail("report_files: %r cannot be a file name (a host name without '/')" % (name,))
    return name


def plan(documents, directory, texts=None):
    """[(path, text)] in name order: <directory>/<name>.json with to_nice_json's layout and a final newline, then each
    of ``texts`` as <directory>/<name> as it is (a final newline added where it has none)."""
    if not isinstance(directory, str) or not directory.strip():
        raise AnsibleActionFail("report_files: directory must be a path, got %r" % (directory,))
    directory = os.path.abspath(os.path.expanduser(directory))
    entries = []
    for name in sorted(documents):
        entries.append((os.path.join(directory, _file_name(name) + ".json"), to_nice_json(documents[name]) + "\n"))
    for name in sorted(texts or {}):
        text = str(texts[name])
        entries.append((os.path.join(directory, _file_name(name)), text if text.endswith("\n") else text + "\n"))
    return entries


def write(todo, mode):
    """Every report staged beside its destination (the shared writer, module_utils/core/files.py), then each renamed into
    place: a reader sees a host's old report or its new one, and a killed run leaves no partial file."""
    commit_all(None, stage_all(None, [(path, text, mode, None) for path, text in todo], root_owned=False))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            mode = parse_mode(args["mode"], "mode")
        except TopotuneError as err:
            raise AnsibleActionFail("report_files: %s" % err) from None
        entries = plan(args["documents"], args["directory"], args["texts"])
        todo = [(path, text) for path, text in entries if differs(path, text, mode, root_owned=False)]
        before = {path: read_text(path) for path, _text in todo} if self._task.diff else {}
        if not self._task.check_mode:
            try:
                write(todo, mode)
            except OSError as err:
                raise AnsibleActionFail("report_files: cannot write %s: %s; pick a writable directory" % (
                    getattr(err, "filename", None) or args["directory"], err.strerror or err)) from err
        result.update(changed=bool(todo), files=[path for path, _text in entries], changed_files=[path for path, _text in todo])
        if self._task.diff:
            result["diff"] = [{"before_header": path, "after_header": path, "before": before.get(path) or "", "after": text}
                              for path, text in todo]
        return result
