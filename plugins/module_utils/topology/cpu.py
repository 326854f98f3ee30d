"""CPU topology of a node from sysfs: packages, cores in Slurm's logical order, SMT siblings, NUMA nodes, L3 domains.

Public API (standard library only, Python 3.8+):

``CPU_DIR``
    ``sys/devices/system/cpu``, relative to the sysroot.
``read_cpu_topology(sysroot="/", numa_cpus=None)``
    ``(model, warnings)``. ``model`` is ``None`` when the sysroot holds no per-CPU ``topology/`` directories
    (a capture without sysfs, a container hiding them) or no core sets in them, else::

        {"source": "sysfs", "cpus": 384, "threads_per_core": 2,
         "packages": [{"id": 0, "cpus": "0-95,192-287", "cores": "0-95"}, ...],
         "cores": ["0,192", "1,193", ...],          # CPU list of each core, index = logical core index
         "l3": [{"cpus": "0-7,192-199", "cores": "0-7", "numa_node": 0, "package": 0}, ...] or [],
         "numa_nodes": [{"node": 0, "cpus": "0-47,192-239", "cores": "0-47"}, ...] or [],
         "allowed_cpus": "0-383",                   # what this process's cgroup cpuset allows
         "offline_cpus": ""}                        # cpuN directories that are offline (not in the model)

    ``packages``, ``l3`` are in logical order; ``numa_nodes`` in node order, each with its own CPUs
    (``node<N>/cpumap``; empty for a CPU-less node); a package ``id`` is ``physical_package_id`` (None when
    unreadable or -1). ``numa_cpus`` (``{node: cpulist}``) is used only when the sysroot has no
    ``sys/devices/system/node`` (a capture that gives the NUMA nodes otherwise).
``logical_cores(model, cpus)``
    The logical core indices (range form, ``"0-15"``) of the cores holding any of ``cpus``.

The files are read as hwloc's Linux backend reads them (``hwloc/topology-linux.c``: ``look_sysfscpu``,
``look_sysfsnode``, ``hwloc_linux__get_allowed_resources``), so that the model is the machine hwloc, and so Slurm,
finds: the CPUs are the ``cpuN`` directories that are online (``cpu/online``, else each ``cpuN/online``, a CPU
without one being online) and have a ``topology/``; the sets are the kernel masks (``core_cpus``, else the older
``thread_siblings``; ``cluster_cpus``; ``die_cpus``; ``package_cpus``, else ``core_siblings``; the L3's
``shared_cpu_map``; ``node<N>/cpumap``), the ``*_list`` files standing in where a mask is missing, each set
restricted to those CPUs and taken from its first CPU's file; a set that would cross an earlier one is dropped.
AMD family 15h/16h threads with their own ``core_id`` are cores (hwloc's compute-unit rule). The restricted view
of a cgroup cpuset changes nothing but ``allowed_cpus``: slurmd loads the whole machine (``WHOLE_SYSTEM``).
docs/topology.md has the file-by-file table.

Logical core order is slurmd's: it numbers gres.conf ``Cores=`` with abstract core ids (``src/slurmd/common/
xcpuinfo.c``: ``xcpuinfo_abs_to_mac`` through the block map of ``xcpuinfo_hwloc_topo_get``), the depth-first
order of the cores in the hwloc topology it loads (``xcpuinfo_hwloc_topo_load``: hwloc's defaults, which keep no
instruction cache and no I/O, with L1, L2, L4, L5 caches and Misc filtered out). So cores are ordered by first
CPU at every level that remains: package > die > cluster > NUMA node (or the CPUs hwloc gives a CPU-less one) > L3
> core. On Linux the first threads of all cores usually come first (``0-95``) and their SMT siblings after
(``192-287``), so a core index is not a CPU id on SMT hosts. Where a shared L2 groups cores (two Core 2 dies per
package) lstopo's own ``Core L#`` differs from slurmd's numbering; the model follows slurmd. Not modelled: Groups
hwloc makes from NUMA distances (none reorders cores on the machines of hwloc's test suite) and Intel E-cores,
which slurmd drops unless ``SlurmdParameters=allow_ecores`` (a warning says so).
"""

import itertools
import os

