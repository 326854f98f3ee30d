"""Knowledge schema: every GPU generation of knowledge/gpu_generations.yml has its entry in every per-generation
table of the other knowledge files, or an explicit entry saying why not (``unknown: why``, or ``not_applicable: why``
where the generation has no such thing); one key per generation across files, its ``name`` (never an alias, a gfx
target or a PCI device id); every entry cites a source (its own, or its table's).

A generation is one card (knowledge/generations/<name>.yml) and the per-generation tables are views the loader builds
from the cards: ``problems(data)`` checks the views as every reader sees them, ``card_problems(cards, data)`` the cards
themselves (every section present, every name it gives known). Both run on the real files (no problem) and on edited
copies (each edit is found), and on a new card in a copy of the knowledge directory (what adding a generation is)."""

import copy
import os
import re
import shutil

import pytest

from ansible_collections.topotune.instinct.plugins.plugin_utils.core import knowledge as kn
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge, names

GENERATION_FIELDS = ("name", "aliases", "devices", "devices_source", "gfx", "gfx_target_version", "devices_per_node",
                     "pcie", "nps_allowed", "nps_policy", "iommu_bios", "kernel_params", "smt", "companion_cpu",
                     "bios_attest", "source", "bios_source")
PARTITION_FIELDS = ("xcds", "driver", "validated", "matrix_row")
CARD_SECTIONS = ("identity", "rccl", "acceptance", "partitions", "retired_pages", "fabric", "pcie_required",
                 "bios_attest_roles", "xgmi", "online_memory")
XGMI_LAYOUTS = ("full_mesh", "pairs", "hive_full_mesh")
_GFX = re.compile(r"^gfx[0-9a-f]+$")
_DEVICE_ID = re.compile(r"^0x[0-9a-fA-F]{4}$")
_PRODUCT = re.compile(r"^MI[0-9]+[A-Z]*$")


def _why(entry):
    """The reason text of an explicit entry (``unknown`` / ``not_applicable``), else None."""
    for key in ("unknown", "not_applicable"):
        if isinstance(entry, dict) and key in entry:
            return entry[key] if isinstance(entry[key], str) and entry[key].strip() else ""
    return None


def _cited(entry, table):
    return bool((isinstance(entry, dict) and (entry.get("source") or entry.get("sources"))) or
                (isinstance(table, dict) and table.get("source")))


