"""container_flags: flags per launch group from the topology, forbidden flags refused, device access checks."""

import os

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env import container_plan as cf

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
KNOWLEDGE = load_knowledge("container_flags")

TOPOLOGY = {
    "gpus": [{"index": i, "gfx": "gfx942", "render_minor": 128 + i} for i in range(8)],
    "links": [{"a": a, "b": b, "type": "xgmi"} for a in range(8) for b in range(8) if a != b],
}


def node(path, gid=110, group="render", mode="0660", char=True, minor=None):
    entry = {"path": path, "exists": True, "char_device": char, "owner": "root", "gid": gid, "group": group, "mode": mode}
    if minor is not None:
        entry["minor"] = minor
    return entry


def facts(kfd_gid=110, render_gid=110, docker=True, ctk=False, users=None, **kfd):
    return {
        "kfd": node("/dev/kfd", gid=kfd_gid, group={0: "root", 44: "video", 110: "render"}[kfd_gid], **kfd),
        "render_nodes": [
            node("/dev/dri/renderD%d" % (128 + i), gid=render_gid, group={44: "video", 110: "render", 0: "root"}[render_gid], minor=128 + i)
            for i in range(8)
        ],
        "docker": {"present": docker, "path": "/usr/bin/dockerd" if docker else None},
        "amd_ctk": {"present": ctk, "path": "/usr/bin/amd-ctk" if ctk else None},
        "users": users or {},
    }


def flags_of(result, group=0):
    return result["groups"][group]["flags"]


def test_all_gpus_in_one_group_by_default():
    result = cf.plan(TOPOLOGY, [], facts(), {"profile": "xgmi-training"}, KNOWLEDGE)
    assert [g["name"] for g in result["groups"]] == ["all"]
    flags = flags_of(result)
    assert flags[0] == "--device=/dev/kfd"
    assert ["--device=/dev/dri/renderD%d" % (128 + i) for i in range(8)] == flags[1:9]
    assert "--group-add=110" in flags
    assert not any("privileged" in f or "SYS_RAWIO" in f or "SYS_PTRACE" in f for f in flags)


def test_launch_groups_get_only_their_render_nodes():
    result = cf.plan(TOPOLOGY, [[0, 1, 2, 3], [4, 5, 6, 7]], facts(), {}, KNOWLEDGE)
    assert [g["name"] for g in result["groups"]] == ["group-0", "group-1"]
    second = flags_of(result, 1)
    assert [f for f in second if "renderD" in f] == ["--device=/dev/dri/renderD%d" % m for m in (132, 133, 134, 135)]
    assert "--device=/dev/kfd" in second
    assert result["compose"]["services"]["topotune-gpu-group-1"]["devices"][1:] == ["/dev/dri/renderD%d" % m for m in (132, 133, 134, 135)]


def test_group_add_by_gid_for_every_owning_group_and_never_root():
    result = cf.plan(TOPOLOGY, [], facts(kfd_gid=110, render_gid=44), {}, KNOWLEDGE)
    assert [f for f in flags_of(result) if f.startswith("--group-add")] == ["--group-add=44", "--group-add=110"]
    result = cf.plan(TOPOLOGY, [], facts(kfd_gid=0, render_gid=44), {}, KNOWLEDGE)
    assert [f for f in flags_of(result) if f.startswith("--group-add")] == ["--group-add=44"]
    assert "group root" in result["warnings"][0]


@pytest.mark.parametrize(
    "profile,present,absent",
    [
        ("xgmi-training", [], ["--device=/dev/infiniband", "--ulimit=memlock=-1:-1", "--network=host", "--cap-add=SYS_PTRACE"]),
        ("inference", [], ["--device=/dev/infiniband", "--cap-add=SYS_PTRACE"]),
        ("rdma-training", ["--device=/dev/infiniband", "--ulimit=memlock=-1:-1", "--network=host"], ["--cap-add=SYS_PTRACE"]),
        ("debug", ["--cap-add=SYS_PTRACE"], ["--device=/dev/infiniband"]),
    ],
)
def test_profile_flags(profile, present, absent):
    flags = flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": profile}, KNOWLEDGE))
    for flag in present:
        assert flag in flags
    for flag in absent:
        assert flag not in flags


