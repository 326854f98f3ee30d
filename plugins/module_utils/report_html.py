"""One self-contained HTML report of a cluster from the per-node JSON that the playbooks keep on the controller.

Public API (standard library only, Python 3.8+):

``SECTIONS``
    The per-node sections and their sub-directories of the report directory:
    ``topology/<host>.json`` (the topology model), ``launch/<host>.json`` (the launch plan the launch_templates
    role applied: groups, bindings, gres summary), ``checks/<host>.json`` (platform checks),
    ``drift/<host>.json`` (drift of managed settings), ``benchmark/<host>.json`` (rccl-tests run, comparison,
    advice). ``run/summary.json`` (failed / unreachable hosts of the last play run) is read too.
``load_report_dir(path)``
    ``{"report_dir", "hosts": {host: {section: {"state": "ok"|"missing"|"unreadable", "data", "reason",
    "file"}}}, "run": {...}, "as_of"}``. Every file is optional; a missing, unreadable, malformed or
    wrongly shaped file becomes a ``missing``/``unreadable`` section with the reason, never an exception.
``summarize(data)``
    Cluster counts: ``nodes``, ``gpus``, ``checks_failed``, ``checks_warned``, ``drifted``,
    ``failed_hosts``, ``unreachable_hosts``, ``sections_missing``, ``sections_unreadable``.
``topology_svg(topology)``
    ``(svg, info)``: the node diagram (NUMA nodes as boxes, GPUs -- or, on partitioned nodes, physical
    devices with their partition count -- inside their NUMA node, direct xGMI links as curves whose width
    follows the link count or bandwidth); ``info`` counts what was drawn and what was only summarised.
``render_report(data, title=None)``
    The HTML page: inline CSS and SVG only, no script, a Content-Security-Policy that forbids any fetch,
    every value from the nodes HTML-escaped. Deterministic for the same input (no wall-clock time).
"""

import html
import json
import math
import os
import re
import time

SECTIONS = ("topology", "launch", "checks", "drift", "benchmark")
MAX_FILE_BYTES = 64 * 1024 * 1024
_HOST_FILE = re.compile(r"^(.+)\.json$")
_STATUS_ORDER = {"fail": 0, "warn": 1, "unknown": 2, "pass": 3}
_XGMI_COLOUR = "#d9480f"
_LONG_TABLE = 16


