# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load topotune's controller plugins and knowledge once, in the process every worker forks from
version_added: "0.1.0"
description:
  - >-
    Ansible runs each task of each host in a worker process forked from the controller's main process. A worker
    imports the plugins its task needs, and the collection loader compiles a collection's Python from source on
    every import (it keeps no bytecode); to find one C(topotune.instinct.*) filter, Ansible imports every filter
    file of the collection in name order (C(Jinja2Loader) in C(ansible/plugins/loader.py)). So without this
    callback every worker that runs a topotune action or templates a topotune filter compiles and imports those
    plugins, their C(plugin_utils) and C(module_utils), and parses the knowledge files it reads, once per host and
    task.
  - >-
    When the playbook starts, this callback imports every topotune action, filter and lookup plugin into the main
    process and parses every knowledge file (C(plugins/plugin_utils/core/knowledge.py) keeps the parse), so each
    worker inherits them and only runs its task. It changes no result and no output: a plugin or knowledge file
    that fails to load here is left to the task that needs it, which reports the error as it would without this
    callback. C(docs/performance.md) has the measured effect.
  - Enabled in the topotune repository's ansible.cfg; elsewhere add C(topotune.instinct.preload) to C(callbacks_enabled).
requirements:
  - enabled through C(ANSIBLE_CALLBACKS_ENABLED) (or C(callbacks_enabled) in ansible.cfg)
"""

import os

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader, lookup_loader

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge, names

COLLECTION = "topotune.instinct"
PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _plugin_names(kind):
    folder = os.path.join(PLUGINS, kind)
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def preload():
    """Import every topotune action, filter and lookup plugin and parse every knowledge file here; the names of what
    failed to load (left to the task that needs it)."""
    failed = []
    for kind, loader in (("action", action_loader), ("lookup", lookup_loader)):
        for name in _plugin_names(kind):
            try:
                loader.get("%s.%s" % (COLLECTION, name), class_only=True)
            except Exception:  # the task that uses it reports the error
                failed.append("%s %s" % (kind, name))
    for name in _plugin_names("filter"):
        try:
            # a file-named filter of every file: each lookup imports the files up to the one that has it
            filter_loader.get("%s.%s" % (COLLECTION, name))
        except Exception:
            failed.append("filter %s" % name)
    for name in names():
        try:
            load_knowledge(name)
        except Exception:
            failed.append("knowledge %s" % name)
    return failed


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "topotune.instinct.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        failed = preload()
        if failed:
            self._display.vvv("topotune.instinct.preload: not loaded ahead (their tasks report why): %s" % ", ".join(failed))