@pytest.mark.parametrize(
    "options,flag",
    [
        ({"seccomp_unconfined": True}, "--security-opt=seccomp=unconfined"),
        ({"ipc_host": True}, "--ipc=host"),
        ({"shm_size": "64g"}, "--shm-size=64g"),
        ({"env_file": "/etc/topotune/env/xgmi-training.env"}, "--env-file=/etc/topotune/env/xgmi-training.env"),
    ],
)
def test_options_emit_their_flag_and_only_then(options, flag):
    assert flag in flags_of(cf.plan(TOPOLOGY, [], facts(), options, KNOWLEDGE))
    assert flag not in flags_of(cf.plan(TOPOLOGY, [], facts(), {}, KNOWLEDGE))


def test_compose_fragment_mirrors_the_flags():
    options = {
        "profile": "rdma-training",
        "ipc_host": True,
        "shm_size": "64g",
        "seccomp_unconfined": True,
        "env_file": "/etc/topotune/env/rdma-training.env",
    }
    service = cf.plan(TOPOLOGY, [], facts(), options, KNOWLEDGE)["compose"]["services"]["topotune-gpu-all"]
    assert service["devices"][0] == "/dev/kfd" and service["devices"][-1] == "/dev/infiniband"
    assert service["group_add"] == ["110"] and service["ipc"] == "host" and service["shm_size"] == "64g"
    assert service["ulimits"] == {"memlock": {"soft": -1, "hard": -1}} and service["network_mode"] == "host"
    assert service["env_file"] == ["/etc/topotune/env/rdma-training.env"] and service["security_opt"] == ["seccomp=unconfined"]


def test_cdi_replaces_device_nodes_when_the_toolkit_is_present():
    result = cf.plan(TOPOLOGY, [[0, 1], [2, 3], [4, 5], [6, 7]], facts(ctk=True), {"cdi": "auto"}, KNOWLEDGE)
    assert result["cdi"] is True
    assert flags_of(result, 1)[:2] == ["--device=amd.com/gpu=2", "--device=amd.com/gpu=3"]
    assert not any("kfd" in f or "renderD" in f or "group-add" in f for f in flags_of(result, 1))
    assert cf.plan(TOPOLOGY, [], facts(ctk=True), {"cdi": "false"}, KNOWLEDGE)["cdi"] is False
    assert cf.plan(TOPOLOGY, [], facts(ctk=False), {"cdi": "auto"}, KNOWLEDGE)["cdi"] is False
    with pytest.raises(cf.FlagError, match="amd-ctk"):
        cf.plan(TOPOLOGY, [], facts(ctk=False), {"cdi": "true"}, KNOWLEDGE)


@pytest.mark.parametrize(
    "options,fragment",
    [
        ({"privileged": True}, "--privileged is refused"),
        ({"extra_caps": ["SYS_RAWIO"]}, "no AMD document requires it"),
        ({"extra_caps": ["cap_sys_rawio"]}, "SYS_RAWIO is refused"),
        ({"extra_caps": ["ALL"]}, "ALL is refused"),
        ({"extra_caps": ["SYS_PTRACE"]}, "only for debugging"),
        ({"extra_caps": ["SYS PTRACE"]}, "not a capability name"),
        ({"shm_size": "64g; rm -rf /"}, "container_runtime_shm_size"),
        ({"env_file": "relative.env"}, "container_runtime_env_file"),
        ({"env_file": "/etc/x env"}, "container_runtime_env_file"),
    ],
)
def test_forbidden_and_malformed_options_are_refused_with_the_reason(options, fragment):
    with pytest.raises(cf.FlagError, match=fragment):
        cf.plan(TOPOLOGY, [], facts(), options, KNOWLEDGE)


def test_sys_ptrace_is_allowed_in_the_debug_profile_only_once():
    flags = flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "debug", "extra_caps": ["SYS_PTRACE", "SYS_NICE"]}, KNOWLEDGE))
    assert [f for f in flags if f.startswith("--cap-add")] == ["--cap-add=SYS_NICE", "--cap-add=SYS_PTRACE"]


def test_forbidden_list_names_the_source_article_and_reason():
    names = {entry["name"]: entry for entry in KNOWLEDGE["forbidden"]}
    assert set(names) == {"privileged", "SYS_RAWIO", "ALL"}
    assert "no AMD document requires it" in names["SYS_RAWIO"]["reason"]
    for entry in list(KNOWLEDGE["flags"].values()) + KNOWLEDGE["forbidden"]:
        assert entry["source"]


