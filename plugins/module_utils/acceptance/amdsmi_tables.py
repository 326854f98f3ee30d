"""Parse the text output of ``amd-smi xgmi`` and ``amd-smi metric`` (ROCm/amdsmi, human-readable format) into
measurements. ``amd-smi topology`` is ``topology/amdsmi.py``'s.

Public API (standard library only, Python 3.8+):

``parse(text, source="output")``
    ``parse_xgmi`` when the text holds amd-smi xgmi tables, else ``parse_metric``; a log holding both is read as
    the first one's output (a warning names the other).
``parse_xgmi(text, source="output")``
    ``common.new_result`` with ``tool`` ``amd-smi``, ``test`` ``xgmi``. Both layouts: ROCm 6.1's ``LINK METRIC
    TABLE`` whose destination columns are BDFs, and the later one whose columns are ``GPUn``, with the ``GPU LINK
    PORT STATUS`` and ``XGMI LINK STATUS`` tables and the ``Legend``. Measurements (``case`` None): per GPU
    ``bit_rate`` and ``max_bandwidth`` (Gb/s; scope ``gpu``, ``bdf``); per GPU pair ``read`` and ``write`` (B: the
    accumulated xGMI data amd-smi prints in KB (1024 B, as amd-smi converts them) or larger units; scope ``gpu``,
    ``peer``) and ``link_up`` (True when every link of the pair is ``U``, False when one is ``D`` or ``X``; none for
    ``N/A``); per GPU port ``port_up`` (scope ``gpu``, ``port`` 0-based). 65535 (bit_rate, UINT16_MAX) and
    4294967295 (max_bandwidth, UINT32_MAX) are amd-smi's "no value" sentinels of GPUs without xGMI (printed as
    numbers before rocm-systems PR 2053): N/A, never a speed. amd-smi prints bit_rate, max_bandwidth and link_type
    per GPU, not per pair: the first link's rate (amdsmi_get_link_metrics) in newer releases, the GPU's PCIe speed
    and speed x width in ROCm 6.1 (its amdsmi_commands.py), and XGMI when any of the GPU's links is; a pair's link
    type is ``amd-smi topology``'s (``topology/amdsmi.py``). Extra keys:
    ``layout`` (``bdf-columns`` or ``gpu-columns``), ``gpus`` (``gpu``, ``bdf``, ``bit_rate_gbps``,
    ``max_bandwidth_gbps``, ``link_type``, ``ports``), ``pairs`` (``gpu``, ``peer``, ``bdf``, ``peer_bdf``,
    ``read``/``write`` as printed, ``read_bytes``/``write_bytes``, ``status``), ``sentinels`` (the values read as
    N/A).
``parse_metric(text, source="output")``
    ``tool`` ``amd-smi``, ``test`` ``metric``: the ``GPU: n`` blocks of ``amd-smi metric`` (any of its sections,
    ``--pcie`` alone included) as ``gpus`` (``{gpu, sections}``, the nested ``KEY: value`` text), and a measurement
    per numeric value whose unit ``criteria.UNITS`` knows or that has none (``count``): ``case`` the section path
    in lower case (``pcie``, ``ecc_blocks.umc``), ``metric`` the key in lower case (``width``, ``speed``,
    ``bandwidth``, ``replay_count``, ``l0_to_recovery_count``, ``nak_sent_count``, ``max_packet_size``...), scope
    ``gpu``. ``N/A``, the UINT32/UINT64 maximum and negative numbers are no value.

    Both: launcher and log prefixes, the echoed ``$ amd-smi ...`` line, amd-smi's warnings, cut markers (skipped;
    not ``complete``). Not ``complete`` either: a GPU row without its Read/Write rows, a table cut short. Refused
    (``AcceptanceParseError``, one line): no xgmi table / no ``GPU: n`` block with a metric section; a table row
    whose cells do not match its header (unless it is the last line).
``detect(text)``
    True for ``amd-smi xgmi`` (its table titles) or ``amd-smi metric`` output (``GPU: n`` blocks with a metric
    section such as PCIE with REPLAY_COUNT, USAGE, POWER, TEMPERATURE, ECC; not ``amd-smi static``'s).
"""

