# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Docker flags for ROCm containers, derived from the topology; device access checks; the plan of the
container_runtime role. Controller-only (the container_runtime action, the container_flags filter).

Pure functions over parsed knowledge. ``plan()`` turns the topology, the launch groups, the device facts
(from the ``gpu_device_access`` module) and the flag options into per-group flag lists and a compose
fragment; what a profile adds (RDMA devices, memlock, SYS_PTRACE) comes from the profile's data
(knowledge/env_profiles.yml) matched against knowledge/container_flags.yml ``profile``, never from its name.
``access()`` gives the device and user checks, ``role_plan()`` the whole decision of the role: input checks,
launch groups, flags, checks, the files' text and what it manages. Merging the owned keys into daemon.json
happens on the node (``module_utils/core/owned_keys.py``). ``OPTIONS`` declares the action's options and the role's
variables once (``module_utils/core/options.py``); ``NODE_INPUTS`` are those that give the node's facts.
"""

from __future__ import annotations

import copy
import re

import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import format_cpulist, parse
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.launch.grouping import GroupingError, group_gpus
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env.rules import MODEL_INPUTS, PROFILES, profile_traits

FORBIDDEN_CAPS = ("ALL", "SYS_RAWIO")
COMPOSE_FILE = "compose.gpu.yml"
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:=+@%,-]+$")
_SHM = re.compile(r"^[0-9]+[bkmgBKMG]?$")
_CAP = re.compile(r"^[A-Z_]+$")
_PATH_RE = re.compile(r"^/[A-Za-z0-9_./-]+$")

# The options of the container_runtime action and the variables of role container_runtime, declared once
# (module_utils/core/options.py): the action's argument spec is built from here, its documentation
# (plugins/modules/container_runtime.py) and the role's argument specs, defaults, README table and task arguments
# generated from here (scripts/gen-options). Option values are checked by role_plan (several are raw in the action: a
# wrong one fails naming the role variable and the fix).
OPTIONS = {
    "profile": {
        "type": "str", "default": "xgmi-training",
        "description": "Container profile, a profile of C(knowledge/env_profiles.yml) (C(xgmi-training), "
                       "C(rdma-training), C(inference), C(debug)). What it adds comes from its data: C(fabric) C(rdma) "
                       "(C(rdma-training)) adds C(/dev/infiniband), memlock C(-1) and the host network, C(debug) "
                       "C(true) (C(debug)) adds C(SYS_PTRACE).",
        "role": {"default": "{{ rocm_env_profile | default('xgmi-training') }}", "choices": list(PROFILES)},
    },
    "group_size": {
        "type": "raw", "default": 0,
        "description": "GPUs per launch group, an integer >= 0: C(0) gives one flag set with all GPUs (C(all.flags)), "
                       "C(k > 0) the groups of C(topotune.instinct.gpu_groups(k)), one C(group-<i>.flags) each with only "
                       "that group's render nodes.",
        "role": {"type": "int"},
    },
    "topology": {
        "type": "dict", "default": {},
        "description": "The role's topology model; empty uses C(topotune_topology) (a model the inventory gives), else "
                       "the play's C(topotune_discovery) (C(playbooks/topology.yml)), else runs "
                       "M(topotune.instinct.gpu_topology).",
    },
    **MODEL_INPUTS,
    "sysroot": {
        "type": "str", "default": "/",
        "description": "Root under which M(topotune.instinct.gpu_topology) and M(topotune.instinct.gpu_device_access) "
                       "read (C(/dev) among them): C(/) on a real node; not C(/) means simulated device nodes (regular "
                       "files) pass.",
        "role": {"type": "path", "default": "{{ topotune_sysroot | default('/') }}"},
    },
    "users": {
        "type": "list", "elements": "str", "default": [],
        "description": "Users who run GPU containers, checked for membership of the groups owning C(/dev/kfd) and the "
                       "render nodes.",
    },
    "manage_groups": {
        "type": "bool", "default": True,
        "description": "Add the existing O(users) to the groups owning C(/dev/kfd) and the render nodes (append: their "
                       "other groups stay); the checks count them as members.",
    },
    "seccomp_unconfined": {
        "type": "bool", "default": False,
        "description": "Add C(--security-opt=seccomp=unconfined) (AMD: \"optional ... recommended for containers "
                       "running in HPC environments\").",
    },
    "ipc_host": {
        "type": "bool", "default": True,
        "description": "Add C(--ipc=host), for multi-process workers sharing memory.",
    },
    "shm_size": {
        "type": "str", "default": "64g",
        "description": "The C(--shm-size) value; empty omits it.",
    },
    "cdi": {
        "type": "raw", "default": "auto",
        "description": "CDI (C(--device amd.com/gpu=N)) through the AMD Container Toolkit: C(auto) (when C(amd-ctk) is "
                       "installed), C(true) (require it) or C(false).",
        "role": {"type": "str"},
    },
    "env_file": {
        "type": "str", "default": "",
        "description": "Env file passed with C(--env-file) (the one role C(topotune.instinct.rocm_env) writes); empty "
                       "omits it.",
        "role": {"default": "/etc/topotune/env/{{ container_runtime_profile }}.env",
                 "default_doc": "C(/etc/topotune/env/<profile>.env)"},
    },
    "launch_dir": {
        "type": "raw", "default": "",
        "description": "The launch directory of role C(topotune.instinct.launch_templates): each group's container gets "
                       "its env file (C(--env-file), container-local GPU indices; C(launch_templates_sizes) must "
                       "include O(group_size)) and, read-only, the wrapper and its table; empty gives none of them.",
        "role": {"type": "str", "default": "{{ launch_templates_dir | default('/etc/topotune/launch') }}"},
    },
    "launch_wrapper": {
        "type": "str", "default": "",
        "description": "Path of C(topotune-bind) on the node, mounted read-only into the containers with O(launch_dir).",
        "role": {"default": "{{ launch_templates_wrapper_path | default('/usr/local/bin/topotune-bind') }}"},
    },
    "numa_confine": {
        "type": "bool", "default": True,
        "description": "C(--cpuset-cpus) and C(--cpuset-mems) of the NUMA nodes of the group's GPUs: the container runs "
                       "and allocates there.",
    },
    "memory_binding": {
        "type": "bool", "default": True,
        "description": "C(--cap-add=SYS_NICE), so C(numactl --membind) works in the container: Docker's default "
                       "seccomp profile allows C(set_mempolicy) and C(mbind) only with it (the cpuset bounds what it "
                       "can reach; the role's README says why nothing wider).",
    },
    "extra_caps": {
        "type": "list", "elements": "str", "default": [],
        "description": "Extra capabilities; C(SYS_RAWIO) and C(ALL) are refused with the reason, C(SYS_PTRACE) is "
                       "allowed only in a profile whose data says C(debug) C(true).",
    },
    "privileged": {
        "type": "bool", "default": False,
        "description": "Declared only so that C(true) fails with the reason: topotune never emits C(--privileged).",
    },
    "output_dir": {
        "type": "raw", "default": "/etc/topotune/container",
        "description": "Directory of the flag files and the compose fragment.",
        "role": {"type": "path"},
    },
    "strict": {
        "type": "bool", "default": True,
        "description": "Fail when a device or user check fails (false reports only).",
    },
    "daemon_json_manage": {
        "type": "bool", "default": False,
        "description": "Merge O(daemon_json_settings) into O(daemon_json_path), keeping every other key (backup "
                       "first); the owned keys are recorded as managed.",
    },
    "daemon_json_path": {
        "type": "raw", "default": "/etc/docker/daemon.json",
        "description": "Docker daemon configuration file.",
        "role": {"type": "path"},
    },
    "daemon_json_settings": {
        "type": "dict", "default": {},
        "description": "Keys topotune owns in C(daemon.json).",
        "role": {"default": {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}},
                 "default_doc": "C(default-ulimits.memlock) = -1"},
    },
    "docker_restart_ok": {
        "type": "bool", "default": False,
        "description": "Restart dockerd after C(daemon.json) changed (running containers stop unless C(live-restore) "
                       "is set); the plan's C(docker_restart) is true when it also exists.",
    },
}
# The inputs that give the node's model, not options of the plan (the device nodes are always read on the node).
NODE_INPUTS = ("topology", "inventory_topology", "discovery")


class FlagError(TopotuneError, ValueError):
    """A requested flag or option is refused; the message names the option, the reason and the fix."""


def _forbidden(knowledge):
    return {entry["name"]: entry for entry in (knowledge or {}).get("forbidden") or []}


def _knowledge(knowledge, name):
    """The parsed knowledge file ``name``: the one given, else the collection's."""
    if knowledge is not None:
        return knowledge
    try:
        return load_knowledge(name)
    except ValueError as err:
        raise FlagError("container_flags: cannot read knowledge/%s.yml: %s" % (name, err)) from None