from ..core.cpulist import CpulistError, format_cpulist, parse, parse_mask
from ..core.sysroot import SysrootError, join, list_dir, read_text

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
# hwloc looks at cache/index0 .. index9 only
MAX_CACHE_INDEX = 10
# (mask file, list file) pairs, newest kernel names first (core_cpus/package_cpus since Linux 5.3)
CORE_FILES = (("core_cpus", "core_cpus_list"), ("thread_siblings", "thread_siblings_list"))
CLUSTER_FILES = (("cluster_cpus", "cluster_cpus_list"),)
DIE_FILES = (("die_cpus", "die_cpus_list"),)
PACKAGE_FILES = (("package_cpus", "package_cpus_list"), ("core_siblings", "core_siblings_list"))
# s390 only: hwloc reads them there and makes Groups of them
BOOK_FILES = (("book_siblings", "book_siblings_list"),)
DRAWER_FILES = (("drawer_siblings", "drawer_siblings_list"),)
# cgroup cpuset mounts hwloc (hwloc_find_linux_cgroup_mntpnt) tries before /proc/mounts since 2.10 (2.9 reads
# /proc/mounts only; on a node both find the same mount)
CGROUP_MOUNTS = (("sys/fs/cgroup/cpuset.cpus.effective", "cgroup2", "/sys/fs/cgroup"),
                 ("sys/fs/cgroup/cpuset/cpuset.cpus", "cgroup1", "/sys/fs/cgroup/cpuset"),
                 ("dev/cpuset/cpus", "cpuset", "/dev/cpuset"))


def _text(path):
    """The file's text up to a NUL (a file copied by hwloc-gather-topology ends in one; hwloc's parsers stop
    there), or None."""
    text = read_text(path, None)
    return None if text is None else text.split("\x00", 1)[0].strip()


def _int(path):
    text = _text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _read_set(path, is_mask, problems):
    text = _text(path)
    if text is None:
        return None
    try:
        return frozenset(parse_mask(text) if is_mask else parse(text))
    except CpulistError as err:
        problems.append("%s: %s" % (path, err))
        return None


def _set_file(directory, pairs, problems):
    """The CPU set of the first readable file of ``pairs`` (mask preferred, as hwloc reads masks only)."""
    for mask, listed in pairs:
        found = _read_set(os.path.join(directory, mask), True, problems)
        if found is None:
            found = _read_set(os.path.join(directory, listed), False, problems)
        if found is not None:
            return found
    return None


def _cpu_dirs(base):
    return sorted(int(n[3:]) for n in list_dir(base) if n.startswith("cpu") and n[3:].isdigit())


def _online(base, present, warnings):
    """The online CPUs among ``present`` (the cpuN directories), as hwloc decides it."""
    text = _text(os.path.join(base, "online"))
    if text is not None:
        try:
            online = set(parse(text))
            return [c for c in present if c in online]
        except CpulistError as err:
            warnings.append("%s/online: %s: each cpuN/online read instead" % (base, err))
    else:
        warnings.append("%s/online is missing (an older kernel): each cpuN/online read instead, a CPU without one "
                        "taken as online, as hwloc does" % base)
    result = []
    for cpu in present:
        # hwloc: atoi() of the file, a CPU without one (cpu0 is often not hotpluggable) is online
        state = _text(os.path.join(base, "cpu%d" % cpu, "online"))
        digits = "".join(itertools.takewhile(str.isdigit, state or ""))
        if state is None or not digits or int(digits) != 0:
            result.append(cpu)
    return result


def _amd_compute_units(sysroot):
    """AMD family 15h/16h (Bulldozer .. Jaguar): hwloc checks whether the two threads of a compute unit are cores."""
    text = _text(join(sysroot, "proc/cpuinfo")) or ""
    vendor = family = None
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "vendor_id":
            vendor = value
        elif key == "cpu family":
            family = value
    return vendor == "AuthenticAMD" and family in ("21", "22")