def esc(value):
    """HTML-escape any value (None -> empty, containers as compact JSON)."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        value = json.dumps(value, sort_keys=True, default=str)
    return html.escape(str(value), quote=True)


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
    run_file = os.path.join(path, "run", "summary.json")
    if os.path.isfile(run_file):
        run, reason = _read_json(run_file)
        if reason is None and not isinstance(run, dict):
            reason = "%s: expected a JSON object" % run_file
        data["run"] = {"state": "unreadable" if reason else "ok", "data": None if reason else run,
                       "reason": reason, "file": run_file}
        newest = max(newest, os.path.getmtime(run_file))
    run = data["run"]["data"] or {}
    for key in ("failed_hosts", "unreachable_hosts"):
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


def topology_svg(topology):
    """Diagram of one node: NUMA boxes, GPUs (or physical devices) inside, direct xGMI links as curves."""
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
    centre, boxes_svg, labels_svg = {}, [], []
    for key in box_keys:
        bx, by = layout[key]
        known = key is not None
        cpus = numa_cpus.get(key) if known else None
        boxes_svg.append('<rect x="%d" y="%d" width="%d" height="%d" rx="8" class="%s" data-numa="%s"/>'
                         % (bx, by, cell_w, box_h[key], "numa-box" if known else "numa-box unknown",
                            esc(key if known else "unknown")))
        sub = ("CPUs %s" % cpus) if cpus else ("CPUs unknown" if known else "GPUs without a reported NUMA node")
        short = sub if len(sub) <= 40 else sub[:37] + "..."
        labels_svg.append('<text x="%d" y="%d" class="numa-label">%s</text>'
                          '<text x="%d" y="%d" class="numa-sub"><title>%s</title>%s</text>'
                          % (bx + 10, by + 19, esc("NUMA %d" % key if known else "NUMA unknown"),
                             bx + 10, by + 34, esc(sub), esc(short)))
        if not members[key]:
            labels_svg.append('<text x="%d" y="%d" class="numa-sub">no GPUs</text>' % (bx + 10, by + head + 20))
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
    top_y, bottom_y, link_svg = 0.0, float(height), []
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
        link_svg.append(
            '<path class="link xgmi" data-a="%s" data-b="%s" d="M%.1f %.1f Q%.1f %.1f %.1f %.1f" stroke="%s" '
            'stroke-width="%.1f" fill="none"><title>%s</title></path>'
            % (esc(a["key"]), esc(b["key"]), x1, y1, cx, cy, x2, y2, _XGMI_COLOUR, stroke, esc(title)))
    unit_svg = []
    for unit in units:
        if "rect" not in unit:
            continue
        ux, uy = unit["rect"]
        unit_svg.append('<g class="gpu" data-gpus="%s" data-numa="%s"><title>%s</title>'
                        '<rect x="%d" y="%d" width="%d" height="%d" rx="5" class="gpu-box"/>'
                        % (esc(",".join(str(g) for g in unit["gpus"])), esc(_numa_text(unit["numa"])),
                           esc(unit["title"]), ux, uy, unit_w, unit_h))
        lines = [unit["label"], unit.get("sub") or ""] + ([unit["sub2"]] if unit.get("sub2") else [])
        for i, text in enumerate(lines):
            unit_svg.append('<text x="%.1f" y="%d" class="%s" text-anchor="middle">%s</text>'
                            % (ux + unit_w / 2.0, uy + 18 + i * 14, "gpu-label" if i == 0 else "gpu-sub", esc(text)))
        unit_svg.append("</g>")
    view_y, view_h = int(math.floor(top_y)), int(math.ceil(bottom_y - top_y))
    svg = ('<svg class="topology" width="%d" height="%d" viewBox="0 %d %d %d" '
           'role="img" aria-label="GPU topology diagram">%s<g class="links">%s</g>%s%s</svg>'
           % (width, view_h, view_y, width, view_h, "".join(boxes_svg), "".join(link_svg), "".join(labels_svg),
              "".join(unit_svg)))
    metrics = sorted({p["metric"] for p in pairs.values() if p["metric"]})
    info = {"units": len(units), "partitioned": partitioned, "drawn_links": len(pairs),
            "drawn_gpu_links": sum(len(p["links"]) for p in pairs.values()), "width_by": metrics,
            "numa_boxes": len(box_keys)}
    return svg, info


# ------------------------------------------------------------------------------------------------ HTML
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2733;
background:#f4f6f8}
header.top{background:#1d2733;color:#fff;padding:18px 28px}header.top h1{margin:0;font-size:22px}
header.top p{margin:4px 0 0;color:#c5cfd9}main{padding:16px 28px 40px}
section.node,section.overview{background:#fff;border:1px solid #d5dce3;border-radius:8px;margin:0 0 22px;
padding:14px 20px}
h2{font-size:19px;margin:2px 0 8px}h3{font-size:15px;margin:16px 0 6px;color:#334155}
table{border-collapse:collapse;margin:4px 0 8px;font-size:13px}th,td{border:1px solid #d5dce3;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#eef2f6}td.num,th.num{text-align:right}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}
.s-pass,.s-ok{background:#2f9e44}.s-warn{background:#e67700}.s-fail,.s-failed,.s-below{background:#c92a2a}
.s-unknown,.s-undetermined{background:#868e96}.s-unreachable{background:#862e9c}
.note{color:#5c6b7a;font-style:italic}.missing{color:#5c6b7a;font-style:italic}
.unreadable{color:#c92a2a;font-weight:600}.warn-list li{color:#9c4a00}
td.st-fail{background:#ffe3e3}td.st-warn{background:#fff3bf}td.st-pass{background:#ebfbee}
td.st-unknown{background:#f1f3f5}td.nw{white-space:nowrap}code{font-size:12px;background:#f1f3f5;padding:0 3px;border-radius:3px}
svg.topology,svg.busbw-chart{display:block;max-width:100%;height:auto;margin:4px 0}
.axis{font:10px sans-serif;fill:#45607d}
.numa-box{fill:#e7f0fa;stroke:#4a78a8;stroke-width:1.5}.numa-box.unknown{fill:#fff4e6;stroke:#d9480f;
stroke-dasharray:6 4}.numa-label{font:600 14px sans-serif;fill:#1d3f66}.numa-sub{font:11px sans-serif;fill:#45607d}
.numa-label,.numa-sub{paint-order:stroke;stroke:#e7f0fa;stroke-width:4px;stroke-linejoin:round}
g.links path{stroke-opacity:.85}
.gpu-box{fill:#fff;stroke:#1d2733;stroke-width:1.3}.gpu-label{font:600 12px sans-serif;fill:#1d2733}
.gpu-sub{font:10px monospace;fill:#45607d}.legend span.sw{display:inline-block;width:26px;height:0;
vertical-align:middle;margin:0 4px 0 10px;border-top-style:solid;border-top-color:#d9480f}
.overview td a{color:#1d3f66}details summary{cursor:pointer;color:#1d3f66}
"""


