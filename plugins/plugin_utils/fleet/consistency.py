"""Cross-node consistency of firmware and software within a hardware class: which node is the odd one out, per item.

Controller only (pure functions, standard library). Input: ``{host: inventory}`` where ``inventory`` is what the
``platform_checks`` module returns under ``inventory`` (``module_utils/gpu_health.inventory`` plus the node's GPU
``identity``): per-GPU VBIOS, ``fw_version`` files and partition modes; ROCm, kernel and BIOS versions.

``hardware_class(inventory)``
    The class a node is compared within: its GPU product (generation and variant: ``MI300X``, ``MI300X HF``,
    ``MI308X``) and partition mode (``SPX/NPS1``; ``mixed: ...`` when its GPUs disagree, omitted where the GPUs
    have no partition files). An MI300X node is never judged against MI308X firmware, nor an SPX node against a CPX
    one.
``compare(inventories)``
    ``{"nodes": [host], "classes": {class: [host]}, "items": [{item, label, class, status, majority, odd, unknown,
    values}], "odd_nodes": {host: [item]}, "summary": {items, differing, no_majority, unknown}}``. Per class and
    item each node has one value: the GPUs' common value, or ``mixed: a | b`` when its GPUs disagree (the node-level
    check ``gpu_firmware_consistency`` says which GPU), or unknown when it could not be read. A node whose value is
    unknown is listed in ``unknown`` and never counted as differing. ``status`` is ``consistent`` (one known value),
    ``differs`` (a value held by more than half of the nodes with a known value: ``majority``; ``odd`` names the
    others), ``no_majority`` (no value reaches half: ``odd`` is empty and ``majority`` None, the groups are in
    ``values``) or ``unknown`` (no node of the class has a value). Items no node of a class reports (firmware files
    an MI250X does not have) are not listed for that class.
``lines(report)``
    One line per item that is not consistent, for the terminal.
"""

UNKNOWN = "unknown"
# Per-node items, in the order the table shows them; firmware:<name> items come after vbios.
NODE_ITEMS = (("rocm_version", "ROCm"), ("kernel_release", "kernel"), ("bios_version", "BIOS"))
GPU_ITEMS = (("vbios", "VBIOS"),)


def _node_value(values):
    """The node's value of an item over its GPUs: the common one, ``mixed: ...``, or None (unknown)."""
    known = sorted({str(v) for v in values if v not in (None, "")})
    if not values or not known:
        return None
    if len(known) == 1 and all(v not in (None, "") for v in values):
        return known[0]
    return "mixed: " + " | ".join(known + ([UNKNOWN] if any(v in (None, "") for v in values) else []))


def hardware_class(inventory):
    """See the module docstring."""
    inventory = inventory or {}
    identity = inventory.get("identity") or {}
    product = identity.get("product") or identity.get("generation") or "unidentified GPU"
    modes = [None if not (g.get("compute_partition") or g.get("memory_partition")) else
             "%s/%s" % (g.get("compute_partition") or "?", g.get("memory_partition") or "?")
             for g in inventory.get("gpus") or []]
    mode = _node_value(modes)
    return "%s %s" % (product, mode) if mode else product


def _per_node(inventories):
    """``{item: (label, {host: value or None})}`` over the nodes of one class; items none of them reports left out."""
    items = {}
    for key, label in GPU_ITEMS:
        items[key] = (label, {h: _node_value([g.get(key) for g in (inv or {}).get("gpus") or []])
                              for h, inv in inventories.items()})
    names = sorted({n for inv in inventories.values() for g in (inv or {}).get("gpus") or []
                    for n in (g.get("firmware") or {})})
    for name in names:
        items["firmware:" + name] = ("%s firmware" % name.upper(), {
            h: _node_value([(g.get("firmware") or {}).get(name) for g in (inv or {}).get("gpus") or []])
            for h, inv in inventories.items()})
    for key, label in NODE_ITEMS:
        items[key] = (label, {h: _node_value([(inv or {}).get(key)]) for h, inv in inventories.items()})
    return {item: entry for item, entry in items.items() if any(v is not None for v in entry[1].values())
            or item in dict(NODE_ITEMS)}


def _row(item, label, klass, values):
    groups, unknown = {}, []
    for host in sorted(values):
        if values[host] is None:
            unknown.append(host)
        else:
            groups.setdefault(values[host], []).append(host)
    known = sum(len(hosts) for hosts in groups.values())
    if not groups:
        status, majority, odd = "unknown", None, []
    elif len(groups) == 1:
        status, majority, odd = "consistent", next(iter(groups)), []
    else:
        best = max(sorted(groups), key=lambda v: len(groups[v]))
        if len(groups[best]) * 2 > known:
            status, majority = "differs", best
            odd = sorted(h for v, hosts in groups.items() if v != best for h in hosts)
        else:
            status, majority, odd = "no_majority", None, []
    return {"item": item, "label": label, "class": klass, "status": status, "majority": majority, "odd": odd,
            "unknown": unknown, "values": dict(sorted(groups.items()))}


def compare(inventories):
    """See the module docstring."""
    inventories = {str(h): inv for h, inv in sorted((inventories or {}).items())}
    classes = {}
    for host, inv in inventories.items():
        classes.setdefault(hardware_class(inv), []).append(host)
    rows, odd_nodes = [], {}
    for klass in sorted(classes):
        members = {h: inventories[h] for h in classes[klass]}
        for item, (label, values) in _per_node(members).items():
            row = _row(item, label, klass, values)
            for host in row["odd"]:
                odd_nodes.setdefault(host, []).append(item)
            rows.append(row)
    return {
        "nodes": sorted(inventories),
        "classes": classes,
        "items": rows,
        "odd_nodes": odd_nodes,
        "summary": {"items": len(rows), "differing": sum(r["status"] == "differs" for r in rows),
                    "no_majority": sum(r["status"] == "no_majority" for r in rows),
                    "unknown": sum(r["status"] == "unknown" for r in rows)},
    }


def lines(report):
    """Terminal lines: one per item that differs or has no majority."""
    out = []
    for row in (report or {}).get("items") or []:
        if row["status"] == "differs":
            odd = ", ".join("%s (%s)" % (h, next(v for v, hosts in row["values"].items() if h in hosts))
                            for h in row["odd"])
            count = len(row["values"][row["majority"]])
            out.append("%s %s: %s on %d node(s); odd: %s" % (row["class"], row["label"], row["majority"], count, odd))
        elif row["status"] == "no_majority":
            out.append("%s %s: no majority: %s" % (row["class"], row["label"], "; ".join(
                "%s on %s" % (v, ", ".join(hosts)) for v, hosts in row["values"].items())))
    return out
