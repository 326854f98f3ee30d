# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: one readable line describing a node's GPU topology model."""

from __future__ import annotations

DOCUMENTATION = r"""
name: topology_summary
author: topotune contributors (@topotune)
short_description: Summarize a topotune topology model in one line
description:
  - Takes the model returned by M(topotune.instinct.gpu_topology) and returns a short human-readable line with
    the GPU count and architecture, the xGMI hives, the GPUs per NUMA node and the number of warnings.
options:
  _input:
    description: The topology model (C(topotune_discovery.topology)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the topology of each node
  ansible.builtin.debug:
    msg: "{{ topotune_discovery.topology | topotune.instinct.topology_summary }}"
"""

RETURN = r"""
_value:
  description: One line, for example C(8 GPUs gfx90a; 2 xGMI hives of 4; NUMA 0:[0-3] 1:[4-7]; 0 warnings).
  type: str
"""

from ansible.errors import AnsibleFilterError


def _ranges(indices):
    """[0,1,2,3,6] -> '0-3,6'."""
    out, run = [], []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
    return ",".join(out)


def topology_summary(model):
    if not isinstance(model, dict) or "gpus" not in model:
        raise AnsibleFilterError("topology_summary expects the gpu_topology model (a dict with 'gpus'), got %s" % type(model).__name__)
    gpus = model.get("gpus") or []
    if not gpus:
        return "no GPUs found (source %s); %d warning(s)" % (model.get("source"), len(model.get("warnings") or []))
    archs = sorted({g.get("gfx") or "unknown gfx" for g in gpus})
    physical = len(model.get("physical_devices") or []) or len(gpus)
    parts = ["%d GPUs %s" % (len(gpus), "/".join(archs))]
    if physical != len(gpus):
        parts[0] += " (%d partitions of %d devices)" % (len(gpus), physical)
    hives = model.get("hives") or []
    if hives:
        sizes = sorted({len(h.get("gpus") or []) for h in hives})
        parts.append("%d xGMI hive%s of %s" % (len(hives), "" if len(hives) == 1 else "s", "/".join(map(str, sizes))))
    else:
        parts.append("no xGMI hive")
    numa = model.get("numa_nodes") or []
    placed = ["%s:[%s]" % (n.get("node"), _ranges(n.get("gpus") or [])) for n in numa if n.get("gpus")]
    unknown = [g["index"] for g in gpus if g.get("numa_node") is None]
    if unknown:
        placed.append("unknown:[%s]" % _ranges(unknown))
    parts.append("NUMA " + " ".join(placed))
    parts.append("%d warning%s" % (len(model.get("warnings") or []), "" if len(model.get("warnings") or []) == 1 else "s"))
    return "; ".join(parts)


class FilterModule:
    def filters(self):
        return {"topology_summary": topology_summary}
