# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one controller loader of ``knowledge/*.yml`` (AMD facts kept as data, each with its source).

Public API (controller only: PyYAML, no Ansible; the lookup plugin, the filters, the actions and ``bin/topotune``
read knowledge through it):

``KnowledgeError(TopotuneError, ValueError)``
    An invalid name, a missing file, a file that cannot be read or is not YAML; the message names the file and why.
``KNOWLEDGE_DIR``
    The collection's ``knowledge/`` directory.
``names(directory=KNOWLEDGE_DIR)``
    The knowledge files there, by name (no ``.yml``), sorted.
``load_knowledge(name, directory=KNOWLEDGE_DIR)``
    The parsed ``<directory>/<name>.yml``: a new copy on every call, so a caller may change what it gets without
    changing what the next caller sees.
``generations(directory=KNOWLEDGE_DIR)``
    The ``generations`` list of ``gpu_generations.yml`` (a copy), what ``module_utils/topology/identity.py`` identifies
    a node against.

Each file is parsed once per controller process (with libyaml's C parser when PyYAML has it, about ten times
faster than the pure-Python one) and kept as its pickled bytes; each call unpickles a copy (a tenth of a
millisecond for gpu_generations.yml, where a parse takes milliseconds). The cache is keyed by the file's path,
size and modification time: an edited file is parsed again. Ansible forks a worker per task and host, which
inherits what the main process has parsed; a worker parses what it needs at most once.
"""

from __future__ import annotations

import os
import pickle
import re

import yaml

try:
    from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
except ImportError:  # bin/topotune: plugins/ is on sys.path, no collection loader
    from module_utils.core.errors import TopotuneError

# plugins/plugin_utils/core/knowledge.py -> the collection root
KNOWLEDGE_DIR = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")), "knowledge")
_NAME = re.compile(r"^[a-z0-9_]+$")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CACHE = {}


class KnowledgeError(TopotuneError, ValueError):
    """A knowledge file that cannot be loaded."""


def names(directory=KNOWLEDGE_DIR):
    """The knowledge files of ``directory`` by name, sorted (empty when it is not a directory)."""
    if not os.path.isdir(directory):
        return []
    return sorted(f[:-4] for f in os.listdir(directory) if f.endswith(".yml") and _NAME.match(f[:-4]))


def parse(text, path="<string>", what="knowledge file"):
    """``text`` (of ``what`` at ``path``) parsed as knowledge is: the safe loader, the C parser when available;
    KnowledgeError when it is not YAML."""
    try:
        # a safe loader: CSafeLoader, or SafeLoader where PyYAML was built without libyaml
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise KnowledgeError("%s %s is not valid YAML: %s" % (what, path, " ".join(str(exc).split()))) from None


def _parsed(name, directory):
    """The pickled parse of ``<directory>/<name>.yml``, from the cache while the file is unchanged."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise KnowledgeError("knowledge name %r is invalid: use lower-case letters, digits and _" % (name,))
    path = os.path.join(directory, name + ".yml")
    try:
        info = os.stat(path)
    except OSError:
        raise KnowledgeError("no knowledge file %r (known: %s)" % (name, ", ".join(names(directory)) or "none")) from None
    key = (info.st_size, info.st_mtime_ns)
    cached = _CACHE.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        raise KnowledgeError("cannot read knowledge file %s: %s" % (path, exc.strerror or exc)) from None
    blob = pickle.dumps(parse(text, path), protocol=pickle.HIGHEST_PROTOCOL)
    _CACHE[path] = (key, blob)
    return blob


def load_knowledge(name, directory=KNOWLEDGE_DIR):
    """The parsed knowledge file ``name`` (no suffix), a copy of its own; KnowledgeError with the reason."""
    # bytes this process pickled from the file it parsed, never data from elsewhere
    return pickle.loads(_parsed(name, directory))


def generations(directory=KNOWLEDGE_DIR):
    """The ``generations`` list of gpu_generations.yml (a copy); KnowledgeError when the file has none."""
    data = load_knowledge("gpu_generations", directory)
    listed = data.get("generations") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise KnowledgeError("knowledge file %s has no `generations` list"
                             % os.path.join(directory, "gpu_generations.yml"))
    return listed
