"""Render the launch configuration of one node from its topology model and GPU groups (pure functions).

Public API (standard library only):

``LaunchRenderError(TopotuneError, ValueError)``
    Invalid options; the message names the option and the fix.
``OPTIONS``
    The module's options and the role's variables, declared once (``module_utils/core/options.py``).
``DEFAULTS``
    The renderer's option defaults: the declared ones, and its own for what the module derives from the node.
``TABLE_NAME``, ``ENV_FILE``
    The wrapper's table file name in ``dest`` (``bind.table``); the pattern of group env file names.
``validate_options(options)``
    ``DEFAULTS`` merged with ``options``, every value checked; raises ``LaunchRenderError`` naming the option and,
    for the options role ``launch_templates`` takes from a variable (``ROLE_VARIABLES``), that variable.
``plan(topology, options)``
    Groups per configured size (``grouping.group_gpus``), the per-GPU binding (CPU set, NUMA node, L3 domain)
    and the whole-group recipe per group.
``render(topology, options)``
    ``{"files": [{"path", "content", "mode"}], "plan", "warnings"}``: the wrapper's table ``<dest>/bind.table``,
    the wrapper itself when ``options["wrapper_content"]`` holds it (the role's static ``files/topotune-bind``),
    one env file per group (``<dest>/size<K>-group<G>.env``), ``<dest>/gres.conf`` and ``<dest>/README``.

Binding of a GPU (``cpu_binding``): ``numa`` = the CPUs of its NUMA node; ``l3`` = the L3 domain(s) assigned to
it (``l3_domains``), or ``cpu_map[gpu]``; ``none`` = no binding. ``reserved_cpus`` are removed from every set
(e.g. Frontier's first core of each L3 region). Its memory (``memory_policy``): the memory nodes and the numactl
policy, ``membind`` (``--membind``), ``preferred`` (``--preferred``) or ``none``. Every rule is here: the table
carries each GPU's resolved CPUs, memory nodes and policy, and the wrapper (the role's ``files/topotune-bind``)
only intersects them with the CPUs and memory nodes the process is allowed (Slurm step, cgroup cpuset, affinity)
at run time and applies the result, so the table holds the node's plan, not a job's.
"""

import re

from ..core.cpulist import CpulistError, format_cpulist, normalize, parse
from ..core.errors import TopotuneError
from ..core.options import role_variables
from .gres import gres_positions, render_gres
from .grouping import GroupingError, group_gpus

VISIBLE_ENVS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "none")
SCOPES = ("group", "rank")
CPU_BINDINGS = ("numa", "l3", "none")
# numactl's memory policies a table line may carry (numactl(8): --membind, --preferred); none: no memory policy
MEMORY_POLICIES = ("membind", "preferred", "none")
TABLE_NAME = "bind.table"
# 2: each gpu line carries its memory nodes and policy (format 1 had one node-wide `membind` line)
TABLE_FORMAT = 2
ENV_FILE = re.compile(r"^size[0-9]+-group[0-9]+\.env$")
# The wrapper's default table path; the module points it at <dest>/bind.table when dest is not the default.
WRAPPER_TABLE_LINE = re.compile(r"^(TABLE=\$\{TOPOTUNE_LAUNCH_TABLE:-)(/[^}]*)(\})", re.M)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Values go unquoted into env files read by docker --env-file (no quote removal) and systemd
# EnvironmentFile, and into the wrapper's table: keep them to characters that mean the same in all three.
_VALUE = re.compile(r"^[A-Za-z0-9_,.:/=+@%-]*$")
_ABS_PATH = re.compile(r"^/[A-Za-z0-9_./+-]+$")
_NODE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
# gres.conf Type= (letters, digits, _ . + -); "auto" is the node's GPU generation in lower case
_GRES_TYPE = re.compile(r"^[A-Za-z0-9_.+-]*$")

