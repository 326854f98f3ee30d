#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a node's topology-aware launch configuration (binding wrapper, env files, gres.conf) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: launch_templates
author: topotune contributors (@topotune)
short_description: Write xGMI/NUMA-aware launch files for a GPU node in one call
description:
  - Groups the node's GPUs for every size in O(sizes) so collectives stay on the fastest xGMI links
    (exact optimum up to 16 GPUs, hierarchical for partitioned CPX nodes), then writes, atomically and only
    where the content, mode or owner differs
  - the per-rank binding wrapper O(wrapper_path), which picks the GPU of the local rank (C(--rank),
    C(LOCAL_RANK), C(SLURM_LOCALID), C(OMPI_COMM_WORLD_LOCAL_RANK), ...), exports the visible-devices
    variable and C(HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0), and execs the command under
    C(numactl --cpunodebind=N --membind=N) of that GPU's NUMA node;
  - one C(KEY=VALUE) env file per group (C(<dest>/size<K>-group<G>.env)) for C(docker --env-file) and
    systemd C(EnvironmentFile=); a Slurm C(gres.conf) fragment; a human-readable C(<dest>/README).
  - Env files of sizes no longer configured are removed. GPUs whose NUMA node is unknown (C(numa_node -1))
    are left unbound with a warning rather than bound to a guessed node. Sizes that do not divide the GPU
    count are skipped with a warning.
options:
  topology:
    description:
      - The topology model returned by M(topotune.instinct.gpu_topology) (C(topotune_discovery.topology) after
        C(playbooks/topology.yml)).
    type: dict
    required: true
  sizes:
    description: Group sizes to generate (each should divide the GPU count; 1, 2, 4, 8 are typical).
    type: list
    elements: int
    default: [2, 4, 8]
  default_size:
    description: Size the wrapper uses without C(--size)/C(TOPOTUNE_GROUP_SIZE); default the smallest size.
    type: int
  dest:
    description: Directory for the env files, C(gres.conf) and C(README).
    type: path
    default: /etc/topotune/launch
  wrapper_path:
    description: Path of the binding wrapper.
    type: path
    default: /usr/local/bin/topotune-bind
  visible_devices_env:
    description:
      - Variable that restricts the GPUs a rank sees. AMD documents C(ROCR_VISIBLE_DEVICES) for Linux;
        C(HIP_VISIBLE_DEVICES) indexes are applied after it, so only one is set. C(none) sets neither.
    type: str
    choices: [ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, none]
    default: ROCR_VISIBLE_DEVICES
  visible_devices_scope:
    description:
      - C(group) makes all GPUs of the rank's group visible in group order (the application selects device
        C(LOCAL_RANK); peers stay visible for RCCL IPC); C(rank) makes only the rank's GPU visible (device 0).
    type: str
    choices: [group, rank]
    default: group
  cpu_binding:
    description:
      - C(numa) binds CPUs and memory to the GPU's NUMA node; C(l3) binds CPUs to the GPU's L3/CCD core set
        from O(cpu_map) (or the model's C(l3_cpus)), falling back to C(numa); C(none) only sets the env.
    type: str
    choices: [numa, l3, none]
    default: numa
  cpu_map:
    description: GPU index to cpulist, e.g. the Frontier/LUMI GCD to L3 table, used by O(cpu_binding=l3).
    type: dict
    default: {}
  membind:
    description: Also bind memory (C(--membind)) to the GPU's NUMA node.
    type: bool
    default: true
  extra_env:
    description: Extra variables added to the wrapper and every env file (values limited to C([A-Za-z0-9_,.:/=+@%-])).
    type: dict
    default: {}
  gres:
    description: Write the Slurm C(gres.conf) fragment C(<dest>/gres.conf).
    type: bool
    default: true
  gres_type:
    description: Slurm GRES C(Type=) for every GPU line (empty for none).
    type: str
    default: ""
  header:
    description: First comment line of every file (the role passes C(ansible_managed)).
    type: str
    default: "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten."
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
seealso:
  - module: topotune.instinct.gpu_topology
"""

EXAMPLES = r"""
- name: Write the launch files from the gathered topology
  topotune.instinct.launch_templates:
    topology: "{{ topotune_discovery.topology }}"
    sizes: [2, 4, 8]

- name: Frontier-style L3 binding with HIP_VISIBLE_DEVICES
  topotune.instinct.launch_templates:
    topology: "{{ topotune_discovery.topology }}"
    visible_devices_env: HIP_VISIBLE_DEVICES
    cpu_binding: l3
    cpu_map: {4: "0-7,64-71", 5: "8-15,72-79"}
"""

RETURN = r"""
files:
  description: Every file managed by this call.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/topotune-bind, /etc/topotune/launch/size4-group0.env, /etc/topotune/launch/README]
