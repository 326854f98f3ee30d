# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster report's data: the per-node JSON the playbooks keep on the controller, loaded, counted and laid out.

Controller-only and standard library only; no HTML here. ``report_render`` turns ``report_view()`` into the page
with the jinja2 templates in ``templates/`` (autoescaped: every value below is plain text or a number).

``SECTIONS``
    The per-node sections and their sub-directories of the report directory:
    ``topology/<host>.json`` (the topology model), ``launch/<host>.json`` (the launch plan the launch_templates
    role applied: groups, bindings, gres summary), ``checks/<host>.json`` (platform checks),
    ``drift/<host>.json`` (drift of managed settings), ``benchmark/<host>.json`` (rccl-tests run, comparison,
    advice), ``acceptance/<host>.json`` (``playbooks/acceptance.yml``: each criterion's verdict, figure, margins and
    source, and the tool runs). The run status of each host comes from the per-job bring-up summaries ``run/site/<job id>.json``
    (their union: ``load_run_summaries``), else from ``run/summary.json`` (failed / unreachable hosts).
``load_report_dir(path)``
    ``{"report_dir", "hosts": {host: {section: {"state": "ok"|"missing"|"unreadable", "data", "reason",
    "file"}}}, "run": {...}, "as_of"}``. Every file is optional; a missing, unreadable, malformed or
    wrongly shaped file becomes a ``missing``/``unreadable`` section with the reason, never an exception.
``summarize(data)``
    Cluster counts: ``nodes``, ``gpus``, ``checks_failed``, ``checks_warned``, ``drifted``,
    ``failed_hosts``, ``unreachable_hosts``, ``sections_missing``, ``sections_unreadable``.
``topology_diagram(topology)``
    ``(diagram, info)``: the geometry of the node diagram (NUMA nodes as boxes, GPUs -- or, on partitioned
    nodes, physical devices with their partition count -- inside their NUMA node, direct xGMI links as curves
    whose width follows the link count or bandwidth); ``info`` counts what was drawn and what was only summarised.
``link_summary(topology)``
    GPU pairs per link class, with whether the diagram draws them.
