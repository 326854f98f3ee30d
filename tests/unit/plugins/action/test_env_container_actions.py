"""The rocm_env and container_runtime actions: the input is checked before the node is read, the node is read only
when the chain (role variable, topotune_topology, the play's discovery) lacks what the plan needs, and the plan's
files start with the play's ansible_managed."""

from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.topotune.instinct.plugins.action import container_runtime, rocm_env

MODEL = {"gpus": [{"index": i, "gfx": "gfx942", "render_minor": 128 + i, "numa_node": 0} for i in range(2)],
         "links": [{"a": 0, "b": 1, "type": "xgmi", "hops": 1}], "numa_nodes": [{"node": 0, "cpus": "0-7"}],
         "identity": {"generation": "MI300X"}}


def node(path, minor=None):
    entry = {"path": path, "exists": True, "char_device": True, "owner": "root", "gid": 110, "group": "render", "mode": "0660"}
    return dict(entry, minor=minor) if minor is not None else entry


DEVICES = {"kfd": node("/dev/kfd"), "render_nodes": [node("/dev/dri/renderD128", 128), node("/dev/dri/renderD129", 129)],
           "docker": {"present": True, "path": "/usr/bin/dockerd"}, "amd_ctk": {"present": False, "path": None}, "users": {}}


def run(module, args, discovered=None, task_vars=None, templar=None, devices=None):
    """Run the action with ``args``; ``discovered`` is what the gpu_topology module returns on the node, ``devices``
    what gpu_device_access returns. Returns (result, the module calls made)."""
    task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
    action = module.ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=templar, shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        if module_name == "topotune.instinct.gpu_device_access":
            return dict(devices or {"failed": True, "msg": "permission denied"})
        return dict(discovered or {"failed": True, "msg": "no KFD topology under /x"})

    action._execute_module = execute
    return action.run(task_vars=task_vars or {}), calls


def test_rocm_env_uses_the_plays_discovery_and_reads_nothing():
    result, calls = run(rocm_env, {"profile": "xgmi-training", "discovery": {"topology": MODEL, "rocm_version": "6.4.1"}})
    assert calls == [] and result["changed"] is False
    assert "# Node: gfx942, ROCm 6.4.1, fabric none." in result["files"][0]["content"]
    assert result["files"][0]["content"].startswith("#\n# Ansible managed\n#\n")
    assert result["managed"]["files"] == ["/etc/topotune/env/xgmi-training.env", "/etc/profile.d/topotune-rocm.sh"]


def test_rocm_env_reads_the_node_when_the_chain_has_no_model_and_fails_naming_the_sysroot():
    discovered = {"topology": dict(MODEL, identity=None), "rocm_version": "7.0.2"}
    result, calls = run(rocm_env, {"profile": "debug", "sysroot": "/sim"}, discovered)
    assert calls == [("topotune.instinct.gpu_topology", {"sysroot": "/sim"})]
    assert "ROCm 7.0.2" in result["files"][0]["content"]
    with pytest.raises(AnsibleActionFail, match="cannot read the node's GPU topology under /sim: no KFD topology"):
        run(rocm_env, {"profile": "debug", "sysroot": "/sim"})


def test_rocm_env_reads_the_node_for_the_version_alone_and_a_failed_read_leaves_it_unknown():
    result, calls = run(rocm_env, {"profile": "debug", "topology": MODEL})
    assert len(calls) == 1 and "ROCm unknown" in result["files"][0]["content"]
    result, calls = run(rocm_env, {"profile": "debug", "topology": MODEL, "rocm_version": "6.2.1"})
    assert calls == [] and "ROCm 6.2.1" in result["files"][0]["content"]


