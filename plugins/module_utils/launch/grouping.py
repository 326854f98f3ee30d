"""Partition a node's GPUs into groups of equal size so collectives stay on the fastest links.

Pure standard-library Python (runs on the controller, in modules on the managed node, and in the CLI).

Objective, compared lexicographically over the whole partition (sum over every intra-group GPU pair):

1. link strength: ``xgmi_links`` when the topology knows link counts, else ``bandwidth_mbps.max`` of
   xGMI links, else 1 per xGMI pair (PCIe pairs count 0);
2. number of xGMI pairs (an xGMI link beats PCIe even when its bandwidth is not reported);
3. fewer hops; 4. lower KFD weight;
5. NUMA locality: fewer distinct NUMA nodes per group (unknown NUMA nodes are not counted);
6. GPU index: the lexicographically smallest partition (groups sorted, ordered by first GPU).

Every component is a sum, and lexicographic order is compatible with addition, so the objective is
encoded as one integer (mixed radix, each radix larger than the largest possible sum of the components
below it) and optimized by dynamic programming over bitmasks of unassigned GPUs: the group holding the
lowest unassigned GPU is chosen, the rest is solved recursively and memoized.  Every partition into
groups of size k is reached exactly once this way, so the result is the exact optimum (proved against
brute force in ``tests/unit/plugins/module_utils/launch/test_grouping.py``).  Used for up to ``EXACT_LIMIT`` GPUs.

Larger (partitioned, CPX/DPX) nodes are grouped hierarchically: partitions of one physical GPU stay
together, whole physical GPUs are grouped exactly over the same objective (so one hive stays together),
or, when the partition counts do not fit the group size, GPUs are chunked in (hive, physical GPU,
partition) order: a documented degraded result with a warning.
"""

from itertools import combinations

from ..core.errors import TopotuneError

EXACT_LIMIT = 16
_MISSING_HOPS = 3


class GroupingError(TopotuneError, ValueError):
    """The topology or the requested group size cannot be grouped; the message names the fix."""


def _link_metric(links):
    if any(link.get("xgmi_links") is not None for link in links):
        return "xgmi_links"
    for link in links:
        bandwidth = link.get("bandwidth_mbps") or {}
        if link.get("type") == "xgmi" and bandwidth.get("max"):
            return "bandwidth_mbps"
    return "link_type"


def _strength(link, metric):
    if link is None or link.get("type") != "xgmi":
        return 0
    if metric == "xgmi_links":
        count = link.get("xgmi_links")
        if count is None:
            return 1 if (link.get("hops") or 1) <= 1 else 0
        return int(count)
    if metric == "bandwidth_mbps":
        return int((link.get("bandwidth_mbps") or {}).get("max") or 0)
    return 1


