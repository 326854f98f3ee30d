#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the node's Node Feature Discovery local feature file from the topology model and the platform checks."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nfd_features
author: topotune contributors (@topotune)
short_description: Write a Node Feature Discovery local feature file with the node's GPU topology and check labels
description:
  - Renders Kubernetes node labels (GPU generation, GPU count, compute and memory partition mode, xGMI hive count,
    NUMA nodes, platform checks passing and failing count, topotune version) as the C(name=value) lines that
    nfd-worker's local feature source reads from C(/etc/kubernetes/node-feature-discovery/features.d/).
  - Every name is checked against the Kubernetes rules (prefix a DNS subdomain, name at most 63 characters of
    C([A-Za-z0-9._-])); every value is made one (other characters become C(-), at most 63 characters), and a
    value the inputs cannot give is C(unknown).
  - The compute partition mode is the driver's C(current_compute_partition) of the first GPU when the file exists
    under O(sysroot), else derived from the model's partitions; the memory partition mode only from the driver's
    C(current_memory_partition).
  - The file is written atomically (a dot-named temp file, which nfd-worker skips, renamed over it), root-owned
    C(0644), only when its content or attributes differ. Check mode and diff supported.
version_added: "0.2.0"
# BEGIN generated options: plugins/module_utils/checks/nfd_labels.py (scripts/gen-options)
options:
  path:
    description: The feature file, in the directory nfd-worker's local source reads (C(features.d/); files whose name
      starts with a dot are skipped).
    type: path
    default: /etc/kubernetes/node-feature-discovery/features.d/topotune
  prefix:
    description: Label prefix, a DNS subdomain; sub-namespaces of C(feature.node.kubernetes.io) need no nfd-master
      configuration.
    type: str
    default: topotune.feature.node.kubernetes.io
  topology:
    description: The C(topotune.instinct.gpu_topology) model of the node (its C(topology) result). Empty reads the KFD
      topology under O(sysroot) (a model that cannot be read gives C(unknown) labels and a warning).
    type: dict
    default: {}
  checks:
    description: The C(topotune.instinct.platform_checks) result (C(generation), C(summary)), as the role's
      C(platform_checks_report). Empty gives C(unknown) check labels.
    type: dict
    default: {}
  sysroot:
    description: Directory under which the GPUs' sysfs partition files are read.
    type: path
    default: /
  state:
    description: C(absent) removes the file.
    type: str
    default: present
    choices: [present, absent]
# END generated options
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
"""

EXAMPLES = r"""
- name: Hand the node's topology and check labels to Node Feature Discovery
  topotune.instinct.nfd_features:
    topology: "{{ topotune_discovery.topology }}"
    checks: "{{ platform_checks_report }}"
    sysroot: "{{ topotune_sysroot | default('/') }}"
"""

RETURN = r"""
labels:
  description: The labels written (names without the prefix), empty with O(state=absent).
  returned: always
  type: dict
  sample:
    gpu.generation: MI300X
    gpu.count: "8"
    gpu.logical-count: "64"
    gpu.compute-partition: CPX
    gpu.memory-partition: NPS1
    gpu.xgmi-hives: "1"
    numa.nodes: "2"
    checks.passing: "yes"
    checks.failing: "0"
    version: 0.1.0
path:
  description: The feature file.
  returned: always
  type: str
  sample: /etc/kubernetes/node-feature-discovery/features.d/topotune
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.checks.nfd_labels import OPTIONS, check_prefix, node_labels, render
from ansible_collections.topotune.instinct.plugins.module_utils.core import files, sysroot
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.module_utils.core.version import COLLECTION_VERSION
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

MODE = 0o644


class NfdFeatures:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def topology(self):
        if self.params["topology"]:
            return self.params["topology"]
        try:
            return load_capture(sysroot=self.params["sysroot"])
        except TopotuneError as err:
            self.module.warn("nfd_features: no topology model (%s): GPU labels are unknown" % err)
            return {}

    def partition_files(self, topology):
        """The driver's compute and memory partition mode of the first physical GPU (None when not exposed)."""
        devices = topology.get("physical_devices") or []
        bdf = devices[0].get("bdf") if devices else ((topology.get("gpus") or [{}])[0].get("bdf"))
        if not bdf:
            return None, None
        base = sysroot.join(self.params["sysroot"], "sys/bus/pci/devices/%s" % bdf)
        return (sysroot.read_text(os.path.join(base, "current_compute_partition"), default=None),
                sysroot.read_text(os.path.join(base, "current_memory_partition"), default=None))

    def run(self):
        path = self.params["path"]
        before = files.read_text(path)
        if self.params["state"] == "absent":
            labels, content = {}, None
            changed = os.path.lexists(path)
        else:
            check_prefix(self.params["prefix"])
            topology = self.topology()
            compute, memory = self.partition_files(topology)
            labels = node_labels(topology, self.params["checks"], COLLECTION_VERSION, compute, memory)
            content = render(labels, self.params["prefix"])
            changed = files.differs(path, content, MODE, root_owned=os.geteuid() == 0)
        if changed and not self.module.check_mode:
            if content is None:
                os.unlink(path)
            else:
                files.write_atomic(self.module, path, content, MODE, root_owned=os.geteuid() == 0)
        result = {"changed": changed, "labels": labels, "path": path}
        if self.module._diff:
            result["diff"] = [files.diff_entry(path, before, content, "" if content is not None else " (removed)")]
        return result


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(OPTIONS),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**NfdFeatures(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg="nfd_features: %s" % err)


if __name__ == "__main__":
    main()
