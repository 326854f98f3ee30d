"""The Slurm ``gres.conf`` fragment of one node, from its GPU and CPU topology (pure functions, stdlib only).

Public API:

``record_order(records)``
    ``records`` (``{"file", "links"}`` dicts) in the order slurmd keeps GPU records when it merges gres.conf with an
    AutoDetect plugin's devices: by ``File`` in natural order, then by the position of ``-1`` in ``Links``
    (records without either last).
``gres_positions(gpus, dev_dir)``
    GPU index -> position of its line, for the GPUs with a known render node. The position is the GPU id Slurm
    hands a job (``SLURM_STEP_GPUS``); ``topotune-bind`` maps it back through the table's ``gres`` column.
``render_gres(topology, gpus, bindings, gres_index, options)``
    ``{"content", "warnings", "summary"}``. One line per GPU with a known render node, at its ``gres_index``
    position. ``summary`` = ``{"socket_parameter", "node_line", "links_known", "lines": [{"gpu", "file", "cores",
    "links"}]}``.

Rules (Slurm 22.05, the Debian 12 packages, and 24.11 behave the same here):

- Every line is ``NodeName=<node> AutoDetect=off Name=gpu ...``. With AutoDetect (``rsmi``), slurmd checks the
  configured ``File``/``Cores``/``Links`` against the detected devices and ignores each GPU that differs ("has
  mismatching Cores or Links from the device found on the system. Ignoring it", ``_merge_system_gres_conf`` and
  ``_validate_cpus_links`` in src/plugins/gres/gpu/gres_gpu.c); gres.conf(5) AutoDetect: "If there is a mismatch,
  then the node's state is set to invalid and the node is drained". The rsmi plugin reports no link counts: its
  ``Links`` are zeros with ``-1`` at the rsmi device index (``gres_links_create_empty`` in
  src/plugins/gpu/rsmi/gpu_rsmi.c), so any xGMI count here is a mismatch. ``AutoDetect=off`` on a line needs
  ``NodeName`` ("In-line AutoDetect requires NodeName to take effect", ``_parse_gres_config`` in
  src/common/gres.c 22.05, src/interfaces/gres.c 24.11), a node-local value overrides a global ``AutoDetect``, and
  repeating the same value is allowed (gres.conf(5); ``_handle_local_autodetect``). ``NodeName`` also keeps the
  lines to this node when the fragments of several nodes are joined into one gres.conf (``_parse_gres_config_node``
  skips other nodes' lines).
- GPU ids: the ``index`` Slurm gives each device is its record's position (``common_node_config_load`` in
  src/plugins/gres/common/gres_common.c 22.05, ``gres_node_config_load`` in src/interfaces/gres.c 24.11), and
  ``SLURM_STEP_GPUS`` lists those positions (``common_gres_set_env``, ``use_dev_num`` false for GPUs); with
  ``Flags=amd_gpu_env`` its ``ROCR_VISIBLE_DEVICES`` carries the same positions (or job-local counts when devices
  are constrained). Without AutoDetect the records keep the file's
  order (``gres_p_node_config_load`` merges and sorts only when a plugin returned devices); with it,
  ``_merge_system_gres_conf`` sorts them by ``File`` (``strnatcmp``) and then by the ``-1`` position in ``Links``.
  The lines are written in GPU index order (ROCm's order, so Slurm's own ``ROCR_VISIBLE_DEVICES`` names the right
  GPUs) and every line has ``Links=`` with its ``-1`` at its own position, so that order is also what Slurm's sort
  gives: the ids map to the same GPUs when render minors are not in GPU order and when link counts are unknown
  (``record_order`` is that sort; gres.conf(5) Links: "the minor number ... is not necessarily the same as the
  device number/index").
- ``Links=`` lists, per line, the xGMI link count to every GPU in line order (``-1`` itself, 0 none); Slurm
  prefers well-linked GPUs for multi-GPU requests. KFD reports bandwidth rather than counts: without counts, a
  link's value is its maximum bandwidth in units of the node's weakest direct link (MI250X: 200/100/50 GB/s ->
  4/2/1, the ``xgmi_num_links`` counts). With no link data at all every count is 0 and only the ``-1`` position
  is kept, as the rsmi plugin does ("Use links to record PCI bus ID order").
- ``Cores=`` holds *logical core indices* ("Core 0 will be the first core on the first socket"), never Linux CPU
  ids: on an SMT host CPU 192 is a sibling thread, and an index past the core count makes slurmd reject the GRES.
  The cores are those of the GPU's NUMA node, or of its L3 domain(s) with ``cpu_binding: l3``.
- Slurm schedules GRES affinity per socket, and since 24.05.5 slurmd drains a node whose GPU cores do not align
  with socket boundaries. When the cores are a NUMA node smaller than a socket (NPS2/NPS4) the node needs
  ``SlurmdParameters=numa_node_as_socket``; when they are an L3 domain, ``l3cache_as_socket``. The comment block
  states which, with the matching ``slurm.conf`` node line.
- ``Flags=amd_gpu_env`` makes Slurm set only ``ROCR_VISIBLE_DEVICES``; without it Slurm also sets
  ``CUDA_VISIBLE_DEVICES`` (which HIP applies again after ROCr has renumbered the devices, when
  ``HIP_VISIBLE_DEVICES`` is unset: ROCclr rocdevice.cpp), ``GPU_DEVICE_ORDINAL`` (OpenCL's filter in ROCclr) and
  ``ZE_AFFINITY_MASK`` to the same indices (``gres_common_gpu_set_env``), so a partial allocation can see no GPU.
"""