class _Model:
    """Index-addressed view of the topology: per-pair component vectors and per-GPU attributes."""

    def __init__(self, topology):
        if not isinstance(topology, dict) or not isinstance(topology.get("gpus"), list):
            raise GroupingError(
                "topology is not a topotune topology model (dict with a 'gpus' list); "
                "pass the fact set by topotune.instinct.gpu_topology"
            )
        gpus = [g for g in topology["gpus"] if isinstance(g, dict) and isinstance(g.get("index"), int)]
        if not gpus:
            raise GroupingError("topology has no GPUs with an integer 'index': nothing to group")
        gpus.sort(key=lambda g: g["index"])
        self.gpus = gpus
        self.indices = [g["index"] for g in gpus]
        if len(set(self.indices)) != len(self.indices):
            raise GroupingError("topology lists a GPU index twice; re-gather the topology")
        position = {index: pos for pos, index in enumerate(self.indices)}
        links = [link for link in topology.get("links") or [] if isinstance(link, dict)]
        self.metric = _link_metric(links)
        n = len(gpus)
        by_pair = {}
        for link in links:
            a, b = position.get(link.get("a")), position.get(link.get("b"))
            if a is None or b is None or a == b:
                continue
            by_pair[(min(a, b), max(a, b))] = link
        self.links = by_pair
        # components per pair: strength, xgmi, hops, weight
        self.pair = [[None] * n for _unused in range(n)]
        totals = [0, 0, 0, 0]
        for a in range(n):
            for b in range(a + 1, n):
                link = by_pair.get((a, b))
                if link is None:
                    comp = (0, 0, _MISSING_HOPS, 0)
                else:
                    comp = (
                        _strength(link, self.metric),
                        1 if link.get("type") == "xgmi" else 0,
                        int(link.get("hops") if link.get("hops") is not None else _MISSING_HOPS),
                        int(link.get("weight") or 0),
                    )
                self.pair[a][b] = self.pair[b][a] = comp
                for i in range(4):
                    totals[i] += max(comp[i], 0)
        self.numa = [g.get("numa_node") if isinstance(g.get("numa_node"), int) else None for g in gpus]
        # Mixed radix, least significant first: each radix exceeds the largest possible difference of
        # everything below it, so comparing the integer compares the component vector lexicographically.
        r_weight = n + 1
        r_hops = r_weight * (totals[3] + 1)
        r_xgmi = r_hops * (totals[2] + 1)
        r_strength = r_xgmi * (totals[1] + 1)
        self.radix = (r_strength, r_xgmi, r_hops, r_weight)
        self.pair_value = [[0] * n for _unused in range(n)]
        for a in range(n):
            for b in range(n):
                if a != b:
                    strength, xgmi, hops, weight = self.pair[a][b]
                    self.pair_value[a][b] = (strength * r_strength + xgmi * r_xgmi
                                             - hops * r_hops - weight * r_weight)
        numa_ids = sorted({x for x in self.numa if x is not None})
        self.numa_bit = [0 if x is None else 1 << numa_ids.index(x) for x in self.numa]

    def components(self, positions):
        strength = xgmi = hops = weight = 0
        for i, a in enumerate(positions):
            row = self.pair[a]
            for b in positions[i + 1:]:
                comp = row[b]
                strength += comp[0]
                xgmi += comp[1]
                hops += comp[2]
                weight += comp[3]
        spread = len({self.numa[p] for p in positions if self.numa[p] is not None})
        return strength, xgmi, hops, weight, spread