def test_rocm_env_wrong_input_fails_before_the_node_is_read():
    with pytest.raises(AnsibleActionFail, match="rocm_env_env_dir must be an absolute path") as failed:
        run(rocm_env, {"profile": "xgmi-training", "env_dir": "/etc/topo tune"})
    assert "Traceback" not in str(failed.value)
    with pytest.raises(AnsibleActionFail, match="rocm_env refused HSA_OVERRIDE_GFX_VERSION"):
        run(rocm_env, {"profile": "xgmi-training", "overrides": {"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}, "topology": MODEL,
                       "rocm_version": "6.4.1"})


def test_the_plays_ansible_managed_heads_the_files():
    templar = MagicMock()
    templar.template.side_effect = lambda value: value.replace("{{ site }}", "lab")
    result, _calls = run(rocm_env, {"profile": "debug", "topology": MODEL, "rocm_version": "6.4.1"},
                         task_vars={"ansible_managed": "Managed by topotune at {{ site }}"}, templar=templar)
    assert result["files"][0]["content"].startswith("#\n# Managed by topotune at lab\n#\n")


def test_container_runtime_plans_from_the_inventory_model_and_reads_only_the_device_nodes():
    args = {"inventory_topology": MODEL, "group_size": 2, "output_dir": "/etc/topotune/container",
            "launch_dir": "/etc/topotune/launch", "launch_wrapper": "/usr/local/bin/topotune-bind", "docker_restart_ok": True}
    result, calls = run(container_runtime, args, devices=DEVICES)
    assert [name for name, _args in calls] == ["topotune.instinct.gpu_device_access"]
    assert [g["name"] for g in result["groups"]] == ["group-0"]
    assert [f["path"] for f in result["files"]] == ["/etc/topotune/container/group-0.flags", "/etc/topotune/container/compose.gpu.yml"]
    assert result["docker_restart"] is True and "warnings" not in result and result["flag_warnings"] == []
    assert result["report"][0].startswith("pass | kfd |")


def test_container_runtime_reads_the_topology_only_after_the_input_check():
    with pytest.raises(AnsibleActionFail, match="container_runtime_privileged: --privileged is never emitted"):
        run(container_runtime, {"privileged": True}, devices=DEVICES)
    result, calls = run(container_runtime, {"sysroot": "/sim"}, {"topology": MODEL}, devices=DEVICES)
    assert calls[0] == ("topotune.instinct.gpu_topology", {"sysroot": "/sim"}) and result["groups"][0]["gpus"] == [0, 1]
    with pytest.raises(AnsibleActionFail, match="cannot read the node's GPU topology under /sim"):
        run(container_runtime, {"sysroot": "/sim"}, devices=DEVICES)


def test_container_runtime_reads_the_device_nodes_itself_after_the_input_check():
    with pytest.raises(AnsibleActionFail, match="container_runtime_output_dir must be an absolute path") as failed:
        run(container_runtime, {"output_dir": "out", "topology": MODEL}, devices=DEVICES)
    assert "Traceback" not in str(failed.value)
    devices = dict(DEVICES, users={"trainer": {"exists": True, "groups": ["trainer"]}})
    result, calls = run(container_runtime, {"topology": MODEL, "sysroot": "/sim", "users": ["trainer"]}, devices=devices)
    assert calls == [("topotune.instinct.gpu_device_access", {"sysroot": "/sim", "users": ["trainer"]})]
    assert result["device_groups"] == ["render"] and result["gids"] == [110] and result["users_to_add"] == ["trainer"]
    with pytest.raises(AnsibleActionFail, match="cannot read the device nodes under /sim: permission denied"):
        run(container_runtime, {"topology": MODEL, "sysroot": "/sim"})


def test_container_runtime_takes_the_device_nodes_the_discovery_read_under_its_sysroot():
    """The play's discovery (gpu_topology's device_access) saves the node a round trip; read again when the sysroot
    differs or a container user's groups are asked for."""
    discovery = {"topology": MODEL, "device_access": dict(DEVICES, sysroot="/sim", kfd=dict(node("/dev/kfd"), gid=44))}
    result, calls = run(container_runtime, {"sysroot": "/sim", "discovery": discovery}, devices=DEVICES)
    assert calls == [] and result["gids"][0] == 44
    _result, calls = run(container_runtime, {"sysroot": "/", "discovery": discovery}, devices=DEVICES)
    assert calls == [("topotune.instinct.gpu_device_access", {"sysroot": "/", "users": []})]
    users = dict(DEVICES, users={"trainer": {"exists": True, "groups": ["trainer"]}})
    _result, calls = run(container_runtime, {"sysroot": "/sim", "discovery": discovery, "users": ["trainer"]}, devices=users)
    assert [name for name, _args in calls] == ["topotune.instinct.gpu_device_access"]
    # the role's own discovery carries them too
    result, calls = run(container_runtime, {"sysroot": "/sim"}, {"topology": MODEL, "device_access": discovery["device_access"]})
    assert [name for name, _args in calls] == ["topotune.instinct.gpu_topology"] and result["gids"][0] == 44


@pytest.mark.parametrize("module,role,args", [
    (rocm_env, "rocm_env", {"profile": "debug", "topology": MODEL, "rocm_version": "6.4.1"}),
    (container_runtime, "container_runtime", {"profile": "debug", "topology": MODEL}),
])
def test_an_unreadable_knowledge_file_fails_the_task_naming_the_role(module, role, args, monkeypatch):
    def unreadable(name):
        raise ValueError("knowledge/%s.yml: not a mapping" % name)

    monkeypatch.setattr(module, "load_knowledge", unreadable)
    with pytest.raises(AnsibleActionFail, match=r"^%s: knowledge/\w+\.yml: not a mapping$" % role):
        run(module, args, devices=DEVICES)
