"""Scale-out advice: the source article's decision flow and cost/benefit table, fed by measured figures.

The flow and the table are data (``knowledge/advice.yml``, passed in as ``config``); these functions are pure.

Public API (standard library only, Python 3.8+):

``AdviceError(TopotuneError)``
    Unusable config or inputs (one line naming the key and the fix).
``article_comm_ratio(size_b, model=None)``
    The article's MI250 estimate ``min(0.15 * (size_B / 13) ** 0.7, 0.5)`` (parameters from
    ``config["comm_ratio_model"]`` when given). An estimate for the authors' cluster, not a measurement.
``comm_time_ms(model_size_b, busbw_gbs, ranks=None, bytes_per_param=2)``
    Time of one all_reduce of the gradients: ``S = model_size_b * 1e9 * bytes_per_param`` bytes;
    rccl-tests defines ``busbw = algbw * 2(n-1)/n`` and ``algbw = S / t``, so ``t = S * 2(n-1)/n / busbw``
    (``2(n-1)/n`` is taken as 2 when ``ranks`` is unknown: an upper bound).
``comm_share_from_step(model_size_b, step_time_ms, busbw_gbs, ranks=None, bytes_per_param=2)``
    ``comm_time_ms / step_time_ms`` capped at 1: the share when communication does not overlap compute
    (frameworks overlap gradient buckets with the backward pass, so a measured share is better).
``fabric_for(config, generation=None, topology=None, generations=None)``
    Where a node's collective (GPU-GPU) traffic flows: the ``fabrics`` entry of ``config`` for the GPU
    generation (given, or the topology's ``identity``; ``generations``, the list of knowledge/gpu_generations.yml,
    identifies a model made without one and resolves a given alias to the generation's name, the key of
    ``fabrics``), else what the topology's links show (``xgmi_full_mesh`` when every pair of GPU devices has a
    direct xGMI link; also for an ``unknown`` entry). ``None`` when nothing is known.
``cross_numa_share(topology, gpus=None, fabric=None)``
    Fraction of GPU pairs (of ``gpus``, default all) whose collective traffic crosses NUMA nodes through the
    host: the GPUs sit on different NUMA nodes AND the pair has no xGMI path (a PCIe link, or no link
    known on a fabric that is not xGMI). Pairs joined by xGMI never count: on MI300X-class parts (full
    mesh) the share is 0 whatever the NUMA layout. ``None`` when fewer than 2 GPUs have a NUMA node.
``xgmi_summary(topology, gpus=None)``
    Pairs by link type and hops, the worst hop count (the flow's "check xGMI hops" step).
``advise(config, ...)``
    Walks the flow; returns ``outcome``, ``recommendation``, ``path`` (each decision with its value,
    threshold and reason), ``inputs`` (with where each came from, and the ``fabric``), ``options`` (the
    table rows ranked, recommended first; a row needing re-cabling is ``applicable: false`` on a fixed
    fabric such as an OAM baseboard), ``notes`` and ``warnings`` (a collective on a subset of a full-mesh
    node, e.g. 2 or 4 of 8 MI300X, is warned about, never recommended).
"""

import re

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import by_name, model_identity

_ARTICLE_MODEL = {"base": 0.15, "reference_size_b": 13, "exponent": 0.7, "cap": 0.5}


class AdviceError(TopotuneError):
    """Advice config or inputs that cannot be used."""


def _positive(name, value, allow_none=True):
    if value is None:
        if allow_none:
            return None
        raise AdviceError("%s is required" % name)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AdviceError("%s=%r is not a number" % (name, value)) from None
    if number <= 0:
        raise AdviceError("%s=%r must be greater than 0" % (name, value))
    return number


def _share(name, value):
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AdviceError("%s=%r is not a number (give a fraction 0..1, e.g. 0.35)" % (name, value)) from None
    if not 0 <= number <= 1:
        raise AdviceError("%s=%r is outside 0..1 (give a fraction, e.g. 0.35 for 35%%)" % (name, value))
    return number


def article_comm_ratio(size_b, model=None):
    """The article's communication-share estimate for a model of ``size_b`` billion parameters (MI250)."""
    params = dict(_ARTICLE_MODEL)
    params.update({k: v for k, v in (model or {}).items() if k in _ARTICLE_MODEL})
    size = _positive("model_size_b", size_b, allow_none=False)
    return min(params["base"] * (size / params["reference_size_b"]) ** params["exponent"], params["cap"])


