"""The Slurm ``gres.conf`` fragment of one node, from its GPU and CPU topology (pure functions, stdlib only).

Public API:

``render_gres(topology, gpus, bindings, gres_index, options)``
    ``{"content", "warnings", "summary"}``. One ``Name=gpu`` line per GPU with a known render node, in GPU index
    order (``gres_index`` maps GPU index -> line position; ``topotune-bind`` maps ``SLURM_STEP_GPUS`` back with
    it). ``summary`` = ``{"socket_parameter", "node_line", "lines": [{"gpu", "file", "cores", "links"}]}``.

Rules (gres.conf(5), Slurm's gres documentation):

- ``Cores=`` holds *logical core indices* ("Core 0 will be the first core on the first socket"), never Linux CPU
  ids: on an SMT host CPU 192 is a sibling thread, and an index past the core count makes slurmd reject the GRES.
  The cores are those of the GPU's NUMA node, or of its L3 domain(s) with ``cpu_binding: l3``.
- Slurm schedules GRES affinity per socket, and since 24.05.5 slurmd drains a node whose GPU cores do not align
  with socket boundaries. When the cores are a NUMA node smaller than a socket (NPS2/NPS4) the node needs
  ``SlurmdParameters=numa_node_as_socket``; when they are an L3 domain, ``l3cache_as_socket``. The comment block
  states which, with the matching ``slurm.conf`` node line.
- ``Links=`` lists, per GPU line, the xGMI link count to every GPU in file order (``-1`` for itself, 0 for none);
  Slurm prefers well-linked GPUs for multi-GPU requests. Autodetection (``AutoDetect=rsmi``) leaves it empty.
  KFD reports bandwidth rather than link counts: without counts, a link's value is its maximum bandwidth in units
  of the node's weakest direct link (MI250X: 200/100/50 GB/s -> 4/2/1, the ``xgmi_num_links`` counts).
- ``Flags=amd_gpu_env`` makes Slurm set only ``ROCR_VISIBLE_DEVICES``; without it Slurm also sets
  ``CUDA_VISIBLE_DEVICES`` and ``GPU_DEVICE_ORDINAL`` to the same indices, which the HIP runtime applies again
  after ROCr has renumbered the devices, so a partial allocation can see no GPU.
"""

from .cpu_topology import logical_cores
from .cpulist import parse


def _links(topology, listed):
    """Per GPU, the Links= list: xGMI link counts, else each direct link's bandwidth in units of the weakest one."""
    direct = [link for link in topology.get("links") or []
              if isinstance(link, dict) and link.get("type") == "xgmi" and link.get("hops") == 1]
    if not topology.get("links"):
        return None
    widths = [(link.get("bandwidth_mbps") or {}).get("max") for link in direct]
    unit = min(widths) if widths and all(isinstance(w, int) and w > 0 for w in widths) else None
    table = {}
    for link, width in zip(direct, widths):
        count = link.get("xgmi_links")
        if not (isinstance(count, int) and count > 0):
            count = max(1, round(width / unit)) if unit else 1
        table[(link.get("a"), link.get("b"))] = count
    return {a: ",".join("-1" if a == b else str(table.get((min(a, b), max(a, b)), 0)) for b in listed) for a in listed}


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
    links = _links(topology, listed)
    use_l3 = options["cpu_binding"] == "l3" and any(bindings[g]["l3"] for g in listed)
    type_part = " Type=%s" % options["gres_type"] if options["gres_type"] else ""
    head = [
        "# " + options["header"],
        "# Slurm gres.conf for this node, from its GPU and CPU topology (topotune.instinct.launch_templates). Use it",
        "# instead of AutoDetect=rsmi, which needs the retired rocm-smi library and leaves Links= empty.",
        "# Cores= are Slurm logical core indices (core 0 is the first core of the first socket), not Linux CPU ids.",
        "# Links= counts the xGMI links to each GPU in this file's order. Flags=amd_gpu_env makes Slurm set only",
        "# ROCR_VISIBLE_DEVICES (also setting CUDA_VISIBLE_DEVICES applies the filter twice: a partial allocation",
        "# can see no GPU).",
    ]
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
    for gpu in gpus:
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
        path = "%s/dri/renderD%d" % (options["dev_dir"], gpu["render_minor"])
        entry = {"gpu": index, "file": path, "cores": cores, "links": links[index] if links else None}
        lines.append(entry)
        body.append("# GPU %d %s NUMA %s CPUs %s" % (
            index, gpu.get("bdf") or "", _text(b["numa_node"]), numa_cpus.get(b["numa_node"]) or "-"))
        body.append("Name=gpu%s File=%s%s%s Flags=amd_gpu_env" % (
            type_part, path, " Cores=%s" % cores if cores else "", " Links=%s" % entry["links"] if links else ""))
    summary = {"socket_parameter": parameter, "node_line": node_line, "lines": lines}
    return {"content": "\n".join(head + body) + "\n", "warnings": warnings, "summary": summary}


def _text(node):
    return "unknown" if node is None else str(node)
