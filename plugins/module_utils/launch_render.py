"""Render the launch configuration of one node from its topology model and GPU groups (pure functions).

Public API (standard library only):

``LaunchRenderError(TopotuneError, ValueError)``
    Invalid options; the message names the option and the fix.
``DEFAULTS``
    Option defaults (the module's and the role's defaults mirror them).
``validate_options(options)``
    ``DEFAULTS`` merged with ``options``, every value checked; raises ``LaunchRenderError``.
``gpu_binding(gpu, options)``
    ``{"gpu", "numa_node", "cpus", "numactl": [args], "warning"}``: ``--cpunodebind=N --membind=N``, or
    ``--physcpubind=<L3 cpus> --membind=N`` with ``cpu_binding: l3`` where a core set is known, or no
    arguments (unbound, with a warning) when the NUMA node is unknown.
``plan(topology, options)``
    Groups per configured size (``grouping.group_gpus``), bindings and the whole-group recipe per group.
``render(topology, options)``
    ``{"files": [{"path", "content", "mode"}], "plan", "warnings"}``: the binding wrapper, one env file per
    group (``<dest>/size<K>-group<G>.env``), ``<dest>/gres.conf`` and ``<dest>/README``.
"""

import re

from .cpulist import CpulistError, normalize
from .grouping import GroupingError, group_gpus
from .sysroot import TopotuneError