def test_unknown_group_member_and_missing_render_minor_fail_clearly():
    with pytest.raises(cf.FlagError, match="does not have"):
        cf.plan(TOPOLOGY, [[0, 9]], facts(), {}, KNOWLEDGE)
    broken = {"gpus": [{"index": 0, "gfx": "gfx942"}], "links": []}
    with pytest.raises(cf.FlagError, match="render_minor"):
        cf.plan(broken, [], facts(), {}, KNOWLEDGE)


def statuses(checks):
    return {c["id"]: c["status"] for c in checks}


def test_checks_pass_on_a_sound_node():
    users = {"alice": {"exists": True, "groups": ["alice", "render"]}}
    checks = statuses(cf.access_checks(facts(users=users), ["alice"]))
    assert set(checks.values()) == {"pass", "info"} and checks["user-alice"] == "pass"


@pytest.mark.parametrize(
    "device_facts,users,check_id,status,fragment",
    [
        (dict(facts(), kfd={"path": "/dev/kfd", "exists": False}), [], "kfd", "fail", "/dev/kfd missing"),
        (dict(facts(), render_nodes=[]), [], "render-nodes", "fail", "no /dev/dri/renderD"),
        (facts(kfd_gid=0), [], "kfd", "fail", "group root"),
        (facts(mode="0600"), [], "kfd", "fail", "lacks group read/write"),
        (facts(mode="0666"), [], "kfd", "warn", "world-writable"),
        (facts(char=False), [], "kfd", "fail", "not a character device"),
        (facts(users={"bob": {"exists": True, "groups": ["bob", "video"]}}), ["bob"], "user-bob", "fail", "bob in bob, video"),
        (facts(), ["carol"], "user-carol", "fail", "does not exist"),
        (facts(docker=False), [], "docker-engine", "warn", "docker engine not found"),
    ],
)
def test_each_check_fires_on_its_fault(device_facts, users, check_id, status, fragment):
    checks = {c["id"]: c for c in cf.access_checks(device_facts, users)}
    assert checks[check_id]["status"] == status and fragment in checks[check_id]["observed"]


def test_simulated_nodes_accept_regular_files():
    checks = {c["id"]: c for c in cf.access_checks(facts(char=False), [], simulated=True)}
    assert checks["kfd"]["status"] == "pass" and "simulated" in checks["kfd"]["observed"]


def test_filter_adds_checks_and_wraps_errors():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.topotune.instinct.plugins.filter.container_flags import container_flags

    result = container_flags(TOPOLOGY, [], facts(), {"profile": "debug"})
    assert {c["id"] for c in result["checks"]} >= {"kfd", "docker-engine"}
    with pytest.raises(AnsibleFilterError, match="SYS_RAWIO"):
        container_flags(TOPOLOGY, [], facts(), {"extra_caps": ["SYS_RAWIO"]})
    with pytest.raises(AnsibleFilterError, match="topology model"):
        container_flags("nope")


def test_device_access_reads_a_sysroot(tmp_path):
    """module_utils/topology/devices.py, what gpu_device_access returns and gpu_topology's discovery carries."""
    from ansible_collections.topotune.instinct.plugins.module_utils.topology.devices import device_access

    (tmp_path / "dev/dri").mkdir(parents=True)
    for name in ("dev/kfd", "dev/dri/renderD129", "dev/dri/renderD128", "dev/dri/card0"):
        (tmp_path / name).write_text("")
        os.chmod(tmp_path / name, 0o660)

    result = device_access(str(tmp_path), ["root", "no-such-user-xyz"])
    assert result["sysroot"] == str(tmp_path)
    assert result["kfd"]["exists"] and result["kfd"]["mode"] == "0660" and result["kfd"]["char_device"] is False
    assert [n["minor"] for n in result["render_nodes"]] == [128, 129]
    assert result["render_nodes"][0]["path"] == "/dev/dri/renderD128"
    assert result["users"]["root"]["exists"] and not result["users"]["no-such-user-xyz"]["exists"]
    assert set(result["docker"]) == {"present", "path"}