import re

from ..core.cpulist import parse
from ..topology.cpu import logical_cores

PLACEHOLDER_NODE = "NODE"
_DIGITS = re.compile(r"([0-9]+)")


def _natural(text):
    """A sort key ordering like Slurm's ``strnatcmp``: digit runs by value (renderD99 < renderD128)."""
    parts = _DIGITS.split(text)
    return [int(part) if k % 2 else part for k, part in enumerate(parts)]


def _self_position(links):
    """Position of the ``-1`` in a Links string (Slurm's ``gres_links_validate``); -1 when there is none."""
    values = links.split(",")
    return values.index("-1") if "-1" in values else -1


def record_order(records):
    """``records`` as slurmd orders GPU records when it merges them with autodetected devices: by ``file`` in
    natural order (``_sort_gpu_by_file``), then by the ``-1`` position in ``links`` (``_sort_gpu_by_links_order``),
    records without a file or links last. Both sorts are stable here; glibc's ``qsort`` merge sort is too."""
    by_file = sorted(records, key=lambda r: (r.get("file") is None, _natural(r.get("file") or "")))
    return sorted(by_file, key=lambda r: (r.get("links") is None, _self_position(r.get("links") or "")))


def _device_file(dev_dir, gpu):
    return "%s/dri/renderD%d" % (dev_dir, gpu["render_minor"])


def _position_links(count, position):
    return ",".join("-1" if k == position else "0" for k in range(count))


def gres_positions(gpus, dev_dir):
    """GPU index -> its line's position: the GPUs with a known render node in index order, which every line's
    ``Links`` ``-1`` position repeats, so it is also the order ``record_order`` (Slurm's sort) gives."""
    listed = [g for g in sorted(gpus, key=lambda g: g["index"]) if isinstance(g.get("render_minor"), int)]
    records = [{"gpu": g["index"], "file": _device_file(dev_dir, g), "links": _position_links(len(listed), k)}
               for k, g in enumerate(listed)]
    return {record["gpu"]: position for position, record in enumerate(record_order(records))}


