"""Kubernetes node labels for Node Feature Discovery (NFD) from topotune's topology model and check report.

``node_labels(topology, checks, version, compute_partition=None, memory_partition=None)``
    The label names (without prefix) and values of a node, each value valid for Kubernetes.
``render(labels, prefix)``
    The NFD local feature file: one ``<prefix>/<name>=<value>`` line per label, sorted, after a comment header.
``OPTIONS``
    The nfd_features module's options and role platform_checks' ``platform_checks_nfd_*`` variables, declared once.
``check_prefix(prefix)`` / ``check_name(name)`` / ``label_value(text)``
    The Kubernetes rules (k8s.io/apimachinery validation: qualified names and label values): a prefix is a DNS
    subdomain (lower-case RFC 1123 labels joined by dots, at most 253 characters), a name and a value at most 63
    characters of ``[A-Za-z0-9._-]`` starting and ending alphanumeric (a value may be empty).

NFD's local source (nfd-worker) reads every file of ``/etc/kubernetes/node-feature-discovery/features.d/`` except
those whose name starts with a dot, one ``name[=value]`` per line, ``#`` lines being comments; a prefixed name keeps
its prefix (kubernetes-sigs.github.io/node-feature-discovery, usage/customization-guide, "Local feature source").
The atomic writer's temp files (``files.TEMP_PREFIX``) start with a dot, so the worker never reads a partial file.

Compute partition mode: the driver's ``current_compute_partition`` when given (amdgpu sysfs, MI300 series), else
derived from the model: one logical GPU per physical device is SPX; partitions of one XCC each are CPX (MI300X: 8,
MI308X: 4); otherwise 2, 3, 4 partitions are DPX, TPX, QPX (amd-smi "GPU partitioning" guide). Memory partition mode
(NPS1, NPS4 ...) comes only from the driver's ``current_memory_partition``: the model cannot tell it; ``unknown``
without it.
"""

import re

from ..core.errors import TopotuneError

MAX_NAME = 63
MAX_PREFIX = 253
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
# partitions per physical GPU -> mode, when a partition has more than one XCC
_MODE_BY_COUNT = {1: "SPX", 2: "DPX", 3: "TPX", 4: "QPX"}
UNKNOWN = "unknown"

# The options of the nfd_features module and the nfd_* variables of role platform_checks, declared once
# (module_utils/core/options.py; scripts/gen-options generates their documentation).
OPTIONS = {
    "enabled": {
        "type": "bool", "default": False, "role_only": True,
        "description": [
            "Write the node's topology and check labels (GPU generation and count, compute and memory partition "
            "mode, xGMI hives, NUMA nodes, checks passing and failing count, topotune version) as a Node Feature "
            "Discovery local feature file (C(docs/scheduler.md), \"Node Feature Discovery\").",
            "Off by default: only nodes running nfd-worker need it.",
        ],
    },
    "path": {
        "type": "path", "default": "/etc/kubernetes/node-feature-discovery/features.d/topotune",
        "description": "The feature file, in the directory nfd-worker's local source reads (C(features.d/); files "
                       "whose name starts with a dot are skipped).",
        "role": {"type": "str"},
    },
    "prefix": {
        "type": "str", "default": "topotune.feature.node.kubernetes.io",
        "description": "Label prefix, a DNS subdomain; sub-namespaces of C(feature.node.kubernetes.io) need no "
                       "nfd-master configuration.",
    },
    "topology": {
        "type": "dict", "default": {}, "role": False,
        "description": "The C(topotune.instinct.gpu_topology) model of the node (its C(topology) result). Empty reads "
                       "the KFD topology under O(sysroot) (a model that cannot be read gives C(unknown) labels and a "
                       "warning).",
    },
    "checks": {
        "type": "dict", "default": {}, "role": False,
        "description": "The C(topotune.instinct.platform_checks) result (C(generation), C(summary)), as the role's "
                       "C(platform_checks_report). Empty gives C(unknown) check labels.",
    },
    "sysroot": {
        "type": "path", "default": "/", "role": False,
        "description": "Directory under which the GPUs' sysfs partition files are read.",
    },
    "state": {
        "type": "str", "choices": ["present", "absent"], "default": "present", "role": False,
        "description": "C(absent) removes the file.",
    },
}


