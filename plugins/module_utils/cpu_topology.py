"""CPU topology of a node from sysfs: packages, cores in Slurm/hwloc logical order, SMT siblings, L3 domains.

Public API (standard library only, Python 3.8+):

``CPU_DIR``
    ``sys/devices/system/cpu``, relative to the sysroot.
``read_cpu_topology(sysroot="/", numa_cpus=None)``
    ``(model, warnings)``. ``model`` is ``None`` when the sysroot holds no per-CPU ``topology/`` directories
    (a capture without sysfs, a container hiding them), else::

        {"source": "sysfs", "cpus": 384, "threads_per_core": 2,
         "packages": [{"id": 0, "cpus": "0-95,192-287", "cores": "0-95"}, ...],
         "cores": ["0,192", "1,193", ...],          # CPU list of each core, index = logical core index
         "l3": [{"cpus": "0-7,192-199", "cores": "0-7", "numa_node": 0, "package": 0}, ...] or []}

    ``numa_cpus`` (``{node: cpulist}``, default read from ``sys/devices/system/node``) places each L3 domain on
    its NUMA node and orders cores as hwloc does.
``logical_cores(model, cpus)``
    The logical core indices (range form, ``"0-15"``) of the cores holding any of ``cpus``.

Logical core order is hwloc's (and therefore Slurm's, which numbers ``gres.conf`` ``Cores=`` that way: "Core 0
will be the first core on the first socket", gres.conf(5)): objects are ordered by their first CPU at every level
of package > NUMA node > L3 > core, depth first. On Linux the first threads of all cores usually come first
(``0-95``) and their SMT siblings after (``192-287``), so a core index is not a CPU id on SMT hosts.
"""

import os

from .cpulist import CpulistError, format_cpulist, parse
from .sysroot import join, list_dir, read_int, read_text

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"


def _cpus_of(path, online):
    text = read_text(path, None)
    if text is None:
        return None
    try:
        return frozenset(c for c in parse(text) if c in online)
    except CpulistError:
        return None


def _online(base, warnings):
    for name in ("online", "present"):
        text = read_text(os.path.join(base, name), None)
        if text:
            try:
                return set(parse(text))
            except CpulistError as err:
                warnings.append("%s/%s: %s" % (base, name, err))
    found = {int(n[3:]) for n in list_dir(base) if n.startswith("cpu") and n[3:].isdigit()}
    if found:
        warnings.append("%s/online is missing: every cpuN directory taken as online" % base)
    return found


def _numa_cpulists(sysroot):
    base = join(sysroot or "/", NODE_DIR)
    found = {}
    for name in list_dir(base):
        if name.startswith("node") and name[4:].isdigit():
            text = read_text(os.path.join(base, name, "cpulist"), None)
            if text is not None:
                found[int(name[4:])] = text
    return found


def _l3_of(cpu_dir, online):
    """The CPUs sharing this CPU's level-3 cache (unified or data), or None."""
    cache = os.path.join(cpu_dir, "cache")
    for index in list_dir(cache):
        if not index.startswith("index"):
            continue
        entry = os.path.join(cache, index)
        if read_int(os.path.join(entry, "level"), None) != 3:
            continue
        if read_text(os.path.join(entry, "type"), "Unified") not in ("Unified", "Data"):
            continue
        return _cpus_of(os.path.join(entry, "shared_cpu_list"), online)
    return None


def read_cpu_topology(sysroot="/", numa_cpus=None):
    """Read packages, cores and L3 domains of the online CPUs under ``sysroot``; returns ``(model, warnings)``."""
    warnings = []
    base = join(sysroot or "/", CPU_DIR)
    online = _online(base, warnings)
    if not online:
        return None, ["%s lists no CPU: CPU topology unknown" % base]
    package_of, siblings_of, l3_of = {}, {}, {}
    missing = []
    for cpu in sorted(online):
        cpu_dir = os.path.join(base, "cpu%d" % cpu)
        topo = os.path.join(cpu_dir, "topology")
        package = read_int(os.path.join(topo, "physical_package_id"), None)
        siblings = (_cpus_of(os.path.join(topo, "thread_siblings_list"), online)
                    or _cpus_of(os.path.join(topo, "core_cpus_list"), online))
        if package is None or not siblings or cpu not in siblings:
            missing.append(cpu)
            continue
        package_of[cpu] = package
        siblings_of[cpu] = siblings
        l3 = _l3_of(cpu_dir, online)
        if l3 and cpu in l3:
            l3_of[cpu] = l3
    if missing:
        if len(missing) == len(online):
            return None, warnings + ["%s/cpuN/topology is missing or unreadable for every CPU: CPU topology unknown"
                                     % base]
        warnings.append("CPUs %s have no readable topology/ (physical_package_id, thread_siblings_list): left out "
                        "of the CPU topology" % format_cpulist(missing))
    known = set(package_of)
    if l3_of and set(l3_of) != known:
        warnings.append("CPUs %s report no level-3 cache: L3 domains left out" % format_cpulist(known - set(l3_of)))
        l3_of = {}
    if not numa_cpus:
        numa_cpus = _numa_cpulists(sysroot)
    node_of = {}
    for node, text in sorted(numa_cpus.items()):
        try:
            for cpu in parse(text):
                node_of.setdefault(cpu, node)
        except (CpulistError, TypeError):
            continue
    cores = {frozenset(siblings_of[c]) for c in known}
    pkg_cpus = {}
    for cpu, pkg in package_of.items():
        pkg_cpus.setdefault(pkg, set()).add(cpu)
    numa_sets = {}
    for cpu in known:
        if cpu in node_of:
            numa_sets.setdefault(node_of[cpu], set()).add(cpu)

    def first(cpu_set):
        return min(cpu_set) if cpu_set else -1

    def key(core):
        cpu = min(core)
        return (first(pkg_cpus[package_of[cpu]]), first(numa_sets.get(node_of.get(cpu), ())),
                first(l3_of.get(cpu, ())), cpu)

    ordered = sorted(cores, key=key)
    index_of = {}
    for index, core in enumerate(ordered):
        for cpu in core:
            index_of[cpu] = index

    def core_range(cpu_set):
        return format_cpulist(sorted({index_of[c] for c in cpu_set if c in index_of}))

    packages = [{"id": pkg, "cpus": format_cpulist(cpus), "cores": core_range(cpus)}
                for pkg, cpus in sorted(pkg_cpus.items(), key=lambda kv: min(kv[1]))]
    l3_domains = []
    for domain in sorted({frozenset(s) for s in l3_of.values()}, key=min):
        nodes = {node_of.get(c) for c in domain}
        l3_domains.append({
            "cpus": format_cpulist(domain), "cores": core_range(domain),
            "numa_node": nodes.pop() if len(nodes) == 1 and None not in nodes else None,
            "package": package_of[min(domain)],
        })
    model = {
        "source": "sysfs",
        "cpus": len(known),
        "threads_per_core": max(len(core) for core in ordered),
        "packages": packages,
        "cores": [format_cpulist(core) for core in ordered],
        "l3": l3_domains,
    }
    return model, warnings


def logical_cores(model, cpus):
    """Logical core indices (range form) of the cores that hold any CPU of the cpulist ``cpus``."""
    wanted = set(parse(cpus)) if isinstance(cpus, str) else set(cpus)
    found = [i for i, core in enumerate(model.get("cores") or []) if wanted.intersection(parse(core))]
    return format_cpulist(found)
