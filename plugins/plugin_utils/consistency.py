"""Cross-node consistency of firmware and software: which node is the odd one out, per item.

Controller only (pure functions, standard library). Input: ``{host: inventory}`` where ``inventory`` is what the
``platform_checks`` module returns under ``inventory`` (``module_utils/gpu_health.inventory``): per-GPU VBIOS,
``fw_version`` files and partition modes; ROCm, kernel and BIOS versions.

``compare(inventories)``
    ``{"nodes": [host], "items": [{item, status, majority, odd, values}], "odd_nodes": {host: [item]},
    "summary": {items, differing, no_majority}}``. Per item each node has one value: the GPUs' common value, or
    ``mixed: a | b`` when its GPUs disagree (the node-level check ``gpu_firmware_consistency`` /
    ``gpu_partition_mode`` says which GPU), or ``unknown`` when it could not be read. ``status`` is ``consistent``
    (one value), ``differs`` (a value held by more than half of the nodes: ``majority``; ``odd`` names the others)
    or ``no_majority`` (no value reaches half: ``odd`` is empty and ``majority`` None, the groups are in
    ``values``).
``lines(report)``
    One line per item that is not consistent, for the terminal.
"""

UNKNOWN = "unknown"
# Per-node items, in the order the table shows them; firmware:<name> items come after vbios.
NODE_ITEMS = (("rocm_version", "ROCm"), ("kernel_release", "kernel"), ("bios_version", "BIOS"))
GPU_ITEMS = (("vbios", "VBIOS"), ("compute_partition", "compute partition"), ("memory_partition", "memory partition"))


def _node_value(values):
    known = sorted({str(v) for v in values if v not in (None, "")})
    if not values or not known:
        return UNKNOWN
    if len(known) == 1 and all(v not in (None, "") for v in values):
        return known[0]
    return "mixed: " + " | ".join(known + ([UNKNOWN] if any(v in (None, "") for v in values) else []))


def _per_node(inventories):
    """``{item: (label, {host: value})}``."""
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
    return items


def compare(inventories):
    """See the module docstring."""
    inventories = {str(h): inv for h, inv in sorted((inventories or {}).items())}
    nodes = sorted(inventories)
    rows, odd_nodes = [], {}
    for item, (label, values) in _per_node(inventories).items():
        groups = {}
        for host in nodes:
            groups.setdefault(values[host], []).append(host)
        if len(groups) <= 1:
            status, majority, odd = "consistent", next(iter(groups), None), []
        else:
            best = max(sorted(groups), key=lambda v: len(groups[v]))
            if len(groups[best]) * 2 > len(nodes):
                status, majority = "differs", best
                odd = sorted(h for v, hosts in groups.items() if v != best for h in hosts)
            else:
                status, majority, odd = "no_majority", None, []
        for host in odd:
            odd_nodes.setdefault(host, []).append(item)
        rows.append({"item": item, "label": label, "status": status, "majority": majority, "odd": odd,
                     "values": dict(sorted(groups.items()))})
    return {
        "nodes": nodes,
        "items": rows,
        "odd_nodes": odd_nodes,
        "summary": {"items": len(rows), "differing": sum(r["status"] == "differs" for r in rows),
                    "no_majority": sum(r["status"] == "no_majority" for r in rows)},
    }


def lines(report):
    """Terminal lines: one per item that differs or has no majority."""
    out = []
    for row in (report or {}).get("items") or []:
        if row["status"] == "differs":
            odd = ", ".join("%s (%s)" % (h, next(v for v, hosts in row["values"].items() if h in hosts))
                            for h in row["odd"])
            count = len(row["values"][row["majority"]])
            out.append("%s: %s on %d node(s); odd: %s" % (row["label"], row["majority"], count, odd))
        elif row["status"] == "no_majority":
            out.append("%s: no majority: %s" % (row["label"], "; ".join(
                "%s on %s" % (v, ", ".join(hosts)) for v, hosts in row["values"].items())))
    return out
