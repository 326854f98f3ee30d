"""The one controller knowledge loader (plugin_utils/core/knowledge.py): parsed once per process with the C parser where
PyYAML has it, a copy of its own for every caller, clear one-line errors; the lookup plugin, the filters and the
gpu_topology action read through it, and nothing else in plugins/ parses knowledge/."""

import ast
import os
import re

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core import knowledge as kn

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLUGINS = os.path.join(REPO, "plugins")


def test_the_directory_is_the_collections_knowledge():
    assert os.path.samefile(kn.KNOWLEDGE_DIR, os.path.join(REPO, "knowledge"))
    assert kn.names() == sorted(f[:-4] for f in os.listdir(kn.KNOWLEDGE_DIR) if f.endswith(".yml"))


def _knowledge_files():
    cards = os.path.join(kn.KNOWLEDGE_DIR, kn.CARDS)
    return [os.path.join(kn.KNOWLEDGE_DIR, n + ".yml") for n in kn.names()] + [
        os.path.join(cards, f) for f in sorted(os.listdir(cards)) if f.endswith(".yml")]


@pytest.mark.parametrize("path", _knowledge_files(), ids=os.path.basename)
def test_every_file_reads_the_same_with_the_c_and_the_python_parser(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert kn.parse(text, path) == yaml.load(text, Loader=yaml.SafeLoader)  # the pure-Python safe loader
    if yaml.__with_libyaml__:
        assert kn._LOADER is yaml.CSafeLoader


TABLES = """tables:
  shared: {required: [iommu=pt]}
generations: {from_cards: identity, as: list}
"""
CARD = """name: {name}
identity: {{gfx: {gfx}, kernel_params: {{table: shared}}}}
fabric: {fabric}
partitions: {partitions}
"""
VIEWS = """by_name: {from_cards: partitions}
mesh: {from_cards: fabric, names_where: mesh}
partitioned: {from_cards: partitions, names: true}
"""


def _cards_dir(tmp_path, cards):
    (tmp_path / "gpu_generations.yml").write_text(TABLES)
    (tmp_path / "views.yml").write_text(VIEWS)
    (tmp_path / kn.CARDS).mkdir(exist_ok=True)
    for name, gfx, fabric, partitions in cards:
        (tmp_path / kn.CARDS / (name.lower() + ".yml")).write_text(
            CARD.format(name=name, gfx=gfx, fabric=fabric, partitions=partitions))
    return str(tmp_path)


def test_the_views_are_built_from_the_cards_in_name_order(tmp_path):
    directory = _cards_dir(tmp_path, [("MI2", "gfx2", "mesh", "{xcds: 8}"), ("MI1", "gfx1", "pcie", "null")])
    assert kn.generations(directory) == [{"name": "MI1", "gfx": "gfx1", "kernel_params": {"required": ["iommu=pt"]}},
                                         {"name": "MI2", "gfx": "gfx2", "kernel_params": {"required": ["iommu=pt"]}}]
    assert kn.load_knowledge("views", directory) == {
        "by_name": {"MI1": None, "MI2": {"xcds": 8}}, "mesh": ["MI2"], "partitioned": ["MI2"]}
    assert [c["name"] for c in kn.cards(directory)] == ["MI1", "MI2"]


def test_an_edited_or_added_card_builds_the_views_again(tmp_path):
    directory = _cards_dir(tmp_path, [("MI1", "gfx1", "pcie", "null")])
    assert kn.load_knowledge("views", directory)["mesh"] == []
    _cards_dir(tmp_path, [("MI1", "gfx1", "mesh", "null")])
    os.utime(tmp_path / kn.CARDS / "mi1.yml", ns=(1, 10 ** 18))
    assert kn.load_knowledge("views", directory)["mesh"] == ["MI1"]
    _cards_dir(tmp_path, [("MI3", "gfx3", "mesh", "{xcds: 4}")])
    assert kn.load_knowledge("views", directory)["mesh"] == ["MI1", "MI3"]


# (card file name, its text, message): a card that is not one is one line naming the file and why
CARD_ERRORS = [
    ("mi9.yml", "name: MI8\n", "generation card {dir}/generations/mi9.yml is not a mapping whose `name` is the "
     "file's name (mi9.yml holds name: MI9)"),
    ("mi9.yml", "- a\n", "generation card {dir}/generations/mi9.yml is not a mapping"),
    ("mi9.yml", "name: MI9\nidentity: {x: {table: absent}}\n", "generation card {dir}/generations/mi9.yml names table "
     "'absent', which gpu_generations.yml `tables` does not hold (known: shared)"),
    ("mi9.yml", "name: MI9\nidentity: [1,\n", "generation card {dir}/generations/mi9.yml is not valid YAML: "),
    ("mi9.yml", "name: MI9\nidentity: 3\n", "generation card MI9: `identity` is not a mapping (view at "
     "gpu_generations.generations)"),
]


@pytest.mark.parametrize("file,text,message", CARD_ERRORS)
def test_a_card_that_is_not_one_is_one_clear_error(tmp_path, file, text, message):
    directory = _cards_dir(tmp_path, [])
    (tmp_path / kn.CARDS / file).write_text(text)
    with pytest.raises(kn.KnowledgeError) as err:
        kn.load_knowledge("gpu_generations", directory)
    assert str(err.value).startswith(message.format(dir=tmp_path)) and "\n" not in str(err.value)


def test_a_marker_the_loader_does_not_know_is_named(tmp_path):
    directory = _cards_dir(tmp_path, [])
    (tmp_path / "bad.yml").write_text("x: {y: {from_cards: fabric, sorted: true}}\n")
    with pytest.raises(kn.KnowledgeError, match=r"^view marker at bad.x.y is not one the loader knows"):
        kn.load_knowledge("bad", directory)


def test_each_caller_gets_a_copy_of_its_own():
    first = kn.load_knowledge("gpu_generations")
    first["generations"][0]["name"] = "changed"
    first["tables"]["kernel_params_common"]["required"].append("changed")
    second = kn.load_knowledge("gpu_generations")
    assert second["generations"][0]["name"] == "MI210"
    assert "changed" not in second["tables"]["kernel_params_common"]["required"]
    assert kn.generations() == second["generations"] and kn.generations() is not kn.generations()


def test_a_file_is_parsed_once_per_process_until_it_changes(tmp_path, monkeypatch):
    (tmp_path / "facts.yml").write_text("a: [1, 2]\n")
    calls = []
    real = kn.parse
    monkeypatch.setattr(kn, "parse", lambda text, path, what="knowledge file": calls.append(path) or real(text, path))
    assert [kn.load_knowledge("facts", str(tmp_path)) for attempt in range(5)] == [{"a": [1, 2]}] * 5
    assert len(calls) == 1
    (tmp_path / "facts.yml").write_text("a: [1, 2, 3]\n")
    os.utime(tmp_path / "facts.yml", ns=(1, 10 ** 18))
    assert kn.load_knowledge("facts", str(tmp_path)) == {"a": [1, 2, 3]} and len(calls) == 2


# (file content or None for no file, name, message): one line naming the file and why
ERRORS = [
    (None, "Facts", "knowledge name 'Facts' is invalid: use lower-case letters, digits and _"),
    (None, "../etc", "knowledge name '../etc' is invalid"),
    (None, "absent", "no knowledge file 'absent' (known: other)"),
    ("a: [1,\n", "broken", "knowledge file {dir}/broken.yml is not valid YAML: "),
]


@pytest.mark.parametrize("content,name,message", ERRORS)
def test_what_cannot_be_loaded_is_one_clear_error(tmp_path, content, name, message):
    (tmp_path / "other.yml").write_text("x: 1\n")
    if content is not None:
        (tmp_path / (name + ".yml")).write_text(content)
    with pytest.raises(kn.KnowledgeError) as err:
        kn.load_knowledge(name, str(tmp_path))
    assert str(err.value).startswith(message.format(dir=tmp_path)) and "\n" not in str(err.value)
    assert isinstance(err.value, TopotuneError) and isinstance(err.value, ValueError)


def test_the_lookup_returns_copies_and_names_a_missing_file():
    from ansible_collections.topotune.instinct.plugins.lookup.knowledge import LookupModule

    lookup = LookupModule()
    one, two = lookup.run(["advice", "advice"])
    assert one == two == kn.load_knowledge("advice") and one is not two
    with pytest.raises(AnsibleLookupError, match="no knowledge file 'nope' "):
        lookup.run(["nope"])


def _python_files():
    for root, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(root, name), REPO)


