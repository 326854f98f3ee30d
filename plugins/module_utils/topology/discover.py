"""Front door of the topology engine: discover a node's GPU topology, or load captured output.

Public API:

``SOURCES``
    ``("kfd", "amd-smi", "rocm-smi")``, the precedence order of ``source="auto"``.
``discover(source="auto", sysroot="/", cross_check=False, amd_smi="amd-smi", rocm_smi="rocm-smi",
timeout=30, runner=None)``
    The model dict (see docs/topology.md). ``auto`` takes the first source that works: KFD sysfs (no
    user space needed), then ``amd-smi``, then ``rocm-smi``. ``cross_check`` also consults the other
    sources that are available and records disagreements in ``discrepancies``. ``runner(argv)`` returns
    ``(rc, stdout, stderr)``; the default runs the tool with ``LC_ALL=C`` and ``timeout`` seconds.
``load_capture(sysroot=None, kfd=None, rocm_smi=None, amd_smi=None, amd_smi_numa=None,
amd_smi_list=None)``
    The model from saved files (``rocm_smi`` may be a list of files, merged); several sources given ->
    the first by precedence is the model, the others are cross-checked.
``run_command(argv, timeout=30)``
    The default runner: ``process.run()`` with a tool that cannot be started or hangs returned as its shell
    code (127, 126, 124) and the reason, so ``auto`` moves on to the next source.
``TopologyError``
    Re-exported from ``topology_model``.
"""

import os

from ..core.process import CommandError, run
from ..core.sysroot import SysrootError, read_text
from .amdsmi import parse_amdsmi
from .cpu import read_cpu_topology
from .kfd import read_kfd
from .model import TopologyError
from .rocmsmi import parse_rocmsmi

SOURCES = ("kfd", "amd-smi", "rocm-smi")

__all__ = ["SOURCES", "TopologyError", "attach_cpu_topology", "cross_check_models", "discover", "load_capture",
           "run_command"]


def run_command(argv, timeout=30):
    """Run ``argv`` (no shell) with ``LC_ALL=C``; returns ``(rc, stdout, stderr)``, never raises."""
    try:
        return run(argv, timeout)
    except CommandError as err:
        # amd-smi is known to hang when the driver is wedged; never block a play on it
        return err.rc, "", str(err)


def _tool_output(runner, argv, optional=False):
    rc, out, err = runner(argv)
    if rc != 0:
        if optional:
            return None
        reason = (err or out).strip().splitlines()
        raise TopologyError("`%s` failed (rc=%d): %s" % (" ".join(argv), rc, reason[-1] if reason else "no output"))
    return out


def _from_amdsmi(runner, amd_smi):
    topology = _tool_output(runner, [amd_smi, "topology", "--json"])
    numa = _tool_output(runner, [amd_smi, "static", "--numa", "--json"], optional=True)
    listing = _tool_output(runner, [amd_smi, "list", "--json"], optional=True)
    try:
        return parse_amdsmi(topology, numa, listing, name="amd-smi topology --json")
    except TopologyError:
        raise
    except (ValueError, TypeError) as err:
        raise TopologyError("amd-smi output not understood: %s" % err) from None


def _from_rocmsmi(runner, rocm_smi):
    text = _tool_output(runner, [rocm_smi, "--showtopo", "--json"])
    return parse_rocmsmi(text, "rocm-smi --showtopo --json")


def _read_source(source, sysroot, runner, amd_smi, rocm_smi):
    if source == "kfd":
        return read_kfd(sysroot=sysroot)
    if source == "amd-smi":
        return _from_amdsmi(runner, amd_smi)
    return _from_rocmsmi(runner, rocm_smi)


def discover(source="auto", sysroot="/", cross_check=False, amd_smi="amd-smi", rocm_smi="rocm-smi",
             timeout=30, runner=None):
    """Discover the GPU topology of this node (or of ``sysroot``); returns the model dict."""
    if source not in ("auto",) + SOURCES:
        raise TopologyError("source %r is not one of auto, %s" % (source, ", ".join(SOURCES)))
    if runner is None:
        def runner(argv):
            return run_command(argv, timeout)
    order = SOURCES if source == "auto" else (source,)
    failures = []
    primary = None
    for candidate in order:
        try:
            primary = _read_source(candidate, sysroot, runner, amd_smi, rocm_smi)
            break
        except (TopologyError, SysrootError) as err:
            failures.append((candidate, str(err)))
    if primary is None:
        if len(failures) == 1:
            raise TopologyError(failures[0][1])
        raise TopologyError("no topology source worked (%s)" % "; ".join("%s: %s" % f for f in failures))
    for candidate, message in failures:
        primary.warn("source %s: %s" % (candidate, message))
    others = []
    if cross_check:
        for other in SOURCES:
            if other == primary.source:
                continue
            try:
                others.append(_read_source(other, sysroot, runner, amd_smi, rocm_smi))
            except (TopologyError, SysrootError) as err:
                primary.warn("cross-check: source %s unavailable: %s" % (other, err))
    cross_check_models(primary, others)
    attach_cpu_topology(primary, sysroot)
    return primary.to_dict()


