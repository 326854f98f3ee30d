# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Docker flags for ROCm containers, derived from the topology; device access checks. Controller-only (the
container_flags filter).

Pure functions, standard library only. ``plan()`` turns the topology, the launch groups, the device facts
(from the ``gpu_device_access`` module) and the role options into per-group flag lists, a compose
fragment and structured checks. Merging the owned keys into daemon.json happens on the node
(``module_utils/core/owned_keys.py``).
"""

from __future__ import annotations

import copy
import re

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import format_cpulist, parse
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

FORBIDDEN_CAPS = ("ALL", "SYS_RAWIO")
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:=+@%,-]+$")
_SHM = re.compile(r"^[0-9]+[bkmgBKMG]?$")
_CAP = re.compile(r"^[A-Z_]+$")


class FlagError(TopotuneError, ValueError):
    """A requested flag or option is refused; the message names the option, the reason and the fix."""


def _forbidden(knowledge):
    return {entry["name"]: entry for entry in (knowledge or {}).get("forbidden") or []}


def check_caps(caps, knowledge=None, debug=False):
    """Validate extra capabilities; raise FlagError naming the capability and the reason."""
    forbidden = _forbidden(knowledge)
    checked = []
    for cap in caps or []:
        name = str(cap).upper()
        if name.startswith("CAP_"):
            name = name[4:]
        if not _CAP.match(name):
            raise FlagError("container_runtime_extra_caps: %r is not a capability name (e.g. SYS_PTRACE)" % (cap,))
        if name in forbidden or name in FORBIDDEN_CAPS:
            entry = forbidden.get(name, {})
            raise FlagError(
                "container_runtime_extra_caps: %s is refused: %s [source: %s]"
                % (
                    name,
                    " ".join(str(entry.get("reason", "topotune never grants it")).split()),
                    entry.get("source", "knowledge/container_flags.yml"),
                )
            )
        if name == "SYS_PTRACE" and not debug:
            raise FlagError(
                "container_runtime_extra_caps: SYS_PTRACE is only for debugging and profiling; "
                "use container_runtime_profile: debug [source: ROCm/ROCm megatron-lm.rst; rocgdb and rocprof attach need ptrace]"
            )
        checked.append(name)
    return sorted(set(checked))


def check_privileged(requested, knowledge=None):
    if requested:
        entry = _forbidden(knowledge).get("privileged", {})
        raise FlagError(
            "container_runtime_privileged: --privileged is refused: %s [source: %s]"
            % (" ".join(str(entry.get("reason", "")).split()), entry.get("source", ""))
        )


def gpu_groups(topology, groups):
    """[(name, [gpu dicts])]: one 'all' group when ``groups`` is empty, else group-<i> per index list."""
    gpus = [g for g in (topology or {}).get("gpus") or [] if isinstance(g, dict)]
    by_index = {g.get("index"): g for g in gpus}
    if not groups:
        return [("all", sorted(gpus, key=lambda g: g.get("index", 0)))]
    result = []
    for number, members in enumerate(groups):
        missing = [i for i in members if i not in by_index]
        if missing:
            raise FlagError(
                "GPU group %d names GPU index(es) %s that the topology does not have (known: %s)" % (number, missing, sorted(by_index))
            )
        result.append(("group-%d" % number, [by_index[i] for i in members]))
    return result


def numa_confinement(topology, gpus):
    """(cpus, nodes) of the NUMA nodes holding ``gpus``: what --cpuset-cpus / --cpuset-mems confine a group's
    container to. None when a member's NUMA node or a node's CPU list is unknown (then nothing is confined)."""
    cpus_of = {n.get("node"): n.get("cpus") for n in (topology or {}).get("numa_nodes") or [] if isinstance(n, dict)}
    nodes = sorted({g.get("numa_node") for g in gpus})
    if not nodes or any(not isinstance(n, int) or n < 0 or not cpus_of.get(n) for n in nodes):
        return None
    return format_cpulist(c for n in nodes for c in parse(cpus_of[n])), nodes


def device_gids(device_facts):
    """(gids, warnings): numeric GIDs owning /dev/kfd and the render nodes, group root (0) excluded."""
    gids, warnings = set(), []
    nodes = [(device_facts or {}).get("kfd") or {}] + list((device_facts or {}).get("render_nodes") or [])
    for node in nodes:
        if not node.get("exists"):
            continue
        gid = node.get("gid")
        if gid is None:
            continue
        if gid == 0:
            warnings.append(
                "%s is owned by group root (GID 0); not adding it with --group-add. "
                "Expected render or video (udev rules of the amdgpu package)" % node.get("path")
            )
            continue
        gids.add(int(gid))
    return sorted(gids), warnings


def plan(topology, groups, device_facts, options, knowledge=None):
    """Return {'groups': [{name, gpus, render_minors, flags, compose}], 'compose', 'warnings', 'cdi'}.

    ``options``: profile (xgmi-training | rdma-training | inference | debug), cdi (auto | true | false),
    seccomp_unconfined, ipc_host, shm_size, env_file, extra_caps, privileged; launch_dir (the launch_templates
    directory: its per-group env file, and the wrapper with its table mounted read-only; '' for none),
    wrapper_path, numa_confine (--cpuset-cpus/--cpuset-mems of the group's NUMA nodes), memory_binding
    (CAP_SYS_NICE, so numactl --membind works under Docker's default seccomp profile).
    """
    options = options or {}
    profile = options.get("profile") or "xgmi-training"
    debug = profile == "debug"
    rdma = profile == "rdma-training"
    check_privileged(options.get("privileged"), knowledge)
    caps = check_caps(options.get("extra_caps"), knowledge, debug)
    if debug and "SYS_PTRACE" not in caps:
        caps.append("SYS_PTRACE")
    shm = str(options.get("shm_size") or "")
    if shm and not _SHM.match(shm):
        raise FlagError("container_runtime_shm_size: %r is not a size like 64g or 16384m" % (shm,))
    env_file = str(options.get("env_file") or "")
    if env_file and (not env_file.startswith("/") or not _SAFE_TOKEN.match(env_file)):
        raise FlagError("container_runtime_env_file: %r must be an absolute path of [A-Za-z0-9_./:=+@%%,-]" % (env_file,))

    facts = device_facts or {}
    ctk = bool((facts.get("amd_ctk") or {}).get("present"))
    cdi_option = str(options.get("cdi", "auto")).lower()
    if cdi_option in ("true", "yes", "1") and not ctk:
        raise FlagError(
            "container_runtime_cdi: true but the AMD Container Toolkit (amd-ctk) is not installed on this node; "
            "install it or set container_runtime_cdi: auto"
        )
    cdi = ctk and cdi_option in ("auto", "true", "yes", "1")
    gids, warnings = device_gids(facts)

    common = []
    compose_common = {}
    if not cdi:
        common += ["--group-add=%d" % gid for gid in gids]
        if gids:
            compose_common["group_add"] = [str(gid) for gid in gids]
    if options.get("seccomp_unconfined"):
        common.append("--security-opt=seccomp=unconfined")
        compose_common["security_opt"] = ["seccomp=unconfined"]
    if options.get("ipc_host"):
        common.append("--ipc=host")
        compose_common["ipc"] = "host"
    if shm:
        common.append("--shm-size=%s" % shm)
        compose_common["shm_size"] = shm
    if rdma:
        common += ["--network=host", "--ulimit=memlock=-1:-1"]
        compose_common["network_mode"] = "host"
        compose_common["ulimits"] = {"memlock": {"soft": -1, "hard": -1}}
    if caps:
        common += ["--cap-add=%s" % cap for cap in caps]
        compose_common["cap_add"] = list(caps)
    if env_file:
        common.append("--env-file=%s" % env_file)
        compose_common["env_file"] = [env_file]

    launch_dir = str(options.get("launch_dir") or "")
    wrapper = str(options.get("wrapper_path") or "")
    for option, value in (("container_runtime_launch_dir", launch_dir), ("launch_templates_wrapper_path", wrapper)):
        if value and (not value.startswith("/") or not _SAFE_TOKEN.match(value)):
            raise FlagError("%s: %r must be an absolute path of [A-Za-z0-9_./:=+@%%,-]" % (option, value))

    result_groups, services = [], {}
    for number, (name, gpus) in enumerate(gpu_groups(topology, groups)):
        minors = [g.get("render_minor") for g in gpus]
        if cdi:
            devices = ["amd.com/gpu=%s" % g.get("index") for g in gpus]
        else:
            missing = [g.get("index") for g in gpus if g.get("render_minor") is None]
            if missing:
                raise FlagError("GPU(s) %s have no render_minor in the topology; cannot name their /dev/dri/renderD nodes" % missing)
            devices = ["/dev/kfd"] + ["/dev/dri/renderD%d" % int(m) for m in minors]
        if rdma:
            devices.append("/dev/infiniband")
        own, compose_own = _group_flags(topology, gpus, number if groups else None, launch_dir, wrapper, options, caps)
        flags = ["--device=%s" % d for d in devices] + common + own
        for flag in flags:
            if not _SAFE_TOKEN.match(flag.split("=", 1)[-1]):
                raise FlagError("flag %r for %s contains characters a flag file cannot carry" % (flag, name))
        service = {"devices": devices}
        service.update(copy.deepcopy(compose_common))
        for key, value in compose_own.items():
            service[key] = (service.get(key) or []) + value if isinstance(value, list) else value
        services["topotune-gpu-%s" % name] = service
        result_groups.append(
            {"name": name, "gpus": [g.get("index") for g in gpus], "render_minors": minors, "flags": flags, "compose": service}
        )
    return {"groups": result_groups, "compose": {"services": services}, "warnings": warnings, "cdi": cdi, "gids": gids, "profile": profile}


def _group_flags(topology, gpus, number, launch_dir, wrapper, options, caps):
    """Flags of one launch group beyond its devices: NUMA confinement, SYS_NICE for memory binding, the group's
    launch env file and the wrapper with its table. Returns (flags, compose keys)."""
    flags, compose = [], {}
    confined = numa_confinement(topology, gpus) if options.get("numa_confine", True) else None
    if confined:
        cpus, nodes = confined
        flags += ["--cpuset-cpus=%s" % cpus, "--cpuset-mems=%s" % ",".join(str(n) for n in nodes)]
        compose["cpuset"] = cpus
    # numactl --membind (topotune-bind's, DeepSpeed's, ...) calls set_mempolicy, which Docker's default seccomp
    # profile allows only with CAP_SYS_NICE; the cpuset above bounds the CPUs and memory nodes it can reach.
    if options.get("memory_binding", True) and "SYS_NICE" not in caps:
        flags.append("--cap-add=SYS_NICE")
        compose["cap_add"] = ["SYS_NICE"]
    if launch_dir:
        if number is not None:
            env = "%s/size%d-group%d.env" % (launch_dir, len(gpus), number)
            flags.append("--env-file=%s" % env)
            compose["env_file"] = [env]
        mounts = (["%s:%s:ro" % (wrapper, wrapper)] if wrapper else []) + ["%s:%s:ro" % (launch_dir, launch_dir)]
        flags += ["--volume=%s" % m for m in mounts]
        compose["volumes"] = mounts
    return flags, compose


def _status(check_id, status, observed, expected, remediation, source):
    return {"id": check_id, "status": status, "observed": observed, "expected": expected, "remediation": remediation, "source": source}


def access_checks(device_facts, users=None, expected_groups=("render", "video"), simulated=False):
    """Structured checks: /dev/kfd and render nodes (group, mode), users in the owning groups, docker, CDI."""
    facts = device_facts or {}
    checks = []
    src_dev = "ROCm/ROCm-docker #116; ROCm/rocm-install-on-linux docs/how-to/docker.rst"
    nodes = [("kfd", facts.get("kfd") or {"path": "/dev/kfd", "exists": False})]
    nodes += [("render-%s" % n.get("minor"), n) for n in facts.get("render_nodes") or []]
    if not facts.get("render_nodes"):
        checks.append(
            _status(
                "render-nodes",
                "fail",
                "no /dev/dri/renderD* node",
                "one render node per GPU",
                "load the amdgpu driver (modprobe amdgpu) and check dmesg",
                src_dev,
            )
        )
    owning = {}
    for check_id, node in nodes:
        path = node.get("path")
        if not node.get("exists"):
            checks.append(
                _status(
                    check_id,
                    "fail",
                    "%s missing" % path,
                    "%s present" % path,
                    "load the amdgpu driver (modprobe amdgpu); install amdgpu-dkms if the module is missing",
                    src_dev,
                )
            )
            continue
        mode = int(str(node.get("mode", "0")), 8)
        group = node.get("group") or str(node.get("gid"))
        problems = []
        if not node.get("char_device") and not simulated:
            problems.append("not a character device")
        if group not in expected_groups:
            problems.append("group %s, expected one of %s" % (group, ", ".join(expected_groups)))
        if mode & 0o060 != 0o060:
            problems.append("mode %s lacks group read/write" % node.get("mode"))
        if mode & 0o002:
            problems.append("mode %s is world-writable" % node.get("mode"))
        owning.setdefault(group, []).append(path)
        observed = "%s %s:%s %s%s" % (
            path,
            node.get("owner"),
            group,
            node.get("mode"),
            " (simulated regular file)" if simulated and not node.get("char_device") else "",
        )
        expected = "group in (%s), mode 0660" % ", ".join(expected_groups)
        status = "fail" if any(p != "mode %s is world-writable" % node.get("mode") for p in problems) else ("warn" if problems else "pass")
        checks.append(
            _status(
                check_id,
                status,
                observed + ("; " + "; ".join(problems) if problems else ""),
                expected,
                'install the amdgpu udev rules (KERNEL=="kfd", GROUP="render", MODE="0660") and reload udev',
                src_dev,
            )
        )

    memberships = facts.get("users") or {}
    for user in users or []:
        info = memberships.get(user) or {}
        if not info.get("exists"):
            checks.append(
                _status(
                    "user-%s" % user,
                    "fail",
                    "user %s does not exist" % user,
                    "an existing user",
                    "create the user or remove it from container_runtime_users",
                    "container_runtime_users",
                )
            )
            continue
        missing = sorted(g for g in owning if g not in (info.get("groups") or []) and g != "root")
        checks.append(
            _status(
                "user-%s" % user,
                "fail" if missing else "pass",
                "%s in %s" % (user, ", ".join(info.get("groups") or []) or "no groups"),
                "member of %s" % (", ".join(sorted(g for g in owning if g != "root")) or "the device groups"),
                "usermod -aG %s %s (or set container_runtime_manage_groups: true)" % (",".join(missing), user) if missing else "",
                src_dev,
            )
        )

    docker = facts.get("docker") or {}
    checks.append(
        _status(
            "docker-engine",
            "pass" if docker.get("present") else "warn",
            docker.get("path") or "docker engine not found",
            "dockerd installed",
            "" if docker.get("present") else "install Docker Engine; flag files and the compose fragment are written anyway",
            "ROCm/rocm-install-on-linux docs/how-to/docker.rst",
        )
    )
    ctk = facts.get("amd_ctk") or {}
    checks.append(
        _status(
            "amd-container-toolkit",
            "pass" if ctk.get("present") else "info",
            ctk.get("path") or "amd-ctk not found (CDI not used)",
            "optional: amd-ctk for CDI (--device amd.com/gpu=...)",
            "" if ctk.get("present") else "optional: install the AMD Container Toolkit and run amd-ctk runtime configure --runtime=docker",
            "instinct.docs.amd.com container-toolkit running-workloads.html",
        )
    )
    return checks