def _links(topology, listed):
    """Per GPU, the Links= list and whether link data was known: xGMI link counts, else each direct link's
    bandwidth in units of the weakest one; without any link data, 0 everywhere and -1 at the GPU's position."""
    if not topology.get("links"):
        return {a: _position_links(len(listed), k) for k, a in enumerate(listed)}, False
    direct = [link for link in topology.get("links") or []
              if isinstance(link, dict) and link.get("type") == "xgmi" and link.get("hops") == 1]
    widths = [(link.get("bandwidth_mbps") or {}).get("max") for link in direct]
    unit = min(widths) if widths and all(isinstance(w, int) and w > 0 for w in widths) else None
    table = {}
    for link, width in zip(direct, widths):
        count = link.get("xgmi_links")
        if not (isinstance(count, int) and count > 0):
            count = max(1, round(width / unit)) if unit else 1
        table[(link.get("a"), link.get("b"))] = count
    return {a: ",".join("-1" if a == b else str(table.get((min(a, b), max(a, b)), 0)) for b in listed)
            for a in listed}, True


def _uniform(counts):
    values = set(counts)
    return values.pop() if len(values) == 1 else None


def _socket_plan(cpu, numa_cpus, use_l3):
    """(parameter or None, sockets, cores per socket or None, what a socket is)."""
    cores = len(cpu["cores"])
    if use_l3:
        domains = cpu.get("l3") or []
        if len(domains) > len(cpu["packages"]):
            per = _uniform(len(parse(d["cores"])) for d in domains)
            return "l3cache_as_socket", len(domains), per, "L3 domain"
    nodes = [n for n in numa_cpus.values() if n]
    if len(nodes) > len(cpu["packages"]):
        per = _uniform(len(parse(logical_cores(cpu, n))) for n in nodes)
        return "numa_node_as_socket", len(nodes), per, "NUMA node"
    per = _uniform(len(parse(p["cores"])) for p in cpu["packages"])
    return None, len(cpu["packages"]), per if per else (cores // max(1, len(cpu["packages"]))), "package"


def render_gres(topology, gpus, bindings, gres_index, options):
    warnings = []
    cpu = topology.get("cpu_topology")
    cpu = cpu if isinstance(cpu, dict) and cpu.get("cores") else None
    numa_cpus = {n["node"]: n.get("cpus") for n in topology.get("numa_nodes") or []
                 if isinstance(n, dict) and isinstance(n.get("node"), int)}
    listed = sorted(gres_index, key=gres_index.get)
    links, links_known = _links(topology, listed)
    use_l3 = options["cpu_binding"] == "l3" and any(bindings[g]["l3"] for g in listed)
    type_part = " Type=%s" % options["gres_type"] if options["gres_type"] else ""
    node = options["node_name"]
    head = [
        "# " + options["header"],
        "# Slurm gres.conf for this node, from its GPU and CPU topology (topotune.instinct.launch_templates).",
        "# NodeName=%s AutoDetect=off: with AutoDetect=rsmi slurmd checks File/Cores/Links against what rsmi" % node,
        "# reports (Links without xGMI counts) and ignores every GPU that differs, and the node is drained. NodeName",
        "# keeps these lines to this node when several nodes' fragments are joined into one gres.conf.",
        "# Lines are in GPU index order (ROCm's), with the -1 of Links= at the line's own position: that order is the",
        "# GPU id Slurm hands a job (SLURM_STEP_GPUS), also under Slurm's File/Links sort; topotune-bind maps it back.",
        "# Cores= are Slurm logical core indices (core 0 is the first core of the first socket), not Linux CPU ids.",
        "# Flags=amd_gpu_env makes Slurm set only ROCR_VISIBLE_DEVICES (it would also set CUDA_VISIBLE_DEVICES,",
        "# which HIP applies again after ROCr's renumbering: a partial allocation can see no GPU).",
    ]
    if links_known:
        head.append("# Links= counts the xGMI links to each GPU in this file's order.")
    else:
        head.append("# Links= has no link counts (the topology holds no GPU links): 0 everywhere, -1 at each GPU's "
                    "position.")
    if node == PLACEHOLDER_NODE:
        warnings.append("gres.conf: NodeName=%s is a placeholder: slurmd skips gres.conf lines of another node "
                        "name, so this node would register no GPU; set the node's Slurm name (module option "
                        "node_name, bin/topotune launch --node-name)" % node)
    parameter = None
    node_line = None
    if cpu is None:
        warnings.append("gres.conf: Cores= omitted: the CPU topology (sys/devices/system/cpu/cpu*/topology) was not "
                        "read, and Slurm needs logical core indices, which Linux CPU ids are not on SMT hosts")
        head.append("# Cores= omitted: the node's CPU topology is unknown (no cpu*/topology in sysfs).")
    else:
        parameter, sockets, per_socket, unit = _socket_plan(cpu, numa_cpus, use_l3)
        head.append("# Machine: %d package(s), %d NUMA node(s), %d L3 domain(s), %d cores, %d thread(s) per core."
                    % (len(cpu["packages"]), len([c for c in numa_cpus.values() if c]), len(cpu.get("l3") or []),
                       len(cpu["cores"]), cpu["threads_per_core"]))
        if parameter:
            head += [
                "# Each GPU's Cores= is one %s, smaller than a package: Slurm >= 24.05.5 drains the node unless" % unit,
                "# slurm.conf sets SlurmdParameters=%s (slurmd then counts each %s as a socket; check" % (parameter, unit),
                "# with slurmd -C). Without it, Slurm schedules GPU affinity per whole package.",
            ]
        else:
            head.append("# Each GPU's Cores= is one whole package (socket): aligned with Slurm's socket boundaries.")
        count = len(listed)
        gres = "gpu:%s:%d" % (options["gres_type"], count) if options["gres_type"] else "gpu:%d" % count
        node_line = "NodeName=%s CPUs=%d Sockets=%d%s ThreadsPerCore=%d Gres=%s" % (
            options["node_name"], cpu["cpus"], sockets, " CoresPerSocket=%d" % per_socket if per_socket else "",
            cpu["threads_per_core"], gres)
        head += ["# slurm.conf node line matching this file (add RealMemory= and the rest of your node options):",
                 "# " + node_line]
    lines = []
    body = []
    # GPU index order: gres_positions numbers the listed GPUs in that order (Slurm's sort keeps it)
    for gpu in sorted(gpus, key=lambda g: g["index"]):
        index = gpu["index"]
        b = bindings[index]
        if index not in gres_index:
            body.append("# GPU %d (%s): render node unknown, not listed" % (index, gpu.get("bdf")))
            continue
        cores = None
        if cpu is not None:
            if use_l3 and b["l3"]:
                cores = logical_cores(cpu, ",".join(cpu["l3"][i]["cpus"] for i in b["l3"]))
            elif b["numa_node"] is not None and numa_cpus.get(b["numa_node"]):
                cores = logical_cores(cpu, numa_cpus[b["numa_node"]])
        path = _device_file(options["dev_dir"], gpu)
        entry = {"gpu": index, "file": path, "cores": cores, "links": links[index]}
        lines.append(entry)
        body.append("# GPU %d %s NUMA %s CPUs %s" % (
            index, gpu.get("bdf") or "", _text(b["numa_node"]), numa_cpus.get(b["numa_node"]) or "-"))
        body.append("NodeName=%s AutoDetect=off Name=gpu%s File=%s%s Links=%s Flags=amd_gpu_env" % (
            node, type_part, path, " Cores=%s" % cores if cores else "", entry["links"]))
    summary = {"socket_parameter": parameter, "node_line": node_line, "links_known": links_known, "lines": lines}
    return {"content": "\n".join(head + body) + "\n", "warnings": warnings, "summary": summary}


def _text(node):
    return "unknown" if node is None else str(node)