def _exact(model, items, per_group):
    """Best partition of ``items`` (tuples of positions) into groups of ``per_group`` items.

    Returns (value, groups) with groups as sorted position tuples; exact by exhaustive DP.
    """
    count = len(items)
    pair_value = model.pair_value
    numa_bit = model.numa_bit
    # item-level values: intra-item pairs, item-to-item pairs, NUMA bit set
    self_value = [sum(pair_value[a][b] for i, a in enumerate(it) for b in it[i + 1:]) for it in items]
    cross = [[sum(pair_value[a][b] for a in items[i] for b in items[j]) if i != j else 0
              for j in range(count)] for i in range(count)]
    item_numa = [0] * count
    for i, it in enumerate(items):
        for p in it:
            item_numa[i] |= numa_bit[p]

    # Value of every candidate group, by bitmask, built incrementally along the combination tree, with
    # the group's sorted GPU positions (for the index tie-break).
    group_value = {}
    group_items = {}

    def grow(start, members, value, numa, mask, left):
        if left == 0:
            group_value[mask] = value - bin(numa).count("1")
            group_items[mask] = tuple(members)
            return
        for nxt in range(start, count - left + 1):
            row = cross[nxt]
            add = self_value[nxt]
            for m in members:
                add += row[m]
            members.append(nxt)
            grow(nxt + 1, members, value + add, numa | item_numa[nxt], mask | (1 << nxt), left - 1)
            members.pop()

    grow(0, [], 0, 0, 0, per_group)

    class _Members(dict):
        def __missing__(self, gmask):
            value = self[gmask] = tuple(sorted(p for i in group_items[gmask] for p in items[i]))
            return value

    group_members = _Members()
    # Upper bound for pruning: a group's value is the mean over its items of itself, so the best value of
    # any partition of S is at most sum(best_with[i] for i in S) / per_group.
    best_with = [None] * count
    for gmask, value in group_value.items():
        for i in group_items[gmask]:
            if best_with[i] is None or value > best_with[i]:
                best_with[i] = value
    bound_of = {gmask: sum(best_with[i] for i in its) for gmask, its in group_items.items()}

    singletons = all(len(it) == 1 for it in items)
    memo = {0: (0, ())}

    def solve(mask):
        hit = memo.get(mask)
        if hit is not None:
            return hit
        lowbit = mask & -mask
        rest = []
        bit = lowbit << 1
        while bit <= mask:
            if mask & bit:
                rest.append(bit)
            bit <<= 1
        if len(rest) + 1 == per_group:
            result = memo[mask] = (group_value[mask], (group_members[mask],))
            return result
        if len(rest) + 1 == 2 * per_group:
            # Last two groups: the complement is forced (the hot path, no recursion). combinations()
            # yields in lexicographic order, so for single GPUs the first optimum is the index-smallest.
            best_total = best_mask = None
            for combo in combinations(rest, per_group - 1):
                gmask = lowbit | sum(combo)
                total = group_value[gmask] + group_value[mask ^ gmask]
                if best_total is None or total > best_total:
                    best_total, best_mask = total, gmask
                elif total == best_total and not singletons and (
                    (group_members[gmask], group_members[mask ^ gmask])
                    < (group_members[best_mask], group_members[mask ^ best_mask])
                ):
                    best_mask = gmask
            result = memo[mask] = (best_total, (group_members[best_mask], group_members[mask ^ best_mask]))
            return result
        bound = sum(best_with[i] for i in range(count) if mask >> i & 1)
        candidates = []
        for combo in combinations(rest, per_group - 1):
            gmask = lowbit | sum(combo)
            candidates.append((per_group * group_value[gmask] + bound - bound_of[gmask], gmask))
        # Most promising first (stable: lexicographic order among equals) so the incumbent is strong early.
        candidates.sort(key=lambda c: -c[0])
        best_total = best_key = None
        for optimistic, gmask in candidates:
            if best_total is not None:
                if optimistic < per_group * best_total:
                    break
                if optimistic == per_group * best_total and singletons and group_members[gmask] > best_key[0]:
                    continue
            sub = memo.get(mask ^ gmask) or solve(mask ^ gmask)
            sub_total, sub_groups = sub
            total = group_value[gmask] + sub_total
            if best_total is None or total > best_total:
                best_total, best_key = total, (group_members[gmask],) + sub_groups
            elif total == best_total:
                key = (group_members[gmask],) + sub_groups
                if key < best_key:
                    best_key = key
        result = memo[mask] = (best_total, best_key)
        return result

    return solve((1 << count) - 1)


def _chunked(model, size):
    """Degraded grouping: consecutive chunks in (hive, physical GPU, partition, index) order."""
    def key(pos):
        gpu = model.gpus[pos]
        part = gpu.get("partition") or {}
        physical = gpu.get("physical_index")
        return (str(gpu.get("hive_id") or ""), physical if isinstance(physical, int) else gpu["index"],
                part.get("index") or 0, gpu["index"])

    order = sorted(range(len(model.gpus)), key=key)
    return tuple(tuple(sorted(order[i:i + size])) for i in range(0, len(order), size))