def test_filter_names_device_groups_and_existing_users_and_counts_managed_memberships():
    from ansible_collections.topotune.instinct.plugins.filter.container_flags import container_flags

    users = {"bob": {"exists": True, "groups": ["bob", "video"]}, "carol": {"exists": False, "groups": []}}
    device_facts = dict(facts(users=users), render_nodes=[dict(n, group="video", gid=44) for n in facts()["render_nodes"]])
    options = {"users": ["bob", "carol"]}
    result = container_flags(TOPOLOGY, [], device_facts, options)
    assert result["device_groups"] == ["render", "video"] and result["member_users"] == ["bob"]
    assert statuses(result["checks"])["user-bob"] == "fail"  # not in render yet
    managed = container_flags(TOPOLOGY, [], device_facts, dict(options, manage_groups=True))
    # the role adds bob to render and video (append) first; carol does not exist and still fails
    assert statuses(managed["checks"])["user-bob"] == "pass" and statuses(managed["checks"])["user-carol"] == "fail"
    assert "bob in bob, render, video" in {c["id"]: c for c in managed["checks"]}["user-bob"]["observed"]
    assert device_facts["users"]["bob"]["groups"] == ["bob", "video"]  # the input is not changed
    root_owned = dict(facts(kfd_gid=0, users=users), render_nodes=[])
    assert container_flags(TOPOLOGY, [], root_owned, dict(options, manage_groups=True))["device_groups"] == []


def test_filter_report_has_a_line_per_check_then_the_warnings():
    from ansible_collections.topotune.instinct.plugins.filter.container_flags import container_flags

    result = container_flags(TOPOLOGY, [], facts(kfd_gid=0, docker=False), {})
    assert len(result["report"]) == len(result["checks"]) + len(result["warnings"]) and result["warnings"]
    assert result["report"][-len(result["warnings"]):] == result["warnings"]
    docker = [line for line in result["report"] if "| docker-engine |" in line]
    assert docker == ["warn | docker-engine | docker engine not found | install Docker Engine; flag files and the compose "
                      "fragment are written anyway"]