def _walk(node, path=()):
    """(path, key-or-None, value) for every mapping key and list item under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from _walk(value, path + (str(key),))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield path, None, value
            yield from _walk(value, path + (str(index),))


def problems(data):
    """What breaks the schema in ``data`` ({file name: parsed content}); [] when nothing does."""
    out = []
    gens = data["gpu_generations"]["generations"]
    names_ = [g.get("name") for g in gens]
    known = set(names_)
    aliases = {a for g in gens for a in g.get("aliases") or []}
    gfx_targets = {g.get("gfx") for g in gens} | set(data["env_vars"]["native_gfx"]["targets"])
    if len(known) != len(names_):
        out.append("gpu_generations: a name is listed twice")
    for gen in gens:
        missing = [f for f in GENERATION_FIELDS if f not in gen]
        if missing:
            out.append("gpu_generations %s: no %s" % (gen.get("name"), ", ".join(missing)))
        if set(gen.get("aliases") or []) & known:
            out.append("gpu_generations %s: an alias is another generation's name" % gen.get("name"))
        if not gen.get("source"):
            out.append("gpu_generations %s: no source" % gen.get("name"))

    # per-generation tables: one entry for every generation, by name
    entries = {}
    for entry in data["rccl_expectations"]["generations"]:
        entries.setdefault(("rccl_expectations", "generations"), []).append(entry.get("name"))
        why = _why(entry)
        if why == "" or (why is None and not entry.get("criteria")):
            out.append("rccl_expectations %s: neither criteria nor unknown: why" % entry.get("name"))
        if why is not None and entry.get("criteria"):
            out.append("rccl_expectations %s: criteria and unknown both" % entry.get("name"))
        bounds = [b for c in entry.get("criteria") or [] for b in c.get("bounds") or []]
        if not (entry.get("source") or (bounds and all(b.get("sources") for b in bounds))):
            out.append("rccl_expectations %s: no source" % entry.get("name"))
    partitions = data["gpu_health"]["partitions"]
    entries[("gpu_health", "partitions.generations")] = list(partitions["generations"])
    for name, entry in partitions["generations"].items():
        why = _why(entry)
        if why == "" or (why is None and any(f not in entry for f in PARTITION_FIELDS)):
            out.append("gpu_health partitions %s: neither %s nor not_applicable: why" % (name, ", ".join(PARTITION_FIELDS)))
        if not _cited(entry, partitions):
            out.append("gpu_health partitions %s: no source" % name)
    pages = data["gpu_health"]["retired_pages"]
    entries[("gpu_health", "retired_pages.reserved_vram_bytes")] = list(pages["reserved_vram_bytes"])
    for name, value in pages["reserved_vram_bytes"].items():
        if value is None and name not in pages.get("not_applicable", []):
            out.append("gpu_health reserved_vram_bytes %s: null without not_applicable" % name)
    if not pages.get("source"):
        out.append("gpu_health retired_pages: no source")
    xgmi = data["gpu_health"]["xgmi"]
    entries[("gpu_health", "xgmi.generations")] = list(xgmi["generations"])
    for name, entry in xgmi["generations"].items():
        why = _why(entry)
        if why == "" or (why is None and (entry or {}).get("layout") not in XGMI_LAYOUTS):
            out.append("gpu_health xgmi %s: neither a layout (%s) nor unknown / not_applicable: why" % (
                name, ", ".join(XGMI_LAYOUTS)))
        if not (isinstance(entry, dict) and entry.get("source")):
            out.append("gpu_health xgmi %s: no source" % name)
    if not xgmi.get("source") or not isinstance(xgmi.get("wafl"), dict) or xgmi["wafl"].get("level") not in (
            "warn", "fail"):
        out.append("gpu_health xgmi: no source, or no wafl maxima with a level (warn or fail)")
    memory = data["gpu_generations"]["host"]["online_memory"]
    entries[("gpu_generations", "host.online_memory.generations")] = list(memory["generations"])
    for name, entry in memory["generations"].items():
        why = _why(entry)
        if why == "" or (why is None and not (entry.get("min_gib") or entry.get("recommended_gib"))):
            out.append("gpu_generations online_memory %s: neither min_gib, recommended_gib nor unknown: why" % name)
        if why is None and not entry.get("sources"):
            out.append("gpu_generations online_memory %s: no source" % name)
    fabrics = [(name, f) for f in data["advice"]["fabrics"] for name in f.get("generations") or []]
    entries[("advice", "fabrics")] = [name for name, _f in fabrics]
    for fabric in data["advice"]["fabrics"]:
        if not fabric.get("source") or _why(fabric) == "":
            out.append("advice fabric %s: no source, or unknown without why" % fabric.get("id"))
    for (name, where), listed in entries.items():
        for gen in sorted(known - set(listed)):
            out.append("%s %s: no entry for %s (give it one, or unknown: why)" % (name, where, gen))
        for extra in sorted(set(listed) - known):
            out.append("%s %s: %s is not a generation name%s" % (
                name, where, extra, " (an alias: use its generation's name)" if extra in aliases else ""))
        for twice in sorted({n for n in listed if listed.count(n) > 1}):
            out.append("%s %s: %s has more than one entry" % (name, where, twice))

    # everywhere: generations named by name only; gfx targets known; no device id as a key
    for file, content in data.items():
        for path, key, value in _walk(content):
            where = "%s %s" % (file, ".".join(path) or "(top)")
            if path[-1:] == ("aliases",) or (file == "gpu_generations" and path[-1:] == ("devices",)):
                continue
            if isinstance(key, str) and _DEVICE_ID.match(key):
                out.append("%s: device id %s as a key (name the generation)" % (where, key))
            if isinstance(key, str) and _PRODUCT.match(key) and key not in known:
                out.append("%s: key %s is not a generation name" % (where, key))
            if path[-1:] == ("generations",) and isinstance(value, str) and value not in known:
                out.append("%s: %s is not a generation name" % (where, value))
            for text in ([key] if isinstance(key, str) else []) + ([value] if isinstance(value, str) else []):
                if _GFX.match(text) and text not in gfx_targets:
                    out.append("%s: gfx target %s is neither a generation's gfx nor in env_vars native_gfx" % (where, text))
    return out


def card_problems(cards, data):
    """What is wrong with the generation ``cards`` themselves, given the views ``data``; [] when nothing is."""
    out = []
    fabrics = {f.get("id") for f in data["advice"]["fabrics"]}
    required = {check for check, spec in data["pcie_health"].items() if isinstance(spec, dict) and "required" in spec}
    roles = set(data["gpu_generations"]["tables"]["bios_attest_roles"])
    for card in cards:
        name = card["name"]
        missing = [section for section in CARD_SECTIONS if section not in card]
        if missing:
            out.append("card %s: no %s (give each its entry, or unknown: why / not_applicable: why)"
                       % (name, ", ".join(missing)))
        if "fabric" in card and card["fabric"] not in fabrics:
            out.append("card %s: fabric %r is not an id of advice.yml fabrics (%s)" % (
                name, card["fabric"], ", ".join(sorted(fabrics))))
        for check in sorted(set(card.get("pcie_required") or []) - required):
            out.append("card %s: pcie_required %s is not a pcie_health check with `required`" % (name, check))
        for role in sorted(set(card.get("bios_attest_roles") or []) - roles):
            out.append("card %s: bios_attest_roles %s is not a role of tables.bios_attest_roles" % (name, role))
        xgmi = card.get("xgmi") or {}
        if xgmi.get("layout") == "pairs":
            pairs = xgmi.get("pairs") or []
            gpus = sorted({i for p in pairs for i in p[:2]})
            degree = {i: sum(i in p[:2] for p in pairs) for i in gpus}
            if not pairs or gpus != list(range(len(gpus))) or any(len(p) != 3 or p[0] == p[1] for p in pairs) or \
                    set(degree.values()) != {xgmi.get("peers_per_gpu")}:
                out.append("card %s: xgmi pairs are not [a, b, links] over GPUs 0..n-1 with peers_per_gpu peers each"
                           % name)
        vram = card.get("retired_pages") or {}
        if "retired_pages" in card and vram.get("reserved_vram_bytes") is None and not vram.get("not_applicable"):
            out.append("card %s: retired_pages.reserved_vram_bytes null without not_applicable: why" % name)
    return out


@pytest.fixture(scope="module")
def data():
    return {name: load_knowledge(name) for name in names()}


def _entry(entries, name):
    return next(entry for entry in entries if entry["name"] == name)


def test_the_knowledge_files_keep_the_schema(data):
    assert set(data) >= {"gpu_generations", "rccl_expectations", "gpu_health", "advice", "pcie_health", "env_vars"}
    assert problems(data) == []
    cards = kn.cards()
    assert [card["name"] for card in cards] == [g["name"] for g in data["gpu_generations"]["generations"]]
    assert card_problems(cards, data) == []


def test_each_break_of_a_card_is_named(data):
    cards = kn.cards()
    mi300x = next(card for card in cards if card["name"] == "MI300X")
    mi300x.pop("partitions")
    mi300x["fabric"] = "mesh"
    mi300x["pcie_required"].append("aspm")
    mi300x["retired_pages"] = {"reserved_vram_bytes": None}
    mi250x = next(card for card in cards if card["name"] == "MI250X")
    mi250x["xgmi"]["pairs"].pop()  # GCDs 6 and 7 left with 2 peers, not the card's 3
    assert card_problems(cards, data) == [
        "card MI250X: xgmi pairs are not [a, b, links] over GPUs 0..n-1 with peers_per_gpu peers each",
        "card MI300X: no partitions (give each its entry, or unknown: why / not_applicable: why)",
        "card MI300X: fabric 'mesh' is not an id of advice.yml fabrics (mi300a_unstated, oam_full_mesh, oam_xgmi, "
        "pcie_xgmi_bridge)",
        "card MI300X: pcie_required aspm is not a pcie_health check with `required`",
        "card MI300X: retired_pages.reserved_vram_bytes null without not_applicable: why",
    ]


def _knowledge_copy(tmp_path):
    copied = tmp_path / "knowledge"
    shutil.copytree(kn.KNOWLEDGE_DIR, copied)
    return copied


def test_a_new_generation_is_one_card_its_missing_sections_are_named(data, tmp_path):
    """A card with only its identity: the views leave it out of every table and the schema names each one."""
    directory = _knowledge_copy(tmp_path)
    card = (directory / "generations" / "mi300x.yml").read_text()
    identity_only = card[:card.index("\n# RCCL pass criteria")].replace("name: MI300X", "name: MI400X")
    identity_only = identity_only.replace("aliases: []", "aliases: []  # new").replace('"0x74', '"0x99')
    (directory / "generations" / "mi400x.yml").write_text(identity_only + "\n")
    views = {name: load_knowledge(name, str(directory)) for name in names(str(directory))}
    assert "MI400X" in [g["name"] for g in views["gpu_generations"]["generations"]]
    assert problems(views) == [
        "rccl_expectations generations: no entry for MI400X (give it one, or unknown: why)",
        "gpu_health partitions.generations: no entry for MI400X (give it one, or unknown: why)",
        "gpu_health retired_pages.reserved_vram_bytes: no entry for MI400X (give it one, or unknown: why)",
        "gpu_health xgmi.generations: no entry for MI400X (give it one, or unknown: why)",
        "gpu_generations host.online_memory.generations: no entry for MI400X (give it one, or unknown: why)",
        "advice fabrics: no entry for MI400X (give it one, or unknown: why)",
    ]
    assert card_problems(kn.cards(str(directory)), views) == [
        "card MI400X: no rccl, acceptance, partitions, retired_pages, fabric, pcie_required, bios_attest_roles, xgmi, "
        "online_memory (give each its entry, or unknown: why / not_applicable: why)"]

    # the same card with every section, explicit where nothing is known: no problem anywhere
    (directory / "generations" / "mi400x.yml").write_text(identity_only + """