# The options of the launch_templates module and the variables of role launch_templates, declared once
# (module_utils/core/options.py): the module's argument spec and the flags of `bin/topotune launch` are built from here,
# the module's documentation and the role's argument specs, defaults, README table and task arguments generated from
# here (scripts/gen-options).
OPTIONS = {
    "sizes": {
        "type": "list", "elements": "int", "default": [2, 4, 8],
        "description": "Group sizes to generate: GPUs grouped so collectives stay on the fastest xGMI links. Each size "
                       "should divide the node's GPU count (1, 2, 4, 8 are typical); sizes that do not are skipped "
                       "with a warning (63-partition nodes, for example).",
        "cli": {"flag": "--size", "metavar": "K",
                "help": "group size to generate (repeatable; default 2, 4 and 8 as the role)"},
    },
    "default_size": {
        "type": "int",
        "description": "Size the wrapper uses without C(--size) or C(TOPOTUNE_GROUP_SIZE); null takes the smallest "
                       "generated size.",
    },
    "visible_devices_env": {
        "type": "str", "default": "ROCR_VISIBLE_DEVICES", "choices": list(VISIBLE_ENVS),
        "description": "Variable restricting the GPUs a rank sees: C(ROCR_VISIBLE_DEVICES) (AMD's advice on Linux), "
                       "C(HIP_VISIBLE_DEVICES), or C(none) (sets and unsets nothing). Only one is set, since HIP "
                       "indexes apply after the ROCR filter: the wrapper unsets the others, Slurm's "
                       "C(CUDA_VISIBLE_DEVICES) and C(GPU_DEVICE_ORDINAL) included.",
        "cli": {},
    },
    "visible_devices_scope": {
        "type": "str", "default": "group", "choices": list(SCOPES),
        "description": "C(group) makes all GPUs of the rank's group (or step) visible in group order and the rank uses "
                       "device C(LOCAL_RANK) (torchrun style; peers stay visible for RCCL IPC); C(rank) makes only the "
                       "rank's GPU visible, as device 0 (LUMI's C(select_gpu) style).",
        "cli": {},
    },
    "cpu_binding": {
        "type": "str", "default": "numa", "choices": list(CPU_BINDINGS),
        "description": "C(numa) binds each rank to the CPUs of its GPU's NUMA node and memory to that node; C(l3) binds "
                       "CPUs to the GPU's L3 domain(s) (each NUMA node's L3 domains shared out among its GPUs in index "
                       "order, as Frontier's table; O(cpu_map) overrides), memory to the NUMA node; C(none) only sets "
                       "the environment.",
        "cli": {},
    },
    "cpu_map": {
        "type": "dict", "default": {},
        "description": "GPU index to a cpulist overriding the derived L3 set of that GPU with O(cpu_binding=l3), for "
                       "example C({4: \"1-7,65-71\"}).",
    },
    "reserved_cpus": {
        "type": "str", "default": "",
        "description": [
            "CPUs no rank is bound to (system or low-noise cores), a cpulist such as C(0,8,16); Frontier's core "
            "specialization keeps the first core of every L3 region "
            "(C(0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120)).",
            "Slurm core specialization (C(CoreSpecCount), C(CpuSpecList)) needs nothing here: the wrapper keeps within "
            "the job's CPUs anyway.",
        ],
        "cli": {"metavar": "CPULIST", "help": "CPUs no rank is bound to"},
    },
    "membind": {
        "type": "bool", "default": True,
        "description": "Also bind memory to the GPU's NUMA node (C(numactl --membind)).",
        "cli": {"flag": "--no-membind", "help": "do not bind memory to the GPU's NUMA node"},
    },
    "extra_env": {
        "type": "dict", "default": {},
        "description": "Extra variables C({NAME: \"value\"}) for the wrapper's table and every env file (values "
                       "limited to C([A-Za-z0-9_,.:/=+@%-])); one set here wins over the C(NCCL_IB_HCA) and "
                       "C(NCCL_IB_GID_INDEX) found from the node's NICs.",
    },
    "rdma_withheld": {
        "type": "str", "default": "",
        "description": [
            "Why C(NCCL_IB_HCA) and C(NCCL_IB_GID_INDEX) are left unset on this node, whatever NICs it has; the README "
            "says it. Empty (the default): the node's own NIC pairing decides (O(sysroot)).",
            "The role sets it itself where the node's rails differ from the other nodes of its hardware class in the "
            "play (filter C(topotune.instinct.rdma_withheld) over the play's C(topotune_discovery), as the "
            "C(rail_consistency) check compares them): RCCL pairs two nodes' NICs by position, so with two NICs "
            "swapped or cabled to another leaf, NICs in GPU order would send the traffic across rails. A value set "
            "here wins; the nodes are compared only when the play discovered them (C(playbooks/topology.yml)).",
        ],
        "role": {"arg": "{{ launch_templates_rdma_withheld or (__launch_templates_rdma_withheld | default({}))"
                        ".get(inventory_hostname, '') }}"},
    },
    "gres": {
        "type": "bool", "default": True,
        "description": "Write the Slurm C(gres.conf) fragment (C(gres.conf) in O(dest)).",
    },
    "gres_type": {
        "type": "str", "default": "",
        "description": "Slurm GRES C(Type=) of every GPU line: C(auto) is the node's GPU generation in lower case "
                       "(C(mi300x), C(mi250x), ...; the model's C(identity), from C(knowledge/gpu_generations.yml)), "
                       "empty for none, or a name of your own; slurm.conf's C(Gres=) must use the same type.",
        "role": {"default": "auto"},
        "cli": {"default": "auto", "metavar": "TYPE",
                "help": "gres.conf Type=: auto (the node's GPU generation, lower case), '' or a name"},
    },
    "dest": {
        "type": "path", "default": "/etc/topotune/launch",
        "description": "Directory of the wrapper's table, the env files, C(gres.conf) and C(README).",
        "role": {"name": "launch_templates_dir"},
        "cli": {"help": "launch directory on the node"},
    },
    "wrapper_path": {
        "type": "path", "default": "/usr/local/bin/topotune-bind",
        "description": "Path of the binding wrapper.",
    },
    "wrapper_content": {
        "type": "str", "role": False,
        "description": "Content of the binding wrapper (the role's C(files/topotune-bind)); its default table path is "
                       "pointed at O(dest). Without it the wrapper is not written (only its table and the other files).",
    },
    "dev_dir": {
        "type": "path", "role": False,
        "description": [
            "Directory holding C(dri/renderD*) on the node, used for the C(File=) of gres.conf and where the wrapper "
            "tests which GPUs the process can open.",
            "Default C(<sysroot>/dev), so C(/dev) on a real node and the profile's C(dev) on a simulated one.",
        ],
        "cli": {"default": "/dev", "help": "where the node's dri/renderD* are"},
    },
    "node_name": {
        "type": "str", "role": False,
        "description": "Slurm node name of the gres.conf lines (C(NodeName=<name> AutoDetect=off ...); slurmd skips "
                       "lines of other names) and of the C(slurm.conf) line in its comments; default the short host "
                       "name.",
        "cli": {"default": "NODE",
                "help": "Slurm node name of the gres.conf lines (NodeName=) and of its slurm.conf line"},
    },
    "header": {
        "type": "str", "default": "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten.",
        "role": False,
        "description": "First comment line of every file.",
    },
    "topology": {
        "type": "dict", "default": {},
        "description": [
            "The topology model of M(topotune.instinct.gpu_topology) (C(topotune_discovery.topology) after "
            "C(playbooks/topology.yml)); its C(cpu_topology) gives Slurm core indices and L3 domains.",
            "Empty, the node's model is discovered in the same task (M(topotune.instinct.gpu_topology) under "
            "O(sysroot), C(/) when that is empty), after every other option is checked. The role passes the first "
            "model of its chain: this variable, else C(topotune_topology) (a model the inventory gives), else the "
            "play's C(topotune_discovery) (the C(topotune.instinct.node_topology) filter).",
        ],
        "role": {"arg": "{{ launch_templates_topology | topotune.instinct.node_topology(topotune_topology | default({}), "
                        "topotune_discovery | default({})) }}"},
    },
    "sysroot": {
        "type": "path", "default": "/",
        "description": [
            "Root under which the node's sysfs is read (C(/) on a real node, C(/sim) on a simulated one): its "
            "topology when none is given, and the RDMA NICs with the PCIe switch each sits below "
            "(C(sys/class/infiniband/*/device)).",
            "When every GPU has exactly one NIC below its own PCIe switch or root port, each group's env file gets "
            "C(NCCL_IB_HCA) = C(=) and its GPUs' NICs in GPU order with their ACTIVE ports (RCCL reads it), and "
            "C(NCCL_IB_GID_INDEX) = the index of those ports' RoCE v2 GID when they agree; otherwise none is written "
            "and the README says why. A value in O(extra_env) always wins. An empty string skips the NIC lookup.",
        ],
        "role": {"default": "{{ topotune_sysroot | default('/') }}"},
    },
}