import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, last_meaningful, measurement, new_result, shorten
from .common import refuse as _refuse
from .criteria import UNITS

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_TITLE = re.compile(r"(LINK METRIC TABLE|GPU LINK PORT STATUS|XGMI LINK STATUS|Legend)\s*:\s*$")
_GPU_ROW = re.compile(r"^\s*GPU(\d+)\s+(%s)\s*(.*?)\s*$" % _BDF)
_RW_ROW = re.compile(r"^\s*(Read|Write)\b\s*(.*?)\s*$")
_RATE = r"N/A|\d+(?:\.\d+)?\s*Gb/s"
_METRICS_ROW = re.compile(r"^(%s)\s*(%s)\s*(\S+)?$" % (_RATE, _RATE))
_DATA = re.compile(r"N/A|(\d+(?:\.\d+)?)\s*([KMGTPE]?i?B)\b")
_DATA_FACTORS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50, "EB": 1 << 60,
                 "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}
_STATUS = re.compile(r"^(?:SELF|N/A|[UDX](?:/[UDX])*)$")
_SENTINELS = {"bit_rate": (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF),
              "max_bandwidth": (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)}
_METRIC_SENTINELS = (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)
_GPU_BLOCK = re.compile(r"^GPU:\s*(\d+)\s*$")
_KEY = re.compile(r"^([A-Z][A-Z0-9_]*)\s*:\s*(.*?)\s*$")
_VALUE = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*([A-Za-z%/][\w%/]*))?$")
# sections only amd-smi metric prints (amdsmi_commands.py metric_gpu); CLOCK is static's too
_METRIC_SECTIONS = {"USAGE", "POWER", "TEMPERATURE", "PCIE", "ECC", "ECC_BLOCKS", "FAN", "VOLTAGE_CURVE", "OVERDRIVE",
                    "MEM_OVERDRIVE", "PERF_LEVEL", "XGMI_ERR", "ENERGY", "MEM_USAGE", "THROTTLE", "VOLTAGE",
                    "BASEBOARD", "GPUBOARD", "XGMI_LINK_STATUS"}
# sections of amd-smi static (and firmware, bad-pages...): a GPU block with one is not metric output
_OTHER_SECTIONS = {"ASIC", "BUS", "VBIOS", "LIMIT", "DRIVER", "BOARD", "RAS", "PARTITION", "SOC_PSTATE", "XGMI_PLPD",
                   "PROCESS_ISOLATION", "NUMA", "VRAM", "CACHE_INFO", "FW_LIST", "IFWI", "RETIRED", "PENDING",
                   "UN_RES", "CPER", "PROCESS_INFO"}
_WARNING = re.compile(r"^\s*(?:WARNING|ERROR|error)\b", re.IGNORECASE)


_ANCHORS = (_TITLE, re.compile(r"GPU\d+\s+%s" % _BDF), re.compile(r"GPU:\s*\d+\s*$"))


def _anchor(line):
    for pattern in _ANCHORS:
        match = pattern.search(line)
        if match is not None:
            return match.start()
    return None


def _lines(text, source):
    if not isinstance(text, str):
        raise AcceptanceParseError("%s line 0: %r: expected text, got %s" % (source, "", type(text).__name__))
    lines = clean_lines(text)
    return prefixes.strip_all(lines, prefixes.learn(lines, _anchor))


def _has_xgmi(lines):
    return any(_TITLE.search(line) and not line.strip().startswith("Legend") for _n, line in lines)