def comm_time_ms(model_size_b, busbw_gbs, ranks=None, bytes_per_param=2):
    size = _positive("model_size_b", model_size_b, allow_none=False) * 1e9 * _positive(
        "bytes_per_param", bytes_per_param, allow_none=False)
    busbw = _positive("busbw_gbs", busbw_gbs, allow_none=False)
    factor = 2.0 * (ranks - 1) / ranks if isinstance(ranks, int) and ranks > 1 else 2.0
    return size * factor / (busbw * 1e9) * 1000.0


def comm_share_from_step(model_size_b, step_time_ms, busbw_gbs, ranks=None, bytes_per_param=2):
    step = _positive("step_time_ms", step_time_ms, allow_none=False)
    return min(comm_time_ms(model_size_b, busbw_gbs, ranks, bytes_per_param) / step, 1.0)


def _selected(topology, gpus):
    known = [g["index"] for g in (topology or {}).get("gpus") or []]
    if gpus is None:
        return known
    missing = [g for g in gpus if g not in known]
    if missing:
        raise AdviceError("GPUs %s are not in the topology (it has %s)" % (missing, known))
    return list(gpus)


def _links_by_pair(topology, selected):
    links = {}
    for link in (topology or {}).get("links") or []:
        a, b = link.get("a"), link.get("b")
        if a in selected and b in selected and a != b:
            links[(min(a, b), max(a, b))] = link
    return links


def _structural_fabric(topology):
    """What the links say: xgmi_full_mesh / xgmi / mixed (some PCIe pairs) / None (no links)."""
    gpus = (topology or {}).get("gpus") or []
    devices = {}
    for gpu in gpus:
        physical = gpu.get("physical_index")
        devices.setdefault(gpu["index"] if physical is None else physical, []).append(gpu["index"])
    owner = {index: device for device, members in devices.items() for index in members}
    pairs = {}
    for link in (topology or {}).get("links") or []:
        a, b = owner.get(link.get("a")), owner.get(link.get("b"))
        if a is None or b is None or a == b:
            continue
        key = (min(a, b), max(a, b))
        best = pairs.get(key)
        kind = (link.get("type"), link.get("hops"))
        if best is None or (kind[0] == "xgmi" and (best[0] != "xgmi" or (kind[1] or 9) < (best[1] or 9))):
            pairs[key] = kind
    count = len(devices)
    if count < 2 or not pairs:
        return None
    every = count * (count - 1) // 2
    if len(pairs) == every and all(kind == ("xgmi", 1) for kind in pairs.values()):
        return "xgmi_full_mesh"
    if len(pairs) == every and all(kind[0] == "xgmi" for kind in pairs.values()):
        return "xgmi"
    return "mixed"


def fabric_for(config, generation=None, topology=None, generations=None):
    """The fabric entry (where collective traffic flows) for a generation or a topology; see the module docstring."""
    fabrics = [f for f in (config or {}).get("fabrics") or [] if isinstance(f, dict)]
    name, how = (str(generation), "given") if generation else (None, None)
    if name is None and topology:
        name = model_identity(topology, generations)["generation"]
        how = "topology identity" if name else None
    if name:
        # fabrics list generation names: an alias (MI250, MI350X) is looked up by its generation's name
        known = by_name(generations, name) if generations else None
        wanted = {name.upper(), str((known or {}).get("name") or "").upper()} - {""}
        for entry in fabrics:
            if entry.get("unknown"):
                continue  # no source states these generations' fabric: the topology's links below
            if wanted & {str(g).upper() for g in entry.get("generations") or []}:
                found = dict(entry)
                found.update(generation=name, found_by=how)
                return found
    structure = _structural_fabric(topology)
    if structure is None:
        return None
    return {"id": "topology", "generation": name, "found_by": "topology links", "intra_node": structure,
            "form_factor": None, "recable": None, "collective_gpu_counts": None,
            "source": "the topology model's links (no fabric entry for %s)" % (name or "an unknown generation")}


def cross_numa_share(topology, gpus=None, fabric=None):
    """Fraction of GPU pairs whose collective traffic crosses NUMA nodes over the host; see the module docstring."""
    selected = set(_selected(topology, gpus))
    nodes = {g["index"]: g["numa_node"] for g in (topology or {}).get("gpus") or []
             if g["index"] in selected and g.get("numa_node") is not None and g["numa_node"] >= 0}
    indices = sorted(nodes)
    pairs = len(indices) * (len(indices) - 1) // 2
    if not pairs:
        return None
    links = _links_by_pair(topology, selected)
    xgmi_fabric = (fabric or {}).get("intra_node") in ("xgmi_full_mesh", "xgmi")
    cross = 0
    for i, a in enumerate(indices):
        for b in indices[i + 1:]:
            if nodes[a] == nodes[b]:
                continue
            link = links.get((a, b))
            via_xgmi = link.get("type") == "xgmi" if link else xgmi_fabric
            cross += 0 if via_xgmi else 1
    return cross / float(pairs)