``collective_view(data)``
    The multi-node collective of ``collective/acceptance.json`` (``playbooks/acceptance.yml``'s second play): its
    status and criterion, the full run, the excluded hosts with their evidence and every isolation run; None when
    the file is absent, the reason when it cannot be read.
``consistency_view(data)``
    The cluster-consistency table: per firmware/software item (VBIOS, ``fw_version`` files, partition modes, ROCm,
    kernel, BIOS, each RDMA rail) the majority value and the odd nodes out, the nodes ``rail_consistency`` does
    not pass, from each node's ``checks/<host>.json`` ``inventory``
    (``plugin_utils/fleet/consistency.py``); None when no node has one.
``report_view(data, title=None)``
    Everything the page shows, as plain data for the template. Deterministic (no wall-clock time).
"""

from __future__ import annotations

import json
import math
import os
import re
import time

from ..fleet.consistency import compare as compare_nodes

SECTIONS = ("topology", "launch", "checks", "drift", "benchmark", "acceptance")
MAX_FILE_BYTES = 64 * 1024 * 1024
_HOST_FILE = re.compile(r"^(.+)\.json$")
_STATUS_ORDER = {"fail": 0, "warn": 1, "unknown": 2, "pass": 3}
_XGMI_COLOUR = "#d9480f"
_LONG_TABLE = 16


def text(value):
    """The text shown for any value: None as nothing, containers as compact JSON, the rest as str()."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


# ------------------------------------------------------------------------------------------------ loading
def _read_json(path):
    """(data, None) or (None, reason) for one JSON file."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            return None, "%s is %d bytes, larger than the %d byte limit" % (path, size, MAX_FILE_BYTES)
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        return None, "%s cannot be read: %s" % (path, err.strerror or err)
    try:
        return json.loads(raw.decode("utf-8", "replace")), None
    except ValueError as err:
        return None, "%s is not valid JSON: %s" % (path, err)


def _shape_error(section, data):
    """Why ``data`` cannot be the ``section`` JSON, or None."""
    if not isinstance(data, dict):
        return "expected a JSON object, found %s" % type(data).__name__
    if section == "topology":
        if not isinstance(data.get("gpus"), list):
            return "no 'gpus' list: not a topotune topology model (playbooks/topology.yml writes it)"
    elif section == "launch":
        if not isinstance(data.get("bindings"), list) or not isinstance(data.get("sizes"), list):
            return "no 'bindings'/'sizes' lists: not a launch_templates plan (playbooks/site.yml records it)"
    elif section == "checks":
        if not isinstance(data.get("results"), list):
            return "no 'results' list: not platform_checks output"
    elif section == "drift":
        if not isinstance(data.get("drifted"), list):
            return "no 'drifted' list: not a drift record"
    elif section == "acceptance":
        if not isinstance(data.get("verdicts"), list) or not isinstance(data.get("runs"), list):
            return "no 'verdicts'/'runs' lists: not an acceptance report (playbooks/acceptance.yml writes it)"
    return None


def load_report_dir(path):
    """Read every per-node JSON under ``path``; problems are recorded per section, never raised."""
    data = {"report_dir": path, "hosts": {}, "run": {"state": "missing", "data": None, "reason": None},
            "as_of": None}
    newest = 0.0
    found = {}
    for section in SECTIONS:
        folder = os.path.join(path, section)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for name in names:
            match = _HOST_FILE.match(name)
            if match and os.path.isfile(os.path.join(folder, name)):
                found.setdefault(match.group(1), {})[section] = os.path.join(folder, name)
    collective = os.path.join(path, "collective", "acceptance.json")
    data["collective"] = {"state": "missing", "data": None, "reason": None, "file": collective}
    if os.path.isfile(collective):
        value, reason = _read_json(collective)
        if reason is None and not (isinstance(value, dict) and isinstance(value.get("excluded"), list)):
            reason = "%s: no 'excluded' list: not a collective record (playbooks/acceptance.yml writes it)" % collective
        data["collective"].update(state="unreadable" if reason else "ok", data=None if reason else value, reason=reason)
    data["run"], run_newest = load_run_summaries(path)
    newest = max(newest, run_newest)
    run = data["run"]["data"] or {}
    for key in ("completed_hosts", "failed_hosts", "unreachable_hosts"):
        for host in _host_list(run, key):
            found.setdefault(host, {})
    for host in sorted(found):
        sections = {}
        for section in SECTIONS:
            file_path = found[host].get(section)
            if file_path is None:
                sections[section] = {"state": "missing", "data": None, "reason": None,
                                     "file": os.path.join(path, section, host + ".json")}
                continue
            try:
                newest = max(newest, os.path.getmtime(file_path))
            except OSError:
                pass
            value, reason = _read_json(file_path)
            if reason is None:
                shape = _shape_error(section, value)
                if shape:
                    reason = "%s: %s" % (file_path, shape)
            sections[section] = {"state": "unreadable" if reason else "ok", "data": None if reason else value,
                                 "reason": reason, "file": file_path}
        data["hosts"][host] = sections
    if newest:
        data["as_of"] = newest
    return data


# ------------------------------------------------------------------------------------------------ run summaries
def _job_key(job):
    return (str(job.get("finished") or ""), str(job.get("job_id") or ""))


def union_of_jobs(jobs):
    """One bring-up summary from the summaries of several jobs (``run/site/<job id>.json``): each host's status is
    the one of the latest job (by ``finished``, then job id) that ran it, so the slices of a sliced job add up and a
    later run on some nodes updates only those. Check-mode jobs are left out (they applied nothing)."""
    status, failures, order = {}, {}, []
    for job in sorted((j for j in jobs if not j.get("check_mode")), key=_job_key):
        order.append(job)
        unreachable = set(_host_list(job, "unreachable_hosts"))
        failed = set(_host_list(job, "failed_hosts"))
        ran = _host_list(job, "hosts") + _host_list(job, "completed_hosts") + sorted(failed | unreachable)
        job_failures = job.get("failures") if isinstance(job.get("failures"), dict) else {}
        for host in ran:
            status[host] = "unreachable" if host in unreachable else "failed" if host in failed else "ok"
            if host in job_failures:
                failures[host] = job_failures[host]
            else:
                failures.pop(host, None)
    return {
        "playbook": "site", "hosts": sorted(status),
        "completed_hosts": sorted(h for h, s in status.items() if s == "ok"),
        "failed_hosts": sorted(h for h, s in status.items() if s == "failed"),
        "unreachable_hosts": sorted(h for h, s in status.items() if s == "unreachable"),
        "failures": {h: failures[h] for h in sorted(failures)},
        "finished": order[-1].get("finished") if order else None,
        "jobs": [text(j.get("job_id")) for j in order],
    }


def load_run_summaries(path):
    """``(run, newest mtime)``: the bring-up status of every host, from the per-job summaries under ``run/site/``
    (their union, ``union_of_jobs``), else from ``run/summary.json`` (report directories of earlier releases, or
    written by hand). An unreadable per-job file is named in ``reason`` and left out; the others still count."""
    run = {"state": "missing", "data": None, "reason": None, "file": None}
    newest = 0.0
    jobs_dir = os.path.join(path, "run", "site")
    try:
        names = sorted(n for n in os.listdir(jobs_dir) if _HOST_FILE.match(n))
    except OSError:
        names = []
    jobs, reasons = [], []
    for name in names:
        job_file = os.path.join(jobs_dir, name)
        if not os.path.isfile(job_file):
            continue
        job, reason = _read_json(job_file)
        if reason is None and not isinstance(job, dict):
            reason = "%s: expected a JSON object" % job_file
        if reason:
            reasons.append(reason)
            continue
        newest = max(newest, os.path.getmtime(job_file))
        if not job.get("check_mode"):
            jobs.append(job)
    if jobs:
        return dict(run, state="ok", data=union_of_jobs(jobs), reason="; ".join(reasons) or None,
                    file=jobs_dir), newest
    if reasons:
        return dict(run, state="unreadable", reason="; ".join(reasons), file=jobs_dir), newest
    run_file = os.path.join(path, "run", "summary.json")
    if os.path.isfile(run_file):
        data, reason = _read_json(run_file)
        if reason is None and not isinstance(data, dict):
            reason = "%s: expected a JSON object" % run_file
        run = {"state": "unreadable" if reason else "ok", "data": None if reason else data, "reason": reason,
               "file": run_file}
        newest = max(newest, os.path.getmtime(run_file))
    return run, newest


# ------------------------------------------------------------------------------------------------ summary
def _host_list(run, key):
    value = run.get(key)
    return [str(h) for h in value] if isinstance(value, list) else []


def _host_status(data, host):
    run = data["run"]["data"] or {}
    if host in _host_list(run, "unreachable_hosts"):
        return "unreachable"
    if host in _host_list(run, "failed_hosts"):
        return "failed"
    return "ok"


def _checks_counts(checks):
    counts = {"pass": 0, "warn": 0, "fail": 0, "unknown": 0}
    for result in checks.get("results") or []:
        status = result.get("status") if isinstance(result, dict) else None
        counts[status if status in counts else "unknown"] += 1
    return counts


def summarize(data):
    out = {"nodes": len(data["hosts"]), "gpus": 0, "checks_failed": 0, "checks_warned": 0, "drifted": 0,
           "failed_hosts": [], "unreachable_hosts": [], "sections_missing": 0, "sections_unreadable": 0}
    for host, sections in data["hosts"].items():
        status = _host_status(data, host)
        if status != "ok":
            out[status + "_hosts"].append(host)
        for section in SECTIONS:
            state = sections[section]["state"]
            if state == "missing":
                out["sections_missing"] += 1
            elif state == "unreadable":
                out["sections_unreadable"] += 1
        topo = sections["topology"]["data"]
        if topo:
            out["gpus"] += len([g for g in topo["gpus"] if isinstance(g, dict)])
        checks = sections["checks"]["data"]
        if checks:
            counts = _checks_counts(checks)
            out["checks_failed"] += counts["fail"]
            out["checks_warned"] += counts["warn"]
        drift = sections["drift"]["data"]
        if drift:
            out["drifted"] += len(drift["drifted"])
    return out


# ------------------------------------------------------------------------------------------------ SVG
def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _short_bdf(bdf):
    if not isinstance(bdf, str):
        return ""
    return bdf[5:] if len(bdf) == 12 and bdf[4] == ":" else bdf


def _gbs(mbps):
    value = mbps / 1000.0
    return ("%.0f" % value) if value >= 10 else ("%.1f" % value)


def _units(topology):
    """Boxes to draw: GPUs, or physical devices when the node is partitioned (CPX/DPX)."""
    gpus = [g for g in topology.get("gpus") or [] if isinstance(g, dict) and _int(g.get("index")) is not None]
    gpus.sort(key=lambda g: g["index"])
    partitioned = any(isinstance(g.get("partition"), dict) for g in gpus)
    units, unit_of = [], {}
    if not partitioned:
        for gpu in gpus:
            unit_of[gpu["index"]] = len(units)
            units.append({"key": "gpu%d" % gpu["index"], "label": "GPU %d" % gpu["index"],
                          "sub": _short_bdf(gpu.get("bdf")), "numa": _int(gpu.get("numa_node")), "gpus": [gpu["index"]],
                          "title": "GPU %d %s NUMA %s hive %s" % (
                              gpu["index"], gpu.get("bdf") or "", _numa_text(gpu.get("numa_node")),
                              gpu.get("hive_id") or "none")})
        return units, unit_of, False
    by_physical = {}
    for gpu in gpus:
        phys = _int(gpu.get("physical_index"))
        by_physical.setdefault(phys if phys is not None else -1 - gpu["index"], []).append(gpu)
    for phys in sorted(by_physical, key=lambda p: by_physical[p][0]["index"]):
        members = by_physical[phys]
        nodes = {_int(g.get("numa_node")) for g in members}
        numa = nodes.pop() if len(nodes) == 1 else None
        first, last = members[0]["index"], members[-1]["index"]
        counts = {g["partition"].get("count") for g in members if isinstance(g.get("partition"), dict)}
        count = max([c for c in counts if isinstance(c, int)] or [len(members)])
        for gpu in members:
            unit_of[gpu["index"]] = len(units)
        units.append({"key": "dev%d" % phys, "label": "device %d" % phys if phys >= 0 else "GPU %d" % first,
                      "sub": "%d/%d partitions" % (len(members), count),
                      "sub2": "GPUs %d-%d" % (first, last) if first != last else "GPU %d" % first,
                      "numa": numa, "gpus": [g["index"] for g in members],
                      "title": "physical device %s %s: %d of %d partitions present, GPUs %s" % (
                          phys, members[0].get("bdf") or "", len(members), count,
                          ",".join(str(g["index"]) for g in members))})
    return units, unit_of, True


def _numa_text(node):
    return str(node) if _int(node) is not None else "unknown"


def _strength(link):
    if _int(link.get("xgmi_links")) is not None:
        return "xgmi_links", link["xgmi_links"]
    bandwidth = link.get("bandwidth_mbps") if isinstance(link.get("bandwidth_mbps"), dict) else {}
    if isinstance(bandwidth.get("max"), (int, float)) and bandwidth["max"] > 0:
        return "bandwidth", bandwidth["max"]
    return None, None


def _link_title(link, names):
    parts = ["%s - %s: %s" % (names[0], names[1], "xGMI" if link.get("type") == "xgmi" else link.get("type")),
             "%s hop(s)" % link.get("hops"), "weight %s" % link.get("weight")]
    if _int(link.get("xgmi_links")) is not None:
        parts.append("%d xGMI links" % link["xgmi_links"])
    bandwidth = link.get("bandwidth_mbps") if isinstance(link.get("bandwidth_mbps"), dict) else {}
    if isinstance(bandwidth.get("max"), (int, float)):
        parts.append("%s-%s GB/s" % (_gbs(bandwidth.get("min") or 0), _gbs(bandwidth["max"])))
    return ", ".join(parts)


def link_summary(topology):
    """``[(label, pairs, diagram)]`` per (type, hops, weight) class of GPU pairs; ``diagram`` says whether
    the class is drawn. On partitioned nodes pairs inside one physical device are their own class."""
    _unused, unit_of, partitioned = _units(topology)
    classes = {}
    for link in topology.get("links") or []:
        if not isinstance(link, dict):
            continue
        inside = partitioned and unit_of.get(link.get("a")) is not None and \
            unit_of.get(link.get("a")) == unit_of.get(link.get("b"))
        key = (str(link.get("type")), str(link.get("hops")), str(link.get("weight")), inside)
        classes[key] = classes.get(key, 0) + 1
    out = []
    for (kind, hops, weight, inside), count in sorted(classes.items()):
        name = "xGMI" if kind == "xgmi" else ("PCIe" if kind == "pcie" else kind)
        label = "%s, %s hop(s), weight %s%s" % (name, hops, weight, ", inside one device" if inside else "")
        if inside:
            note = "not drawn: inside one device"
        elif kind == "xgmi" and hops == "1":
            note = "drawn per device pair" if partitioned else "drawn"
        elif kind == "xgmi":
            note = "not drawn: routed through another GPU"
        else:
            note = "not drawn: through the host"
        out.append((label, count, note))
    return out


def _grid_columns(count):
    return 1 if count <= 1 else 2 if count <= 4 else 4 if count <= 16 else 6


def topology_diagram(topology):
    """Geometry of one node's diagram: NUMA boxes, GPUs (or physical devices) inside, direct xGMI links as curves.

    ``diagram``: ``width``, ``view_y``, ``view_h``; ``boxes`` (x, y, w, h, known, numa, label, sub, short,
    empty, label_x, label_y, sub_y); ``links`` (a, b, x1, y1, cx, cy, x2, y2, colour, stroke, title); ``units``
    (x, y, w, h, gpus, numa, title, lines of (css class, x, y, text)). Coordinates are numbers."""
    units, unit_of, partitioned = _units(topology)
    unit_w, unit_h, gap = (108, 58, 34) if partitioned else (92, 44, 34)
    numa_cpus = {}
    for node in topology.get("numa_nodes") or []:
        if isinstance(node, dict) and _int(node.get("node")) is not None:
            numa_cpus[node["node"]] = node.get("cpus")
    boxes = sorted(set(numa_cpus) | {u["numa"] for u in units if u["numa"] is not None})
    box_keys = list(boxes) + ([None] if any(u["numa"] is None for u in units) else [])
    members = {key: [u for u in units if u["numa"] == key] for key in box_keys}
    pad, head, box_gap, margin = 18, 42, 60, 12
    # NUMA boxes on a grid (2x2 for NPS4), every cell as large as the largest box so GPUs line up
    cols = {key: _grid_columns(len(members[key])) for key in box_keys}
    cell_w = max([max(200, pad * 2 + c * unit_w + (c - 1) * gap) for c in cols.values()] or [200])
    box_h = {}
    for key in box_keys:
        rows = int(math.ceil(len(members[key]) / float(cols[key])))
        box_h[key] = head + pad + rows * unit_h + (rows - 1) * gap if rows else head + 26
    per_row = 1 if not box_keys else min(len(box_keys), 2 if len(box_keys) <= 4 else 4,
                                         max(1, 1240 // (cell_w + box_gap)))
    layout, y = {}, margin
    for start in range(0, len(box_keys), per_row or 1):
        row = box_keys[start:start + per_row]
        for pos, key in enumerate(row):
            layout[key] = (margin + pos * (cell_w + box_gap), y)
        y += max(box_h[key] for key in row) + box_gap
    centre, box_list = {}, []
    for key in box_keys:
        bx, by = layout[key]
        known = key is not None
        cpus = numa_cpus.get(key) if known else None
        sub = ("CPUs %s" % cpus) if cpus else ("CPUs unknown" if known else "GPUs without a reported NUMA node")
        box_list.append({"x": bx, "y": by, "w": cell_w, "h": box_h[key], "known": known,
                         "numa": str(key) if known else "unknown",
                         "label": "NUMA %d" % key if known else "NUMA unknown", "sub": sub,
                         "short": sub if len(sub) <= 40 else sub[:37] + "...", "empty": not members[key],
                         "label_x": bx + 10, "label_y": by + 19, "sub_y": by + 34, "empty_y": by + head + 20})
        for pos, unit in enumerate(members[key]):
            ux = bx + pad + (pos % cols[key]) * (unit_w + gap)
            uy = by + head + (pos // cols[key]) * (unit_h + gap)
            centre[unit["key"]] = (ux + unit_w / 2.0, uy + unit_h / 2.0)
            unit["rect"] = (ux, uy)
    width = margin * 2 + per_row * cell_w + (per_row - 1) * box_gap if box_keys else 200
    height = y - box_gap + margin if box_keys else 40
    # links: one curve per pair of boxes joined by direct xGMI; PCIe and multi-hop pairs are only summarised
    pairs = {}
    for link in topology.get("links") or []:
        if not isinstance(link, dict) or link.get("type") != "xgmi" or str(link.get("hops")) != "1":
            continue
        ua, ub = unit_of.get(link.get("a")), unit_of.get(link.get("b"))
        if ua is None or ub is None or ua == ub:
            continue
        entry = pairs.setdefault((min(ua, ub), max(ua, ub)), {"links": [], "value": 0, "metric": None})
        entry["links"].append(link)
        metric, value = _strength(link)
        if partitioned:
            entry["metric"], entry["value"] = "partition pairs", len(entry["links"])
        elif metric:
            entry["metric"], entry["value"] = metric, value
    values = [p["value"] for p in pairs.values()]
    top, bottom = max(values or [0]), min(values or [0])
    low, span = (1.2, 2.3) if partitioned else (1.5, 5.0)
    top_y, bottom_y, links = 0.0, float(height), []
    for (ua, ub), entry in sorted(pairs.items()):
        a, b = units[ua], units[ub]
        (x1, y1), (x2, y2) = centre[a["key"]], centre[b["key"]]
        dx, dy = x2 - x1, y2 - y1
        dist = math.hypot(dx, dy) or 1.0
        # bend grows with distance so collinear links of different lengths stay apart
        bend = min(0.16 * dist, 40.0)
        cx, cy = (x1 + x2) / 2.0 - dy / dist * bend, (y1 + y2) / 2.0 + dx / dist * bend
        peak_y = ((y1 + y2) / 2.0 + cy) / 2.0
        top_y, bottom_y = min(top_y, peak_y - 4), max(bottom_y, peak_y + 4)
        # equal strengths (or none known) get one middle width rather than all the thickest
        stroke = low + span * entry["value"] / top if top and bottom != top else low + span * 0.35
        names = (a["label"], b["label"])
        title = _link_title(entry["links"][0], names)
        if partitioned:
            title = "%s - %s: %d directly linked partition pairs (%s)" % (
                names[0], names[1], len(entry["links"]), title.split(": ", 1)[1])
        links.append({"a": a["key"], "b": b["key"], "x1": x1, "y1": y1, "cx": cx, "cy": cy, "x2": x2, "y2": y2,
                      "colour": _XGMI_COLOUR, "stroke": stroke, "title": title})
    unit_list = []
    for unit in units:
        if "rect" not in unit:
            continue
        ux, uy = unit["rect"]
        lines = [unit["label"], unit.get("sub") or ""] + ([unit["sub2"]] if unit.get("sub2") else [])
        unit_list.append({"x": ux, "y": uy, "w": unit_w, "h": unit_h, "gpus": ",".join(str(g) for g in unit["gpus"]),
                          "numa": _numa_text(unit["numa"]), "title": unit["title"],
                          "lines": [("gpu-label" if i == 0 else "gpu-sub", ux + unit_w / 2.0, uy + 18 + i * 14, line)
                                    for i, line in enumerate(lines)]})
    view_y, view_h = int(math.floor(top_y)), int(math.ceil(bottom_y - top_y))
    diagram = {"width": width, "view_y": view_y, "view_h": view_h, "boxes": box_list, "links": links,
               "units": unit_list}
    metrics = sorted({p["metric"] for p in pairs.values() if p["metric"]})
    info = {"units": len(units), "partitioned": partitioned, "drawn_links": len(pairs),
            "drawn_gpu_links": sum(len(p["links"]) for p in pairs.values()), "width_by": metrics,
            "numa_boxes": len(box_keys)}
    return diagram, info


# ------------------------------------------------------------------------------------------------ page data
def _table(headers, rows, numeric=(), fold=None):
    """A table as data. A cell is a value, ``(css class, value)`` or ``{"code": value}`` (shown as code); every
    cell becomes ``{"text", "cls", "code"}``. ``fold`` (the summary line) when the table is long enough to fold."""
    out = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls, code = ("num" if i in numeric else None), False
            if isinstance(cell, tuple):  # (css class, text)
                cls, cell = text(cell[0]), cell[1]
            elif isinstance(cell, dict) and set(cell) == {"code"}:
                code, cell = True, cell["code"]
            cells.append({"text": text(cell), "cls": cls, "code": code})
        out.append(cells)
    return {"headers": [{"text": text(h), "num": i in numeric} for i, h in enumerate(headers)], "rows": out,
            "fold": text(fold) if fold is not None and len(out) > _LONG_TABLE else None}


def _topology_view(topology):
    gpus = [g for g in topology["gpus"] if isinstance(g, dict)]
    phys = topology.get("physical_devices") if isinstance(topology.get("physical_devices"), list) else []
    gfx = sorted({str(g.get("gfx")) for g in gpus if g.get("gfx")})
    devices = sorted({str(g.get("device_id")) for g in gpus if g.get("device_id")})
    hives = topology.get("hives") if isinstance(topology.get("hives"), list) else []
    diagram, info = topology_diagram(topology)
    width_by = {"xgmi_links": "xGMI link count", "bandwidth": "reported bandwidth",
                "partition pairs": "number of directly linked partition pairs"}
    summary = link_summary(topology)
    warnings = [text(w) for w in topology.get("warnings") or [] if w]
    identity = topology.get("identity") if isinstance(topology.get("identity"), dict) else {}
    return {"gpus": len(gpus), "devices": len(phys) or len(gpus), "gfx": ", ".join(gfx) or "gfx unknown",
            "identity": text("%s (%s, %s)" % (identity["generation"], identity.get("product"), identity.get("kind"))
                             if identity.get("generation") else
                             "generation unknown: %s" % (identity.get("reason") or "no identity in the model")),
            "device_ids": ", ".join(devices), "hives": len(hives), "source": text(topology.get("source") or "unknown"),
            "diagram": diagram, "partitioned": info["partitioned"], "drawn_links": info["drawn_links"],
            "width_by": ", ".join(width_by.get(m, m) for m in info["width_by"])
            or "nothing (no count or bandwidth reported: equal widths)",
            "links": _table(("GPU pairs by link", "pairs", "diagram"), summary, numeric=(1,)) if summary else None,
            "warnings": warnings, "warnings_fold": len(warnings) > _LONG_TABLE}


def _launch_view(launch):
    """The launch plan the launch_templates role applied on the node (its module's returned ``plan``)."""
    options = launch.get("options") if isinstance(launch.get("options"), dict) else {}
    sizes = [s for s in launch.get("sizes") or [] if isinstance(s, dict)]
    bindings = {b.get("gpu"): b for b in launch.get("bindings") or [] if isinstance(b, dict)}
    view = {"cpu_binding": text(options.get("cpu_binding", "?")), "membind": bool(options.get("membind", True)),
            "env": text(options.get("visible_devices_env", "?")), "scope": text(options.get("visible_devices_scope", "?")),
            "reserved": text(options["reserved_cpus"]) if options.get("reserved_cpus") else "", "sizes": []}
    for size in sizes:
        rows = []
        for number, (group, why, recipe) in enumerate(zip(size.get("groups") or [], size.get("explanations") or [],
                                                          size.get("recipes") or [])):
            numa = [str(n) for n in recipe.get("numa_nodes") or []] + (["unknown"] if recipe.get("numa_unknown") else [])
            rows.append((number, ",".join(str(g) for g in group), ("nw", ", ".join(numa)), why,
                         {"code": recipe.get("recipe")}))
        score = size.get("score") if isinstance(size.get("score"), dict) else {}
        view["sizes"].append({"size": text(size.get("size")), "exact": bool(size.get("exact")),
                              "method": text(size.get("method")), "xgmi_pairs": text(score.get("xgmi_pairs")),
                              "numa_spread": text(score.get("numa_spread")),
                              "table": _table(("group", "GPUs", "NUMA", "why", "recipe"), rows, numeric=(0,),
                                              fold="Groups of %s" % (size.get("size"),))})
    view["notes"] = [text(w) for w in launch.get("warnings") or []
                     if str(w).startswith(("group size", "none of launch_templates_sizes"))]
    default = [s for s in sizes if s.get("size") == launch.get("default_size")]
    order = default[0].get("order") if default else sorted(bindings)
    view["default_size"] = text(launch.get("default_size")) if default else None
    gres = launch.get("gres") if isinstance(launch.get("gres"), dict) else {}
    cores = {line.get("gpu"): line.get("cores") for line in gres.get("lines") or [] if isinstance(line, dict)}
    rows = []
    for rank, index in enumerate(order or []):
        binding = bindings.get(index) or {}
        rows.append((rank, index, _numa_text(binding.get("numa_node")), ("nw", binding.get("cpus") or "-"),
                     {"code": " ".join(binding.get("numactl") or []) or "(unbound)"},
                     ("nw", cores.get(index) or "-"), ("st-warn", binding["warning"]) if binding.get("warning") else ""))
    view["binding"] = _table(("local rank", "GPU", "NUMA", "CPUs", "numactl", "Slurm cores", "note"), rows,
                             numeric=(0, 1), fold="Per-rank binding")
    view["node_line"] = text(gres["node_line"]) if gres.get("node_line") else None
    view["socket_parameter"] = text(gres["socket_parameter"]) if gres.get("socket_parameter") else None
    return view


def _checks_view(checks):
    results = [r for r in checks["results"] if isinstance(r, dict)]
    counts = _checks_counts(checks)
    results.sort(key=lambda r: (_STATUS_ORDER.get(r.get("status"), 2), str(r.get("id"))))
    rows = []
    for result in results:
        status = result.get("status") if result.get("status") in _STATUS_ORDER else "unknown"
        rows.append((result.get("id"), ("st-" + status, status), result.get("observed"), result.get("expected"),
                     result.get("remediation") if status != "pass" else "", result.get("source")))
    return {"counts": [(s, "%d %s" % (counts[s], s)) for s in ("fail", "warn", "unknown", "pass")],
            "generation": text(checks.get("generation")) if checks.get("generation") else None,
            "table": _table(("check", "status", "observed", "expected", "remediation", "source"), rows) if rows else None}


def _drift_view(drift):
    items = [d for d in drift["drifted"] if isinstance(d, dict)]
    rows = [(d.get("owner"), d.get("kind"), d.get("item"), d.get("expected"), d.get("observed"),
             ("st-pass", "yes") if d.get("corrected") else ("st-warn", "no")) for d in items]
    return {"mode": text(drift.get("mode") or "?"), "checked": text(drift.get("checked", "?")), "drifted": len(items),
            "corrected": sum(1 for d in items if d.get("corrected")) if items else None,
            "table": _table(("owner", "kind", "item", "expected", "observed", "corrected"), rows) if items else None}


def _size_text(size):
    if not isinstance(size, (int, float)):
        return str(size)
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return "%g %s" % (size / float(factor), unit)
    return "%d B" % size


def _pct(value):
    return "%.0f%%" % (value * 100) if isinstance(value, (int, float)) else "-"


def busbw_chart(rows, reference, column="out_of_place"):
    """Geometry of the bars of busbw per message size (the column the comparison used: AMD's criteria are
    in-place), with the reference as a dashed line; None when there is nothing to draw."""
    pick = 2 if column == "in_place" else 1
    values = [(row[0], row[pick]) for row in rows if isinstance(row[pick], (int, float)) and row[pick] >= 0]
    if not values:
        return None
    ref = reference if isinstance(reference, (int, float)) and reference > 0 else None
    top = max([v for _unused, v in values] + ([ref] if ref else [])) or 1.0
    bar_w, gap, left, plot_h, base = 18, 4, 44, 150, 174
    width = left + len(values) * (bar_w + gap) + 10
    bars = []
    for i, (size, value) in enumerate(values):
        h = plot_h * value / top
        x = left + i * (bar_w + gap)
        bars.append({"x": x, "y": base - h, "w": bar_w, "h": h, "size": text(size), "value": text(value),
                     "label_x": x + bar_w / 2.0 if i % 4 == 0 or i == len(values) - 1 else None})
    return {"width": width, "height": base + 24, "left": left, "base": base, "top_y": base - plot_h + 4,
            "top": "%.0f" % top, "bars": bars,
            "ref": {"y": base - plot_h * ref / top, "text": text(ref)} if ref else None}


def _benchmark_view(bench):
    view = {"skipped": bool(bench.get("skipped")), "msg": text(bench.get("msg")), "result": None, "comparison": None,
            "chart": None, "table": None, "advice": None}
    result = bench.get("result") if isinstance(bench.get("result"), dict) else None
    comparison = bench.get("comparison") if isinstance(bench.get("comparison"), dict) else {}
    if result:
        view["result"] = {"collective": text(result.get("collective") or "all_reduce"), "ranks": text(result.get("n_ranks")),
                          "peak": text(result.get("peak_busbw")),
                          "avg": text(result.get("avg_busbw") if result.get("avg_busbw") is not None else "n/a"),
                          "truncated": not result.get("complete", True)}
    if comparison:
        view["comparison"] = {
            "status": comparison.get("status") if comparison.get("status") in ("ok", "warn", "below", "failed") else "unknown",
            "generation": text(comparison.get("generation") or "unknown generation"),
            "reason": text(comparison.get("reason"))}
    rows = []
    for row in (result or {}).get("rows") or []:
        if not isinstance(row, dict):
            continue
        oop = row.get("out_of_place") if isinstance(row.get("out_of_place"), dict) else {}
        inp = row.get("in_place") if isinstance(row.get("in_place"), dict) else {}
        rows.append((_size_text(row.get("size")), oop.get("busbw"), inp.get("busbw"), oop.get("algbw"), oop.get("time_us")))
    view["chart"] = busbw_chart(rows, comparison.get("expected_busbw"), (comparison.get("compared") or {}).get("column"))
    if rows:
        view["table"] = _table(("size", "busbw out-of-place (GB/s)", "busbw in-place (GB/s)", "algbw (GB/s)",
                                "time (us)"), rows, numeric=(1, 2, 3, 4), fold="Bus bandwidth by message size")
    advice = bench.get("advice") if isinstance(bench.get("advice"), dict) else None
    if advice:
        reasons = [p.get("reason") for p in advice.get("path") or [] if isinstance(p, dict) and p.get("reason")]
        options = [o for o in advice.get("options") or [] if isinstance(o, dict)]
        rows = [(o.get("rank"), o.get("action"), o.get("cost_usd"), o.get("deploy_time"), _pct(o.get("throughput_gain")),
                 _pct(o.get("latency_cut")), "yes" if o.get("recommended") else "", o.get("source")) for o in options]
        view["advice"] = {
            "outcome": text(advice.get("outcome")), "recommendation": text(advice.get("recommendation")),
            "decisions": " -> ".join(reasons) if reasons else None,
            "options": _table(("rank", "option", "cost (USD)", "deploy", "throughput", "latency cut", "recommended",
                               "source"), rows, numeric=(0, 2)) if options else None,
            "notes": [text(n) for n in (advice.get("notes") or []) + (advice.get("warnings") or []) if n]}
    view["binding"] = _binding_view(bench.get("binding"))
    view["baseline"] = _baseline_view(bench.get("baseline"))
    view["empty"] = not view["skipped"] and not result and not advice and not view["binding"]
    return view


_VERDICT_CLS = {"better": "st-pass", "improved": "st-pass", "same": None, "unchanged": None, "worse": "st-fail",
                "regressed": "st-fail", "recorded": None}


def _headline(fig):
    fig = fig if isinstance(fig, dict) else {}
    return (fig.get("busbw"), fig.get("time_us"), _size_text(fig.get("size")) if fig.get("size") is not None else "")


def _binding_view(binding):
    """The article's comparison of binding plans (``rccl_bench`` ``binding``): one row per plan."""
    if not isinstance(binding, dict) or not isinstance(binding.get("runs"), list):
        return None
    comparison = binding.get("comparison") if isinstance(binding.get("comparison"), dict) else {}
    deltas = comparison.get("deltas") if isinstance(comparison.get("deltas"), dict) else {}
    rows = []
    for run in binding["runs"]:
        run = run if isinstance(run, dict) else {}
        plan = text(run.get("plan"))
        d = deltas.get(plan) if isinstance(deltas.get(plan), dict) else {}
        busbw, time_us, size = _headline(run.get("figures"))
        verdict = "reference" if plan == comparison.get("reference") else d.get("verdict") or ""
        marks = [w for w, on in (("best", plan == comparison.get("best")),
                                 ("deployed", plan == comparison.get("deployed"))) if on]
        rows.append((plan + (" (%s)" % ", ".join(marks) if marks else ""), size, busbw, time_us,
                     _signed(d.get("busbw_pct")), _signed(d.get("small_time_pct")),
                     (_VERDICT_CLS.get(verdict), verdict), run.get("error") or d.get("reason") or "",
                     {"code": " ".join(str(w) for w in run.get("cmd") or [])}))
    return {"recommendation": text(comparison.get("recommendation")),
            "table": _table(("plan", "size", "busbw in-place (GB/s)", "time (us)", "busbw vs reference",
                             "small-message time vs reference", "verdict", "why", "command"), rows,
                            numeric=(2, 3))}


def _baseline_view(baseline):
    """The run against the node's stored baseline (``benchmark_baseline`` filter)."""
    if not isinstance(baseline, dict) or not baseline.get("status"):
        return None
    stored = baseline.get("baseline") if isinstance(baseline.get("baseline"), dict) else {}
    d = baseline.get("delta") if isinstance(baseline.get("delta"), dict) else {}
    status = str(baseline["status"])
    return {"status": status, "cls": _VERDICT_CLS.get(status), "reason": text(baseline.get("reason")),
            "recorded_at": text(stored.get("recorded_at")), "stored": bool(baseline.get("stored")),
            "busbw_pct": _signed(d.get("busbw_pct")), "time_pct": _signed(d.get("time_pct")),
            "small_time_pct": _signed(d.get("small_time_pct"))}


def _signed(value):
    return "" if not isinstance(value, (int, float)) else "%+.1f %%" % value


def _acceptance_counts(report):
    counts = {"pass": 0, "warn": 0, "fail": 0, "unknown": 0}
    for verdict in report["verdicts"]:
        if isinstance(verdict, dict):
            status = verdict.get("status")
            counts[status if status in counts else "unknown"] += 1
    return counts


def _acceptance_view(report):
    verdicts = [v for v in report["verdicts"] if isinstance(v, dict)]
    verdicts.sort(key=lambda v: (_STATUS_ORDER.get(v.get("status"), 2), str(v.get("id"))))
    rows = []
    for v in verdicts:
        status = v.get("status") if v.get("status") in _STATUS_ORDER else "unknown"
        value = "" if v.get("value") is None or isinstance(v.get("value"), bool) else "%s %s" % (v["value"], v.get("unit") or "")
        rows.append((v.get("id"), ("st-" + status, status), value, _signed(v.get("margin_pct")),
                     _signed(v.get("margin_vs_median_pct")), v.get("observed"), v.get("expected"), v.get("source")))
    runs = [(r.get("id"), r.get("status"), " ".join(r.get("cmd") or []) or r.get("source") or "", r.get("reason"))
            for r in report["runs"] if isinstance(r, dict)]
    counts = _acceptance_counts(report)
    return {"counts": [(s, "%d %s" % (counts[s], s)) for s in ("fail", "warn", "unknown", "pass")],
            "generation": text(report.get("product") or report.get("generation")) or None,
            "table": _table(("criterion", "status", "value", "vs criterion", "vs class median", "observed", "expected",
                             "source"), rows) if rows else None,
            "runs": _table(("run", "status", "command or file", "reason"), runs, fold="Tool runs") if runs else None}


_VIEWS = (("topology", "Topology", _topology_view), ("launch", "GPU groups and per-rank binding", _launch_view),
          ("checks", "Platform checks", _checks_view), ("drift", "Drift", _drift_view),
          ("benchmark", "Benchmark", _benchmark_view), ("acceptance", "Acceptance", _acceptance_view))


def _node_view(number, host, sections, status):
    out = {"number": number, "host": host, "status": status, "sections": []}
    for key, what, build in _VIEWS:
        entry = sections[key]
        view = {"key": key, "what": what, "state": entry["state"], "file": text(entry.get("file")),
                "reason": text(entry.get("reason")), "view": None}
        if entry["state"] == "ok":
            try:
                view["view"] = build(entry["data"])
            except Exception as err:  # noqa: BLE001 - a malformed record must degrade one section, not the report
                view.update(state="error", error="%s in %s: %s" % (type(err).__name__, text(entry.get("file")), err))
        out["sections"].append(view)
    return out


def _overview_row(number, host, sections, status):
    topo = sections["topology"]
    if topo["state"] == "ok":
        gpus = [g for g in topo["data"]["gpus"] if isinstance(g, dict)]
        gfx = sorted({str(g.get("gfx")) for g in gpus if g.get("gfx")})
        devices = {g.get("physical_index") for g in gpus}
        partitioned = any(isinstance(g.get("partition"), dict) for g in gpus)
        gpu_text = "%d %s%s" % (len(gpus), ", ".join(gfx), " (partitions of %d devices)" % len(devices) if partitioned else "")
    else:
        gpu_text = topo["state"] if topo["state"] == "unreadable" else "not collected"
    checks = sections["checks"]
    if checks["state"] == "ok":
        c = _checks_counts(checks["data"])
        check_cell = ("st-fail" if c["fail"] else "st-warn" if c["warn"] else "st-pass",
                      "%d fail, %d warn, %d unknown, %d pass" % (c["fail"], c["warn"], c["unknown"], c["pass"]))
    else:
        check_cell = (None, checks["state"] if checks["state"] == "unreadable" else "not collected")
    drift = sections["drift"]
    drift_text = ("%d drifted" % len(drift["data"]["drifted"])) if drift["state"] == "ok" else (
        drift["state"] if drift["state"] == "unreadable" else "not collected")
    bench = sections["benchmark"]
    if bench["state"] == "ok":
        comp = bench["data"].get("comparison") if isinstance(bench["data"].get("comparison"), dict) else {}
        res = bench["data"].get("result") if isinstance(bench["data"].get("result"), dict) else {}
        bench_text = "skipped" if bench["data"].get("skipped") else "%s GB/s peak, %s" % (
            res.get("peak_busbw", "?"), comp.get("status", "unknown"))
        base = bench["data"].get("baseline") if isinstance(bench["data"].get("baseline"), dict) else {}
        if base.get("status"):
            bench_text += ", %s vs baseline" % base["status"]
    else:
        bench_text = bench["state"] if bench["state"] == "unreadable" else "not collected"
    accept = sections["acceptance"]
    if accept["state"] == "ok":
        a = _acceptance_counts(accept["data"])
        accept_cell = ("st-fail" if a["fail"] else "st-warn" if a["warn"] else "st-pass" if a["pass"] else None,
                       "%d fail, %d warn, %d unknown, %d pass" % (a["fail"], a["warn"], a["unknown"], a["pass"]))
    else:
        accept_cell = (None, accept["state"] if accept["state"] == "unreadable" else "not collected")
    return {"number": number, "host": host, "status": status, "gpus": gpu_text, "checks_cls": check_cell[0],
            "checks": check_cell[1], "drift": drift_text, "benchmark": bench_text, "acceptance_cls": accept_cell[0],
            "acceptance": accept_cell[1]}


_CONSISTENCY_STATUS = {"consistent": ("st-pass", "same"), "differs": ("st-fail", "differs"),
                       "no_majority": ("st-warn", "no majority"), "unknown": ("st-unknown", "unknown")}


def collective_view(data):
    """See the module docstring."""
    entry = data.get("collective") or {}
    if entry.get("state") == "unreadable":
        return {"state": "unreadable", "reason": text(entry.get("reason"))}
    record = entry.get("data")
    if entry.get("state") != "ok" or not record:
        return None
    criterion = record.get("criterion") or {}
    full = record.get("full_run") or {}
    runs = ((record.get("isolation") or {}).get("runs")) or []
    status = record.get("status") if record.get("status") in _STATUS_ORDER else "unknown"
    return {
        "state": "ok", "status": status, "hosts": len(record.get("hosts") or []),
        "criterion": text(criterion.get("text") or ("in-place busbw >= %s GB/s" % criterion.get("busbw_gbs")
                                                    if criterion.get("busbw_gbs") else criterion)),
        "full_run": "%s: %s" % (text(full.get("verdict") or "not run"), text(full.get("evidence"))),
        "excluded": [(text(e.get("host")), text(e.get("evidence")), text(e.get("why"))) for e in record["excluded"]
                     if isinstance(e, dict)],
        "good": ", ".join(text(h) for h in record.get("good") or []),
        "undetermined": ", ".join(text(h) for h in record.get("undetermined") or []),
        "runs": _table(("run", "hosts", "verdict", "evidence"), [
            (r.get("index"), ", ".join(text(h) for h in r.get("hosts") or []),
             ("st-" + ("pass" if r.get("verdict") == "pass" else "fail" if r.get("verdict") == "fail" else "unknown"),
              r.get("verdict")), r.get("evidence")) for r in runs if isinstance(r, dict)],
            numeric=(0,), fold="Isolation runs") if runs else None,
    }


def consistency_view(data):
    """The cluster-consistency table (see the module docstring); None without any node inventory."""
    inventories = {}
    for host, sections in data["hosts"].items():
        checks = sections.get("checks") or {}
        inventory = (checks.get("data") or {}).get("inventory") if checks.get("state") == "ok" else None
        if isinstance(inventory, dict):
            inventories[host] = inventory
    if not inventories:
        return None
    report = compare_nodes(inventories)
    rows = []
    # items that differ first, then those without a majority, then the consistent ones, then the unknown ones
    order = {"differs": 0, "no_majority": 1, "consistent": 2, "unknown": 3}
    for row in sorted(report["items"], key=lambda r: (order[r["status"]], r["class"], r["label"])):
        odd = "; ".join("%s: %s" % (value, ", ".join(hosts)) for value, hosts in row["values"].items()
                        if value != row["majority"]) if row["status"] in ("differs", "no_majority") else ""
        rows.append((row["class"], row["label"], _CONSISTENCY_STATUS[row["status"]],
                     row["majority"] if row["majority"] is not None else "(none)",
                     len(row["values"].get(row["majority"], [])) if row["majority"] is not None else 0, odd,
                     ", ".join(row["unknown"])))
    return {"nodes": len(report["nodes"]), "differing": report["summary"]["differing"],
            "no_majority": report["summary"]["no_majority"],
            "classes": [(klass, ", ".join(hosts)) for klass, hosts in sorted(report["classes"].items())],
            "odd_nodes": [(host, ", ".join(items)) for host, items in sorted(report["odd_nodes"].items())],
            # the cluster-wide check rail_consistency of each node that does not pass
            "rails": [(host, result["status"], result["observed"])
                      for host, result in sorted(report["rail_consistency"].items()) if result["status"] != "pass"],
            "table": _table(("hardware class", "item", "status", "majority value", "nodes",
                             "nodes that differ (value: nodes)", "unknown on"), rows, numeric=(4,))}


def report_view(data, title=None):
    """Everything the page shows, as plain data (strings and numbers) for templates/report.html.j2."""
    counts = summarize(data)
    run = data["run"]
    info = run["data"] if run["state"] == "ok" else {}
    hosts = sorted(data["hosts"].items())
    return {
        "title": title or "topotune cluster report", "report_dir": text(data["report_dir"]),
        "as_of": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data["as_of"])) if data.get("as_of") else "no data",
        "counts": dict(counts, failed=len(counts["failed_hosts"]), unreachable=len(counts["unreachable_hosts"])),
        "run": {"state": run["state"], "reason": text(run.get("reason")), "playbook": text(info.get("playbook") or "?"),
                "finished": text(info.get("finished") or "?"),
                "jobs": len(info["jobs"]) if isinstance(info.get("jobs"), list) else None},
        "overview": [_overview_row(n, host, sections, _host_status(data, host)) for n, (host, sections) in enumerate(hosts, 1)],
        "nodes": [_node_view(n, host, sections, _host_status(data, host)) for n, (host, sections) in enumerate(hosts, 1)],
        "consistency": consistency_view(data),
        "collective": collective_view(data),
    }