def _cgroup_mount(sysroot):
    """``(kind, mount point)`` of the cpuset controller, as hwloc finds it, or ``(None, None)``."""
    for probe, kind, mount in CGROUP_MOUNTS:
        if os.access(join(sysroot, probe), os.R_OK):
            return kind, mount
    for line in (_text(join(sysroot, "proc/mounts")) or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount, fstype, options = fields[1], fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            controllers = (_text(join(sysroot, mount + "/cgroup.controllers")) or "").split()
            if "cpuset" in controllers:
                return "cgroup2", mount
        elif fstype == "cpuset":
            return "cpuset", mount
        elif fstype == "cgroup" and "cpuset" in options:
            return ("cpuset" if "noprefix" in options else "cgroup1"), mount
    return None, None


def _cgroup_name(sysroot):
    name = _text(join(sysroot, "proc/self/cpuset"))
    if name:
        return name.splitlines()[0]
    for line in (_text(join(sysroot, "proc/self/cgroup")) or "").splitlines():
        _hier, _sep, rest = line.partition(":")
        if rest.startswith("cpuset:"):
            return rest[len("cpuset:"):]
        if rest.startswith(":"):
            return rest[1:]
    return None


def _allowed(sysroot, problems):
    """``(CPUs the reading process's cgroup cpuset allows or None, the file read)``, as hwloc reads them: the
    cpuset controller's mount, the process's cgroup (``/proc/self/cpuset``, else ``/proc/self/cgroup``), its
    ``cpuset.cpus.effective`` (cgroup v2), ``cpuset.cpus`` (v1) or ``cpus`` (the old cpuset fs). None when
    unreadable (a cgroup namespace shows ``/../..`` paths), as hwloc then allows every CPU."""
    try:
        kind, mount = _cgroup_mount(sysroot)
        name = _cgroup_name(sysroot) if kind else None
        if not name:
            return None, None
        leaf = {"cgroup2": "cpuset.cpus.effective", "cgroup1": "cpuset.cpus", "cpuset": "cpus"}[kind]
        path = join(sysroot, "/".join(p for p in (mount.strip("/"), name.strip("/"), leaf) if p))
    except SysrootError:
        return None, None
    return _read_set(path, False, problems), path


def _numa(sysroot, numa_cpus, pus, warnings):
    """The NUMA nodes hwloc builds (``node/online``, ``node<N>/cpumap``): ``({node: its own CPUs}, [(node, the CPUs
    hwloc attaches it to)] in hwloc's insertion order)``. hwloc gives a node the CPUs of its HMAT initiators
    (``access1``, else ``access0``) and a CPU-less node those of its closest nodes (``distance``)."""
    base = join(sysroot, NODE_DIR)
    problems = []
    if not os.path.isdir(base):
        found = {}
        if not numa_cpus:
            warnings.append("%s is missing (a kernel without NUMA support): NUMA nodes unknown; hwloc counts one "
                            "node of every CPU" % base)
        for node, text in sorted((numa_cpus or {}).items()):
            try:
                found[node] = frozenset(parse(text)) & pus
            except (CpulistError, TypeError):
                continue
        return found, sorted(found.items())
    nodes = None
    text = _text(os.path.join(base, "online"))
    if text is not None:
        try:
            nodes = parse(text)
        except CpulistError as err:
            warnings.append("%s/online: %s: node<N> directories used" % (base, err))
    if nodes is None:
        nodes = sorted(int(n[4:]) for n in list_dir(base) if n.startswith("node") and n[4:].isdigit())
    raw = {}
    taken = set()
    for node in nodes:
        cpus = _set_file(os.path.join(base, "node%d" % node), (("cpumap", "cpulist"),), problems)
        if cpus is None:
            warnings.append("%s/node%d has no readable cpumap or cpulist: NUMA node left out" % (base, node))
        elif cpus & taken:
            # hwloc (look_sysfsnode) drops a node whose CPUs overlap an earlier node's
            warnings.append("NUMA node %d: its CPUs %s overlap an earlier node's: left out, as hwloc does"
                            % (node, format_cpulist(cpus & taken)))
        else:
            raw[node] = set(cpus)
            taken |= cpus
    warnings.extend(problems)
    own = {node: frozenset(cpus) & pus for node, cpus in raw.items()}
    distances = _distances(base, nodes) if len(raw) > 1 else None
    order = [n for n in nodes if n in raw and raw[n]] + [n for n in nodes if n in raw and not raw[n]]
    for node in order:
        had_cpus = bool(raw[node])
        initiators = _initiators(base, node)
        for other in initiators or ():
            if other != node and other in raw:
                raw[node] |= raw[other]
        if not had_cpus and not raw[node] and distances:
            _closest(node, nodes, raw, distances)
    return own, [(node, frozenset(raw[node]) & pus) for node in order]


def _initiators(base, node):
    """The nodes listed in ``node<N>/access1/initiators`` (else ``access0``: Linux 5.10+ HMAT), or None."""
    for access in ("access1", "access0"):
        path = os.path.join(base, "node%d" % node, access, "initiators")
        if os.path.isdir(path):
            return [int(n[4:]) for n in list_dir(path) if n.startswith("node") and n[4:].isdigit()]
    return None


def _distances(base, nodes):
    """``{(i, j): distance}`` from ``node<N>/distance`` (SLIT), or None when a row is missing or short."""
    table = {}
    for i in nodes:
        words = (_text(os.path.join(base, "node%d" % i, "distance")) or "").split()
        if len(words) < len(nodes) or not all(w.isdigit() for w in words[:len(nodes)]):
            return None
        for j, word in zip(nodes, words):
            table[(i, j)] = int(word)
    return table


def _closest(node, nodes, raw, distances):
    """hwloc's locality of a CPU-less node: the CPUs of the nodes strictly closest to it, unless all are as close."""
    others = [j for j in nodes if j != node and j in raw]
    if not others:
        return
    best = min(distances[(node, j)] for j in others)
    nearest = [j for j in others if distances[(node, j)] == best]
    if best <= distances[(node, node)] or len(nearest) == len(nodes) - 1:
        return
    for j in nearest:
        raw[node] |= raw[j]


class _Containers:
    """The objects hwloc inserts by cpuset, in its insertion order; one that would cross another is dropped."""

    def __init__(self):
        self.sets = {}      # frozenset -> kind of the first object with it
        self.dropped = []

    def add(self, cpus, kind):
        if not cpus or cpus in self.sets:
            return cpus in self.sets
        for other in self.sets:
            if cpus & other and not (cpus <= other or other <= cpus):
                self.dropped.append((kind, cpus, self.sets[other], other))
                return False
        self.sets[cpus] = kind
        return True


def _first(cpus, cpu):
    return bool(cpus) and min(cpus) == cpu


def _read_cpus(base, pus, amd_cu, warnings):
    """Walk the CPUs as hwloc's look_sysfscpu does; returns (cores, containers, packages, l3 sets, no_core, no_l3)."""
    problems = []
    containers = _Containers()
    cores, packages, l3 = [], [], []
    thread_is_core = None if amd_cu else False
    no_cache, no_l3 = [], []
    by_package_id = {}
    no_package_files = False
    for cpu in sorted(pus):
        topo = os.path.join(base, "cpu%d" % cpu, "topology")
        core = _set_file(topo, CORE_FILES, problems)
        not_first = False
        if core is not None:
            core &= pus
            if len(core) > 1 and thread_is_core is None:
                sibling = min(c for c in core if c != cpu)
                mine = _int(os.path.join(topo, "core_id"))
                theirs = _int(os.path.join(base, "cpu%d" % sibling, "topology", "core_id"))
                thread_is_core = mine != theirs
            if not _first(core, cpu):
                not_first = True
            if not not_first or thread_is_core:
                core = frozenset([cpu]) if thread_is_core else core
                if containers.add(core, "core"):
                    cores.append(core)
        cluster = die = None
        if not not_first:
            cluster = _set_file(topo, CLUSTER_FILES, problems)
            if cluster is not None:
                cluster &= pus
                if len(cluster) == 1:
                    cluster = None
                elif not _first(cluster, cpu):
                    cluster, not_first = None, True
        if not not_first:
            die = _set_file(topo, DIE_FILES, problems)
            if die is not None:
                die &= pus
                if len(die) == 1:
                    die = None
                elif not _first(die, cpu):
                    die, not_first = None, True
        if not not_first or no_package_files:
            package = _set_file(topo, PACKAGE_FILES, problems)
            pkg_id = _int(os.path.join(topo, "physical_package_id"))
            if package is None and pkg_id is not None:
                # neither mask nor list: the CPUs of one physical_package_id make a package (hwloc makes none)
                no_package_files = True
                by_package_id.setdefault(pkg_id, []).append(cpu)
            elif package is not None:
                package &= pus
                if _first(package, cpu) and containers.add(package, "package"):
                    packages.append((pkg_id if pkg_id is not None and pkg_id >= 0 else None, package))
        for cpus, kind in ((cluster, "cluster"), (die, "die")):
            if cpus:
                containers.add(cpus, kind)
        for pairs, kind in ((BOOK_FILES, "book"), (DRAWER_FILES, "drawer")):
            cpus = _set_file(topo, pairs, problems)
            if cpus is not None and _first(cpus & pus, cpu):
                containers.add(cpus & pus, kind)
        found_l3 = _read_caches(os.path.join(base, "cpu%d" % cpu, "cache"), cpu, core, pus, containers, l3, problems)
        if found_l3 is None:
            no_cache.append(cpu)
        elif not found_l3:
            no_l3.append(cpu)
    for pkg_id, cpus in sorted(by_package_id.items(), key=lambda kv: kv[1][0]):
        cpus = frozenset(cpus)
        if containers.add(cpus, "package"):
            packages.append((pkg_id if pkg_id >= 0 else None, cpus))
    if by_package_id:
        warnings.append("CPUs %s have no package_cpus/core_siblings mask or list: packages made of the CPUs of "
                        "each physical_package_id" % format_cpulist(c for cs in by_package_id.values() for c in cs))
    warnings.extend(problems[:5])
    if len(problems) > 5:
        warnings.append("%d more unreadable CPU topology files" % (len(problems) - 5))
    return cores, containers, packages, l3, no_cache, no_l3


def _read_caches(cache_dir, cpu, core, pus, containers, l3, problems):
    """Add this CPU's level-3 cache, the one cache slurmd's hwloc keeps; returns whether it has one (None: no
    cache/). slurmd filters out L1, L2, L4 and L5 caches, and hwloc keeps no instruction cache by default."""
    names = [n for n in list_dir(cache_dir) if n.startswith("index") and n[5:].isdigit()
             and int(n[5:]) < MAX_CACHE_INDEX]
    if not names:
        return None
    has_l3 = False
    for name in sorted(names, key=lambda n: int(n[5:])):
        entry = os.path.join(cache_dir, name)
        if _int(os.path.join(entry, "level")) != 3:
            continue
        kind = (_text(os.path.join(entry, "type")) or "Unified").split()[0]
        if kind.startswith("Instruction"):
            continue
        has_l3 = True
        shared = _set_file(entry, (("shared_cpu_map", "shared_cpu_list"),), problems)
        if shared is None:
            continue
        if not shared and core:
            shared = core  # ia64 prints an empty map: hwloc uses the core's CPUs
        shared = frozenset(shared) & pus
        if _first(shared, cpu) and containers.add(shared, "L3 cache"):
            l3.append(shared)
    return has_l3


def read_cpu_topology(sysroot="/", numa_cpus=None):
    """Read packages, cores, NUMA nodes and L3 domains of the CPUs under ``sysroot``; returns ``(model, warnings)``."""
    sysroot = sysroot or "/"
    warnings = []
    base = join(sysroot, CPU_DIR)
    present = _cpu_dirs(base)
    if not present:
        return None, ["%s lists no CPU: CPU topology unknown" % base]
    online = _online(base, present, warnings)
    offline = sorted(set(present) - set(online))
    pus = frozenset(c for c in online if os.path.isdir(os.path.join(base, "cpu%d" % c, "topology")))
    if not pus:
        return None, warnings + ["%s/cpuN/topology is missing for every online CPU: CPU topology unknown" % base]
    if offline:
        warnings.append("CPUs %s are offline: hwloc and Slurm leave them out, so core indices are those of the "
                        "online CPUs and shift when they come back online" % format_cpulist(offline))
    if len(pus) < len(online):
        warnings.append("CPUs %s have no topology/ directory: left out of the CPU topology, as hwloc does"
                        % format_cpulist(set(online) - pus))
    cores, containers, packages, l3_sets, no_cache, no_l3 = _read_cpus(base, pus, _amd_compute_units(sysroot),
                                                                       warnings)
    if not cores:
        return None, warnings + ["%s/cpuN/topology has no readable core_cpus or thread_siblings mask or list: "
                                 "CPU topology unknown" % base]
    numa, attached = _numa(sysroot, numa_cpus, pus, warnings)
    for node, cpus in attached:
        if cpus and not containers.add(cpus, "NUMA node %d" % node):
            warnings.append("NUMA node %d: its CPUs %s cross a cache or package: not used to order cores, as hwloc "
                            "attaches it higher" % (node, format_cpulist(cpus)))
    for kind, cpus, other_kind, other in containers.dropped[:5]:
        warnings.append("%s %s crosses %s %s: left out, as hwloc does"
                        % (kind, format_cpulist(cpus), other_kind, format_cpulist(other)))
    in_package = set().union(*(cpus for _pkg, cpus in packages))
    if in_package != pus:
        warnings.append("CPUs %s belong to no package (their package_cpus or core_siblings mask names another "
                        "first CPU, or none is readable): slurmd counts sockets by package and numbers only the cores "
                        "inside one" % format_cpulist(pus - in_package))
    if max(pus) >= len(pus):
        # xcpuinfo_hwloc_topo_get skips a CPU whose id is not below the CPU count when it builds the block map
        warnings.append("CPU ids go up to %d with %d CPUs (offline CPUs or sparse ids): slurmd's block map "
                        "(xcpuinfo_hwloc_topo_get) leaves out CPUs %s, so Slurm binds the cores holding them to other "
                        "CPUs" % (max(pus), len(pus), format_cpulist(c for c in pus if c >= len(pus))))
    in_core = set().union(*cores)
    if in_core != pus:
        warnings.append("CPUs %s belong to no core (no readable core_cpus or thread_siblings): left out of the "
                        "cores, as hwloc does" % format_cpulist(pus - in_core))
    if no_cache and len(no_cache) < len(pus):
        warnings.append("CPUs %s have no cache/ directory: in no L3 domain" % format_cpulist(no_cache))
    elif no_cache:
        warnings.append("no CPU has a cache/ directory (%s/cpuN/cache): L3 domains unknown" % base)
    if no_l3 and len(no_l3) + len(no_cache) < len(pus):
        warnings.append("CPUs %s report no level-3 cache: in no L3 domain" % format_cpulist(no_l3))

    # hwloc's depth-first order, siblings by first CPU: sort each core by the first CPUs of the sets above it
    above = sorted(containers.sets, key=len, reverse=True)

    def key(core):
        return tuple(min(s) for s in above if len(s) > len(core) and core <= s) + (min(core),)

    ordered = sorted(cores, key=key)
    index_of = {cpu: index for index, core in enumerate(ordered) for cpu in core}

    def core_range(cpu_set):
        return format_cpulist(sorted({index_of[c] for c in cpu_set if c in index_of}))

    def position(cpu_set):
        return min((index_of[c] for c in cpu_set if c in index_of), default=len(ordered) + min(cpu_set))

    package_of = {}
    for pkg_id, cpus in packages:
        for cpu in cpus:
            package_of[cpu] = pkg_id
    node_of = {cpu: node for node, cpus in numa.items() for cpu in cpus}
    l3_domains = []
    for domain in sorted(l3_sets, key=position):
        nodes = {node_of.get(c) for c in domain}
        l3_domains.append({
            "cpus": format_cpulist(domain), "cores": core_range(domain),
            "numa_node": nodes.pop() if len(nodes) == 1 and None not in nodes else None,
            "package": package_of.get(min(domain)),
        })
    threads = {len(core) for core in ordered}
    if len(threads) > 1:
        warnings.append("cores have %s threads: Slurm wants one ThreadsPerCore and numbers CPUs as if every core had "
                        "the most (xcpuinfo_hwloc_topo_get)" % " or ".join(str(t) for t in sorted(threads)))
    allowed, allowed_path = _allowed(sysroot, [])
    allowed = (allowed & pus) if allowed is not None else pus
    if allowed != pus:
        warnings.append("this process's cgroup cpuset (%s) allows CPUs %s only: the model still describes the whole "
                        "machine, which is what Slurm numbers (slurmd loads hwloc with WHOLE_SYSTEM)"
                        % (allowed_path, format_cpulist(allowed) or "none"))
    hybrid = [k for k in ("cpu_core", "cpu_atom") if os.path.exists(join(sysroot, "sys/devices/%s/cpus" % k))]
    if len(hybrid) == 2:
        warnings.append("hybrid Intel CPU (sys/devices/cpu_core, cpu_atom): unless SlurmdParameters=allow_ecores, "
                        "slurmd numbers the P-cores only (CPUs %s); core indices here count every core"
                        % (_text(join(sysroot, "sys/devices/cpu_core/cpus")) or "?"))
    model = {
        "source": "sysfs",
        "cpus": len(pus),
        "threads_per_core": max(threads),
        "packages": [{"id": pkg_id, "cpus": format_cpulist(cpus), "cores": core_range(cpus)}
                     for pkg_id, cpus in sorted(packages, key=lambda p: position(p[1]))],
        "cores": [format_cpulist(core) for core in ordered],
        "l3": l3_domains,
        "numa_nodes": [{"node": node, "cpus": format_cpulist(cpus), "cores": core_range(cpus)}
                       for node, cpus in sorted(numa.items())],
        "allowed_cpus": format_cpulist(allowed),
        "offline_cpus": format_cpulist(offline),
    }
    return model, warnings


def logical_cores(model, cpus):
    """Logical core indices (range form) of the cores that hold any CPU of the cpulist ``cpus``."""
    wanted = set(parse(cpus)) if isinstance(cpus, str) else set(cpus)
    found = [i for i, core in enumerate(model.get("cores") or []) if wanted.intersection(parse(core))]
    return format_cpulist(found)
