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
    The ``generations`` list of gpu_generations.yml (a copy), what ``module_utils/topology/identity.py`` identifies
    a node against.
``CHECK_TABLES``, ``checks_knowledge(directory=KNOWLEDGE_DIR)``
    The knowledge files the platform checks read besides ``gpu_generations``, and the ``knowledge`` of module
    ``platform_checks`` built from them (``gpu_generations`` with each of them under its name): what the module's
    action, ``bin/topotune checks`` and role ``drift_exporter`` pass, from this one list.
``cards(directory=KNOWLEDGE_DIR)``
    The generation cards of ``<directory>/generations/*.yml`` (a copy), sorted by name, ``{table: KEY}`` resolved.

A GPU generation is one card, ``knowledge/generations/<name>.yml``: its identity and its entry of every
per-generation table (knowledge/generations/README.md). The table files do not repeat them: where a file holds a
per-generation table it holds a view marker, which the loader replaces by what the cards say (``PATH`` is a dotted
path into a card, read on every card in name order; a card without it is left out, which the schema test names):

``{from_cards: PATH}``
    ``{name: value}``.
``{from_cards: PATH, as: list}``
    ``[{name: name, **value}]``.
``{from_cards: PATH, names_where: VALUE}``
    the names of the cards whose value is VALUE or a list holding it.
``{from_cards: PATH, names: true}``
    the names of the cards that have a (non-null) value.

A card names a shared table of gpu_generations.yml (``tables:``) as ``{table: KEY}``, which the loader replaces by the
table: one copy of what generations share.
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
CARDS = "generations"  # the cards' directory, under the knowledge directory
_MARKER = "from_cards"
_ABSENT = object()


# The knowledge files the platform checks read besides gpu_generations (each a key of module platform_checks' knowledge)
CHECK_TABLES = ("pcie_health", "gpu_health", "rocm_compatibility")


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


def _stat(path):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns)


def _read(path, what="knowledge file"):
    """The parsed file at ``path``; KnowledgeError when it cannot be read or is not YAML."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        raise KnowledgeError("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None
    return parse(text, path, what)


def _card_files(directory):
    """(path, stat) of every card, by file name; () when there is no cards directory."""
    folder = os.path.join(directory, CARDS)
    if not os.path.isdir(folder):
        return ()
    return tuple((os.path.join(folder, f), _stat(os.path.join(folder, f))) for f in sorted(os.listdir(folder))
                 if f.endswith(".yml") and _NAME.match(f[:-4]))


def _resolve_tables(node, tables, path):
    """``node`` with every ``{table: KEY}`` replaced by ``tables[KEY]``."""
    if isinstance(node, dict):
        if set(node) == {"table"}:
            if not isinstance(tables, dict) or node["table"] not in tables:
                raise KnowledgeError("generation card %s names table %r, which gpu_generations.yml `tables` does not "
                                     "hold (known: %s)" % (path, node["table"], ", ".join(sorted(tables or {})) or "none"))
            return tables[node["table"]]
        return {key: _resolve_tables(value, tables, path) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolve_tables(value, tables, path) for value in node]
    return node


def _cards(directory, files):
    """The cards (tables resolved), in file-name order; KnowledgeError naming the card that is not one."""
    generations_file = os.path.join(directory, "gpu_generations.yml")
    tables = (_read(generations_file) or {}).get("tables") if os.path.exists(generations_file) else None
    out = []
    for path, _stat_key in files:
        card = _read(path, "generation card")
        stem = os.path.basename(path)[:-4]
        if not isinstance(card, dict) or not isinstance(card.get("name"), str) or card["name"].lower() != stem:
            raise KnowledgeError("generation card %s is not a mapping whose `name` is the file's name (%s.yml holds "
                                 "name: %s)" % (path, stem, stem.upper()))
        out.append(_resolve_tables(card, tables, path))
    return out


def _at(card, path):
    """The value at the dotted ``path`` of ``card``; _ABSENT when it has none (null is a value: an explicit entry)."""
    value = card
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _view(marker, cards, where):
    """What the view ``marker`` (a ``from_cards`` mapping at ``where``) says over ``cards``."""
    path, form = marker[_MARKER], {k: v for k, v in marker.items() if k != _MARKER}
    if not isinstance(path, str) or not path or len(form) > 1 or (
            form and not ({"as": "list"} == form or "names_where" in form or {"names": True} == form)):
        raise KnowledgeError("view marker at %s is not one the loader knows: use {from_cards: PATH} with nothing, "
                             "as: list, names_where: VALUE or names: true beside it" % where)
    found = [(card["name"], _at(card, path)) for card in cards]
    if "names_where" in form:
        wanted = form["names_where"]
        return [name for name, value in found if value == wanted or (isinstance(value, list) and wanted in value)]
    if form.get("names"):
        return [name for name, value in found if value is not _ABSENT and value is not None]
    if form.get("as") == "list":
        listed = [(name, value) for name, value in found if value is not _ABSENT]
        for name, value in listed:
            if not isinstance(value, dict):
                raise KnowledgeError("generation card %s: `%s` is not a mapping (view at %s)" % (name, path, where))
        return [dict({"name": name}, **value) for name, value in listed]
    return {name: value for name, value in found if value is not _ABSENT}


def _build_views(node, cards, where):
    """``node`` with every view marker built over ``cards()`` (called only when a marker needs the cards)."""
    if isinstance(node, dict):
        if _MARKER in node:
            return _view(node, cards(), where)
        return {key: _build_views(value, cards, "%s.%s" % (where, key)) for key, value in node.items()}
    if isinstance(node, list):
        return [_build_views(value, cards, "%s[%d]" % (where, index)) for index, value in enumerate(node)]
    return node


def _cards_key(directory):
    """What the views depend on besides their own file: every card, and gpu_generations.yml (the cards' tables)."""
    return _card_files(directory), _stat(os.path.join(directory, "gpu_generations.yml"))


def _parsed(name, directory):
    """The pickled view of ``<directory>/<name>.yml``, from the cache while it (and, if it has views, the cards) is
    unchanged."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise KnowledgeError("knowledge name %r is invalid: use lower-case letters, digits and _" % (name,))
    path = os.path.join(directory, name + ".yml")
    key = _stat(path)
    if key is None:
        raise KnowledgeError("no knowledge file %r (known: %s)" % (name, ", ".join(names(directory)) or "none"))
    cached = _CACHE.get(path)
    if cached is not None and cached[0] == key and (cached[1] is None or cached[1] == _cards_key(directory)):
        return cached[2]
    depends = []  # [cards key, cards] once a marker has read them

    def read_cards():
        if not depends:
            depends.extend((_cards_key(directory), None))
            depends[1] = _cards(directory, depends[0][0])
        return depends[1]

    view = _build_views(_read(path), read_cards, name)
    blob = pickle.dumps(view, protocol=pickle.HIGHEST_PROTOCOL)
    _CACHE[path] = (key, depends[0] if depends else None, blob)
    return blob


def load_knowledge(name, directory=KNOWLEDGE_DIR):
    """The parsed knowledge file ``name`` (no suffix), a copy of its own; KnowledgeError with the reason."""
    # bytes this process pickled from the file it parsed, never data from elsewhere
    return pickle.loads(_parsed(name, directory))


def cards(directory=KNOWLEDGE_DIR):
    """The generation cards (a copy each call), by name, their ``{table: KEY}`` resolved."""
    return _cards(directory, _card_files(directory))


def generations(directory=KNOWLEDGE_DIR):
    """The ``generations`` list of gpu_generations.yml (a copy); KnowledgeError when the file has none."""
    data = load_knowledge("gpu_generations", directory)
    listed = data.get("generations") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise KnowledgeError("knowledge file %s has no `generations` list"
                             % os.path.join(directory, "gpu_generations.yml"))
    return listed


def checks_knowledge(directory=KNOWLEDGE_DIR):
    """Module platform_checks' ``knowledge``: ``gpu_generations`` with every ``CHECK_TABLES`` file under its name (a
    copy); KnowledgeError with the reason."""
    knowledge = load_knowledge("gpu_generations", directory)
    knowledge.update((name, load_knowledge(name, directory)) for name in CHECK_TABLES)
    return knowledge
