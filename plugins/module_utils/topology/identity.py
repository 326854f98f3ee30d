"""The GPU identity of a node: which AMD Instinct generation, product and kind its GPUs are, decided once.

Public API (standard library only, Python 3.8+):

``KINDS``
    ``("physical", "hf", "vf", "apu")``: a physical function of the main part, a product variant with the same
    expectations (HF), an SR-IOV virtual function seen in a guest, an APU (CPU and GPU in one package).
``identify(device_ids, generations, name=None)``
    The identity dict (below) of a node whose AMD GPU PCI functions have ``device_ids`` (one entry per function,
    partitions included or not: only proportions matter), against the ``generations`` list of
    ``knowledge/gpu_generations.yml``. ``name`` (a generation name or alias, e.g. ``platform_checks_generation``)
    forces the generation.
``identify_model(topology, generations)``
    ``identify`` over a topology model's GPUs (one device id per physical device).
``model_identity(topology, generations)``
    The model's ``identity`` (set at discovery), or ``identify_model`` for a model made without one (an older
    capture, a hand-written topology).
``generation_entry(generations, identity)``
    The knowledge entry of ``identity["generation"]``, or None.
``by_name(generations, text)``
    The entry whose name or alias is a word of ``text`` (``"AMD Instinct MI300X"``), or None: for tool output that
    names the device but carries no PCI id (rccl-tests' rank lines).

The identity dict::

    {"generation": "MI300X" | None,   # the knowledge entry's name: the key of every per-generation table
     "product": "MI300X HF" | None,   # the device's own name (knowledge `devices[].name`)
     "kind": "hf" | None,             # one of KINDS
     "device_id": "0x74a9" | None,    # the most frequent id of the generation on the node
     "gfx": "gfx942" | None,
     "device_ids": ["0x74a9"],        # every id of the generation present (the GPU count counts these)
     "other_device_ids": [],          # AMD GPU ids on the node outside the generation (mixed node, unknown part)
     "how": "device id" | "given" | "none",
     "reason": None | "why the generation is unknown"}

Every consumer (platform and health checks, GPU count, RCCL criterion, advice, gres ``Type=``, NFD labels, the
report, the CLI) reads this dict; nothing else maps device ids to generations.
"""

import re

KINDS = ("physical", "hf", "vf", "apu")
_WORD = re.compile(r"[A-Za-z0-9]+")


def _norm(device_id):
    """``"0x74A1"``, ``"74a1"``, ``29857`` -> ``"0x74a1"``; None when not a device id."""
    if isinstance(device_id, int) and not isinstance(device_id, bool):
        return "0x%04x" % device_id if 0 < device_id <= 0xFFFF else None
    text = str(device_id or "").strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    if not text or len(text) > 4 or any(c not in "0123456789abcdef" for c in text):
        return None
    return "0x%04x" % int(text, 16)


def _devices(generations):
    """{device id: (generation entry, device entry)} over every generation's ``devices``."""
    table = {}
    for gen in generations or []:
        if not isinstance(gen, dict):
            continue
        for dev in gen.get("devices") or []:
            key = _norm((dev or {}).get("id"))
            if key is not None:
                table[key] = (gen, dev)
    return table


def _names(gen):
    return [str(n).upper() for n in [gen.get("name")] + list(gen.get("aliases") or []) if n]


def _entry_named(generations, name):
    wanted = str(name).strip().upper()
    return next((g for g in generations or [] if isinstance(g, dict) and wanted in _names(g)), None)


def by_name(generations, text):
    """The generation entry one of whose names is a word of ``text``, or None."""
    words = set(_WORD.findall(str(text or "").upper()))
    return next((g for g in generations or [] if isinstance(g, dict) and words & set(_names(g))), None)


def _unknown(how, reason, others):
    return {"generation": None, "product": None, "kind": None, "device_id": None, "gfx": None, "device_ids": [],
            "other_device_ids": others, "how": how, "reason": reason}


def identify(device_ids, generations, name=None):
    """The identity of a node with AMD GPU functions ``device_ids``; see the module docstring."""
    table = _devices(generations)
    counts = {}
    for raw in device_ids or []:
        key = _norm(raw)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    if name:
        gen = _entry_named(generations, name)
        if gen is None:
            return _unknown("given", "generation %r is not in knowledge/gpu_generations.yml (known: %s)" % (
                name, ", ".join(str(g.get("name")) for g in generations or [] if isinstance(g, dict))),
                sorted(counts))
    else:
        per_gen = {}
        for key, count in counts.items():
            if key in table:
                gname = table[key][0]["name"]
                per_gen[gname] = per_gen.get(gname, 0) + count
        if not per_gen:
            return _unknown("none", ("no AMD GPU found" if not counts else
                                     "no device id of knowledge/gpu_generations.yml (%s)" % ", ".join(sorted(counts))),
                            sorted(counts))
        best = max(sorted(per_gen), key=lambda n: per_gen[n])
        gen = _entry_named(generations, best)
    own = sorted(k for k in counts if k in table and table[k][0] is gen)
    if own:
        top = max(own, key=lambda k: (counts[k], k))
        dev = table[top][1]
        product, kind, device_id = dev.get("name") or gen["name"], dev.get("kind") or "physical", top
    else:
        # forced by name on a node whose devices are not of that generation (or carry no id)
        product, kind, device_id = gen["name"], None, None
    return {"generation": gen["name"], "product": product, "kind": kind, "device_id": device_id,
            "gfx": gen.get("gfx"), "device_ids": own, "other_device_ids": sorted(k for k in counts if k not in own),
            "how": "given" if name else "device id", "reason": None}


def identify_model(topology, generations):
    """``identify`` over a topology model: one device id per physical device (partitions share their device's)."""
    seen = {}
    for gpu in (topology or {}).get("gpus") or []:
        if isinstance(gpu, dict):
            seen.setdefault(gpu.get("physical_index", gpu.get("index")), gpu.get("device_id"))
    return identify([d for d in seen.values() if d], generations)


def model_identity(topology, generations):
    """The identity the model carries, else the one its device ids give."""
    identity = (topology or {}).get("identity")
    if isinstance(identity, dict) and "generation" in identity:
        return identity
    return identify_model(topology, generations)


def generation_entry(generations, identity):
    """The knowledge entry of the identified generation, or None."""
    name = (identity or {}).get("generation")
    return _entry_named(generations, name) if name else None
