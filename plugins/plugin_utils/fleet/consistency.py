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
    values}], "odd_nodes": {host: [item]}, "summary": {items, differing, no_majority, unknown}, "rail_consistency":
    {host: result}}``. Per class and
    item each node has one value: the GPUs' common value, or ``mixed: a | b`` when its GPUs disagree (the node-level
    check ``gpu_firmware_consistency`` says which GPU), or unknown when it could not be read. A node whose value is
    unknown is listed in ``unknown`` and never counted as differing. ``status`` is ``consistent`` (one known value),
    ``differs`` (a value held by more than half of the nodes with a known value: ``majority``; ``odd`` names the
    others), ``no_majority`` (no value reaches half: ``odd`` is empty and ``majority`` None, the groups are in
    ``values``) or ``unknown`` (no node of the class has a value). Items no node of a class reports (firmware files
    an MI250X does not have) are not listed for that class.
``rail_consistency(report)``
    The cluster-wide check ``rail_consistency`` of each compared node, from ``compare``'s ``rail:<i>`` items:
    ``{host: {id, status, observed, expected, remediation, source}}`` (the shape of a node check).
``rdma_withheld(inventories)``
    ``{host: reason}`` for each node whose ``rail_consistency`` fails: the launch_templates role leaves
    ``NCCL_IB_HCA`` unset there and its README gives the reason. Nodes that pass or are unknown are not listed (their
    own NIC pairing stands: an unreadable rail or a class of one proves no disagreement).
``lines(report)``
    One line per item that is not consistent, for the terminal.

Rails: a node's ``inventory`` may carry ``rails`` (``module_utils/checks/rdma_health.py``), one entry per GPU in
GPU order: rail i is the RDMA NIC paired with GPU i (below its PCIe switch). On a rail-optimized fabric NIC i of every
node is cabled to the rail-i switch, and RCCL pairs its ranks' NICs by their position, so within a hardware class the
NIC's device name, its netdev, link rate, firmware and IPv4 subnet must be the same on rail i of every node: an odd
one out (two NICs swapped, a cable on the wrong leaf) makes cross-node traffic cross rails, which times out on
rail-isolated MI3xx fabrics (ROCm/mori#370) or runs slow, since NCCL/RCCL ignore IP subnets (NVIDIA/nccl#1755).
"""

UNKNOWN = "unknown"
RAIL_FIELDS = ("nic", "netdev", "rate", "fw_ver", "ipv4_subnet")  # keys of rdma_health.rails entries
RAIL_SOURCE = ("ROCm/system-acceptance-docs docs/network/topology-mapping.md (each GPU with the NIC below its switch, "
               "one rail per NIC position); ROCm/cvs cvs/lib/preflight/interface_consistency.py (the same RDMA "
               "interfaces on every node)")
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
    items.update(_rail_items(inventories))
    return {item: entry for item, entry in items.items() if any(v is not None for v in entry[1].values())
            or item in dict(NODE_ITEMS)}


def rail_value(rail):
    """One rail's value: its NIC's name, netdev, rate, firmware and IPv4 subnet; ``no NIC`` when the GPU has none
    paired; None (unknown) when any of them could not be read, so an unreadable file never makes a node odd."""
    if not isinstance(rail, dict):
        return None
    if not rail.get("nic"):
        return "no NIC"
    fields = [rail.get(field) for field in RAIL_FIELDS]
    if any(value in (None, "") for value in fields):
        return None
    return " ".join(["%s" % fields[0], "%s" % fields[1], "%s" % fields[2], "fw %s" % fields[3], "%s" % fields[4]])


def _rail_items(inventories):
    """``{"rail:<i>": (label, {host: value})}``: rail i on every node that reports rails (absent: unknown)."""
    count = max((len(inv.get("rails") or []) for inv in inventories.values() if isinstance(inv, dict)), default=0)
    items = {}
    for i in range(count):
        values = {}
        for host, inv in inventories.items():
            rails = (inv or {}).get("rails")
            values[host] = (rail_value(rails[i]) if i < len(rails) else "no NIC") if rails else None
        items["rail:%d" % i] = ("rail %d (GPU %d's NIC)" % (i, i), values)
    return items


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
    report = {
        "nodes": sorted(inventories),
        "classes": classes,
        "items": rows,
        "odd_nodes": odd_nodes,
        "summary": {"items": len(rows), "differing": sum(r["status"] == "differs" for r in rows),
                    "no_majority": sum(r["status"] == "no_majority" for r in rows),
                    "unknown": sum(r["status"] == "unknown" for r in rows)},
    }
    report["rail_consistency"] = rail_consistency(report)
    return report


def rail_consistency(report):
    """See the module docstring. Per node: ``fail`` naming each rail where it is the odd one out (its value and the
    class's), ``unknown`` with the reason (no rails read, a class of one, no majority, a rail unreadable there),
    ``pass`` when each of its rails equals its class's."""
    report = report or {}
    rows = [r for r in report.get("items") or [] if r["item"].startswith("rail:")]
    expected = "on each rail the same RDMA device, netdev, rate, firmware and IPv4 subnet as the other nodes of its class"
    out = {}
    for klass, hosts in (report.get("classes") or {}).items():
        mine = [r for r in rows if r["class"] == klass]
        for host in hosts:
            odd, unsure = [], []
            for row in mine:
                value = next((v for v, members in row["values"].items() if host in members), None)
                if host in row["odd"]:
                    odd.append("%s: %s, %d other node(s): %s" % (row["label"], value, len(row["values"][row["majority"]]),
                                                                 row["majority"]))
                elif host in row["unknown"]:
                    unsure.append("%s unreadable here" % row["label"])
                elif row["status"] == "no_majority":
                    unsure.append("%s: no value on more than half of the nodes (%s)" % (
                        row["label"], "; ".join("%s on %s" % (v, ", ".join(m)) for v, m in row["values"].items())))
            if odd:
                status, observed = "fail", "; ".join(odd)
            elif not mine or all(host in row["unknown"] for row in mine):
                status, observed = "unknown", "no RDMA rails read on this node (no RDMA NIC paired with its GPUs)"
            elif len(hosts) < 2:
                status, observed = "unknown", "the only node of class %s in this run: nothing to compare with" % klass
            elif unsure:
                status, observed = "unknown", "; ".join(unsure)
            else:
                status, observed = "pass", "%d rail(s) equal to the other %d node(s) of %s" % (
                    len(mine), len(hosts) - 1, klass)
            out[host] = {"id": "rail_consistency", "status": status, "observed": observed, "expected": expected,
                         "remediation": "" if status == "pass" else (
                             "check the NIC-to-GPU cabling and the switch port of each named rail (or the NIC's "
                             "firmware); until fixed, NCCL_IB_HCA stays unset on this node (the launch_templates "
                             "role withholds it)" if status == "fail" else
                             "run the checks on more nodes of this class, or as root"),
                         "source": RAIL_SOURCE}
    return out


def rdma_withheld(inventories):
    """See the module docstring."""
    return {host: "its rails differ from the other nodes of its hardware class in this run (rail_consistency: %s), "
                  "so RCCL's NIC by GPU position would cross rails" % verdict["observed"]
            for host, verdict in compare(inventories)["rail_consistency"].items() if verdict["status"] == "fail"}


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