VISIBLE_ENVS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "none")
SCOPES = ("group", "rank")
CPU_BINDINGS = ("numa", "l3", "none")
ENV_FILE = re.compile(r"^size[0-9]+-group[0-9]+\.env$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Values go unquoted into env files read by docker --env-file (no quote removal) and systemd
# EnvironmentFile, and into the bash wrapper: keep them to characters that mean the same in all three.
_VALUE = re.compile(r"^[A-Za-z0-9_,.:/=+@%-]*$")
_ABS_PATH = re.compile(r"^/[A-Za-z0-9_./+-]+$")

DEFAULTS = {
    "sizes": [2, 4, 8],
    "default_size": None,
    "dest": "/etc/topotune/launch",
    "wrapper_path": "/usr/local/bin/topotune-bind",
    "visible_devices_env": "ROCR_VISIBLE_DEVICES",
    "visible_devices_scope": "group",
    "cpu_binding": "numa",
    "cpu_map": {},
    "membind": True,
    "extra_env": {},
    "gres": True,
    "gres_type": "",
    "header": "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten.",
}


class LaunchRenderError(TopotuneError, ValueError):
    """Options that cannot be rendered."""


def _fail(option, value, why, fix):
    raise LaunchRenderError("launch option %s=%r %s; %s" % (option, value, why, fix))


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
    for key in ("dest", "wrapper_path"):
        if not isinstance(opts[key], str) or not _ABS_PATH.match(opts[key]) or ".." in opts[key]:
            _fail(key, opts[key], "is not a plain absolute path", "use e.g. %s" % DEFAULTS[key])
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
    if not isinstance(opts["extra_env"], dict):
        _fail("extra_env", opts["extra_env"], "is not a mapping", "use NAME: value pairs")
    extra = {}
    for name, value in opts["extra_env"].items():
        text = "" if value is None else str(value)
        if isinstance(value, bool):
            text = "1" if value else "0"
        if not _NAME.match(str(name)):
            _fail("extra_env", name, "is not an environment variable name", "use [A-Za-z_][A-Za-z0-9_]*")
        if not _VALUE.match(text):
            _fail("extra_env[%s]" % name, text, "holds characters that env files and shells read differently",
                  "use letters, digits and _,.:/=+@%-")
        extra[str(name)] = text
    opts["extra_env"] = extra
    if not isinstance(opts["gres_type"], str) or not _VALUE.match(opts["gres_type"]) or "," in opts["gres_type"]:
        _fail("gres_type", opts["gres_type"], "is not a plain Slurm GRES type", "use e.g. mi250x or ''")
    opts["membind"] = bool(opts["membind"])
    opts["gres"] = bool(opts["gres"])
    opts["header"] = " ".join(str(opts["header"]).split())
    return opts


def _cpus(text):
    if not text:
        return None
    try:
        return normalize(str(text)) or None
    except CpulistError:
        return None


def gpu_binding(gpu, options):
    """numactl arguments binding one rank to the CPUs and memory of its GPU's NUMA node (or L3 set)."""
    index = gpu["index"]
    node = gpu.get("numa_node")
    node = node if isinstance(node, int) and not isinstance(node, bool) and node >= 0 else None
    cpus = _cpus(gpu.get("cpus"))
    result = {"gpu": index, "numa_node": node, "cpus": cpus, "numactl": [], "warning": None}
    mode = options["cpu_binding"]
    if mode == "none":
        return result
    l3 = options["cpu_map"].get(index) or _cpus(gpu.get("l3_cpus"))
    if mode == "l3" and l3:
        result["cpus"] = l3
        result["numactl"] = ["--physcpubind=%s" % l3]
        if node is not None and options["membind"]:
            result["numactl"].append("--membind=%d" % node)
        return result
    if node is None:
        result["warning"] = (
            "GPU %d: NUMA node unknown (the kernel reports numa_node -1, as in VMs or firmware without SRAT "
            "proximity): its ranks run unbound rather than on a guessed node; fix the firmware/VM NUMA "
            "topology or set launch_templates_cpu_map" % index)
        return result
    result["numactl"] = ["--cpunodebind=%d" % node]
    if options["membind"]:
        result["numactl"].append("--membind=%d" % node)
    if mode == "l3":
        result["warning"] = "GPU %d: no L3/CCD core set known, bound to NUMA node %d instead" % (index, node)
    return result


def _group_recipe(members, bindings, options):
    nodes = sorted({bindings[g]["numa_node"] for g in members if bindings[g]["numa_node"] is not None})
    unknown = any(bindings[g]["numa_node"] is None for g in members)
    gpus = ",".join(str(g) for g in members)
    visible = "" if options["visible_devices_env"] == "none" else "%s=%s " % (options["visible_devices_env"], gpus)
    args = []
    if nodes and not unknown and options["cpu_binding"] != "none":
        node_list = ",".join(str(n) for n in nodes)
        args = ["--cpunodebind=%s" % node_list]
        if options["membind"]:
            args.append("--membind=%s" % node_list)
    recipe = visible + ("numactl %s <command>" % " ".join(args) if args else "<command>")
    return {"gpus": list(members), "numa_nodes": nodes, "numa_unknown": unknown, "numactl": args,
            "recipe": recipe}


def plan(topology, options):
    """Groups, bindings and recipes for every configured size that fits this node."""
    opts = validate_options(options)
    if not isinstance(topology, dict) or not isinstance(topology.get("gpus"), list) or not topology["gpus"]:
        raise LaunchRenderError("the topology has no GPUs: gather it with topotune.instinct.gpu_topology "
                                "on a node with amdgpu loaded (or the right sysroot)")
    gpus = sorted((g for g in topology["gpus"] if isinstance(g, dict) and isinstance(g.get("index"), int)),
                  key=lambda g: g["index"])
    bindings = {g["index"]: gpu_binding(g, opts) for g in gpus}
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
        result["recipes"] = [_group_recipe(group, bindings, opts) for group in result["groups"]]
        result["order"] = [g for group in result["groups"] for g in group]
        sizes.append(result)
    if not sizes:
        # Degraded, not failed: per-GPU bindings still place every rank right (e.g. a CPX node missing a partition).
        warnings.append(
            "none of launch_templates_sizes %s divides the %d GPUs of this node: writing per-GPU groups (size 1) "
            "only; a node short of GPUs or partitions needs attention (platform checks: gpu count)"
            % (wanted, len(gpus)))
        result = group_gpus(topology, 1)
        result["recipes"] = [_group_recipe(group, bindings, opts) for group in result["groups"]]
        result["order"] = [g for group in result["groups"] for g in group]
        sizes.append(result)
    default = opts["default_size"]
    if default is None or default not in [s["size"] for s in sizes]:
        default = sizes[0]["size"]
    return {"gpus": gpus, "bindings": bindings, "sizes": sizes, "default_size": default,
            "options": opts, "warnings": warnings}


def _bash_words(values):
    return " ".join(str(v) for v in values)


def render_wrapper(p):
    opts = p["options"]
    visible = "" if opts["visible_devices_env"] == "none" else opts["visible_devices_env"]
    lines = []
    for s in p["sizes"]:
        lines.append("ORDER[%d]=\"%s\"" % (s["size"], _bash_words(s["order"])))
        lines.append("NGROUPS[%d]=%d" % (s["size"], len(s["groups"])))
        for g, members in enumerate(s["groups"]):
            lines.append("GROUP[%d:%d]=\"%s\"" % (s["size"], g, _bash_words(members)))
    for gpu in p["gpus"]:
        lines.append("BIND[%d]=\"%s\"" % (gpu["index"], _bash_words(p["bindings"][gpu["index"]]["numactl"])))
    extra = "".join("export %s=%s\n" % (k, v) for k, v in sorted(opts["extra_env"].items()))
    return WRAPPER % {
        "header": opts["header"],
        "name": opts["wrapper_path"].rsplit("/", 1)[-1],
        "dest": opts["dest"],
        "sizes": _bash_words(s["size"] for s in p["sizes"]),
        "default_size": p["default_size"],
        "visible": visible,
        "scope": opts["visible_devices_scope"],
        "tables": "\n".join(lines),
        "extra": extra,
    }


def render_env(p, size, group):
    opts = p["options"]
    recipe = size["recipes"][group]
    members = size["groups"][group]
    cpus = []
    for g in members:
        if p["bindings"][g]["cpus"]:
            cpus.append(p["bindings"][g]["cpus"])
    cpu_text = normalize(",".join(cpus)) if cpus and not recipe["numa_unknown"] else ""
    env = [
        ("TOPOTUNE_GROUP_SIZE", str(size["size"])),
        ("TOPOTUNE_GROUP", str(group)),
        ("TOPOTUNE_GROUP_GPUS", ",".join(str(g) for g in members)),
    ]
    if opts["visible_devices_env"] != "none":
        env.append((opts["visible_devices_env"], ",".join(str(g) for g in members)))
    env.append(("TOPOTUNE_NUMA_NODES", ",".join(str(n) for n in recipe["numa_nodes"]) if recipe["numactl"] else ""))
    env.append(("TOPOTUNE_CPUS", cpu_text))
    env.append(("HSA_OVERRIDE_CPU_AFFINITY_DEBUG", "0"))
    env.extend(sorted(opts["extra_env"].items()))
    head = [
        "# " + opts["header"],
        "# topotune launch group %d of size %d: GPUs %s" % (group, size["size"], ",".join(str(g) for g in members)),
        "# %s" % size["explanations"][group],
        "# whole-group launch: %s" % recipe["recipe"],
        "# KEY=VALUE for docker --env-file and systemd EnvironmentFile= (values are never quoted)",
    ]
    return "\n".join(head + ["%s=%s" % kv for kv in env]) + "\n"


def render_gres(p):
    opts = p["options"]
    lines = [
        "# " + opts["header"],
        "# Slurm gres.conf fragment generated by topotune from the GPU topology (replaces AutoDetect=rsmi,",
        "# which needs the retired rocm-smi library). Cores= are the GPU's NUMA-local CPUs: Slurm 24.05.5+",
        "# drains the node unless they align with its socket boundaries, so set",
        "# SlurmdParameters=numa_node_as_socket (or l3cache_as_socket) when NUMA nodes are smaller than sockets.",
    ]
    type_part = " Type=%s" % opts["gres_type"] if opts["gres_type"] else ""
    for gpu in p["gpus"]:
        b = p["bindings"][gpu["index"]]
        minor = gpu.get("render_minor")
        if not isinstance(minor, int):
            lines.append("# GPU %d (%s): render node unknown, not listed" % (gpu["index"], gpu.get("bdf")))
            continue
        lines.append("# GPU %d %s NUMA %s" % (gpu["index"], gpu.get("bdf") or "",
                                              "unknown" if b["numa_node"] is None else b["numa_node"]))
        cores = " Cores=%s" % b["cpus"] if b["cpus"] and b["numa_node"] is not None else ""
        lines.append("Name=gpu%s File=/dev/dri/renderD%d%s" % (type_part, minor, cores))
    return "\n".join(lines) + "\n"


def render_readme(p, topology):
    opts = p["options"]
    name = opts["wrapper_path"]
    out = [
        "# " + opts["header"],
        "topotune launch configuration",
        "=============================",
        "",
        "Topology source: %s; %d GPUs. Visible-device variable: %s (scope: %s). CPU binding: %s%s." % (
            topology.get("source"), len(p["gpus"]), opts["visible_devices_env"], opts["visible_devices_scope"],
            opts["cpu_binding"], "" if opts["membind"] else " (no --membind)"),
        "",
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
            out.append("    env file: %s/size%d-group%d.env" % (opts["dest"], s["size"], g))
            out.append("    whole-group launch: %s" % s["recipes"][g]["recipe"])
    out += [
        "",
        "Usage (one process per GPU; the local rank comes from --rank, LOCAL_RANK, SLURM_LOCALID,",
        "OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or PALS_LOCAL_RANKID):",
        "  torchrun --nproc-per-node=N --no-python %s [--size K --group G] python train.py" % name,
        "  srun --ntasks-per-node=N --cpu-bind=none --gpu-bind=none %s python app.py" % name,
        "  mpirun -np N --bind-to none %s ./app" % name,
        "  docker run --env-file %s/size<K>-group<G>.env ..." % opts["dest"],
        "  %s --print --rank R -- cmd   (show the binding without running)" % name,
        "Slurm gres.conf fragment: %s/gres.conf" % opts["dest"],
    ]
    if p["warnings"]:
        out += ["", "Warnings:"] + ["  - " + w for w in p["warnings"]]
    return "\n".join(out) + "\n"


def render(topology, options):
    """Every file of the launch configuration, as ``{"path", "content", "mode"}`` dicts."""
    p = plan(topology, options)
    opts = p["options"]
    files = [{"path": opts["wrapper_path"], "content": render_wrapper(p), "mode": "0755"}]
    for s in p["sizes"]:
        for g in range(len(s["groups"])):
            files.append({"path": "%s/size%d-group%d.env" % (opts["dest"], s["size"], g),
                          "content": render_env(p, s, g), "mode": "0644"})
    if opts["gres"]:
        files.append({"path": opts["dest"] + "/gres.conf", "content": render_gres(p), "mode": "0644"})
    files.append({"path": opts["dest"] + "/README", "content": render_readme(p, topology), "mode": "0644"})
    summary = {
        "default_size": p["default_size"],
        "sizes": [{k: s[k] for k in ("size", "groups", "score", "explanations", "exact", "method", "recipes")}
                  for s in p["sizes"]],
        "bindings": [p["bindings"][g["index"]] for g in p["gpus"]],
    }
    return {"files": files, "plan": summary, "warnings": p["warnings"]}


WRAPPER = r"""#!/bin/bash
# %(header)s
# %(name)s: run one local rank bound to the CPUs and memory of its GPU's NUMA node (topotune).
# Generated from this node's GPU topology; the groups and bindings are explained in %(dest)s/README.
set -u

SIZES="%(sizes)s"
DEFAULT_SIZE=%(default_size)s
VISIBLE_VAR="%(visible)s"
SCOPE="%(scope)s"
declare -A ORDER NGROUPS GROUP BIND
%(tables)s

prog=${0##*/}
die() { echo "$prog: $*" >&2; exit 2; }
usage() {
    cat <<EOF
usage: $prog [--size K] [--group G] [--rank R] [--print] [--] command [args...]
Runs command for local rank R on its GPU, under numactl bound to that GPU's NUMA node, with
HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0 so ROCm helper threads keep the binding.
  --size K    group size whose rank order is used (sizes: $SIZES; default \${TOPOTUNE_GROUP_SIZE:-$DEFAULT_SIZE})
  --group G   run inside group G of size K (ranks 0..K-1); default \$TOPOTUNE_GROUP or the whole node
  --rank R    local rank; default LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
              MPI_LOCALRANKID or PALS_LOCAL_RANKID
  --print     print the environment and command instead of running it (alias --dry-run)
  --list      print every group of every size
TOPOTUNE_BIND_NUMACTL overrides the numactl binary.
EOF
}

size=${TOPOTUNE_GROUP_SIZE:-$DEFAULT_SIZE}
group=${TOPOTUNE_GROUP:-}
rank=
print=0
while [ $# -gt 0 ]; do
    case $1 in
        --size) [ $# -ge 2 ] || die "--size needs a value"; size=$2; shift 2 ;;
        --size=*) size=${1#*=}; shift ;;
        --group) [ $# -ge 2 ] || die "--group needs a value"; group=$2; shift 2 ;;
        --group=*) group=${1#*=}; shift ;;
        --rank) [ $# -ge 2 ] || die "--rank needs a value"; rank=$2; shift 2 ;;
        --rank=*) rank=${1#*=}; shift ;;
        --print|--dry-run) print=1; shift ;;
        --list)
            for k in $SIZES; do
                g=0
                while [ "$g" -lt "${NGROUPS[$k]}" ]; do echo "size $k group $g: GPUs ${GROUP[$k:$g]}"; g=$((g + 1)); done
            done
            exit 0 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || [ "$print" = 1 ] || die "no command given (see --help)"

source_var=--rank
if [ -z "$rank" ]; then
    for var in LOCAL_RANK SLURM_LOCALID OMPI_COMM_WORLD_LOCAL_RANK MPI_LOCALRANKID PALS_LOCAL_RANKID; do
        if [ -n "${!var:-}" ]; then rank=${!var}; source_var=$var; break; fi
    done
fi
[ -n "$rank" ] || die "no local rank: pass --rank N or run under torchrun, srun or mpirun"
case $rank in ''|*[!0-9]*) die "local rank '$rank' (from $source_var) is not a number" ;; esac
case $size in ''|*[!0-9]*) die "group size '$size' is not a number; sizes: $SIZES" ;; esac
[ -n "${ORDER[$size]+x}" ] || die "group size $size is not generated on this node; sizes: $SIZES"
if [ -n "$group" ]; then
    case $group in *[!0-9]*) die "group '$group' is not a number" ;; esac
    [ "$group" -lt "${NGROUPS[$size]}" ] || die "group $group does not exist for size $size (0..$((NGROUPS[$size] - 1)))"
    read -r -a members <<<"${GROUP[$size:$group]}"
else
    read -r -a members <<<"${ORDER[$size]}"
fi
[ "$rank" -lt "${#members[@]}" ] || die "local rank $rank (from $source_var) >= ${#members[@]} GPUs in this layout"
gpu=${members[$rank]}

if [ "$SCOPE" = rank ]; then visible=$gpu; else visible=$(IFS=,; echo "${members[*]}"); fi
export TOPOTUNE_GPU=$gpu TOPOTUNE_LOCAL_RANK=$rank TOPOTUNE_GROUP_SIZE=$size
export HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0
[ -z "$VISIBLE_VAR" ] || export "$VISIBLE_VAR=$visible"
%(extra)s
read -r -a bind <<<"${BIND[$gpu]}"
if [ "${#bind[@]}" -eq 0 ]; then
    echo "$prog: warning: GPU $gpu has no known NUMA node; running unbound" >&2
    cmd=("$@")
else
    cmd=("${TOPOTUNE_BIND_NUMACTL:-numactl}" "${bind[@]}" -- "$@")
fi
if [ "$print" = 1 ]; then
    [ -z "$VISIBLE_VAR" ] || echo "$VISIBLE_VAR=$visible"
    echo "HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0"
    echo "TOPOTUNE_GPU=$gpu"
    printf '%%q ' "${cmd[@]}"
    echo
    exit 0
fi
exec "${cmd[@]}"
"""