# The renderer's defaults: the declared ones and its own (what the module derives from the node, the RDMA NICs).
DEFAULTS = dict({name: option.get("default") for name, option in OPTIONS.items() if name not in ("topology", "sysroot")},
                dev_dir="/dev", node_name="NODE",
                # RDMA NIC per GPU (PCI slot -> NIC name) from pcie_health.nic_affinity, and why it is
                # empty; each NIC's ports ({port, active, gid_index, gid_reason}) from rdma_health.launch_rdma_options
                rdma_nics={}, rdma_ports={}, rdma_reason="no RDMA NIC affinity given")


class LaunchRenderError(TopotuneError, ValueError):
    """Options that cannot be rendered."""


# The variable of role launch_templates each option comes from (the role passes them as they are, so the message
# names what its user sets); the other options are the module's own (wrapper_content, dev_dir, node_name, header,
# rdma_*).
ROLE_VARIABLES = role_variables(OPTIONS, "launch_templates")


def _fail(option, value, why, fix):
    variable = ROLE_VARIABLES.get(option.split("[", 1)[0])
    raise LaunchRenderError("launch option %s=%r%s %s; %s" % (
        option, value, " (%s)" % variable if variable else "", why, fix))


def _check_value(option, text):
    if not _VALUE.match(text):
        _fail(option, text, "holds characters that env files and shells read differently", "use letters, digits and _,.:/=+@%-")