def xgmi_summary(topology, gpus=None):
    selected = set(_selected(topology, gpus))
    kinds, worst = {}, None
    for link in (topology or {}).get("links") or []:
        if link.get("a") in selected and link.get("b") in selected:
            key = "%s/%s" % (link.get("type"), link.get("hops"))
            kinds[key] = kinds.get(key, 0) + 1
            if link.get("type") == "xgmi" and isinstance(link.get("hops"), int):
                worst = link["hops"] if worst is None else max(worst, link["hops"])
    multi_hop = sum(n for k, n in kinds.items() if k.startswith("xgmi/") and k != "xgmi/1")
    pcie = sum(n for k, n in kinds.items() if k.startswith("pcie/"))
    return {"pairs": kinds, "max_xgmi_hops": worst, "multi_hop_pairs": multi_hop, "pcie_pairs": pcie}


def _threshold(config, name):
    item = (config.get("thresholds") or {}).get(name)
    value = item.get("value") if isinstance(item, dict) else item
    if value is None:
        raise AdviceError("advice config has no thresholds.%s.value" % name)
    return float(value)


def _not_applicable(option, fabric):
    """Why a cost/benefit row does not apply to this node's fabric (None when it may)."""
    if option.get("requires") != "recabling" or not fabric:
        return None
    label = fabric.get("generation") or "this node"
    if fabric.get("recable") is False:
        return ("%s GPUs sit on a fixed %s fabric (%s): there is no cabling to rebuild"
                % (label, (fabric.get("form_factor") or "").upper() or "board", fabric.get("intra_node")))
    if fabric.get("intra_node") == "xgmi_full_mesh":
        return "every GPU pair of %s already has a direct xGMI link: a rebuild cannot shorten any path" % label
    return None


def _rank_options(config, outcome, fabric=None):
    rank_by = outcome.get("rank_by", "cost_usd")
    recommended = list(outcome.get("options") or [])
    rows = []
    for option in config.get("options") or []:
        row = dict(option)
        cost_k = (row.get("cost_usd") or 0) / 1000.0
        row["throughput_gain_per_kusd"] = round(row.get("throughput_gain", 0) / cost_k, 4) if cost_k else None
        row["latency_cut_per_kusd"] = round(row.get("latency_cut", 0) / cost_k, 4) if cost_k else None
        why = _not_applicable(row, fabric)
        row["applicable"] = why is None
        if why:
            row["not_applicable"] = why
        row["recommended"] = row.get("id") in recommended and why is None
        rows.append(row)
    if rank_by not in ("cost_usd", "deploy_days", "throughput_gain_per_kusd", "latency_cut_per_kusd",
                       "throughput_gain", "latency_cut"):
        raise AdviceError("outcome rank_by %r is unknown" % rank_by)
    ascending = rank_by in ("cost_usd", "deploy_days")

    def key(row):
        value = row.get(rank_by)
        value = float("inf") if value is None else float(value)
        return (not row["recommended"], not row["applicable"], value if ascending else -value, row.get("id") or "")

    rows.sort(key=key)
    for position, row in enumerate(rows, 1):
        row["rank"] = position
    return rows, rank_by


def _fabric_summary(fabric):
    if not fabric:
        return None
    keys = ("id", "generation", "found_by", "form_factor", "intra_node", "recable", "collective_gpu_counts", "source")
    return {k: fabric.get(k) for k in keys}


def _fabric_reason(fabric):
    label = fabric.get("generation") or "this node"
    flows = {"xgmi_full_mesh": "every GPU pair has a direct xGMI link (full mesh): intra-node collectives run on "
                               "xGMI, never across NUMA nodes over PCIe",
             "xgmi": "every GPU pair is joined by xGMI (1 or 2 hops): intra-node collectives stay on xGMI",
             "xgmi_hive_then_pcie": "xGMI inside each bridged hive, PCIe through the host between hives",
             "mixed": "some GPU pairs have no xGMI path: their traffic goes over PCIe through the host"}
    form = " on an %s baseboard" % fabric["form_factor"].upper() if fabric.get("form_factor") == "oam" else ""
    return "%s%s: %s" % (label, form, flows.get(fabric.get("intra_node"), "fabric %s" % fabric.get("intra_node")))


