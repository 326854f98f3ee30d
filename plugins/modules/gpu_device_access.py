#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: gpu_device_access
short_description: Report who can open the ROCm device nodes and which container tooling is present
version_added: "0.1.0"
description:
  - Reads owner, group, GID and mode of C(/dev/kfd) and every C(/dev/dri/renderD*) node under O(sysroot),
    the group memberships of O(users), and whether the Docker engine and the AMD Container Toolkit
    (C(amd-ctk)) are installed.
  - Read-only; check mode returns the same result. The role C(topotune.instinct.container_runtime) turns
    the result into C(--group-add) flags and checks.
author:
  - topotune contributors (@topotune)
options:
  sysroot:
    description:
      - Directory under which C(dev/) is read (C(/) on a real node, C(/sim) on a simulated node, where the
        device nodes are regular files).
    type: path
    default: /
  users:
    description: Users whose group memberships are reported.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read device ownership and container tooling
  topotune.instinct.gpu_device_access:
    sysroot: "{{ topotune_sysroot | default('/') }}"
    users: [alice]
  register: __container_runtime_access
"""

RETURN = r"""
kfd:
  description: The KFD node (path as seen inside a container, full path read, exists, char_device, owner, group, gid, mode).
  returned: always
  type: dict
  sample: {path: /dev/kfd, exists: true, char_device: true, owner: root, group: render, gid: 110, mode: "0660"}
render_nodes:
  description: One entry per C(renderD<minor>), sorted by minor, same keys as RV(kfd) plus C(minor).
  returned: always
  type: list
  elements: dict
users:
  description: Per user, C(exists) and C(groups) (names, primary group included).
  returned: always
  type: dict
  sample: {alice: {exists: true, groups: [alice, render, video]}}
docker:
  description: C(present) and C(path) of dockerd (or docker).
  returned: always
  type: dict
amd_ctk:
  description: C(present) and C(path) of amd-ctk.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.topology.devices import device_access


def main():
    module = AnsibleModule(
        argument_spec={
            "sysroot": {"type": "path", "default": "/"},
            "users": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        found = device_access(module.params["sysroot"], module.params["users"])
    except TopotuneError as err:
        module.fail_json(msg="gpu_device_access: %s" % err)
    found.pop("sysroot")
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