def _hierarchical(model, size):
    units = {}
    for pos, gpu in enumerate(model.gpus):
        physical = gpu.get("physical_index")
        key = ("p", physical) if isinstance(physical, int) else ("g", gpu["index"])
        units.setdefault(key, []).append(pos)
    unit_list = sorted((tuple(sorted(u)) for u in units.values()), key=lambda u: u[0])
    sizes = {len(u) for u in unit_list}
    if len(sizes) == 1:
        per_unit = sizes.pop()
        if per_unit % size == 0 and per_unit <= EXACT_LIMIT:
            groups = []
            for unit in unit_list:
                groups.extend(_exact(model, [(p,) for p in unit], size)[1])
            return tuple(sorted(groups)), "hierarchical", []
        if size % per_unit == 0 and len(unit_list) <= EXACT_LIMIT:
            return _exact(model, unit_list, size // per_unit)[1], "hierarchical", []
    warning = (
        "group size %d does not align with the partitions of the %d physical GPUs (%s logical GPUs each) "
        "or the node has more than %d of them: GPUs were grouped in hive/physical-GPU order, which keeps "
        "partitions together but is not proven optimal" % (
            size, len(unit_list), "/".join(str(s) for s in sorted({len(u) for u in unit_list})), EXACT_LIMIT)
    )
    return _chunked(model, size), "chunked", [warning]


def _explain(model, positions, method):
    indices = [model.indices[p] for p in positions]
    n_pairs = len(positions) * (len(positions) - 1) // 2
    parts = []
    if n_pairs:
        direct = [model.links.get((a, b)) for i, a in enumerate(positions) for b in positions[i + 1:]]
        xgmi_direct = [link for link in direct if link and link.get("type") == "xgmi" and (link.get("hops") or 1) <= 1]
        counts = sorted({link.get("xgmi_links") for link in xgmi_direct if link.get("xgmi_links")})
        text = "%d of %d GPU pairs directly xGMI-linked" % (len(xgmi_direct), n_pairs)
        if counts:
            text += " (%s links per pair)" % "/".join(str(c) for c in counts)
        hops = [model.pair[a][b][2] for i, a in enumerate(positions) for b in positions[i + 1:]]
        text += ", max %d hop%s" % (max(hops), "" if max(hops) == 1 else "s")
        parts.append(text)
        physical = {model.gpus[p].get("physical_index") for p in positions}
        if len(physical) == 1 and any(model.gpus[p].get("partition") for p in positions):
            parts.append("partitions of one physical GPU")
        hives = {model.gpus[p].get("hive_id") for p in positions}
        if None not in hives:
            parts.append("one xGMI hive" if len(hives) == 1 else "%d xGMI hives" % len(hives))
    numa = sorted({model.numa[p] for p in positions if model.numa[p] is not None})
    unknown = sum(1 for p in positions if model.numa[p] is None)
    if numa:
        parts.append("NUMA node%s %s" % ("" if len(numa) == 1 else "s", ",".join(str(x) for x in numa)))
    if unknown:
        parts.append("%d GPU(s) with unknown NUMA node" % unknown)
    why = {
        "exact": "best link score of all partitions (exact search)",
        "trivial": "only one partition exists",
        "hierarchical": "best link score among partitions keeping physical GPUs whole (exact per level)",
        "chunked": "hive/physical-GPU order (degraded, see warnings)",
    }[method]
    return "GPUs %s: %s; %s" % (",".join(str(i) for i in indices), "; ".join(parts) or "single GPU", why)


def group_gpus(topology, size):
    """Partition the GPUs of ``topology`` into groups of ``size``.

    Returns ``{"size", "groups", "score", "explanations", "exact", "method", "warnings"}`` where groups
    hold GPU indices as in the topology model. Raises GroupingError when ``size`` does not divide the GPU
    count or the topology is unusable.
    """
    model = _Model(topology)
    n = len(model.gpus)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GroupingError("group size must be a positive integer, got %r" % (size,))
    if n % size:
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        raise GroupingError(
            "group size %d does not divide the %d GPUs of this node; use one of %s"
            % (size, n, ", ".join(str(d) for d in divisors))
        )
    warnings = []
    if size in (1, n):
        groups = tuple(tuple(range(i, i + size)) for i in range(0, n, size))
        method = "trivial"
    elif n <= EXACT_LIMIT:
        groups = _exact(model, [(p,) for p in range(n)], size)[1]
        method = "exact"
    else:
        groups, method, warnings = _hierarchical(model, size)
    totals = [0, 0, 0, 0, 0]
    for group in groups:
        for i, value in enumerate(model.components(group)):
            totals[i] += value
    return {
        "size": size,
        "groups": [[model.indices[p] for p in group] for group in groups],
        "score": {
            "metric": model.metric,
            "link_strength": totals[0],
            "xgmi_pairs": totals[1],
            "hops": totals[2],
            "weight": totals[3],
            "numa_spread": totals[4],
        },
        "explanations": [_explain(model, group, method) for group in groups],
        "exact": method in ("exact", "trivial"),
        "method": method,
        "warnings": warnings,
    }


def score_partition(topology, groups):
    """Objective components of an arbitrary partition (GPU indices), for tests and reports."""
    model = _Model(topology)
    position = {index: pos for pos, index in enumerate(model.indices)}
    totals = [0, 0, 0, 0, 0]
    for group in groups:
        for i, value in enumerate(model.components(tuple(sorted(position[g] for g in group)))):
            totals[i] += value
    return tuple(totals)