def _badge(status, text=None):
    return '<span class="badge s-%s">%s</span>' % (esc(status), esc(text if text is not None else status))


def _table(headers, rows, numeric=(), raw_cols=()):
    out = ["<table><tr>"]
    out.extend('<th%s>%s</th>' % (' class="num"' if i in numeric else "", esc(h)) for i, h in enumerate(headers))
    out.append("</tr>")
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            attrs = ' class="num"' if i in numeric else ""
            if isinstance(cell, tuple):  # (css class, text)
                attrs = ' class="%s"' % esc(cell[0])
                cell = cell[1]
            cells.append("<td%s>%s</td>" % (attrs, cell if i in raw_cols else esc(cell)))
        out.append("<tr>%s</tr>" % "".join(cells))
    out.append("</table>")
    return "".join(out)


def _maybe_fold(summary, body, rows):
    if rows > _LONG_TABLE:
        return "<details><summary>%s (%d rows)</summary>%s</details>" % (esc(summary), rows, body)
    return body


def _section_state(entry, what):
    """HTML note for a missing/unreadable section, or None when the data is usable."""
    if entry["state"] == "missing":
        return '<p class="missing">%s: not collected (no %s)</p>' % (esc(what), esc(entry.get("file")))
    if entry["state"] == "unreadable":
        return '<p class="unreadable">%s: unreadable: %s</p>' % (esc(what), esc(entry["reason"]))
    return None


def _render_topology(topology):
    gpus = [g for g in topology["gpus"] if isinstance(g, dict)]
    phys = topology.get("physical_devices") if isinstance(topology.get("physical_devices"), list) else []
    gfx = sorted({str(g.get("gfx")) for g in gpus if g.get("gfx")})
    devices = sorted({str(g.get("device_id")) for g in gpus if g.get("device_id")})
    hives = topology.get("hives") if isinstance(topology.get("hives"), list) else []
    out = ["<h3>Topology</h3>", "<p>%d GPUs on %d physical device(s), %s %s; %d xGMI hive(s); source %s.</p>" % (
        len(gpus), len(phys) or len(gpus), esc(", ".join(gfx) or "gfx unknown"),
        esc(", ".join(devices)), len(hives), esc(topology.get("source") or "unknown"))]
    svg, info = topology_svg(topology)
    out.append(svg)
    legend = ['<p class="legend">Boxes: NUMA nodes with their CPUs; inside, the %s on that node. '
              % ("physical devices (with their partitions and logical GPU numbers)" if info["partitioned"] else "GPUs")]
    if info["drawn_links"]:
        width_by = {"xgmi_links": "xGMI link count", "bandwidth": "reported bandwidth",
                    "partition pairs": "number of directly linked partition pairs"}
        legend.append('<span class="sw" style="border-top-width:2px"></span><span class="sw" style="border-top-width:6px">'
                      '</span> direct xGMI link (%d drawn), width by %s.'
                      % (info["drawn_links"], esc(", ".join(width_by.get(m, m) for m in info["width_by"])
                                                  or "nothing (no count or bandwidth reported: equal widths)")))
    else:
        legend.append("No direct xGMI links.")
    legend.append("</p>")
    out.append("".join(legend))
    summary = link_summary(topology)
    if summary:
        out.append(_table(("GPU pairs by link", "pairs", "diagram"), summary, numeric=(1,)))
    else:
        out.append('<p class="note">The topology has no link matrix (links unknown).</p>')
    warnings = [w for w in topology.get("warnings") or [] if w]
    if warnings:
        items = "".join("<li>%s</li>" % esc(w) for w in warnings)
        out.append(_maybe_fold("Topology warnings", '<ul class="warn-list">%s</ul>' % items, len(warnings)))
    return "".join(out)