def _collective_size(topology, gpus, collective_gpus):
    """GPU devices taking part in one collective on a node: given, or the physical devices of ``gpus``."""
    if collective_gpus is not None:
        try:
            return int(collective_gpus), "the benchmark run"
        except (TypeError, ValueError):
            raise AdviceError("collective_gpus=%r is not a whole number" % (collective_gpus,)) from None
    if gpus is None:
        return None, None
    chosen = set(_selected(topology, gpus))
    devices = {g["index"] if g.get("physical_index") is None else g["physical_index"]
               for g in (topology or {}).get("gpus") or [] if g["index"] in chosen}
    return len(devices), "the allocation (gpus)"


def _subset_warning(fabric, count, what):
    counts = (fabric or {}).get("collective_gpu_counts") or []
    if count is None or not counts or count in counts or not 1 < count < max(counts):
        return None
    cited = re.search(r"https?://\S+?(?=[),;]|\s|$)", fabric.get("collective_source") or fabric.get("source") or "")
    return ("%s: a collective on %d of the %d GPUs of a full-mesh %s node uses only %d of each GPU's %d xGMI links: "
            "AMD advises running collectives on %s GPUs there (%s)" % (
                what, count, max(counts), fabric.get("generation") or "", count - 1, max(counts) - 1,
                " or ".join(str(c) for c in counts), cited.group(0) if cited else "see the fabric's source"))


def _resolve_comm_share(config, inputs, warnings, comm_share, model_size_b, step_time_ms, busbw_gbs, ranks,
                        bytes_per_param):
    if comm_share is not None:
        inputs["comm_share_from"] = "measured (given)"
        return comm_share
    if model_size_b is not None and step_time_ms is not None and busbw_gbs is not None:
        inputs["comm_time_ms"] = round(comm_time_ms(model_size_b, busbw_gbs, ranks, bytes_per_param), 3)
        inputs["comm_share_from"] = ("computed: %s B params x %s bytes all-reduced at %.2f GB/s busbw over a %s ms "
                                     "step, no overlap" % (model_size_b, bytes_per_param, busbw_gbs, step_time_ms))
        return comm_share_from_step(model_size_b, step_time_ms, busbw_gbs, ranks, bytes_per_param)
    if model_size_b is not None:
        inputs["comm_share_from"] = "estimated with the source article's MI250 comm_ratio model (not a measurement)"
        warnings.append("comm share is the article's MI250 estimate for a %sB model; give step_time_ms (and a "
                        "measured busbw) or a measured comm_share for your cluster" % model_size_b)
        return article_comm_ratio(model_size_b, config.get("comm_ratio_model"))
    inputs["comm_share_from"] = None
    return None


def advise(config, comm_share=None, model_size_b=None, step_time_ms=None, busbw_gbs=None, ranks=None,
           cross_numa=None, topology=None, gpus=None, bytes_per_param=2, generation=None, generations=None,
           collective_gpus=None):
    """Walk the decision flow of ``config`` (knowledge/advice.yml) over the given figures."""
    if not isinstance(config, dict) or not isinstance(config.get("flow"), dict):
        raise AdviceError("advice config has no `flow` mapping (pass lookup('topotune.instinct.knowledge', 'advice'))")
    model_size_b = _positive("model_size_b", model_size_b)
    step_time_ms = _positive("step_time_ms", step_time_ms)
    busbw_gbs = _positive("busbw_gbs", busbw_gbs)
    warnings, notes = [], []
    inputs = {"model_size_b": model_size_b, "step_time_ms": step_time_ms, "busbw_gbs": busbw_gbs, "ranks": ranks}
    share = _resolve_comm_share(config, inputs, warnings, _share("comm_share", comm_share), model_size_b,
                                step_time_ms, busbw_gbs, ranks, bytes_per_param)
    inputs["comm_share"] = None if share is None else round(share, 4)
    fabric = fabric_for(config, generation, topology, generations)
    inputs["fabric"] = _fabric_summary(fabric)
    cross = _share("cross_numa_share", cross_numa)
    if cross is not None:
        inputs["cross_numa_share_from"] = "measured (given)"
        if fabric and fabric.get("intra_node") in ("xgmi_full_mesh", "xgmi"):
            notes.append("%s; a measured cross-NUMA share there is host traffic (data loading, host copies, NIC "
                         "placement), not GPU-GPU collective traffic" % _fabric_reason(fabric))
    elif topology:
        cross = cross_numa_share(topology, gpus, fabric)
        inputs["cross_numa_share_from"] = (
            "topology: fraction of GPU pairs on different NUMA nodes with no xGMI path (collective traffic "
            "through the host)" if cross is not None else None)
    else:
        inputs["cross_numa_share_from"] = None
    inputs["cross_numa_share"] = None if cross is None else round(cross, 4)
    for count, what in (_collective_size(None, None, collective_gpus), _collective_size(topology, gpus, None)):
        message = _subset_warning(fabric, count, what)
        if message and message not in warnings:
            warnings.append(message)
    metrics = {"comm_share": share, "cross_numa_share": cross}

    flow = config["flow"]
    nodes, outcomes = flow.get("nodes") or {}, flow.get("outcomes") or {}
    current, path, seen = flow.get("start"), [], set()
    while current not in outcomes:
        if current in seen or current not in nodes:
            raise AdviceError("advice flow node %r is %s" % (current, "a loop" if current in seen else "undefined"))
        seen.add(current)
        node = nodes[current]
        if "step" in node:
            path.append(_step(node, current, topology, gpus, fabric))
            current = node["next"]
            continue
        value = metrics.get(node["metric"])
        threshold = _threshold(config, node["threshold"])
        if value is None:
            path.append({"node": current, "metric": node["metric"], "value": None, "threshold": threshold,
                         "reason": "%s unknown" % node["metric"]})
            return _result(config, "undetermined", None, path, inputs, notes, warnings,
                           [node["above"], node["otherwise"]], outcomes, fabric)
        above = value > threshold
        path.append({"node": current, "metric": node["metric"], "value": round(value, 4), "threshold": threshold,
                     "above": above, "reason": "%s %.1f%% %s %.0f%%" % (
                         node["metric"], value * 100, ">" if above else "<=", threshold * 100)})
        current = node["above"] if above else node["otherwise"]
    limit = (config.get("thresholds") or {}).get("model_parallel_above_b")
    limit = limit.get("value") if isinstance(limit, dict) else limit
    if model_size_b is not None and limit is not None and model_size_b > float(limit):
        notes.append("model above %sB parameters: the article pairs topology tuning with model parallelism "
                     "(pipeline + tensor) rather than more data-parallel GPUs" % limit)
    return _result(config, current, outcomes[current], path, inputs, notes, warnings, None, outcomes, fabric)