rccl: {unknown: no acceptance page yet, observed: [], source: ROCm/system-acceptance-docs docs/gpus/}
acceptance: {unknown: no acceptance page yet}
partitions: {not_applicable: driver rules not read yet}
retired_pages: {reserved_vram_bytes: null, not_applicable: not read yet}
fabric: mi300a_unstated
pcie_required: [ten_bit_tags, ari]
bios_attest_roles: [bare_metal, virtualization_host]
xgmi: {unknown: no baseboard documentation read yet, source: none yet}
online_memory: {unknown: no acceptance page yet}
""")
    views = {name: load_knowledge(name, str(directory)) for name in names(str(directory))}
    assert problems(views) == [] and card_problems(kn.cards(str(directory)), views) == []
    assert "MI400X" in views["pcie_health"]["ari"]["required"]["generations"]
    assert "MI400X" in views["gpu_generations"]["tables"]["bios_attest_roles"]["bare_metal"]["generations"]
    assert "MI400X" in views["gpu_health"]["retired_pages"]["not_applicable"]
    assert views["gpu_health"]["xgmi"]["generations"]["MI400X"]["unknown"] == "no baseboard documentation read yet"
    assert os.path.exists(directory / "generations" / "README.md")


def _with(data, edit):
    changed = copy.deepcopy(data)
    edit(changed)
    return problems(changed)


# (edit, the problem it must give)
BREAKS = [
    (lambda d: d["gpu_health"]["xgmi"]["generations"].pop("MI250X"),
     "gpu_health xgmi.generations: no entry for MI250X (give it one, or unknown: why)"),
    (lambda d: d["gpu_health"]["xgmi"]["generations"]["MI300X"].__setitem__("layout", "mesh"),
     "gpu_health xgmi MI300X: neither a layout (full_mesh, pairs, hive_full_mesh) nor unknown / not_applicable: why"),
    (lambda d: d["gpu_health"]["xgmi"]["generations"].__setitem__("MI210", {"not_applicable": "", "source": "x"}),
     "gpu_health xgmi MI210: neither a layout (full_mesh, pairs, hive_full_mesh) nor unknown / not_applicable: why"),
    (lambda d: d["gpu_health"]["xgmi"]["generations"]["MI355X"].pop("source"), "gpu_health xgmi MI355X: no source"),
    (lambda d: d["gpu_health"]["xgmi"]["wafl"].pop("level"),
     "gpu_health xgmi: no source, or no wafl maxima with a level (warn or fail)"),
    (lambda d: d["advice"]["fabrics"][0]["generations"].append("MI350X"),
     "advice fabrics: MI350X is not a generation name (an alias: use its generation's name)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].__setitem__("0x74a1", {"unknown": "x"}),
     "gpu_health partitions.generations: device id 0x74a1 as a key (name the generation)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].pop("MI210"),
     "gpu_health partitions.generations: no entry for MI210 (give it one, or unknown: why)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].__setitem__("MI210", {"not_applicable": ""}),
     "gpu_health partitions MI210: neither xcds, driver, validated, matrix_row nor not_applicable: why"),
    (lambda d: _entry(d["rccl_expectations"]["generations"], "MI308X").pop("unknown"),
     "rccl_expectations MI308X: neither criteria nor unknown: why"),
    (lambda d: _entry(d["rccl_expectations"]["generations"], "MI308X").pop("source"), "rccl_expectations MI308X: no source"),
    (lambda d: d["gpu_health"]["retired_pages"]["not_applicable"].remove("MI300A"),
     "gpu_health reserved_vram_bytes MI300A: null without not_applicable"),
    (lambda d: d["pcie_health"]["ari"]["required"]["generations"].append("MI250"),
     "pcie_health ari.required.generations: MI250 is not a generation name"),
    (lambda d: d["gpu_health"]["retired_pages"]["reserved_vram_bytes"].__setitem__("MI250", 16777216),
     "gpu_health retired_pages.reserved_vram_bytes: key MI250 is not a generation name"),
    (lambda d: d["env_vars"]["variables"]["HSA_OVERRIDE_GFX_VERSION"].__setitem__("applies_to", ["gfx1100"]),
     "env_vars variables.HSA_OVERRIDE_GFX_VERSION.applies_to: gfx target gfx1100 is neither a generation's gfx nor in "
     "env_vars native_gfx"),
    (lambda d: _entry(d["gpu_generations"]["generations"], "MI250X").pop("source"), "gpu_generations MI250X: no source"),
    (lambda d: d["gpu_generations"]["host"]["online_memory"]["generations"]["MI308X"].pop("recommended_gib"),
     "gpu_generations online_memory MI308X: neither min_gib, recommended_gib nor unknown: why"),
    (lambda d: d["gpu_generations"]["host"]["online_memory"]["generations"]["MI210"].pop("sources"),
     "gpu_generations online_memory MI210: no source"),
    (lambda d: d["gpu_generations"]["host"]["online_memory"]["generations"].pop("MI325X"),
     "gpu_generations host.online_memory.generations: no entry for MI325X (give it one, or unknown: why)"),
]


@pytest.mark.parametrize("edit,problem", BREAKS)
def test_each_break_of_the_schema_is_named(data, edit, problem):
    found = _with(data, edit)
    assert problem in found, found


def test_one_key_per_generation_the_consumers_resolve_aliases(data):
    """Aliases stay in gpu_generations.yml only; the readers that take a name from a user resolve it there."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.bench.advice import fabric_for

    gens = data["gpu_generations"]["generations"]
    for alias, name in (("MI250", "MI250X"), ("MI350X", "MI355X")):
        by_alias, by_name = fabric_for(data["advice"], alias, None, gens), fabric_for(data["advice"], name, None, gens)
        assert by_alias["id"] == by_name["id"] != "topology" and by_alias["generation"] == alias
    # MI300A's entry is explicit: the advice then reads the node's links, as for a part without an entry
    assert fabric_for(data["advice"], "MI300A", None, gens) is None