def _render_launch(launch):
    """The launch plan the launch_templates role applied on the node (its module's returned ``plan``)."""
    out = ["<h3>GPU groups and per-rank binding</h3>"]
    options = launch.get("options") if isinstance(launch.get("options"), dict) else {}
    sizes = [s for s in launch.get("sizes") or [] if isinstance(s, dict)]
    bindings = {b.get("gpu"): b for b in launch.get("bindings") or [] if isinstance(b, dict)}
    out.append("<p>As applied: CPU binding %s%s, visible-devices variable %s (scope %s)%s.</p>" % (
        esc(options.get("cpu_binding", "?")), "" if options.get("membind", True) else " (no memory binding)",
        esc(options.get("visible_devices_env", "?")), esc(options.get("visible_devices_scope", "?")),
        ", reserved CPUs %s" % esc(options["reserved_cpus"]) if options.get("reserved_cpus") else ""))
    for size in sizes:
        rows = []
        for number, (group, why, recipe) in enumerate(zip(size.get("groups") or [], size.get("explanations") or [],
                                                          size.get("recipes") or [])):
            numa = [str(n) for n in recipe.get("numa_nodes") or []] + (["unknown"] if recipe.get("numa_unknown") else [])
            rows.append((number, ",".join(str(g) for g in group), ("nw", ", ".join(numa)),
                         why, "<code>%s</code>" % esc(recipe.get("recipe"))))
        score = size.get("score") if isinstance(size.get("score"), dict) else {}
        note = "" if size.get("exact") else " (%s, not exact)" % esc(size.get("method"))
        out.append("<p>Groups of %s%s: %s xGMI-connected GPU pairs inside the groups; NUMA nodes per group, "
                   "summed: %s.</p>" % (esc(size.get("size")), note, esc(score.get("xgmi_pairs")), esc(score.get("numa_spread"))))
        out.append(_maybe_fold("Groups of %s" % size.get("size"),
                               _table(("group", "GPUs", "NUMA", "why", "recipe"), rows, numeric=(0,), raw_cols=(4,)),
                               len(rows)))
    for warning in launch.get("warnings") or []:
        if str(warning).startswith(("group size", "none of launch_templates_sizes")):
            out.append('<p class="note">%s</p>' % esc(warning))
    default = [s for s in sizes if s.get("size") == launch.get("default_size")]
    order = default[0].get("order") if default else sorted(bindings)
    if default:
        out.append("<p>Local rank r runs on the r-th GPU of the groups-of-%s order (<code>topotune-bind</code>), within "
                   "the GPUs and CPUs the job or container allows:</p>" % esc(launch.get("default_size")))
    gres = launch.get("gres") if isinstance(launch.get("gres"), dict) else {}
    cores = {line.get("gpu"): line.get("cores") for line in gres.get("lines") or [] if isinstance(line, dict)}
    rows = []
    for rank, index in enumerate(order or []):
        binding = bindings.get(index) or {}
        rows.append((rank, index, _numa_text(binding.get("numa_node")), ("nw", binding.get("cpus") or "-"),
                     "<code>%s</code>" % esc(" ".join(binding.get("numactl") or []) or "(unbound)"),
                     ("nw", cores.get(index) or "-"),
                     ("st-warn", binding["warning"]) if binding.get("warning") else ""))
    table = _table(("local rank", "GPU", "NUMA", "CPUs", "numactl", "Slurm cores", "note"), rows, numeric=(0, 1),
                   raw_cols=(4,))
    out.append(_maybe_fold("Per-rank binding", table, len(rows)))
    if gres.get("node_line"):
        out.append("<p>Slurm: <code>%s</code>%s</p>" % (esc(gres["node_line"]), (
            " with <code>SlurmdParameters=%s</code>" % esc(gres["socket_parameter"])) if gres.get("socket_parameter") else ""))
    return "".join(out)