changed_files:
  description: Files written (or, in check mode, that would be written).
  returned: always
  type: list
  elements: str
removed_files:
  description: Stale env files removed (or that would be).
  returned: always
  type: list
  elements: str
plan:
  description: Groups per size (with score, explanations, whole-group recipes) and per-GPU bindings.
  returned: always
  type: dict
  sample: {default_size: 2, sizes: [{size: 2, groups: [[0, 1], [2, 3]], exact: true}], bindings: []}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.files import diff_entry, differs, read_text, write_atomic
from ansible_collections.topotune.instinct.plugins.module_utils.launch_render import ENV_FILE, render
from ansible_collections.topotune.instinct.plugins.module_utils.sysroot import TopotuneError


class LaunchTemplates:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.as_root = os.geteuid() == 0

    def run(self):
        options = {k: self.params[k] for k in (
            "sizes", "default_size", "dest", "wrapper_path", "visible_devices_env", "visible_devices_scope",
            "cpu_binding", "cpu_map", "membind", "extra_env", "gres", "gres_type", "header")}
        result = render(self.params["topology"], options)
        for warning in result["warnings"]:
            self.module.warn(warning)
        dest = self.params["dest"]
        wanted = {f["path"] for f in result["files"]}
        todo, diffs = [], []
        for f in result["files"]:
            mode = int(f["mode"], 8)
            if differs(f["path"], f["content"], mode, self.as_root):
                todo.append((f["path"], f["content"], mode))
                diffs.append(diff_entry(f["path"], read_text(f["path"]), f["content"]))
        stale = []
        if os.path.isdir(dest):
            stale = sorted(os.path.join(dest, name) for name in os.listdir(dest)
                           if ENV_FILE.match(name) and os.path.join(dest, name) not in wanted)
        for path in stale:
            diffs.append(diff_entry(path, read_text(path), "", " (removed)"))
        if not self.module.check_mode:
            for path, content, mode in todo:
                write_atomic(self.module, path, content, mode, self.as_root)
            for path in stale:
                os.unlink(path)
        return {
            "changed": bool(todo or stale),
            # the topology argument (hundreds of kB on a CPX node) is not echoed back: every result is
            # post-processed on the controller, and the caller already holds it
            "invocation": {"module_args": dict(
                self.params, topology="(not echoed: %d GPUs)" % len(self.params["topology"].get("gpus") or []))},
            "files": [f["path"] for f in result["files"]],
            "changed_files": [t[0] for t in todo],
            "removed_files": stale,
            "plan": result["plan"],
            "diff": diffs,
        }


def main():
    module = AnsibleModule(
        argument_spec={
            "topology": {"type": "dict", "required": True},
            "sizes": {"type": "list", "elements": "int", "default": [2, 4, 8]},
            "default_size": {"type": "int"},
            "dest": {"type": "path", "default": "/etc/topotune/launch"},
            "wrapper_path": {"type": "path", "default": "/usr/local/bin/topotune-bind"},
            "visible_devices_env": {"type": "str", "default": "ROCR_VISIBLE_DEVICES",
                                    "choices": ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "none"]},
            "visible_devices_scope": {"type": "str", "default": "group", "choices": ["group", "rank"]},
            "cpu_binding": {"type": "str", "default": "numa", "choices": ["numa", "l3", "none"]},
            "cpu_map": {"type": "dict", "default": {}},
            "membind": {"type": "bool", "default": True},
            "extra_env": {"type": "dict", "default": {}},
            "gres": {"type": "bool", "default": True},
            "gres_type": {"type": "str", "default": ""},
            "header": {"type": "str",
                       "default": "Managed by topotune (topotune.instinct.launch_templates): local edits are overwritten."},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**LaunchTemplates(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg="launch_templates: %s" % err)


if __name__ == "__main__":
    main()