def _metric_blocks(lines):
    """Line numbers of ``GPU: n`` blocks that hold a metric-only section and no other tool's section."""
    found, current, sections = [], None, set()
    for number, line in lines + [(None, "GPU: 0")]:
        if _GPU_BLOCK.match(line.strip()) and not line.startswith((" ", "\t")):
            if current is not None and sections & _METRIC_SECTIONS and not sections & _OTHER_SECTIONS:
                found.append(current)
            current, sections = number, set()
            continue
        match = _KEY.match(line.strip())
        if current is not None and match is not None and not match.group(2):
            sections.add(match.group(1))
    return found


def detect(text):
    """See the module docstring."""
    if not isinstance(text, str):
        return False
    try:
        lines = _lines(text, "detect")
    except AcceptanceParseError:
        return False
    if _has_xgmi(lines) and any(_GPU_ROW.match(line) for _n, line in lines):
        return True
    return bool(_metric_blocks(lines))


def _rate(text, key, sentinels):
    if text is None or text.strip() == "N/A":
        return None
    value = float(text.split()[0].replace("Gb/s", ""))
    if value in _SENTINELS[key]:
        sentinels.append({"field": key, "value": int(value)})
        return None
    return value


def _bytes(match):
    if match.group(0) == "N/A":
        return None
    return float(match.group(1)) * _DATA_FACTORS[match.group(2)]