def _render_checks(checks):
    results = [r for r in checks["results"] if isinstance(r, dict)]
    counts = _checks_counts(checks)
    out = ["<h3>Platform checks</h3><p>%s%s</p>" % (
        " ".join(_badge(s, "%d %s" % (counts[s], s)) for s in ("fail", "warn", "unknown", "pass")),
        " generation %s" % esc(checks.get("generation")) if checks.get("generation") else "")]
    results.sort(key=lambda r: (_STATUS_ORDER.get(r.get("status"), 2), str(r.get("id"))))
    rows = []
    for result in results:
        status = result.get("status") if result.get("status") in _STATUS_ORDER else "unknown"
        rows.append((result.get("id"), ("st-" + status, status), result.get("observed"), result.get("expected"),
                     result.get("remediation") if status != "pass" else "", result.get("source")))
    if rows:
        out.append(_table(("check", "status", "observed", "expected", "remediation", "source"), rows))
    else:
        out.append('<p class="note">No check results.</p>')
    return "".join(out)


def _render_drift(drift):
    items = [d for d in drift["drifted"] if isinstance(d, dict)]
    out = ["<h3>Drift</h3><p>%s mode, %s setting(s) checked, %d drifted%s.</p>" % (
        esc(drift.get("mode") or "?"), esc(drift.get("checked", "?")), len(items),
        ", %d corrected" % sum(1 for d in items if d.get("corrected")) if items else "")]
    if items:
        rows = [(d.get("owner"), d.get("kind"), d.get("item"), d.get("expected"), d.get("observed"),
                 ("st-pass", "yes") if d.get("corrected") else ("st-warn", "no")) for d in items]
        out.append(_table(("owner", "kind", "item", "expected", "observed", "corrected"), rows))
    return "".join(out)


def _size_text(size):
    if not isinstance(size, (int, float)):
        return str(size)
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return "%g %s" % (size / float(factor), unit)
    return "%d B" % size


def _pct(value):
    return "%.0f%%" % (value * 100) if isinstance(value, (int, float)) else "-"


def _busbw_chart(rows, reference, column="out_of_place"):
    """Bars of busbw per message size (the column the comparison used: AMD's criteria are in-place), with the
    reference as a dashed line (inline SVG)."""
    pick = 2 if column == "in_place" else 1
    values = [(row[0], row[pick]) for row in rows if isinstance(row[pick], (int, float)) and row[pick] >= 0]
    if not values:
        return ""
    ref = reference if isinstance(reference, (int, float)) and reference > 0 else None
    top = max([v for _unused, v in values] + ([ref] if ref else [])) or 1.0
    bar_w, gap, left, plot_h, base = 18, 4, 44, 150, 174
    width = left + len(values) * (bar_w + gap) + 10
    parts = ['<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#868e96"/>' % (left, base, width, base),
             '<text x="%d" y="%d" class="axis" text-anchor="end">%s</text>' % (left - 4, base - plot_h + 4, esc("%.0f" % top)),
             '<text x="%d" y="%d" class="axis" text-anchor="end">0</text>' % (left - 4, base + 2)]
    for i, (size, value) in enumerate(values):
        h = plot_h * value / top
        x = left + i * (bar_w + gap)
        parts.append('<rect class="busbw" x="%d" y="%.1f" width="%d" height="%.1f" fill="#4a78a8"><title>%s: %s GB/s'
                     '</title></rect>' % (x, base - h, bar_w, h, esc(size), esc(value)))
        if i % 4 == 0 or i == len(values) - 1:
            parts.append('<text x="%.1f" y="%d" class="axis" text-anchor="middle">%s</text>'
                         % (x + bar_w / 2.0, base + 16, esc(size)))
    if ref:
        y = base - plot_h * ref / top
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c92a2a" stroke-dasharray="5 4"/>'
                     '<text x="%d" y="%.1f" class="axis" fill="#c92a2a">reference %s GB/s</text>'
                     % (left, y, width, y, left + 4, y - 4, esc(ref)))
    return ('<svg class="busbw-chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" '
            'aria-label="bus bandwidth by message size">%s</svg>' % (width, base + 24, width, base + 24, "".join(parts)))