def _read_file(path, what):
    text = read_text(path, None)
    if text is None:
        raise TopologyError("cannot read %s file %s" % (what, path))
    if not text.strip():
        raise TopologyError("%s file %s is empty" % (what, path))
    return text


def load_capture(sysroot=None, kfd=None, rocm_smi=None, amd_smi=None, amd_smi_numa=None, amd_smi_list=None):
    """Build the model from saved captures (paths); see the module docstring."""
    topos = []
    if sysroot is not None or kfd is not None:
        topos.append(read_kfd(sysroot=sysroot, path=kfd))
    if amd_smi is not None:
        numa = _read_file(amd_smi_numa, "amd-smi static --numa --json") if amd_smi_numa else None
        listing = _read_file(amd_smi_list, "amd-smi list --json") if amd_smi_list else None
        topos.append(parse_amdsmi(_read_file(amd_smi, "amd-smi topology"), numa, listing,
                                  name=os.path.basename(amd_smi)))
    if rocm_smi:
        paths = [rocm_smi] if isinstance(rocm_smi, str) else list(rocm_smi)
        parts = [(os.path.basename(p), _read_file(p, "rocm-smi")) for p in paths]
        if len(parts) == 1:
            topos.append(parse_rocmsmi(parts[0][1], parts[0][0]))
        else:
            topos.append(parse_rocmsmi(parts))
    if not topos:
        raise TopologyError("no capture given: pass a sysroot, a KFD tree, amd-smi or rocm-smi output")
    cross_check_models(topos[0], topos[1:])
    if sysroot is not None:
        attach_cpu_topology(topos[0], sysroot)
    return topos[0].to_dict()


def attach_cpu_topology(topo, sysroot):
    """Add the node's CPU topology (packages, cores, L3 domains) read under ``sysroot`` to ``topo``."""
    model, warnings = read_cpu_topology(sysroot, topo.numa_cpus)
    topo.cpu_topology = model
    for message in warnings:
        topo.warn(message)


def _match(primary, other):
    """Map other's GPU index -> primary's, by PCI address when both have them, else by index."""
    by_bdf = {g["bdf"]: g["index"] for g in primary.gpus if g["bdf"]}
    if by_bdf and all(g["bdf"] in by_bdf for g in other.gpus):
        return {g["index"]: by_bdf[g["bdf"]] for g in other.gpus}
    return {g["index"]: g["index"] for g in other.gpus if g["index"] < len(primary.gpus)}


def cross_check_models(primary, others):
    """Record in ``primary.discrepancies`` where ``others`` (Topology objects) disagree with it."""
    for other in others:
        if other.source not in primary.sources:
            primary.sources.append(other.source)
        found = primary.discrepancies
        if len(other.gpus) != len(primary.gpus):
            found.append({"what": "gpu_count", "gpu": None,
                          "values": {primary.source: len(primary.gpus), other.source: len(other.gpus)}})
        mapping = _match(primary, other)
        for og in other.gpus:
            index = mapping.get(og["index"])
            if index is None:
                continue
            pg = primary.gpus[index]
            for key in ("numa_node", "bdf"):
                if og[key] is not None and pg[key] is not None and og[key] != pg[key]:
                    found.append({"what": key, "gpu": index,
                                  "values": {primary.source: pg[key], other.source: og[key]}})
        for (a, b), olink in sorted(other.links.items()):
            pa, pb = mapping.get(a), mapping.get(b)
            if pa is None or pb is None:
                continue
            plink = primary.link(pa, pb)
            if plink is None:
                continue
            for key in ("type", "hops"):
                if plink[key] != olink[key]:
                    found.append({"what": "link %d-%d %s" % (min(pa, pb), max(pa, pb), key), "gpu": None,
                                  "values": {primary.source: plink[key], other.source: olink[key]}})