def parse_xgmi(text, source="output"):
    """See the module docstring."""
    lines = _lines(text, source)
    result = new_result("amd-smi", "xgmi", source)
    gpus, order, pairs, sentinels, warnings = {}, [], [], [], result["warnings"]
    section, columns, current, cut = None, None, None, False
    last = last_meaningful(lines)
    pending_rw = None

    def gpu(index, bdf):
        if index not in gpus:
            gpus[index] = {"gpu": index, "bdf": bdf, "bit_rate_gbps": None, "max_bandwidth_gbps": None,
                           "link_type": None, "ports": []}
            order.append(index)
        return gpus[index]

    for number, line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if is_cut(line):
            cut = True
            continue
        title = _TITLE.search(stripped)
        if title is not None and title.start() == 0:
            section, columns = title.group(1), None
            if pending_rw is not None:
                cut = True
                warnings.append("line %d: GPU%d's row has no Read/Write rows" % (pending_rw[0], pending_rw[1]))
                pending_rw = None
            continue
        if section is None or section == "Legend":
            if _WARNING.match(stripped):
                warnings.append("line %d: %s" % (number, shorten(stripped, 120)))
            continue
        if columns is None:
            tokens = stripped.split()
            if tokens and tokens[0] == "bdf":
                names = tokens[1:]
                if section == "LINK METRIC TABLE":
                    names = [t for t in names if t not in ("bit_rate", "max_bandwidth", "link_type")]
                columns = [] if section == "GPU LINK PORT STATUS" else names
                if any(not re.match(r"^(?:GPU\d+|%s)$" % _BDF, c) for c in columns):
                    _refuse(source, number, line, "not an amd-smi xgmi column header (GPUn or BDF columns)")
                result["layout"] = result.get("layout") or ("gpu-columns" if columns and columns[0].startswith("GPU")
                                                            else "bdf-columns")
                continue
            _refuse(source, number, line, "a %s row before its column header" % section)
        row = _GPU_ROW.match(line)
        if section == "LINK METRIC TABLE":
            rw = _RW_ROW.match(line)
            if row is not None:
                if pending_rw is not None:
                    cut = True
                    warnings.append("line %d: GPU%d's row has no Read/Write rows" % (pending_rw[0], pending_rw[1]))
                entry = gpu(int(row.group(1)), row.group(2).lower())
                metrics = _METRICS_ROW.match(row.group(3))
                if metrics is None:
                    if number == last:
                        cut = True
                        continue
                    _refuse(source, number, line, "not 'bit_rate max_bandwidth link_type'")
                entry["bit_rate_gbps"] = _rate(metrics.group(1), "bit_rate", sentinels)
                entry["max_bandwidth_gbps"] = _rate(metrics.group(2), "max_bandwidth", sentinels)
                entry["link_type"] = None if metrics.group(3) in (None, "N/A") else metrics.group(3)
                current, pending_rw = entry, (number, entry["gpu"], set())
                continue
            if rw is not None and current is not None:
                cells = list(_DATA.finditer(rw.group(2)))
                rest = _DATA.sub("", rw.group(2)).strip()
                if len(cells) != len(columns) or rest:
                    if number == last:
                        cut = True
                        continue
                    _refuse(source, number, line, "%d values, the header has %d GPU columns" % (len(cells),
                                                                                                len(columns)))
                kind = rw.group(1).lower()
                for column, cell in zip(columns, cells):
                    pairs.append({"gpu": current["gpu"], "column": column, "bdf": current["bdf"], "kind": kind,
                                  "text": " ".join(cell.group(0).split()), "bytes": _bytes(cell)})
                if pending_rw is not None:
                    pending_rw[2].add(kind)
                    if pending_rw[2] == {"read", "write"}:
                        pending_rw = None
                continue
        elif section in ("GPU LINK PORT STATUS", "XGMI LINK STATUS") and row is not None:
            statuses = row.group(3).split()
            if not all(_STATUS.match(s) for s in statuses) or (
                    section == "XGMI LINK STATUS" and len(statuses) != len(columns)):
                if number == last:
                    cut = True
                    continue
                _refuse(source, number, line, "%s cells do not match the header (%d GPU columns)" % (
                    section, len(columns)))
            entry = gpu(int(row.group(1)), row.group(2).lower())
            if section == "GPU LINK PORT STATUS":
                entry["ports"] = statuses
            else:
                for column, status in zip(columns, statuses):
                    pairs.append({"gpu": entry["gpu"], "column": column, "bdf": entry["bdf"], "kind": "status",
                                  "text": status, "bytes": None})
            continue
        if _WARNING.match(stripped):
            warnings.append("line %d: %s" % (number, shorten(stripped, 120)))
            continue
        if number == last:
            cut = True
            continue
        _refuse(source, number, line, "not a row of amd-smi xgmi's %s" % section)
    if pending_rw is not None:
        cut = True
        warnings.append("line %d: GPU%d's row has no Read/Write rows" % (pending_rw[0], pending_rw[1]))
    if not gpus:
        number, line = next(((n, t) for n, t in lines if t.strip()), (1, ""))
        _refuse(source, number, line, "no amd-smi xgmi table (LINK METRIC TABLE / XGMI LINK STATUS with GPU rows)")
    by_bdf = {entry["bdf"]: index for index, entry in gpus.items()}
    merged = {}
    for item in pairs:
        column = item["column"]
        peer = int(column[3:]) if column.startswith("GPU") else by_bdf.get(column.lower(), column.lower())
        key = (item["gpu"], peer)
        pair = merged.setdefault(key, {"gpu": item["gpu"], "peer": peer, "bdf": item["bdf"],
                                       "peer_bdf": gpus[peer]["bdf"] if peer in gpus else (
                                           column.lower() if not column.startswith("GPU") else None),
                                       "read": None, "write": None, "read_bytes": None, "write_bytes": None,
                                       "status": None})
        if item["kind"] == "status":
            pair["status"] = item["text"]
        else:
            pair[item["kind"]] = item["text"]
            pair[item["kind"] + "_bytes"] = item["bytes"]
    measurements = result["measurements"]
    for index in order:
        entry = gpus[index]
        for key in ("bit_rate", "max_bandwidth"):
            if entry[key + "_gbps"] is not None:
                measurements.append(measurement(key, "Gb/s", entry[key + "_gbps"], None, gpu=index, bdf=entry["bdf"]))
        for port, status in enumerate(entry["ports"]):
            if status in ("U", "D", "X"):
                measurements.append(measurement("port_up", "bool", status == "U", None, gpu=index, port=port))
    for pair in merged.values():
        if pair["gpu"] == pair["peer"]:
            continue
        for key in ("read", "write"):
            if pair[key + "_bytes"] is not None:
                measurements.append(measurement(key, "B", pair[key + "_bytes"], None, gpu=pair["gpu"],
                                                peer=pair["peer"]))
        links = (pair["status"] or "N/A").split("/")
        if all(s in ("U", "D", "X") for s in links):
            measurements.append(measurement("link_up", "bool", all(s == "U" for s in links), None, gpu=pair["gpu"],
                                            peer=pair["peer"]))
    if sentinels:
        warnings.append("%d bit_rate/max_bandwidth value(s) are amd-smi's no-value sentinels (65535, 4294967295): "
                        "read as N/A" % len(sentinels))
    result.update(complete=not cut, gpus=[gpus[i] for i in order], pairs=list(merged.values()),
                  sentinels=sentinels)
    result.setdefault("layout", None)
    return result