NUMA_TOPOLOGY = dict(TOPOLOGY, gpus=[dict(g, numa_node=g["index"] // 4) for g in TOPOLOGY["gpus"]],
                     numa_nodes=[{"node": 0, "cpus": "0-95,192-287", "gpus": [0, 1, 2, 3]},
                                 {"node": 1, "cpus": "96-191,288-383", "gpus": [4, 5, 6, 7]}])
LAUNCH = {"launch_dir": "/etc/topotune/launch", "wrapper_path": "/usr/local/bin/topotune-bind"}


def test_a_group_is_confined_to_its_numa_node_and_gets_its_launch_files():
    result = cf.plan(NUMA_TOPOLOGY, [[0, 1, 2, 3], [4, 5, 6, 7]], facts(), LAUNCH, KNOWLEDGE)
    second = flags_of(result, 1)
    assert "--cpuset-cpus=96-191,288-383" in second and "--cpuset-mems=1" in second
    assert "--env-file=/etc/topotune/launch/size4-group1.env" in second
    assert "--volume=/usr/local/bin/topotune-bind:/usr/local/bin/topotune-bind:ro" in second
    assert "--volume=/etc/topotune/launch:/etc/topotune/launch:ro" in second
    # numactl --membind needs set_mempolicy: Docker's default seccomp profile allows it with SYS_NICE only
    assert second.count("--cap-add=SYS_NICE") == 1 and not any("privileged" in f for f in second)
    service = result["compose"]["services"]["topotune-gpu-group-1"]
    assert service["cpuset"] == "96-191,288-383" and service["cap_add"] == ["SYS_NICE"]
    assert service["env_file"] == ["/etc/topotune/launch/size4-group1.env"]


def test_the_all_group_spans_every_node_and_has_no_group_env_file():
    flags = flags_of(cf.plan(NUMA_TOPOLOGY, [], facts(), LAUNCH, KNOWLEDGE))
    assert "--cpuset-cpus=0-383" in flags and "--cpuset-mems=0,1" in flags
    assert not any(f.startswith("--env-file=/etc/topotune/launch") for f in flags)


@pytest.mark.parametrize("topology,options,present,absent", [
    (NUMA_TOPOLOGY, {"numa_confine": False}, ["--cap-add=SYS_NICE"], ["--cpuset-cpus", "--cpuset-mems"]),
    (NUMA_TOPOLOGY, {"memory_binding": False}, ["--cpuset-mems=0"], ["SYS_NICE"]),
    (TOPOLOGY, {}, ["--cap-add=SYS_NICE"], ["--cpuset"]),  # NUMA unknown: nothing confined, never guessed
    (NUMA_TOPOLOGY, {"launch_dir": ""}, [], ["--env-file=/etc/topotune/launch", "--volume"]),
])
def test_confinement_and_capability_follow_their_options(topology, options, present, absent):
    flags = flags_of(cf.plan(topology, [[0, 1, 2, 3]], facts(), dict(LAUNCH, **options), KNOWLEDGE))
    assert all(any(f.startswith(p) for f in flags) for p in present)
    assert not any(a in f for a in absent for f in flags)


def test_a_bad_launch_dir_is_refused():
    with pytest.raises(cf.FlagError, match="container_runtime_launch_dir"):
        cf.plan(NUMA_TOPOLOGY, [], facts(), {"launch_dir": "rel/dir"}, KNOWLEDGE)


# --- profile behaviour from profile data (knowledge/env_profiles.yml), never from a profile's name ---

with open(os.path.join(REPO, "knowledge", "env_profiles.yml"), encoding="utf-8") as _handle:
    PROFILES = yaml.safe_load(_handle)
RDMA = ["--device=/dev/infiniband", "--ulimit=memlock=-1:-1", "--network=host"]


def profiles_with(**new):
    """A copy of the knowledge's profiles with ``new`` ones added (or replaced)."""
    copy = yaml.safe_load(yaml.safe_dump(PROFILES))
    copy["profiles"].update(new)
    return copy


def test_a_new_rdma_profile_gets_the_rdma_devices_and_memlock():
    profiles = profiles_with(**{"roce-inference": {"description": "serving across nodes over RoCE", "fabric": "rdma",
                                                   "include": ["inference"], "variables": {}}})
    result = cf.plan(TOPOLOGY, [], facts(), {"profile": "roce-inference"}, KNOWLEDGE, profiles)
    flags = flags_of(result)
    assert all(flag in flags for flag in RDMA) and "--cap-add=SYS_PTRACE" not in flags
    service = result["compose"]["services"]["topotune-gpu-all"]
    assert service["devices"][-1] == "/dev/infiniband" and service["ulimits"] == {"memlock": {"soft": -1, "hard": -1}}
    assert service["network_mode"] == "host"


def test_behaviour_follows_the_data_not_the_name():
    # the names of the shipped profiles mean nothing: their data does
    profiles = profiles_with(**{"rdma-training": dict(PROFILES["profiles"]["rdma-training"], fabric="none"),
                                "bringup": {"description": "a second debugging profile", "debug": True, "variables": {}},
                                "debug": dict(PROFILES["profiles"]["debug"], debug=False)})
    flags = flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "rdma-training"}, KNOWLEDGE, profiles))
    assert not any(flag in flags for flag in RDMA)
    assert "--cap-add=SYS_PTRACE" in flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "bringup"}, KNOWLEDGE, profiles))
    assert "--cap-add=SYS_PTRACE" not in flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "debug"}, KNOWLEDGE, profiles))
    with pytest.raises(cf.FlagError, match="container_runtime_profile: bringup"):
        cf.plan(TOPOLOGY, [], facts(), {"profile": "debug", "extra_caps": ["SYS_PTRACE"]}, KNOWLEDGE, profiles)


def test_an_included_profile_passes_its_data_on_and_its_own_wins():
    profiles = profiles_with(**{"rdma-debug": {"description": "debugging across nodes", "include": ["debug", "rdma-training"],
                                               "debug": True, "variables": {}},
                                "local-debug": {"description": "debugging on one node", "include": ["rdma-debug"],
                                                "fabric": "none", "variables": {}}})
    flags = flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "rdma-debug"}, KNOWLEDGE, profiles))
    assert all(flag in flags for flag in RDMA) and "--cap-add=SYS_PTRACE" in flags
    flags = flags_of(cf.plan(TOPOLOGY, [], facts(), {"profile": "local-debug"}, KNOWLEDGE, profiles))
    assert not any(flag in flags for flag in RDMA) and "--cap-add=SYS_PTRACE" in flags


