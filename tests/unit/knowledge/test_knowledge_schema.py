"""Knowledge schema: every GPU generation of knowledge/gpu_generations.yml has its entry in every per-generation
table of the other knowledge files, or an explicit entry saying why not (``unknown: why``, or ``not_applicable: why``
where the generation has no such thing); one key per generation across files, its ``name`` (never an alias, a gfx
target or a PCI device id); every entry cites a source (its own, or its table's).

``problems(data)`` is the check, run on the real files (no problem) and on edited copies (each edit is found)."""

import copy
import re

import pytest

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge, names

GENERATION_FIELDS = ("name", "aliases", "devices", "devices_source", "gfx", "gfx_target_version", "devices_per_node",
                     "pcie", "nps_allowed", "nps_policy", "iommu_bios", "kernel_params", "smt", "companion_cpu",
                     "bios_attest", "source", "bios_source")
PARTITION_FIELDS = ("xcds", "driver", "validated", "matrix_row")
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


@pytest.fixture(scope="module")
def data():
    return {name: load_knowledge(name) for name in names()}


def test_the_knowledge_files_keep_the_schema(data):
    assert set(data) >= {"gpu_generations", "rccl_expectations", "gpu_health", "advice", "pcie_health", "env_vars"}
    assert problems(data) == []


def _with(data, edit):
    changed = copy.deepcopy(data)
    edit(changed)
    return problems(changed)


def test_a_new_generation_without_its_entries_is_named_in_every_file(data):
    def add(d):
        new = dict(copy.deepcopy(d["gpu_generations"]["generations"][2]), name="MI400X", aliases=[], gfx="gfx942")
        d["gpu_generations"]["generations"].append(new)
    found = _with(data, add)
    assert found == [
        "rccl_expectations generations: no entry for MI400X (give it one, or unknown: why)",
        "gpu_health partitions.generations: no entry for MI400X (give it one, or unknown: why)",
        "gpu_health retired_pages.reserved_vram_bytes: no entry for MI400X (give it one, or unknown: why)",
        "advice fabrics: no entry for MI400X (give it one, or unknown: why)",
    ]

    def add_explicit(d):
        add(d)
        d["rccl_expectations"]["generations"].append({"name": "MI400X", "unknown": "no page yet", "source": "docs/gpus/"})
        d["gpu_health"]["partitions"]["generations"]["MI400X"] = {"unknown": "driver rules not read yet"}
        d["gpu_health"]["retired_pages"]["reserved_vram_bytes"]["MI400X"] = None
        d["gpu_health"]["retired_pages"]["not_applicable"].append("MI400X")
        d["advice"]["fabrics"].append({"id": "x", "generations": ["MI400X"], "unknown": "not stated", "source": "s"})
    assert _with(data, add_explicit) == []


# (edit, the problem it must give)
BREAKS = [
    (lambda d: d["advice"]["fabrics"][0]["generations"].append("MI350X"),
     "advice fabrics: MI350X is not a generation name (an alias: use its generation's name)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].__setitem__("0x74a1", {"unknown": "x"}),
     "gpu_health partitions.generations: device id 0x74a1 as a key (name the generation)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].pop("MI210"),
     "gpu_health partitions.generations: no entry for MI210 (give it one, or unknown: why)"),
    (lambda d: d["gpu_health"]["partitions"]["generations"].__setitem__("MI210", {"not_applicable": ""}),
     "gpu_health partitions MI210: neither xcds, driver, validated, matrix_row nor not_applicable: why"),
    (lambda d: d["rccl_expectations"]["generations"][3].pop("unknown"),
     "rccl_expectations MI308X: neither criteria nor unknown: why"),
    (lambda d: d["rccl_expectations"]["generations"][3].pop("source"), "rccl_expectations MI308X: no source"),
    (lambda d: d["gpu_health"]["retired_pages"]["not_applicable"].remove("MI300A"),
     "gpu_health reserved_vram_bytes MI300A: null without not_applicable"),
    (lambda d: d["pcie_health"]["ari"]["required"]["generations"].append("MI250"),
     "pcie_health ari.required.generations: MI250 is not a generation name"),
    (lambda d: d["gpu_health"]["retired_pages"]["reserved_vram_bytes"].__setitem__("MI250", 16777216),
     "gpu_health retired_pages.reserved_vram_bytes: key MI250 is not a generation name"),
    (lambda d: d["env_vars"]["variables"]["HSA_OVERRIDE_GFX_VERSION"].__setitem__("applies_to", ["gfx1100"]),
     "env_vars variables.HSA_OVERRIDE_GFX_VERSION.applies_to: gfx target gfx1100 is neither a generation's gfx nor in "
     "env_vars native_gfx"),
    (lambda d: d["gpu_generations"]["generations"][1].pop("source"), "gpu_generations MI250X: no source"),
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