def _step(node, name, topology, gpus, fabric):
    entry = {"node": name, "step": node["step"]}
    if node["step"] == "check_xgmi_hops":
        entry["xgmi"] = xgmi_summary(topology, gpus) if topology else None
        entry["fabric"] = _fabric_summary(fabric)
        if fabric:
            entry["reason"] = _fabric_reason(fabric)
        elif not topology:
            entry["reason"] = "no topology given: run playbooks/topology.yml (or `topotune topology`) to check hops"
    return entry


def _result(config, name, outcome, path, inputs, notes, warnings, candidates, outcomes, fabric=None):
    if outcome is None:
        # a figure is missing: list what each branch would recommend, so the user sees what decides it
        ids = []
        for candidate in candidates:
            for option in _first_outcome_options(config, candidate, outcomes):
                if option not in ids:
                    ids.append(option)
        branches = "; ".join("%s -> %s" % (label, _recommendation(outcomes.get(c) or {}, config, fabric) or c)
                             for label, c in zip(("above", "otherwise"), candidates))
        recommendation = "Undetermined: %s (threshold %.0f%%); give it to decide. %s" % (
            path[-1]["reason"], path[-1]["threshold"] * 100, branches)
        outcome = {"recommendation": recommendation, "options": ids, "rank_by": "cost_usd"}
    else:
        outcome = dict(outcome, recommendation=_recommendation(outcome, config, fabric))
    options, rank_by = _rank_options(config, outcome, fabric)
    return {"outcome": name, "recommendation": outcome.get("recommendation"), "path": path, "inputs": inputs,
            "options": options, "rank_by": rank_by, "notes": notes, "warnings": warnings,
            "source": (config.get("flow") or {}).get("source")}


def _recommendation(outcome, config, fabric):
    """The outcome's text; its fixed-fabric wording when one of its options cannot apply to this node."""
    fixed = outcome.get("recommendation_fixed_fabric")
    if fixed and fabric:
        rows = {o.get("id"): o for o in config.get("options") or [] if isinstance(o, dict)}
        if any(_not_applicable(rows.get(i) or {}, fabric) for i in outcome.get("options") or []):
            return fixed
    return outcome.get("recommendation")


def _first_outcome_options(config, node_name, outcomes, depth=0):
    """Options reachable from ``node_name`` (all branches), for the undetermined case."""
    if node_name in outcomes:
        return list(outcomes[node_name].get("options") or [])
    node = (config["flow"].get("nodes") or {}).get(node_name) or {}
    if depth > 20:
        return []
    found = []
    for key in ("next", "above", "otherwise"):
        if key in node:
            found.extend(_first_outcome_options(config, node[key], outcomes, depth + 1))
    return found
