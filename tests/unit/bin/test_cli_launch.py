"""`bin/topotune launch`: the files the launch_templates role writes, by the same code, with the module's options as
flags (declared once, launch_render.OPTIONS)."""

import json
import os
import subprocess
import sys

from ansible_collections.topotune.instinct.plugins.module_utils.launch import render as launch_render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import identify_model
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import generations

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.path.join(REPO, "bin", "topotune")


def _cli(*argv):
    return subprocess.run([sys.executable, CLI, "launch"] + list(argv), capture_output=True, text=True, check=False)


def test_the_flags_are_the_declared_options():
    helps = _cli("--help").stdout
    flags = {"--size", "--cpu-binding", "--reserved-cpus", "--visible-devices-env", "--visible-devices-scope",
             "--no-membind", "--gres-type", "--node-name", "--dest", "--dev-dir"}
    assert all(flag in helps for flag in flags), helps
    assert "{numa,l3,none}" in helps and "{ROCR_VISIBLE_DEVICES,HIP_VISIBLE_DEVICES,none}" in helps
    assert "--wrapper-content" not in helps and "--header" not in helps  # the module's own, no flags


def test_flags_render_what_the_renderer_renders_with_those_options(sim_tree):
    root = sim_tree("mi300x-8gpu-spx")
    run = _cli("--sysroot", root, "--size", "4", "--size", "8", "--cpu-binding", "l3", "--no-membind",
               "--reserved-cpus", "0", "--node-name", "gpu01", "--dest", "/opt/launch")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    model = load_capture(sysroot=root)
    model["identity"] = identify_model(model, generations())
    from ansible_collections.topotune.instinct.plugins.module_utils.checks.rdma_health import launch_rdma_options

    options = dict({"sizes": [4, 8], "cpu_binding": "l3", "membind": False, "reserved_cpus": "0", "node_name": "gpu01",
                    "dest": "/opt/launch", "dev_dir": "/dev", "visible_devices_env": "ROCR_VISIBLE_DEVICES",
                    "visible_devices_scope": "group", "gres_type": "mi300x"}, **launch_rdma_options(root))
    expected = launch_render.render(model, options)
    assert out["plan"] == expected["plan"] and out["files"] == sorted(f["path"] for f in expected["files"])
    assert "/opt/launch/size4-group0.env" in out["files"] and not any("size2-" in path for path in out["files"])


def test_without_flags_the_declared_defaults(sim_tree):
    root = sim_tree("mi300x-8gpu-spx")
    out = json.loads(_cli("--sysroot", root).stdout)
    # sizes 2, 4 and 8 and the default directory, as the role's defaults
    assert {"/etc/topotune/launch/size%d-group0.env" % size for size in (2, 4, 8)} <= set(out["files"])
    assert "Type=mi300x" in _cli("--sysroot", root, "--format", "gres").stdout  # gres type auto, as the role's
    env = _cli("--sysroot", root, "--format", "env", "--group", "1").stdout
    assert env.startswith("==> /etc/topotune/launch/size2-group1.env <==")  # the smallest size without --size
