#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: node_snapshot
short_description: Archive the kernel state topotune reads, for offline analysis
author: topotune contributors (@topotune)
description:
  - Writes a gzip tar laid out as a sysroot with exactly the sysfs/procfs files topotune's topology reader and
    platform checks read (the KFD topology tree, AMD GPU PCI attributes, CPU, NUMA, C-state, THP, DMI,
    C(/proc/cmdline), C(kernel.numa_balancing)), plus C(amd-smi)/C(rocm-smi) output where those tools exist.
  - Extracted anywhere, it is analysed with C(bin/topotune topology --sysroot DIR), or turned into a simulated
    node profile (see C(docs/gather.md)). Device nodes become empty files; their owner, group and mode are
    recorded in C(snapshot.json).
  - Reads the node and writes only the archive. The archive is written in check mode too, because it is a
    report about the node, not a change to what the node runs.
options:
  sysroot:
    description: Directory under which sysfs, procfs and C(/dev) are read (C(/) on a real node).
    type: path
    default: /
  dest:
    description: Path of the archive on the node (mode 0600).
    type: path
    required: true
  smi:
    description: Also record C(amd-smi) and C(rocm-smi) topology output when the tools are installed.
    type: bool
    default: true
  command_timeout:
    description: Seconds each C(amd-smi)/C(rocm-smi) call may take (amd-smi is known to hang on a wedged driver).
    type: int
    default: 30
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
    details: The archive is written in check mode as well; nothing else is touched.
  diff_mode:
    support: none
notes:
  - C(playbooks/gather.yml) runs this module and fetches the archives to the controller.
"""

EXAMPLES = r"""
- name: Snapshot the node's topology-relevant kernel state
  topotune.instinct.node_snapshot:
    dest: /var/tmp/topotune-snapshot.tar.gz
  register: snapshot

- name: Bring it to the controller
  ansible.builtin.fetch:
    src: "{{ snapshot.dest }}"
    dest: "snapshots/{{ inventory_hostname }}.tar.gz"
    flat: true
"""

RETURN = r"""
dest:
  description: Path of the archive on the node.
  type: str
  returned: success
files:
  description: Number of sysfs/procfs files archived.
  type: int
  returned: success
unreadable:
  description: Files that exist but could not be read (relative to the sysroot).
  type: list
  elements: str
  returned: success
smi:
  description: Names of the recorded C(amd-smi)/C(rocm-smi) outputs (under C(smi/) in the archive).
  type: list
  elements: str
  returned: success
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import run_command
from ansible_collections.topotune.instinct.plugins.module_utils.topology.snapshot import collect, write_archive

# file name in the archive -> argv; files match the offline CLI's --amd-smi-json / --rocm-smi inputs
SMI_COMMANDS = {
    "amd-smi_topology.json": ["amd-smi", "topology", "--json"],
    "amd-smi_static_numa.json": ["amd-smi", "static", "--numa", "--json"],
    "amd-smi_list.json": ["amd-smi", "list", "--json"],
    "rocm-smi_showtopo.txt": ["rocm-smi", "--showtopo"],
}


def smi_outputs(module):
    found = {}
    for name, argv in SMI_COMMANDS.items():
        if module.get_bin_path(argv[0]) is None:
            continue
        rc, out, err = run_command(argv, timeout=module.params["command_timeout"])
        if rc == 0 and out.strip():
            found[name] = out
        else:
            module.warn("%s: rc=%d %s" % (" ".join(argv), rc, (err or out).strip().splitlines()[-1:] or ""))
    return found


def main():
    module = AnsibleModule(
        argument_spec={
            "sysroot": {"type": "path", "default": "/"},
            "dest": {"type": "path", "required": True},
            "smi": {"type": "bool", "default": True},
            "command_timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    try:
        files, meta = collect(module.params["sysroot"])
        if not files:
            module.fail_json(msg="node_snapshot: nothing to archive under sysroot %s (is it the node's root?)"
                             % module.params["sysroot"])
        smi = smi_outputs(module) if module.params["smi"] else {}
        meta["smi"] = sorted(smi)
        write_archive(module.params["dest"], files, meta, smi)
    except TopotuneError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=False, dest=module.params["dest"], files=meta["files"], unreadable=meta["unreadable"],
                     smi=meta["smi"])


if __name__ == "__main__":
    main()