class LabelError(TopotuneError):
    pass


def check_prefix(prefix):
    if not isinstance(prefix, str) or not prefix or len(prefix) > MAX_PREFIX or \
            not all(_DNS_LABEL.match(part) for part in prefix.split(".")):
        raise LabelError("label prefix %r is not a DNS subdomain (lower-case letters, digits and '-' in dot-separated "
                         "parts, at most %d characters), e.g. topotune.feature.node.kubernetes.io" % (prefix, MAX_PREFIX))
    return prefix


def check_name(name):
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.match(name):
        raise LabelError("label name %r is not valid: at most %d characters of A-Z a-z 0-9 . _ -, starting and ending "
                         "with a letter or digit" % (name, MAX_NAME))
    return name


def label_value(value):
    """value as a valid label value: booleans yes/no, other characters than [A-Za-z0-9._-] as '-', trimmed to 63
    characters and to alphanumeric ends; what is left empty becomes ``unknown``."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(value))[:MAX_NAME]
    text = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", text)
    return text or UNKNOWN


def compute_partition_mode(topology):
    """SPX/DPX/TPX/QPX/CPX from the model's partitions, or ``unknown`` (no GPUs, unequal partition counts that are
    not all one-XCC partitions). One-XCC partitions are CPX even when one is missing (a real MI300X CPX capture
    shows 63 of 64)."""
    gpus = (topology or {}).get("gpus") or []
    if not gpus:
        return UNKNOWN
    counts = {(g.get("partition") or {}).get("count", 1) for g in gpus}
    if counts == {1}:
        return "SPX"
    if {g.get("num_xcc") for g in gpus} == {1}:
        return "CPX"
    return _MODE_BY_COUNT.get(counts.pop(), UNKNOWN) if len(counts) == 1 else UNKNOWN


def _driver_mode(text, pattern):
    text = (text or "").strip().upper()
    return text if re.match(pattern, text) else None


def node_labels(topology, checks, version, compute_partition=None, memory_partition=None):
    """Label name -> value. ``topology``: the gpu_topology model (its ``identity`` names the generation, product
    and kind); ``checks``: the platform_checks result (``generation``, ``identity``, ``summary`` with per-status
    counts), or None when the checks did not run (check labels then
    ``unknown``). ``compute_partition``/``memory_partition``: the driver's sysfs text, or None."""
    topology = topology or {}
    # the identity discovery decided (the topology's), else the one the platform checks report: the same function
    identity = topology.get("identity") or (checks or {}).get("identity") or {}
    gpus = topology.get("gpus") or []
    physical = len(topology.get("physical_devices") or []) or len(gpus)
    summary = (checks or {}).get("summary") or {}
    failing = summary.get("fail") if isinstance(summary.get("fail"), int) else None
    labels = {
        "gpu.generation": identity.get("generation") or (checks or {}).get("generation"),
        "gpu.product": identity.get("product"),
        "gpu.kind": identity.get("kind"),
        "gpu.count": physical,
        "gpu.logical-count": len(gpus),
        "gpu.compute-partition": _driver_mode(compute_partition, r"^[A-Z]PX$") or compute_partition_mode(topology),
        "gpu.memory-partition": _driver_mode(memory_partition, r"^NPS[0-9]+$"),
        "gpu.xgmi-hives": len(topology.get("hives") or []),
        "numa.nodes": len(topology.get("numa_nodes") or []) or None,
        "checks.passing": None if failing is None else failing == 0,
        "checks.failing": failing,
        "version": version,
    }
    return {check_name(name): label_value(value) for name, value in labels.items()}


def render(labels, prefix):
    check_prefix(prefix)
    lines = ["# Written by topotune (platform_checks role, platform_checks_nfd_enabled); read by nfd-worker's local source."]
    lines += ["%s/%s=%s" % (prefix, check_name(name), label_value(value)) for name, value in sorted(labels.items())]
    return "\n".join(lines) + "\n"