def _render_benchmark(bench):
    out = ["<h3>Benchmark (rccl-tests) and advice</h3>"]
    if bench.get("skipped"):
        out.append('<p class="note">Benchmark skipped: %s</p>' % esc(bench.get("msg")))
    result = bench.get("result") if isinstance(bench.get("result"), dict) else None
    comparison = bench.get("comparison") if isinstance(bench.get("comparison"), dict) else {}
    if result:
        out.append("<p>%s, %s rank(s): peak busbw <b>%s GB/s</b>, avg busbw %s GB/s%s.</p>" % (
            esc(result.get("collective") or "all_reduce"), esc(result.get("n_ranks")), esc(result.get("peak_busbw")),
            esc(result.get("avg_busbw") if result.get("avg_busbw") is not None else "n/a"),
            "" if result.get("complete", True) else " (truncated run)"))
    if comparison:
        status = comparison.get("status") if comparison.get("status") in ("ok", "below", "failed") else "unknown"
        out.append("<p>Against the %s reference: %s %s</p>" % (
            esc(comparison.get("generation") or "unknown generation"), _badge(status), esc(comparison.get("reason"))))
    rows = []
    for row in (result or {}).get("rows") or []:
        if not isinstance(row, dict):
            continue
        oop = row.get("out_of_place") if isinstance(row.get("out_of_place"), dict) else {}
        inp = row.get("in_place") if isinstance(row.get("in_place"), dict) else {}
        rows.append((_size_text(row.get("size")), oop.get("busbw"), inp.get("busbw"), oop.get("algbw"), oop.get("time_us")))
    chart = _busbw_chart(rows, comparison.get("expected_busbw"), (comparison.get("compared") or {}).get("column"))
    if chart:
        out.append(chart)
    if rows:
        table = _table(("size", "busbw out-of-place (GB/s)", "busbw in-place (GB/s)", "algbw (GB/s)", "time (us)"),
                       rows, numeric=(1, 2, 3, 4))
        out.append(_maybe_fold("Bus bandwidth by message size", table, len(rows)))
    advice = bench.get("advice") if isinstance(bench.get("advice"), dict) else None
    if advice:
        out.append("<p>Advice (%s): <b>%s</b></p>" % (esc(advice.get("outcome")), esc(advice.get("recommendation"))))
        reasons = [p.get("reason") for p in advice.get("path") or [] if isinstance(p, dict) and p.get("reason")]
        if reasons:
            out.append("<p>Decisions: %s</p>" % esc(" -> ".join(reasons)))
        options = [o for o in advice.get("options") or [] if isinstance(o, dict)]
        if options:
            rows = [(o.get("rank"), o.get("action"), o.get("cost_usd"), o.get("deploy_time"), _pct(o.get("throughput_gain")),
                     _pct(o.get("latency_cut")), "yes" if o.get("recommended") else "", o.get("source"))
                    for o in options]
            out.append(_table(("rank", "option", "cost (USD)", "deploy", "throughput", "latency cut", "recommended",
                               "source"), rows, numeric=(0, 2)))
        notes = [n for n in (advice.get("notes") or []) + (advice.get("warnings") or []) if n]
        if notes:
            out.append('<ul class="warn-list">%s</ul>' % "".join("<li>%s</li>" % esc(n) for n in notes))
    elif not bench.get("skipped") and not result:
        out.append('<p class="note">No run and no advice in this record.</p>')
    return "".join(out)


_RENDERERS = (("topology", "Topology", _render_topology), ("launch", "GPU groups and per-rank binding", _render_launch),
              ("checks", "Platform checks", _render_checks), ("drift", "Drift", _render_drift),
              ("benchmark", "Benchmark", _render_benchmark))


def _render_node(number, host, sections, status):
    out = ['<section class="node" id="node-%d"><h2>%s %s</h2>' % (number, esc(host), _badge(status))]
    for key, what, renderer in _RENDERERS:
        entry = sections[key]
        note = _section_state(entry, what)
        if note:
            out.append("<h3>%s</h3>%s" % (esc(what), note))
            continue
        try:
            out.append(renderer(entry["data"]))
        except Exception as err:  # noqa: BLE001 - a malformed record must degrade one section, not the report
            out.append('<p class="unreadable">%s: unreadable: %s in %s: %s</p>'
                       % (esc(what), esc(type(err).__name__), esc(entry.get("file")), esc(err)))
    out.append("</section>")
    return "".join(out)


