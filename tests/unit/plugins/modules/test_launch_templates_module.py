"""The launch_templates module and its action (role launch_templates in one task): the options are checked before
the node is read or discovered, the topology is discovered when none is given, dev_dir follows the sysroot."""

from unittest.mock import MagicMock

import pytest

from ansible_collections.topotune.instinct.plugins.action.launch_templates import ActionModule
from ansible_collections.topotune.instinct.plugins.modules import launch_templates


def _action(args, replies):
    """The action with the module runs answered from ``replies`` (module name -> result); the runs are recorded."""
    task = MagicMock(args=args, check_mode=True, diff=False, async_val=0)
    action = ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    calls = []

    def execute(module_name=None, module_args=None, task_vars=None):
        calls.append((module_name, module_args))
        return dict(replies[module_name])
    action._execute_module = execute
    action._remove_tmp_path = lambda path: None
    return action, calls


@pytest.mark.parametrize("args,variable", [
    ({"sizes": [2, 0]}, "launch_templates_sizes"),
    ({"wrapper_path": "/usr/local/bin/topotune bind"}, "launch_templates_wrapper_path"),
    ({"reserved_cpus": "0-x"}, "launch_templates_reserved_cpus"),
])
def test_a_wrong_option_stops_before_any_module_runs(args, variable):
    action, calls = _action(dict(args, topology={}, sysroot="/nonexistent"), {})
    result = action.run(task_vars={})
    assert result["failed"] and variable in result["msg"] and calls == []


def test_without_a_topology_the_node_is_discovered_and_identified_first(sim_model):
    model = sim_model("mi300x-8gpu-spx")
    action, calls = _action({"topology": {}, "sysroot": "/sim", "gres_type": "auto"}, {
        "topotune.instinct.gpu_topology": {"topology": model, "warnings": ["from discovery"]},
        "topotune.instinct.launch_templates": {"changed": True, "files": ["/etc/topotune/launch/bind.table"]},
    })
    result = action.run(task_vars={})
    assert [name for name, _args in calls] == ["topotune.instinct.gpu_topology", "topotune.instinct.launch_templates"]
    assert calls[0][1] == {"sysroot": "/sim"}
    sent = calls[1][1]["topology"]
    assert sent["identity"]["generation"] == "MI300X" and sent["gpus"] == model["gpus"]
    assert result["changed"] and result["warnings"] == ["from discovery"]


def test_a_failed_discovery_is_reported_with_its_reason():
    action, calls = _action({"topology": {}, "sysroot": "/x"}, {
        "topotune.instinct.gpu_topology": {"failed": True, "msg": "gpu_topology: KFD topology not found"}})
    result = action.run(task_vars={})
    assert result["failed"] and "KFD topology not found" in result["msg"] and len(calls) == 1


def test_a_given_topology_is_used_as_it_is(sim_model):
    model = dict(sim_model("mi250x-8gcd"), identity={"generation": "MI250X"})
    action, calls = _action({"topology": model}, {"topotune.instinct.launch_templates": {"changed": False}})
    action.run(task_vars={})
    assert [name for name, _args in calls] == ["topotune.instinct.launch_templates"] and calls[0][1]["topology"] is model


def test_module_writes_gres_type_auto_and_dev_dir_under_the_sysroot(tmp_path, run_module, sim_tree, sim_model):
    root = sim_tree("mi300x-8gpu-spx")
    model = dict(sim_model("mi300x-8gpu-spx"), identity={"generation": "MI300X"})
    code, result = run_module(launch_templates, check_mode=True, topology=model, sysroot=root, gres_type="auto",
                              dest=str(tmp_path / "launch"), wrapper_path=str(tmp_path / "bin" / "topotune-bind"),
                              node_name="node1")
    assert code == 0 and result["changed"], result
    gres = result["plan"]["gres"]
    assert gres is not None
    # check mode wrote nothing; the plan's options carry what was decided
    assert not (tmp_path / "launch").exists()
    code, result = run_module(launch_templates, topology=model, sysroot=root, gres_type="auto", node_name="node1",
                              dest=str(tmp_path / "launch"), wrapper_path=str(tmp_path / "bin" / "topotune-bind"))
    text = (tmp_path / "launch" / "gres.conf").read_text()
    assert "Type=mi300x" in text and "File=%s/dev/dri/renderD" % root in text


def test_module_checks_the_options_before_reading_the_node(tmp_path, run_module):
    code, result = run_module(launch_templates, topology={}, sysroot=str(tmp_path / "missing"), sizes=[2, 0])
    assert code == 1 and "launch_templates_sizes" in result["msg"] and "positive integers" in result["msg"]
    code, result = run_module(launch_templates, topology={}, sysroot="")
    assert code == 1 and "the topology has no GPUs" in result["msg"]
