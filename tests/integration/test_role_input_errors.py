"""A wrong role variable stops the role before it touches the node, with a message naming the variable and the fix."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

PLAY = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: topotune.instinct.{role}
"""

# role, wrong variables, what the message must name (the variable) and say (the fix or the rule)
CASES = [
    ("cpu_governor", {"cpu_governor_governor": "perf ormance"}, "cpu_governor_governor", "performance"),
    ("cpu_governor", {"cpu_governor_cpus": "0-3,x"}, "cpu_governor_cpus", "cpulist"),
    ("kernel_tuning", {"kernel_tuning_sysroot": "relative/path"}, "kernel_tuning_sysroot", "absolute"),
    ("kernel_tuning", {"kernel_tuning_bootloader": "lilo"}, "kernel_tuning_bootloader", "grub_dropin"),
    ("rocm_env", {"rocm_env_allow": {"HSA_OVERRIDE_GFX_VERSION": " "}}, "rocm_env_allow", "why"),
    ("rocm_env", {"rocm_env_env_dir": "/etc/topo tune"}, "rocm_env_env_dir", "absolute path"),
    ("container_runtime", {"container_runtime_privileged": True}, "container_runtime_privileged", "--privileged"),
    ("container_runtime", {"container_runtime_extra_caps": ["CAP_SYS_RAWIO"]}, "container_runtime_extra_caps", "SYS_RAWIO"),
    ("container_runtime", {"container_runtime_output_dir": "out/flags"}, "container_runtime_output_dir", "absolute path"),
    ("launch_templates", {"launch_templates_sizes": [2, 0]}, "launch_templates_sizes", "positive integers"),
    ("launch_templates", {"launch_templates_wrapper_path": "/usr/local/bin/topotune bind"}, "launch_templates_wrapper_path",
     "absolute path"),
    ("kernel_tuning", {"kernel_tuning_sysctl": [{"name": "vm.swappiness", "value": "1 0"}]}, "kernel_tuning_sysctl",
     "no spaces"),
    # not a malformed value but a refusal: ACS off on a virtualization host
    ("kernel_tuning", {"kernel_tuning_acs_disable": True, "platform_checks_virtualization_host": True},
     "platform_checks_virtualization_host", "Set kernel_tuning_acs_disable: false"),
    ("platform_checks", {"platform_checks_report_dir": "reports"}, "platform_checks_report_dir", "absolute controller path"),
    ("drift_exporter", {"drift_exporter_interval_seconds": 5}, "drift_exporter_interval_seconds", "at least 10"),
]

# The roles whose variables are checked by their one module or action call, in Python (issue 23); drift_exporter's by
# the plan filter of its managed_files call
PLAN_CALLS = ("topotune.instinct.cpu_governor", "topotune.instinct.kernel_runtime", "topotune.instinct.launch_templates",
              "topotune.instinct.platform_checks", "topotune.instinct.managed_files", "topotune.instinct.rocm_env",
              "topotune.instinct.container_runtime")


@pytest.mark.parametrize("role,extra_vars,variable,fix", CASES, ids=["%s-%s" % (c[0], c[2]) for c in CASES])
def test_wrong_variable_is_named_before_any_change(tmp_path, role, extra_vars, variable, fix):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY.format(role=role))
    extra = dict(extra_vars, topotune_sysroot=str(tmp_path / "sysroot"))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_CALLBACKS_ENABLED="topotune.instinct.drift_capture,topotune.instinct.preload")
    run = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
                          "-e", json.dumps(extra), str(playbook)], cwd=REPO, env=env, capture_output=True, text=True,
                         check=False)
    assert run.returncode != 0, run.stdout[-2000:]
    results = [(task["task"]["name"], task["hosts"]["localhost"]) for play in json.loads(run.stdout)["plays"]
               for task in play["tasks"] if "localhost" in task["hosts"]]
    failed = [(name, res) for name, res in results if res.get("failed")]
    assert len(failed) == 1, results
    name, res = failed[0]
    # it is the argument spec, the preflight assert, or the role's one plan call (which checks the variables before it
    # reads or writes anything) that stopped the role, and no task before it changed anything
    assert res.get("action") in ("ansible.builtin.validate_argument_spec", "ansible.builtin.assert", "validate_argument_spec", "assert") \
        or res.get("action") in PLAN_CALLS or "Validating arguments" in name, name
    assert not any(r.get("changed") for _n, r in results)
    assert variable in res["msg"] and fix in res["msg"], res["msg"]
    assert "Traceback" not in run.stdout + run.stderr