def _metric_value(text):
    """(value, unit) of a metric leaf; (None, None) when it is no number."""
    match = _VALUE.match(text.strip())
    if match is None:
        return None, None
    number, unit = match.group(1), match.group(2)
    value = float(number)
    if value in _METRIC_SENTINELS or value < 0:
        return None, None
    if unit is None:
        return value, "count"
    return value, unit


def parse_metric(text, source="output"):
    """See the module docstring."""
    lines = _lines(text, source)
    blocks = set(_metric_blocks(lines))
    result = new_result("amd-smi", "metric", source)
    gpus, cut, current, stack = [], False, None, []
    for number, line in lines:
        if not line.strip():
            continue
        if is_cut(line):
            cut = True
            continue
        match = _GPU_BLOCK.match(line.strip())
        if match is not None and not line.startswith((" ", "\t")):
            current = {"gpu": int(match.group(1)), "sections": {}} if number in blocks else None
            if current is not None:
                gpus.append(current)
            stack = [(-1, current["sections"] if current is not None else {})]
            continue
        if current is None:
            if _WARNING.match(line):
                result["warnings"].append("line %d: %s" % (number, shorten(line.strip(), 120)))
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        key = _KEY.match(line.strip())
        target = stack[-1][1]
        if key is None:
            # a list item amd-smi prints under its key, or a folded long value
            items = target.setdefault("_items", [])
            items.append(line.strip())
            continue
        name, value = key.group(1), key.group(2)
        if value:
            target[name] = value
        else:
            child = {}
            target[name] = child
            stack.append((indent, child))
    if not gpus:
        number, line = next(((n, t) for n, t in lines if t.strip()), (1, ""))
        _refuse(source, number, line, "no amd-smi metric output (a 'GPU: n' block with a metric section such as PCIE, "
                                      "USAGE, POWER)")

    def walk(node, path, gpu):
        for name, value in node.items():
            if name == "_items":
                continue
            if isinstance(value, dict):
                walk(value, path + [name.lower()], gpu)
                continue
            number, unit = _metric_value(value)
            if number is None or unit not in UNITS:
                continue
            result["measurements"].append(measurement(name.lower(), unit, number, ".".join(path) or None, gpu=gpu))

    for entry in gpus:
        walk(entry["sections"], [], entry["gpu"])
    result.update(complete=not cut, gpus=gpus)
    return result


def parse(text, source="output"):
    """See the module docstring."""
    lines = _lines(text, source)
    xgmi = next((n for n, line in lines if _TITLE.search(line) and not line.strip().startswith("Legend")), None)
    metric = _metric_blocks(lines)
    if xgmi is not None and (not metric or xgmi < metric[0]):
        result = parse_xgmi(text, source)
        if metric:
            result["warnings"].append("line %d: the log also holds amd-smi metric output: parse_metric reads it"
                                      % metric[0])
        return result
    result = parse_metric(text, source)
    if xgmi is not None:
        result["warnings"].append("line %d: the log also holds amd-smi xgmi tables: parse_xgmi reads them" % xgmi)
    return result