def _overview(data, counts):
    run = data["run"]
    out = ['<section class="overview" id="overview"><h2>Cluster overview</h2>']
    out.append("<p>%d node(s), %d GPU(s); %d failing and %d warning check(s); %d drifted setting(s); "
               "%d failed and %d unreachable host(s).</p>" % (
                   counts["nodes"], counts["gpus"], counts["checks_failed"], counts["checks_warned"], counts["drifted"],
                   len(counts["failed_hosts"]), len(counts["unreachable_hosts"])))
    if run["state"] == "ok":
        info = run["data"]
        out.append("<p>Last run: %s, finished %s.</p>" % (esc(info.get("playbook") or "?"), esc(info.get("finished") or "?")))
    elif run["state"] == "unreadable":
        out.append('<p class="unreadable">Run summary: unreadable: %s</p>' % esc(run["reason"]))
    else:
        out.append('<p class="missing">Run summary: not collected (no run/summary.json).</p>')
    rows = []
    for number, (host, sections) in enumerate(sorted(data["hosts"].items()), 1):
        status = _host_status(data, host)
        topo = sections["topology"]
        if topo["state"] == "ok":
            gpus = [g for g in topo["data"]["gpus"] if isinstance(g, dict)]
            gfx = sorted({str(g.get("gfx")) for g in gpus if g.get("gfx")})
            devices = {g.get("physical_index") for g in gpus}
            partitioned = any(isinstance(g.get("partition"), dict) for g in gpus)
            gpu_text = "%d %s%s" % (len(gpus), ", ".join(gfx),
                                    " (partitions of %d devices)" % len(devices) if partitioned else "")
        else:
            gpu_text = topo["state"] if topo["state"] == "unreadable" else "not collected"
        checks = sections["checks"]
        if checks["state"] == "ok":
            c = _checks_counts(checks["data"])
            check_text = "%d fail, %d warn, %d unknown, %d pass" % (c["fail"], c["warn"], c["unknown"], c["pass"])
            check_cell = ("st-fail" if c["fail"] else "st-warn" if c["warn"] else "st-pass", check_text)
        else:
            check_cell = checks["state"] if checks["state"] == "unreadable" else "not collected"
        drift = sections["drift"]
        drift_cell = ("%d drifted" % len(drift["data"]["drifted"])) if drift["state"] == "ok" else (
            drift["state"] if drift["state"] == "unreadable" else "not collected")
        bench = sections["benchmark"]
        if bench["state"] == "ok":
            comp = bench["data"].get("comparison") if isinstance(bench["data"].get("comparison"), dict) else {}
            res = bench["data"].get("result") if isinstance(bench["data"].get("result"), dict) else {}
            bench_text = "skipped" if bench["data"].get("skipped") else "%s GB/s peak, %s" % (
                res.get("peak_busbw", "?"), comp.get("status", "unknown"))
        else:
            bench_text = bench["state"] if bench["state"] == "unreadable" else "not collected"
        rows.append(('<a href="#node-%d">%s</a>' % (number, esc(host)), _badge(status), esc(gpu_text),
                     check_cell, esc(drift_cell), esc(bench_text)))
    if rows:
        table_rows = []
        for link, badge, gpu_text, check_cell, drift_cell, bench_text in rows:
            if isinstance(check_cell, tuple):
                check_html = '<td class="%s">%s</td>' % (esc(check_cell[0]), esc(check_cell[1]))
            else:
                check_html = "<td>%s</td>" % esc(check_cell)
            table_rows.append("<tr><td>%s</td><td>%s</td><td>%s</td>%s<td>%s</td><td>%s</td></tr>" % (
                link, badge, gpu_text, check_html, drift_cell, bench_text))
        out.append("<table><tr><th>node</th><th>run</th><th>GPUs</th><th>checks</th><th>drift</th><th>benchmark</th>"
                   "</tr>%s</table>" % "".join(table_rows))
    else:
        out.append('<p class="missing">No node data found in %s (run playbooks/topology.yml first).</p>'
                   % esc(data["report_dir"]))
    out.append("</section>")
    return "".join(out)


def render_report(data, title=None):
    """The whole report as one HTML string (no external assets, no script)."""
    counts = summarize(data)
    title = title or "topotune cluster report"
    as_of = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data["as_of"])) if data.get("as_of") else "no data"
    body = [_overview(data, counts)]
    for number, (host, sections) in enumerate(sorted(data["hosts"].items()), 1):
        body.append(_render_node(number, host, sections, _host_status(data, host)))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>%s</title><style>%s</style></head><body>"
        "<header class=\"top\"><h1>%s</h1><p>Report directory %s; newest input %s; generated by topotune "
        "(topotune.instinct.cluster_report).</p></header><main>%s</main></body></html>\n"
        % (esc(title), _CSS, esc(title), esc(data["report_dir"]), esc(as_of), "".join(body)))
