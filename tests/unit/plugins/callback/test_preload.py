"""The preload callback (plugins/callback/preload.py): in the controller's main process, before any worker forks, every
topotune action, filter and lookup plugin is imported and every knowledge file parsed, so the workers inherit them; a
plugin that cannot load is named, not raised (its task reports the error).

Run in a fresh interpreter with Ansible's collection loader, as ansible-playbook runs it (the unit tests' own process
imports the collection as plain packages)."""

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PREFIX = "ansible_collections.topotune.instinct.plugins."

_RUN = r"""
import json, os, sys
from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
context.CLIARGS = ImmutableDict({})
_AnsibleCollectionFinder(paths=os.environ["ANSIBLE_COLLECTIONS_PATH"].split(":"))._install()
from ansible.plugins.loader import filter_loader, init_plugin_loader
init_plugin_loader()
from ansible_collections.topotune.instinct.plugins.callback import preload as pl
from ansible_collections.topotune.instinct.plugins.plugin_utils.core import knowledge as kn
if sys.argv[1] == "broken":
    real = filter_loader.get
    def broken(name, *args, **kwargs):
        if name.endswith(".drift_line"):
            raise ImportError("broken on purpose")
        return real(name, *args, **kwargs)
    filter_loader.get = broken
before = sorted(m for m in sys.modules if m.startswith("ansible_collections.topotune.instinct.plugins."))
failed = pl.preload()
print(json.dumps({"failed": failed, "before": before,
                  "after": sorted(m for m in sys.modules if m.startswith("ansible_collections.topotune.instinct.plugins.")),
                  "parsed": sorted(os.path.basename(p)[:-4] for p in kn._CACHE), "knowledge": kn.names()}))
"""


def _run(mode):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".cache", "collections"))
    proc = subprocess.run([sys.executable, "-c", _RUN, mode], capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _files(kind):
    folder = os.path.join(REPO, "plugins", kind)
    return {f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_")}


def test_every_plugin_and_knowledge_file_is_loaded_ahead():
    found = _run("clean")
    assert found["failed"] == []
    for kind in ("action", "filter", "lookup"):
        loaded = {m[len(PREFIX + kind + "."):] for m in found["after"] if m.startswith(PREFIX + kind + ".")}
        assert loaded == _files(kind), kind
        assert not [m for m in found["before"] if m.startswith(PREFIX + kind + ".")], kind
    # what the actions and filters import comes along: the workers compile none of it
    assert PREFIX + "plugin_utils.env.container_plan" in found["after"]
    # the parse every worker would repeat is in the cache it inherits
    assert found["parsed"] == found["knowledge"] != []


def test_a_plugin_that_cannot_load_is_named_not_raised():
    found = _run("broken")
    assert found["failed"] == ["filter drift_line"]
    assert PREFIX + "filter.topology_summary" in found["after"]