def profile_flags(knowledge, traits):
    """Keys of the knowledge/container_flags.yml flags whose ``profile`` data ({trait: value}) the profile's traits
    (env_rules.profile_traits()) all have: what that profile adds, decided by its data."""
    flags = (knowledge or {}).get("flags") or {}
    return {key for key, entry in flags.items()
            if isinstance(entry, dict) and isinstance(entry.get("profile"), dict) and entry["profile"]
            and all(traits.get(trait) == want for trait, want in entry["profile"].items())}


def profile_data(options, knowledge, profiles):
    """(profile name, the flag keys its data switches on) for ``options.profile`` (default xgmi-training)."""
    profile = options.get("profile") or "xgmi-training"
    try:
        traits = profile_traits(profiles, profile)
    except ValueError as err:
        raise FlagError("container_runtime_profile: %s (knowledge/env_profiles.yml)" % err) from None
    return profile, profile_flags(knowledge, traits)


def _debug_profiles(knowledge, profiles):
    names = []
    for name in sorted((profiles or {}).get("profiles") or {}):
        try:
            if "sys_ptrace" in profile_flags(knowledge, profile_traits(profiles, name)):
                names.append(name)
        except ValueError:
            continue
    return names


def check_caps(caps, knowledge=None, debug=False, debug_profiles=("debug",)):
    """Validate extra capabilities; raise FlagError naming the capability and the reason. ``debug``: the profile's
    data allows SYS_PTRACE (``debug_profiles`` are named in the refusal)."""
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
            source = (((knowledge or {}).get("flags") or {}).get("sys_ptrace") or {}).get("source") \
                or "ROCm/ROCm megatron-lm.rst; rocgdb and rocprof attach need ptrace"
            raise FlagError(
                "container_runtime_extra_caps: SYS_PTRACE is only for debugging and profiling; use a profile with "
                "debug: true in knowledge/env_profiles.yml (container_runtime_profile: %s) [source: %s]"
                % (" or ".join(debug_profiles) or "debug", source)
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


def plan(topology, groups, device_facts, options, knowledge=None, profiles=None):
    """Return {'groups': [{name, gpus, render_minors, flags, compose}], 'compose', 'warnings', 'cdi'}.

    ``options``: profile (a profile of knowledge/env_profiles.yml; its data decides what it adds), cdi (auto |
    true | false), seccomp_unconfined, ipc_host, shm_size, env_file, extra_caps, privileged; launch_dir (the
    launch_templates directory: its per-group env file, and the wrapper with its table mounted read-only; '' for
    none), wrapper_path, numa_confine (--cpuset-cpus/--cpuset-mems of the group's NUMA nodes), memory_binding
    (CAP_SYS_NICE, so numactl --membind works under Docker's default seccomp profile). ``knowledge``: parsed
    knowledge/container_flags.yml, ``profiles``: parsed knowledge/env_profiles.yml (the collection's when None).
    """
    options = options or {}
    knowledge = _knowledge(knowledge, "container_flags")
    profiles = _knowledge(profiles, "env_profiles")
    profile, adds = profile_data(options, knowledge, profiles)
    debug = "sys_ptrace" in adds
    check_privileged(options.get("privileged"), knowledge)
    caps = check_caps(options.get("extra_caps"), knowledge, debug, _debug_profiles(knowledge, profiles))
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
    if "network_host" in adds:
        common.append("--network=host")
        compose_common["network_mode"] = "host"
    if "memlock" in adds:
        common.append("--ulimit=memlock=-1:-1")
        compose_common["ulimits"] = {"memlock": {"soft": -1, "hard": -1}}
    if caps:
        common += ["--cap-add=%s" % cap for cap in caps]
        compose_common["cap_add"] = list(caps)
    if env_file:
        common.append("--env-file=%s" % env_file)
        compose_common["env_file"] = [env_file]

    launch_dir = str(options.get("launch_dir") or "")
    wrapper = str(options.get("wrapper_path") or "")
    for option, value in (("container_runtime_launch_dir", launch_dir), ("container_runtime_launch_wrapper", wrapper)):
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
        if "infiniband" in adds:
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


def device_groups(device_facts):
    """Names of the groups owning the existing /dev/kfd and render nodes, group root excluded, sorted."""
    nodes = [(device_facts or {}).get("kfd") or {}] + list((device_facts or {}).get("render_nodes") or [])
    return sorted({n["group"] for n in nodes if n.get("exists") and isinstance(n.get("group"), str) and n["group"] != "root"})


def with_memberships(device_facts, users, groups):
    """device_facts with ``users`` (those that exist) also in ``groups``: what adding them with append gives."""
    facts = dict(device_facts)
    facts["users"] = dict(facts.get("users") or {})
    for user in users:
        info = facts["users"][user]
        facts["users"][user] = dict(info, groups=sorted(set(info.get("groups") or []) | set(groups)))
    return facts


def access(device_facts, users=None, manage_groups=False, simulated=False):
    """{device_groups, member_users, checks, report} of the node's device facts for ``users``.

    ``member_users``: the users that exist. With ``manage_groups`` they are checked as members of the device groups,
    since the role adds them to those groups (append) before anything else uses them. ``report``: one line per check,
    "status | id | observed | remediation"."""
    facts = dict(device_facts or {})
    users = [str(u) for u in users or []]
    groups = device_groups(facts)
    members = [u for u in users if ((facts.get("users") or {}).get(u) or {}).get("exists")]
    if manage_groups and groups:
        facts = with_memberships(facts, members, groups)
    checks = access_checks(facts, users, simulated=simulated)
    return {"device_groups": groups, "member_users": members, "checks": checks,
            "report": ["%(status)s | %(id)s | %(observed)s | %(remediation)s" % c for c in checks]}


def check_options(options, knowledge):
    """Raise FlagError naming every wrong container_runtime input a type cannot catch (types and choices are
    meta/argument_specs.yml's; what is refused and why is knowledge/container_flags.yml's ``forbidden``), each with
    its value and the fix; the messages are joined with '; '."""
    errors = []
    forbidden = _forbidden(knowledge)
    size = options.get("group_size")
    if isinstance(size, bool) or not re.match(r"^[0-9]+$", str(size)):
        errors.append("container_runtime_group_size must be an integer >= 0, 0 putting all GPUs in one flag set (got %s)" % (size,))
    cdi = options.get("cdi", "auto")
    if str(cdi).lower() not in ("auto", "true", "false"):
        errors.append("container_runtime_cdi must be auto, true or false (got %s)" % (cdi,))
    if options.get("privileged"):
        entry = forbidden.get("privileged") or {}
        errors.append("container_runtime_privileged: --privileged is never emitted: %s Set it to false [source: %s]"
                      % (" ".join(str(entry.get("reason", "")).split()), entry.get("source", "knowledge/container_flags.yml")))
    refused = []
    for cap in options.get("extra_caps") or []:
        name = re.sub(r"^CAP_", "", str(cap).upper())
        if name in forbidden and name not in refused:
            refused.append(name)
    if refused:
        reasons = [" ".join(str(forbidden[name].get("reason", "")).split()).rstrip(".") + "." for name in refused]
        sources = []
        for name in refused:
            if forbidden[name].get("source") not in sources:
                sources.append(forbidden[name].get("source"))
        errors.append("container_runtime_extra_caps: %s refused: %s Remove them [source: %s]"
                      % (", ".join(refused), " ".join(reasons), "; ".join(str(s) for s in sources)))
    for option, may_be_empty in (("output_dir", False), ("launch_dir", True), ("daemon_json_path", False)):
        value = options.get(option)
        if isinstance(value, str) and ((may_be_empty and value == "") or _PATH_RE.match(value)):
            continue
        errors.append("container_runtime_%s must be %san absolute path of [A-Za-z0-9_./-] (got %s)"
                      % (option, "empty or " if may_be_empty else "", value))
    if errors:
        raise FlagError("; ".join(errors))


def _compose_text(header, output_dir, compose):
    lines = [header, "# Compose fragment: one service per launch group; use it with",
             "#   services: {train: {extends: {file: %s/%s, service: topotune-gpu-all}, image: ...}}" % (output_dir, COMPOSE_FILE)]
    # the layout of Ansible's to_nice_yaml(indent=2, sort_keys=true)
    return "\n".join(lines) + "\n" + yaml.safe_dump(compose, indent=2, sort_keys=True, default_flow_style=False, allow_unicode=True)


def _flags_text(header, output_dir, group, profile):
    lines = [header, "# docker run flags for launch group %s (GPUs %s), profile %s."
             % (group["name"], ",".join(str(g) for g in group["gpus"]), profile),
             "# One flag per line: docker run $(grep -v '^#' %s/%s.flags) IMAGE" % (output_dir, group["name"])]
    return "\n".join(lines + group["flags"]) + "\n"


def role_plan(options, topology, device_facts, knowledge, header):
    """The container_runtime role's decision for one node: check the input, form the launch groups, compute every
    group's flags and the compose fragment, check the device nodes and users (stop on a failed check with
    ``strict``), and give the files' text, the users to add, and what the role manages.

    ``options``: the role variables without their ``container_runtime_`` prefix (profile, group_size, cdi,
    seccomp_unconfined, ipc_host, shm_size, env_file, launch_dir, launch_wrapper, numa_confine, memory_binding,
    extra_caps, privileged, users, manage_groups, sysroot, output_dir, strict, daemon_json_manage,
    daemon_json_path, daemon_json_settings, docker_restart_ok). ``topology``: the node's model; ``device_facts``:
    the gpu_device_access result; ``knowledge``: {container_flags, env_profiles}; ``header``: the managed-file
    comment the files start with. Raises FlagError.
    """
    flags_knowledge = knowledge.get("container_flags")
    check_options(options, flags_knowledge)
    topology = topology or {}
    size = int(options.get("group_size") or 0)
    groups = []
    if size > 0:
        try:
            groups = group_gpus(topology, size)["groups"]
        except (GroupingError, TypeError, ValueError) as err:
            raise FlagError("container_runtime_group_size %d: %s" % (size, err)) from None
    facts = dict(device_facts or {})
    result = plan(topology, groups, facts, {
        "profile": options.get("profile"), "cdi": str(options.get("cdi", "auto")).lower(),
        "seccomp_unconfined": options.get("seccomp_unconfined"), "ipc_host": options.get("ipc_host"),
        "shm_size": options.get("shm_size"), "env_file": options.get("env_file"), "extra_caps": options.get("extra_caps"),
        "privileged": options.get("privileged"), "launch_dir": options.get("launch_dir"),
        "wrapper_path": options.get("launch_wrapper"), "numa_confine": bool(options.get("numa_confine", True)),
        "memory_binding": bool(options.get("memory_binding", True)),
    }, flags_knowledge, knowledge.get("env_profiles"))
    manage_groups = bool(options.get("manage_groups"))
    # device nodes of a simulated node (sysroot not /) are regular files
    checked = access(facts, options.get("users"), manage_groups, simulated=(options.get("sysroot") or "/") != "/")
    result.update(checked)
    result["report"] = checked["report"] + result["warnings"]
    failed = [c for c in checked["checks"] if c["status"] == "fail"]
    if options.get("strict", True) and failed:
        raise FlagError("container_runtime: %s. Fix: %s (or container_runtime_strict: false to report only)."
                        % ("; ".join(c["observed"] for c in failed), "; ".join(c["remediation"] for c in failed)))
    output_dir = options["output_dir"]
    compose_path = "%s/%s" % (output_dir, COMPOSE_FILE)
    flag_paths = ["%s/%s.flags" % (output_dir, g["name"]) for g in result["groups"]]
    result["files"] = [{"path": path, "mode": "0644", "content": _flags_text(header, output_dir, group, result["profile"])}
                       for path, group in zip(flag_paths, result["groups"])]
    result["files"].append({"path": compose_path, "mode": "0644", "content": _compose_text(header, output_dir, result["compose"])})
    # flag files of launch groups that no longer exist
    result["prune"] = [{"path": output_dir, "pattern": "*.flags"}]
    result["users_to_add"] = checked["member_users"] if manage_groups and checked["device_groups"] else []
    result["docker_restart"] = bool(options.get("docker_restart_ok")) and bool((facts.get("docker") or {}).get("present"))
    result["managed"] = {
        "owner": "container_runtime",
        "files": flag_paths + [compose_path],
        # daemon.json is shared: only the owned keys are watched, keys a user added never count as drift
        "json_keys": ([{"path": options["daemon_json_path"], "keys": options.get("daemon_json_settings") or {}}]
                      if options.get("daemon_json_manage") else []),
        # [user, group] for every existing user in every group owning the device nodes
        "groups": ([[user, group] for user in checked["member_users"] for group in checked["device_groups"]]
                   if manage_groups else []),
    }
    return result