@pytest.mark.parametrize("profile,fragment", [
    ({"fabric": "infiniband"}, "fabric 'infiniband'; use one of rdma, socket, none"),
    ({"debug": "yes"}, "debug 'yes'; use true or false"),
])
def test_bad_profile_data_is_named(profile, fragment):
    profiles = profiles_with(odd=dict({"description": "x", "variables": {}}, **profile))
    with pytest.raises(cf.FlagError, match=fragment):
        cf.plan(TOPOLOGY, [], facts(), {"profile": "odd"}, KNOWLEDGE, profiles)
    with pytest.raises(cf.FlagError, match="unknown environment profile 'nope'"):
        cf.plan(TOPOLOGY, [], facts(), {"profile": "nope"}, KNOWLEDGE, profiles)


def test_the_profile_flags_of_the_knowledge_are_exactly_the_profile_dependent_ones():
    assert cf.profile_flags(KNOWLEDGE, {"fabric": "rdma", "debug": False}) == {"infiniband", "memlock", "network_host"}
    assert cf.profile_flags(KNOWLEDGE, {"fabric": "none", "debug": True}) == {"sys_ptrace"}
    assert cf.profile_flags(KNOWLEDGE, {"fabric": "socket", "debug": False}) == set()


# --- the container_runtime role's plan ---

HEADER = "#\n# Ansible managed\n#"
ROLE = {"profile": "xgmi-training", "group_size": 0, "cdi": "auto", "seccomp_unconfined": False, "ipc_host": True,
        "shm_size": "64g", "env_file": "/etc/topotune/env/xgmi-training.env", "launch_dir": "/etc/topotune/launch",
        "launch_wrapper": "/usr/local/bin/topotune-bind", "numa_confine": True, "memory_binding": True, "extra_caps": [],
        "privileged": False, "users": [], "manage_groups": True, "sysroot": "/", "output_dir": "/etc/topotune/container",
        "strict": True, "daemon_json_manage": False, "daemon_json_path": "/etc/docker/daemon.json",
        "daemon_json_settings": {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}},
        "docker_restart_ok": False}
ROLE_KNOWLEDGE = {"container_flags": KNOWLEDGE, "env_profiles": PROFILES}


def role_plan(topology=None, device_facts=None, **options):
    return cf.role_plan(dict(ROLE, **options), NUMA_TOPOLOGY if topology is None else topology,
                        facts() if device_facts is None else device_facts, ROLE_KNOWLEDGE, HEADER)


def test_role_plan_writes_one_flag_file_per_group_and_the_compose_fragment():
    result = role_plan(group_size=4, profile="debug", env_file="/etc/topotune/env/debug.env")
    assert [f["path"] for f in result["files"]] == ["/etc/topotune/container/group-0.flags", "/etc/topotune/container/group-1.flags",
                                                    "/etc/topotune/container/compose.gpu.yml"]
    assert {f["mode"] for f in result["files"]} == {"0644"}
    text = result["files"][1]["content"]
    assert text.startswith(HEADER + "\n# docker run flags for launch group group-1 (GPUs 4,5,6,7), profile debug.\n"
                           "# One flag per line: docker run $(grep -v '^#' /etc/topotune/container/group-1.flags) IMAGE\n")
    assert text.endswith("\n") and text.splitlines()[5:] == result["groups"][1]["flags"]
    compose = result["files"][2]["content"]
    assert compose.startswith(HEADER + "\n# Compose fragment: one service per launch group; use it with\n")
    assert yaml.safe_load(compose) == result["compose"]
    assert "  topotune-gpu-group-1:\n    cap_add:\n    - SYS_PTRACE\n    - SYS_NICE\n" in compose  # to_nice_yaml's layout
    assert result["prune"] == [{"path": "/etc/topotune/container", "pattern": "*.flags"}]
    assert result["managed"] == {"owner": "container_runtime", "files": [f["path"] for f in result["files"]], "json_keys": [],
                                 "groups": []}


def test_role_plan_groups_follow_the_topology_grouping():
    from ansible_collections.topotune.instinct.plugins.module_utils.launch.grouping import group_gpus

    result = role_plan(group_size=2)
    assert [g["gpus"] for g in result["groups"]] == group_gpus(NUMA_TOPOLOGY, 2)["groups"]
    with pytest.raises(cf.FlagError, match="container_runtime_group_size 3: "):
        role_plan(group_size=3)