def _imports(path):
    tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.module or "", [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def test_knowledge_is_read_only_through_the_loader():
    """No plugin parses YAML or opens knowledge/ itself, nor reaches the loader through another plugin."""
    loader = os.path.join("plugins", "plugin_utils", "core", "knowledge.py")
    for path in _python_files():
        if path == loader:
            continue
        for module, imported in _imports(path):
            assert not module.endswith(("lookup.knowledge", "action.gpu_topology")) or path.startswith(
                os.path.join("plugins", "lookup")), "%s imports %s %s: import plugin_utils.core.knowledge" % (
                    path, module, imported)
        text = open(os.path.join(REPO, path), encoding="utf-8").read()
        # writing YAML (a compose fragment) is fine; parsing it is the loader's
        assert not re.search(r"\byaml\.(safe_)?load\b|\bLoader\b", text), \
            "%s parses YAML itself: read knowledge with plugin_utils.core.knowledge" % path
        assert not re.search(r"""join\([^()]*["']knowledge["']\)""", text), "%s builds a knowledge/ path" % path
    users = {p for p in _python_files() for m, _n in _imports(p) if m.endswith("plugin_utils.core.knowledge")}
    assert {os.path.join("plugins", *p) for p in (("lookup", "knowledge.py"), ("action", "gpu_topology.py"),
            ("filter", "node_topology.py"), ("filter", "rocm_env_resolve.py"), ("filter", "container_flags.py"),
            ("filter", "cluster_advice.py"), ("action", "platform_checks.py"))} <= users