def validate_options(options):
    opts = dict(DEFAULTS)
    opts.update({k: v for k, v in (options or {}).items() if v is not None or k == "default_size"})
    sizes = opts["sizes"]
    if not isinstance(sizes, (list, tuple)) or not sizes or any(
            isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        _fail("sizes", sizes, "is not a non-empty list of positive integers", "use e.g. [2, 4, 8]")
    opts["sizes"] = sorted(set(sizes))
    if opts["default_size"] is not None and opts["default_size"] not in opts["sizes"]:
        _fail("default_size", opts["default_size"], "is not one of sizes %s" % opts["sizes"],
              "pick one of sizes or leave it unset (the smallest size)")
    for key, allowed in (("visible_devices_env", VISIBLE_ENVS), ("visible_devices_scope", SCOPES),
                         ("cpu_binding", CPU_BINDINGS)):
        if opts[key] not in allowed:
            _fail(key, opts[key], "is not supported", "use one of %s" % ", ".join(allowed))
    for key in ("dest", "wrapper_path", "dev_dir"):
        if not isinstance(opts[key], str) or not _ABS_PATH.match(opts[key]) or ".." in opts[key]:
            _fail(key, opts[key], "is not a plain absolute path", "use e.g. %s" % DEFAULTS[key])
    opts["dev_dir"] = opts["dev_dir"].rstrip("/") or "/"
    cpu_map = {}
    if not isinstance(opts["cpu_map"], dict):
        _fail("cpu_map", opts["cpu_map"], "is not a mapping", "map GPU index to a cpulist, e.g. {4: '0-7,64-71'}")
    for gpu, cpus in opts["cpu_map"].items():
        try:
            cpu_map[int(gpu)] = normalize(str(cpus))
        except (ValueError, CpulistError) as exc:
            _fail("cpu_map[%s]" % gpu, cpus, "is not a GPU index -> cpulist entry (%s)" % exc,
                  "map GPU index to a cpulist, e.g. {4: '0-7,64-71'}")
    opts["cpu_map"] = cpu_map
    try:
        opts["reserved_cpus"] = normalize(str(opts["reserved_cpus"] or ""))
    except CpulistError as exc:
        _fail("reserved_cpus", opts["reserved_cpus"], "is not a cpulist (%s)" % exc,
              "list the CPUs no rank may use, e.g. '0,8,16' or ''")
    if not isinstance(opts["extra_env"], dict):
        _fail("extra_env", opts["extra_env"], "is not a mapping", "use NAME: value pairs")
    extra = {}
    for name, value in opts["extra_env"].items():
        text = "" if value is None else str(value)
        if isinstance(value, bool):
            text = "1" if value else "0"
        if not _NAME.match(str(name)):
            _fail("extra_env", name, "is not an environment variable name", "use [A-Za-z_][A-Za-z0-9_]*")
        _check_value("extra_env[%s]" % name, text)
        extra[str(name)] = text
    opts["extra_env"] = extra
    if not isinstance(opts["gres_type"], str) or not _GRES_TYPE.match(opts["gres_type"]):
        _fail("gres_type", opts["gres_type"], "is not a plain Slurm GRES type",
              "use auto (the GPU generation), e.g. mi250x, or ''")
    if not isinstance(opts["node_name"], str) or not _NODE_NAME.match(opts["node_name"]):
        _fail("node_name", opts["node_name"], "is not a Slurm node name", "use the node's short host name")
    if opts["wrapper_content"] is not None and not isinstance(opts["wrapper_content"], str):
        _fail("wrapper_content", type(opts["wrapper_content"]).__name__, "is not text",
              "pass the content of the role's files/topotune-bind")
    if not isinstance(opts["rdma_nics"], dict):
        _fail("rdma_nics", opts["rdma_nics"], "is not a mapping", "map GPU PCI slot to NIC name, e.g. {'0000:0c:00': 'mlx5_0'}")
    for slot, nic in opts["rdma_nics"].items():
        _check_value("rdma_nics[%s]" % slot, str(nic))
    opts["rdma_ports"] = _rdma_ports(opts["rdma_ports"])
    opts["rdma_reason"] = " ".join(str(opts["rdma_reason"] or "").split())
    if not isinstance(opts["rdma_withheld"], str):
        _fail("rdma_withheld", opts["rdma_withheld"], "is not text", "give the reason NCCL_IB_HCA is withheld, or ''")
    opts["rdma_withheld"] = " ".join(opts["rdma_withheld"].split())
    opts["membind"] = bool(opts["membind"])
    opts["gres"] = bool(opts["gres"])
    opts["header"] = " ".join(str(opts["header"]).split())
    return opts


def _rdma_ports(value):
    fix = "pass rdma_health.launch_rdma_options(sysroot)['rdma_ports']"
    if not isinstance(value, dict):
        _fail("rdma_ports", value, "is not a mapping of NIC name to its ports", fix)
    out = {}
    for nic, ports in value.items():
        _check_value("rdma_ports[%s]" % nic, str(nic))
        if not isinstance(ports, list) or not all(isinstance(q, dict) for q in ports):
            _fail("rdma_ports[%s]" % nic, ports, "is not a list of ports", fix)
        checked = []
        for q in ports:
            port, gid = q.get("port"), q.get("gid_index")
            if isinstance(port, bool) or not isinstance(port, int) or port < 1 or (
                    gid is not None and (isinstance(gid, bool) or not isinstance(gid, int) or gid < 0)):
                _fail("rdma_ports[%s]" % nic, q, "has no port number >= 1 or a GID index that is not an integer >= 0",
                      fix)
            checked.append({"port": port, "active": bool(q.get("active")), "gid_index": gid,
                            "gid_reason": " ".join(str(q.get("gid_reason") or "").split()) or None})
        out[str(nic)] = checked
    return out


def _cpus(text):
    if not text:
        return None
    try:
        return normalize(str(text)) or None
    except CpulistError:
        return None


def _node(gpu):
    node = gpu.get("numa_node")
    return node if isinstance(node, int) and not isinstance(node, bool) and node >= 0 else None


def l3_domains(topology):
    """GPU index -> (L3 domain indices, cpulist): each NUMA node's L3 domains shared out among its GPUs.

    No interface reports which L3 (CCD) a GPU is closest to, so the rule is positional, as torchrun's
    ``core-complex`` binding: the GPUs of a NUMA node in index order take its L3 domains in CPU order, in
    contiguous blocks when there are at least as many domains as GPUs (8 GCDs / 8 L3 on MI250X: one each,
    Frontier's table), else GPU i shares domain ``i * L // G``.
    """
    cpu = topology.get("cpu_topology") or {}
    domains = cpu.get("l3") or []
    result = {}
    by_node = {}
    for gpu in topology.get("gpus") or []:
        node = _node(gpu)
        if node is not None and isinstance(gpu.get("index"), int):
            by_node.setdefault(node, []).append(gpu["index"])
    for node, gpus in by_node.items():
        local = [i for i, d in enumerate(domains) if d.get("numa_node") == node]
        if not local:
            continue
        gpus = sorted(gpus)
        count, nd = len(gpus), len(local)
        for rank, gpu in enumerate(gpus):
            if nd >= count:
                chosen = local[rank * nd // count:(rank + 1) * nd // count]
            else:
                chosen = [local[rank * nd // count]]
            cpus = format_cpulist(c for i in chosen for c in parse(domains[i]["cpus"]))
            result[gpu] = (chosen, cpus)
    return result


def _numa_cpus(topology):
    return {n["node"]: _cpus(n.get("cpus")) for n in topology.get("numa_nodes") or []
            if isinstance(n, dict) and isinstance(n.get("node"), int)}


def memory_policy(nodes, options):
    """``(policy, nodes)``: the numactl memory policy (``MEMORY_POLICIES``) of ranks bound to CPUs near the NUMA
    ``nodes`` (a list; empty or holding None when unknown), and the nodes it names (None for ``none``).

    Memory is bound (``membind``, numactl(8): "only allocate memory from nodes") to the nodes of the ranks' CPUs when
    ``membind`` is on, CPUs are bound and every node is known; otherwise no policy (allocations stay first-touch
    local). The one place of this rule: the wrapper applies what the table says, group recipes use it too."""
    if not options["membind"] or options["cpu_binding"] == "none" or not nodes or any(n is None for n in nodes):
        return "none", None
    return "membind", sorted(set(nodes))


def _numactl_memory(policy, nodes):
    return [] if policy == "none" else ["--%s=%s" % (policy, ",".join(str(n) for n in nodes))]


def gpu_binding(gpu, options, numa_cpus, l3):
    """The CPU set, NUMA node, memory nodes and policy, and nominal numactl arguments of one rank on ``gpu``."""
    index = gpu["index"]
    node = _node(gpu)
    result = {"gpu": index, "numa_node": node, "cpus": None, "l3": None, "mems": None, "memory_policy": "none",
              "numactl": [], "warning": None}
    mode = options["cpu_binding"]
    if mode == "none":
        return result
    cpus = None
    if mode == "l3":
        if index in options["cpu_map"]:
            cpus = options["cpu_map"][index]
        elif index in l3:
            result["l3"] = l3[index][0]
            cpus = l3[index][1]
        elif node is not None:
            result["warning"] = ("GPU %d: no L3 domain known on NUMA node %d (no cpu*/cache/index3 in sysfs, and "
                                 "no launch_templates_cpu_map entry): bound to the NUMA node instead" % (index, node))
    if cpus is None and node is not None:
        cpus = numa_cpus.get(node) or _cpus(gpu.get("cpus"))
    if cpus is None:
        if node is None:
            result["warning"] = (
                "GPU %d: NUMA node unknown (the kernel reports numa_node -1, as in VMs or firmware without SRAT "
                "proximity): its ranks run unbound rather than on a guessed node; fix the firmware/VM NUMA "
                "topology or set launch_templates_cpu_map" % index)
        else:
            result["warning"] = "GPU %d: no CPU list known for NUMA node %d: its ranks run unbound" % (index, node)
        return result
    if options["reserved_cpus"]:
        reserved = set(parse(options["reserved_cpus"]))
        kept = format_cpulist(c for c in parse(cpus) if c not in reserved)
        if not kept:
            result["warning"] = ("GPU %d: launch_templates_reserved_cpus (%s) covers all of its CPUs %s: its ranks "
                                 "run unbound" % (index, options["reserved_cpus"], cpus))
            return result
        cpus = kept
    result["cpus"] = cpus
    policy, mems = memory_policy([node], options)
    result["memory_policy"], result["mems"] = policy, format_cpulist(mems) if mems else None
    result["numactl"] = ["--physcpubind=%s" % cpus] + _numactl_memory(policy, mems or [])
    return result


def full_mesh(topology, gpus):
    """True when every pair of the (unpartitioned) GPUs has a direct xGMI link: MI300X-class OAM baseboards."""
    if len(gpus) < 3 or any(g.get("partition") for g in gpus):
        return False
    direct = {(link.get("a"), link.get("b")) for link in topology.get("links") or []
              if isinstance(link, dict) and link.get("type") == "xgmi" and link.get("hops") == 1}
    return len(direct) == len(gpus) * (len(gpus) - 1) // 2


def _group_recipe(members, bindings, options):
    nodes = sorted({bindings[g]["numa_node"] for g in members if bindings[g]["numa_node"] is not None})
    unknown = any(bindings[g]["numa_node"] is None for g in members)
    gpus = ",".join(str(g) for g in members)
    visible = "" if options["visible_devices_env"] == "none" else "%s=%s " % (options["visible_devices_env"], gpus)
    args = []
    if nodes and not unknown and options["cpu_binding"] != "none":
        args = ["--cpunodebind=%s" % ",".join(str(n) for n in nodes)]
        policy, mems = memory_policy(nodes, options)
        args += _numactl_memory(policy, mems or [])
    recipe = visible + ("numactl %s <command>" % " ".join(args) if args else "<command>")
    return {"gpus": list(members), "numa_nodes": nodes, "numa_unknown": unknown, "numactl": args,
            "recipe": recipe}


def plan(topology, options):
    """Groups, bindings and recipes for every configured size that fits this node."""
    opts = validate_options(options)
    if not isinstance(topology, dict) or not isinstance(topology.get("gpus"), list) or not topology["gpus"]:
        raise LaunchRenderError("the topology has no GPUs: gather it with topotune.instinct.gpu_topology "
                                "on a node with amdgpu loaded (or the right sysroot)")
    if opts["gres_type"] == "auto":
        # the node's GPU generation, as discovery identified it (module_utils/topology/identity.py); none: no Type=
        opts["gres_type"] = str((topology.get("identity") or {}).get("generation") or "").lower()
    gpus = sorted((g for g in topology["gpus"] if isinstance(g, dict) and isinstance(g.get("index"), int)),
                  key=lambda g: g["index"])
    numa_cpus = _numa_cpus(topology)
    l3 = l3_domains(topology) if opts["cpu_binding"] == "l3" else {}
    bindings = {g["index"]: gpu_binding(g, opts, numa_cpus, l3) for g in gpus}
    warnings = [b["warning"] for b in bindings.values() if b["warning"]]
    sizes = []
    wanted = opts["sizes"]
    for size in wanted:
        try:
            result = group_gpus(topology, size)
        except GroupingError as exc:
            warnings.append("group size %d skipped: %s" % (size, exc))
            continue
        warnings.extend(result["warnings"])
        sizes.append(result)
    if not sizes:
        # Degraded, not failed: per-GPU bindings still place every rank right (e.g. a CPX node missing a partition).
        warnings.append(
            "none of launch_templates_sizes %s divides the %d GPUs of this node: writing per-GPU groups (size 1) "
            "only; a node short of GPUs or partitions needs attention (platform checks: gpu count)"
            % (wanted, len(gpus)))
        sizes.append(group_gpus(topology, 1))
    if full_mesh(topology, gpus):
        # AMD RCCL usage tips, "Improving performance on the MI300X accelerator when using fewer than 8 GPUs": a
        # collective over part of a fully connected node reaches "only a fraction of the potential bandwidth"
        for result in sizes:
            if 1 < result["size"] < len(gpus):
                warnings.append(
                    "groups of %d on a fully connected xGMI node: a collective inside a group uses %d of each GPU's %d "
                    "xGMI links, a fraction of the node's bandwidth (AMD RCCL usage tips, \"Improving performance on "
                    "the MI300X accelerator when using fewer than 8 GPUs\"); keep them for jobs that need that many "
                    "GPUs (tensor parallel %d), else run collectives on 1 or %d GPUs"
                    % (result["size"], result["size"] - 1, len(gpus) - 1, result["size"], len(gpus)))
    for result in sizes:
        result["recipes"] = [_group_recipe(group, bindings, opts) for group in result["groups"]]
        result["order"] = [g for group in result["groups"] for g in group]
    default = opts["default_size"]
    if default is None or default not in [s["size"] for s in sizes]:
        default = sizes[0]["size"]
    return {"gpus": gpus, "bindings": bindings, "sizes": sizes, "default_size": default,
            "options": opts, "warnings": warnings}


def _dash(value):
    return "-" if value is None or value == "" else str(value)


def gres_indices(p):
    """GPU index -> its position in gres.conf, the GPU id Slurm hands a job (``slurm_gres.gres_positions``)."""
    return gres_positions(p["gpus"], p["options"]["dev_dir"])


def render_table(p):
    """The wrapper's table: options, one line per GPU, the rank order and groups of every size, extra env."""
    opts = p["options"]
    gres = gres_indices(p)
    lines = [
        "# " + opts["header"],
        "# topotune-bind table, generated from this node's topology by topotune.instinct.launch_templates.",
        "format %d" % TABLE_FORMAT,
        "sizes %s" % " ".join(str(s["size"]) for s in p["sizes"]),
        "default_size %d" % p["default_size"],
        "visible %s" % opts["visible_devices_env"],
        "scope %s" % opts["visible_devices_scope"],
        "devdir %s" % opts["dev_dir"],
        "# gpu INDEX GRES_INDEX RENDER_MINOR NUMA_NODE CPUS MEMS POLICY: the GPU's resolved binding, applied by the",
        "# wrapper within the CPUs and memory nodes the process is allowed (CPUS, MEMS: - = unbound; POLICY: %s)"
        % " | ".join(MEMORY_POLICIES),
    ]
    for gpu in p["gpus"]:
        b = p["bindings"][gpu["index"]]
        lines.append("gpu %d %s %s %s %s %s %s" % (
            gpu["index"], _dash(gres.get(gpu["index"])), _dash(gpu.get("render_minor")), _dash(b["numa_node"]),
            _dash(b["cpus"]), _dash(b["mems"]), b["memory_policy"]))
    for s in p["sizes"]:
        lines.append("order %d %s" % (s["size"], " ".join(str(g) for g in s["order"])))
        for number, members in enumerate(s["groups"]):
            lines.append("group %d %d %s" % (s["size"], number, " ".join(str(g) for g in members)))
    for name, value in sorted(opts["extra_env"].items()):
        lines.append("env %s %s" % (name, value))
    return "\n".join(lines) + "\n"


def container_indices(members):
    """Visible-device indices of ``members`` inside a container given only their render nodes.

    ROCr enumerates only the GPUs whose render node the process can open (libhsakmt skips the others), in KFD
    order, so inside such a container the group's GPUs are 0..k-1 in host index order.
    """
    local = {gpu: position for position, gpu in enumerate(sorted(members))}
    return [local[g] for g in members]


def _slot(bdf):
    return str(bdf or "").rsplit(".", 1)[0]


def _group_nics(p, members):
    """``(NICs of the group's GPUs in GPU order, None)`` or ``(None, why not)``."""
    opts = p["options"]
    if opts["rdma_withheld"]:
        return None, "withheld: %s" % opts["rdma_withheld"]
    if not opts["rdma_nics"]:
        return None, opts["rdma_reason"] or "no RDMA NIC affinity"
    by_index = {g["index"]: g for g in p["gpus"]}
    names = []
    for gpu in members:
        nic = opts["rdma_nics"].get(_slot(by_index[gpu].get("bdf")))
        if not nic:
            return None, "GPU %d has no NIC of its own below its PCIe switch" % gpu
        if nic not in names:
            names.append(nic)
    return names, None


def rdma_hca(p, members):
    """``(NCCL_IB_HCA value or None, why not)`` for a group: ``=`` and its GPUs' NICs in GPU order, each with its
    ACTIVE port(s) when the ports are known, unless the user set NCCL_IB_HCA (extra_env wins) or a GPU of the
    group has no clear NIC, or a NIC no active port.

    RCCL's NCCL_IB_HCA (ROCm/rccl src/transport/net_ib.cc ``ncclIbInit``, src/misc/utils.cc ``matchIf``): a
    leading ``^`` excludes, then a leading ``=`` makes every entry an exact name, otherwise each entry is a prefix
    (``mlx5_1`` also selects ``mlx5_10``..``mlx5_19``); ``:<port>`` limits an entry to that port. RCCL uses only
    ACTIVE ports, and with no matching port at all it falls back to sockets."""
    opts = p["options"]
    if "NCCL_IB_HCA" in opts["extra_env"]:
        return None, "NCCL_IB_HCA set by launch_templates_extra_env"
    names, why = _group_nics(p, members)
    if why:
        return None, why
    entries = []
    for nic in names:
        ports = opts["rdma_ports"].get(nic)
        if not ports:
            entries.append(nic)  # ports not read: the whole device, still by exact name
            continue
        active = [q for q in ports if q["active"]]
        if not active:
            return None, "%s has no ACTIVE port (sys/class/infiniband/%s/ports/*/state), so RCCL would not use it" % (
                nic, nic)
        entries.extend("%s:%d" % (nic, q["port"]) for q in active)
    return "=" + ",".join(entries), None


def rdma_gid_index(p, members):
    """``(NCCL_IB_GID_INDEX or None, why not)`` for a group: the index of the RoCE v2 GID on the ports its
    NCCL_IB_HCA names (``rdma_health.roce_v2_gid_index``), when they all have it at the same index. Never a
    node-wide constant: the GID table is per port and follows the netdev's addresses. A user's value wins."""
    opts = p["options"]
    if "NCCL_IB_GID_INDEX" in opts["extra_env"]:
        return None, "NCCL_IB_GID_INDEX set by launch_templates_extra_env"
    hca, why = rdma_hca(p, members)
    if not hca:
        return None, "NCCL_IB_HCA is not set (%s), so the ports RCCL uses are not known" % why
    found = {}
    for nic in _group_nics(p, members)[0]:
        ports = opts["rdma_ports"].get(nic)
        if not ports:
            return None, "the ports of %s were not read (sys/class/infiniband/%s/ports)" % (nic, nic)
        for q in ports:
            if not q["active"]:
                continue
            if q["gid_index"] is None:
                return None, "%s %s" % (nic, q["gid_reason"] or "port %d: no RoCE v2 GID" % q["port"])
            found["%s:%d" % (nic, q["port"])] = q["gid_index"]
    if len(set(found.values())) > 1:
        return None, ("the RoCE v2 GID is at different indices on these ports (%s): one NCCL_IB_GID_INDEX cannot name "
                      "them all; RCCL >= 2.21 (ROCm 6.3) finds each itself" % ", ".join(
                          "%s %d" % kv for kv in sorted(found.items())))
    return next(iter(found.values())), None


def render_env(p, size, group):
    opts = p["options"]
    recipe = size["recipes"][group]
    members = size["groups"][group]
    cpus = [p["bindings"][g]["cpus"] for g in members if p["bindings"][g]["cpus"]]
    cpu_text = normalize(",".join(cpus)) if cpus and not recipe["numa_unknown"] else ""
    env = [
        ("TOPOTUNE_GROUP_SIZE", str(size["size"])),
        ("TOPOTUNE_GROUP", str(group)),
        ("TOPOTUNE_GROUP_GPUS", ",".join(str(g) for g in members)),
    ]
    if opts["visible_devices_env"] != "none":
        env.append((opts["visible_devices_env"], ",".join(str(i) for i in container_indices(members))))
    env.append(("TOPOTUNE_NUMA_NODES", ",".join(str(n) for n in recipe["numa_nodes"]) if recipe["numactl"] else ""))
    env.append(("TOPOTUNE_CPUS", cpu_text))
    env.append(("HSA_OVERRIDE_CPU_AFFINITY_DEBUG", "0"))
    hca, _unused = rdma_hca(p, members)
    if hca:
        # RCCL reads NCCL_IB_HCA: the NICs below the group's own PCIe switches, in GPU order, by exact name
        env.append(("NCCL_IB_HCA", hca))
    gid, _unused = rdma_gid_index(p, members)
    if gid is not None:
        env.append(("NCCL_IB_GID_INDEX", str(gid)))
    env.extend(sorted(opts["extra_env"].items()))
    head = [
        "# " + opts["header"],
        "# topotune launch group %d of size %d: host GPUs %s" % (group, size["size"], ",".join(str(g) for g in members)),
        "# %s" % size["explanations"][group],
        "# For a container given only this group's render nodes (topotune.instinct.container_runtime group flags):",
        "# ROCm numbers the GPUs it can open from 0, so the visible-device indices here are the container's own.",
        "# On the host, launch through %s --size %d --group %d, which maps host GPUs itself."
        % (opts["wrapper_path"], size["size"], group),
        "# KEY=VALUE for docker --env-file (values are never quoted)",
    ]
    return "\n".join(head + ["%s=%s" % kv for kv in env]) + "\n"


def render_readme(p, topology):
    opts = p["options"]
    name = opts["wrapper_path"]
    binding = opts["cpu_binding"] + ("" if opts["membind"] else " (no --membind)")
    if opts["reserved_cpus"]:
        binding += ", reserved CPUs %s excluded" % opts["reserved_cpus"]
    out = [
        "# " + opts["header"],
        "topotune launch configuration",
        "=============================",
        "",
        "Topology source: %s; %d GPUs. Visible-device variable: %s (scope: %s). CPU binding: %s." % (
            topology.get("source"), len(p["gpus"]), opts["visible_devices_env"], opts["visible_devices_scope"], binding),
        "",
        "Per-rank binding on this node (the wrapper also keeps it within the CPUs the job or container allows):",
        "GPU  BDF           render  NUMA     CPUs            per-rank numactl",
    ]
    for gpu in p["gpus"]:
        b = p["bindings"][gpu["index"]]
        minor = gpu.get("render_minor")
        out.append("%-4d %-13s %-7s %-8s %-15s %s" % (
            gpu["index"], gpu.get("bdf") or "-", "D%d" % minor if isinstance(minor, int) else "-",
            "unknown" if b["numa_node"] is None else b["numa_node"], b["cpus"] or "-",
            " ".join(b["numactl"]) or "(unbound)"))
    for s in p["sizes"]:
        out += ["", "Groups of %d (method %s%s; score %s)" % (
            s["size"], s["method"], ", proven optimal" if s["exact"] else ", not proven optimal",
            ", ".join("%s=%s" % kv for kv in sorted(s["score"].items()))),
            "  rank order without --group: %s" % ",".join(str(g) for g in s["order"])]
        for g in range(len(s["groups"])):
            out.append("  group %d: %s" % (g, s["explanations"][g]))
            out.append("    container env file: %s/size%d-group%d.env" % (opts["dest"], s["size"], g))
            out.append("    whole-group launch on the host: %s" % s["recipes"][g]["recipe"])
    out += [
        "",
        "Usage (one process per GPU; the local rank comes from --rank, LOCAL_RANK, SLURM_LOCALID,",
        "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or PALS_LOCAL_RANKID; under Slurm the step's GPUs come",
        "from SLURM_STEP_GPUS, in a container from the render nodes it can open):",
        "  torchrun --nproc-per-node=N --no-python %s [--size K --group G] python train.py" % name,
        "  srun --ntasks-per-node=N --gres=gpu:N --cpu-bind=none %s python app.py" % name,
        "  mpirun -np N --bind-to none %s ./app" % name,
        "  docker run $(grep -v '^#' /etc/topotune/container/group-G.flags) IMAGE ...",
        "  %s --print --rank R -- cmd   (show the binding without running)" % name,
        "Table read by the wrapper: %s/%s" % (opts["dest"], TABLE_NAME),
    ]
    if opts["gres"]:
        out.append("Slurm gres.conf fragment: %s/gres.conf" % opts["dest"])
    every = [g["index"] for g in p["gpus"]]
    hca, why = rdma_hca(p, every)
    out.append("RDMA: NCCL_IB_HCA in each group's env file = the NICs below its GPUs' PCIe switches (node: %s)" % hca
               if hca else "RDMA: NCCL_IB_HCA not set: %s" % why)
    gid, why = rdma_gid_index(p, every)
    if gid is not None:
        out.append("RDMA: NCCL_IB_GID_INDEX in each group's env file = %d, the RoCE v2 GID of its NICs' ports "
                   "(gid_attrs/types)" % gid)
    else:
        grouped = sorted({rdma_gid_index(p, members)[0] for size in p["sizes"] for members in size["groups"]} - {None})
        out.append("RDMA: NCCL_IB_GID_INDEX not set node-wide: %s%s" % (why, "; the groups whose ports agree have it "
                   "in their env files (%s)" % ", ".join(str(g) for g in grouped) if grouped else ""))
    if p["warnings"]:
        out += ["", "Warnings:"] + ["  - " + w for w in p["warnings"]]
    return "\n".join(out) + "\n"


def wrapper_text(content, dest):
    """The static wrapper with its default table path pointed at ``dest`` (one line changes)."""
    table = "%s/%s" % (dest, TABLE_NAME)
    if not WRAPPER_TABLE_LINE.search(content):
        raise LaunchRenderError("the wrapper given as wrapper_content has no TABLE=${TOPOTUNE_LAUNCH_TABLE:-...} "
                                "line: pass the role's files/topotune-bind unchanged")
    return WRAPPER_TABLE_LINE.sub(lambda m: m.group(1) + table + m.group(3), content, count=1)


def render(topology, options):
    """Every file of the launch configuration, as ``{"path", "content", "mode"}`` dicts."""
    p = plan(topology, options)
    opts = p["options"]
    files = []
    if opts["wrapper_content"] is not None:
        files.append({"path": opts["wrapper_path"], "content": wrapper_text(opts["wrapper_content"], opts["dest"]),
                      "mode": "0755"})
    files.append({"path": "%s/%s" % (opts["dest"], TABLE_NAME), "content": render_table(p), "mode": "0644"})
    for s in p["sizes"]:
        for g in range(len(s["groups"])):
            files.append({"path": "%s/size%d-group%d.env" % (opts["dest"], s["size"], g),
                          "content": render_env(p, s, g), "mode": "0644"})
    gres = None
    if opts["gres"]:
        gres = render_gres(topology, p["gpus"], p["bindings"], gres_indices(p), opts)
        p["warnings"].extend(gres["warnings"])
        files.append({"path": opts["dest"] + "/gres.conf", "content": gres["content"], "mode": "0644"})
    files.append({"path": opts["dest"] + "/README", "content": render_readme(p, topology), "mode": "0644"})
    summary = {
        "default_size": p["default_size"],
        "options": {k: opts[k] for k in ("visible_devices_env", "visible_devices_scope", "cpu_binding", "membind",
                                         "reserved_cpus", "dest", "wrapper_path")},
        "sizes": [{k: s[k] for k in ("size", "groups", "score", "explanations", "exact", "method", "recipes", "order")}
                  for s in p["sizes"]],
        "bindings": [p["bindings"][g["index"]] for g in p["gpus"]],
        "gres": gres["summary"] if gres else None,
        "warnings": list(p["warnings"]),
    }
    return {"files": files, "plan": summary, "warnings": p["warnings"]}