def test_role_plan_adds_existing_users_to_the_device_groups_and_records_them():
    users = {"trainer": {"exists": True, "groups": ["trainer"]}, "ghost": {"exists": False, "groups": []}}
    device_facts = facts(users=users)
    with pytest.raises(cf.FlagError, match="user ghost does not exist"):
        role_plan(device_facts=device_facts, users=["trainer", "ghost"])
    result = role_plan(device_facts=device_facts, users=["trainer", "ghost"], strict=False, daemon_json_manage=True)
    assert result["users_to_add"] == ["trainer"] and result["device_groups"] == ["render"]
    assert result["managed"]["groups"] == [["trainer", "render"]]
    assert result["managed"]["json_keys"] == [{"path": "/etc/docker/daemon.json", "keys": ROLE["daemon_json_settings"]}]
    assert any(line.startswith("fail | user-ghost |") for line in result["report"])
    unmanaged = role_plan(device_facts=device_facts, users=["trainer"], manage_groups=False, strict=False)
    assert unmanaged["users_to_add"] == [] and unmanaged["managed"]["groups"] == []
    assert any(line.startswith("fail | user-trainer |") for line in unmanaged["report"])


def test_role_plan_stops_on_failed_checks_unless_told_to_report_only():
    broken = dict(facts(), kfd={"path": "/dev/kfd", "exists": False})
    with pytest.raises(cf.FlagError) as failed:
        role_plan(device_facts=broken)
    assert str(failed.value) == ("container_runtime: /dev/kfd missing. Fix: load the amdgpu driver (modprobe amdgpu); install "
                                 "amdgpu-dkms if the module is missing (or container_runtime_strict: false to report only).")
    assert role_plan(device_facts=broken, strict=False)["report"][0].startswith("fail | kfd | /dev/kfd missing")
    # regular files stand in for the device nodes on a simulated node
    simulated = facts(char=False)
    with pytest.raises(cf.FlagError, match="not a character device"):
        role_plan(device_facts=simulated)
    assert role_plan(device_facts=simulated, sysroot="/sim")["checks"][0]["status"] == "pass"


def test_role_plan_restarts_docker_only_when_allowed_and_present():
    assert role_plan(docker_restart_ok=True)["docker_restart"] is True
    assert role_plan(docker_restart_ok=False)["docker_restart"] is False
    assert role_plan(docker_restart_ok=True, device_facts=facts(docker=False))["docker_restart"] is False


@pytest.mark.parametrize("options,message", [
    ({"group_size": -1}, "container_runtime_group_size must be an integer >= 0, 0 putting all GPUs in one flag set (got -1)"),
    ({"group_size": "two"}, "container_runtime_group_size must be an integer >= 0"),
    ({"cdi": "maybe"}, "container_runtime_cdi must be auto, true or false (got maybe)"),
    ({"privileged": True}, "container_runtime_privileged: --privileged is never emitted: --privileged gives the container"),
    ({"extra_caps": ["cap_sys_rawio", "ALL", "SYS_RAWIO"]}, "container_runtime_extra_caps: SYS_RAWIO, ALL refused: SYS_RAWIO is"),
    ({"output_dir": "out/flags"}, "container_runtime_output_dir must be an absolute path of [A-Za-z0-9_./-] (got out/flags)"),
    ({"launch_dir": "rel"}, "container_runtime_launch_dir must be empty or an absolute path"),
    ({"daemon_json_path": "/etc/docker/daemon json"}, "container_runtime_daemon_json_path must be an absolute path"),
])
def test_role_input_errors_name_the_variable_and_the_fix(options, message):
    with pytest.raises(cf.FlagError) as failed:
        cf.check_options(dict(ROLE, **options), KNOWLEDGE)
    assert message in str(failed.value)
    with pytest.raises(cf.FlagError):
        role_plan(**options)


def test_role_input_errors_are_all_named_at_once_with_their_sources():
    with pytest.raises(cf.FlagError) as failed:
        cf.check_options(dict(ROLE, privileged=True, extra_caps=["SYS_RAWIO"], output_dir="x"), KNOWLEDGE)
    parts = str(failed.value).split("; container_runtime_")
    assert [p.split(" ", 1)[0].split(":")[0] for p in parts] == ["container_runtime_privileged", "extra_caps", "output_dir"]
    assert "no AMD document requires it" in str(failed.value)
    assert "not a capability. Remove them [source: ROCm/rocm-install-on-linux" in str(failed.value)
    assert ".. " not in str(failed.value)
    assert role_plan(launch_dir="")["groups"][0]["flags"][-1] == "--cap-add=SYS_NICE"
