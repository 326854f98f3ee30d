#!/usr/bin/env python3
"""STAND-IN SIMULATOR of rccl-tests' all_reduce_perf: not rccl-tests, no GPU, no collective is run.

No GPU exists on the simulated nodes, so the acceptance and bad-node isolation runs use this stand-in: it prints what
rccl-tests' ``all_reduce_perf`` prints over a list of hosts, in its real format (the parameter line, one
``#  Rank N Group 0 Pid P on HOST device D [BUS] NAME`` line per rank, the library block, the column header, one row
per message size, ``# Out of bounds values``, ``# Avg bus bandwidth``; the 2-node capture
``tests/fixtures/acceptance/rccl-tests_all_reduce_perf-2node-16rank__mi210-2x8__mhilgema-core42.txt``), with figures
from a model of the nodes' links, into which slow and failing hosts are injected. Its output says what it is: a
``# STAND-IN SIMULATOR`` line first and ``rccl-tests: Version standin-sim`` (``versions.rccl_tests`` once parsed).
Standard library only: it runs inside a simulated node and on the controller.

    python3 sim/bench_standin.py --hosts n01,n02 -g 8 -b 8 -e 8G -f 2
    python3 sim/bench_standin.py --hostfile hosts.txt --faults faults.json
    python3 sim/bench_standin.py --hosts n01,n02,n03 --slow n02=0.5 --fail n03 --explain

Launched as ranks (one process per GPU under ``mpirun`` or ``srun``, ``-g 1``, no ``--hosts``): each rank records
where it runs (its host, its GPU: ``TOPOTUNE_GPU`` from topotune-bind, else its local rank; the CPUs the kernel lets
it run on, ``sched_getaffinity``) in a rendezvous directory of the job (``/tmp/topotune-standin-<job id>``: ranks on
one node only), and rank 0 prints the run, as rccl-tests' rank 0 does. Without ``--hosts`` and outside a launcher it
runs as one process on this host (``all_reduce_perf -b 8 -e 8G -f 2 -g 8``).

Importable: ``render(hosts, ...) -> (text, exit code)``, ``run_model(hosts, ...)`` (the figures without the text),
``load_faults(path)``, ``parse_size(text)``, ``GENERATIONS``; ``render_a2a(host, ...)`` for its TransferBench mode
(``bench_standin.py transferbench a2a --hosts HOST``: TransferBench's ``a2a`` output of one node, ``A2A_PAIR_GBS``).

The model (plain on purpose; figures marked illustrative are no measurement):

* a host's intra-node bus bandwidth is its generation's single-node all_reduce plateau (``GENERATIONS``: MI300X
  317.66 GB/s and MI355X 407.26 GB/s, the in-place busbw at 8 GiB observed in ``knowledge/generations/<gen>.yml``;
  MI210 36.7 GB/s, that card's large-message figure);
* a host's inter-node bandwidth is its NICs' line rate times ``NET_EFFICIENCY`` (0.78, illustrative): MI300X and
  MI355X 8 x 400 Gb/s (one ConnectX-7 per GPU, as ``sim/profiles/mi300x-8gpu-spx.yml``), MI210 1 x 200 Gb/s
  (illustrative; the 2-node MI210 capture reaches ~15-16 GB/s);
* a ring all-reduce runs at the pace of its slowest member, so the run's plateau is the least, over its hosts, of
  ``min(intra, inter)`` (``intra`` alone on one host) times the host's slow factor (1 when healthy);
* the time of one message of S bytes over n ranks is ``latency + S * 2(n-1)/n / plateau``, latency 30 us on one host
  and 250 us + 50 us per doubling of hosts across nodes (illustrative; the 2-node capture's small messages take
  ~300 us); algbw = S / time, busbw = algbw * 2(n-1)/n (rccl-tests' all_reduce factor); out-of-place and in-place
  differ by a deterministic jitter under 0.5 % (``--seed``);
* the binding model (rank mode, read from the simulated node's tree, ``--sysroot``, default ``/sim``): a rank runs at
  ``1 - CROSS_NUMA_PENALTY * remote`` of the host's bandwidth, ``remote`` the share of its CPUs outside its GPU's NUMA
  node (``sys/devices/system/node/node*/cpulist``; GPU *i* is the *i*-th AMD display function by PCI address, its
  ``numa_node``), and the run at the pace of its worst rank. ``CROSS_NUMA_PENALTY`` 0.40 is the source article's
  all_reduce 187 ms unbound -> 112 ms NUMA-bound (112/187 = 0.60; illustrative: one measurement on 8x MI250); memory
  placement is not modelled. A rank on a CPU whose ``cpufreq/scaling_governor`` is not ``performance`` adds
  ``GOVERNOR_LATENCY`` (x1.5, illustrative) to the per-message latency: small messages slow down, large ones barely.
  Without the tree both factors are 1;
* faults (``--faults`` JSON ``{"host": {...}}``, or ``{"hosts": {...}}``, and the flags): ``slow`` (a factor on the
  host's bandwidth: a degraded link or NIC), ``fail`` (``nic``: the run aborts, at the first size from ``at`` bytes
  (default 1 MiB), when it spans nodes, with the NCCL WARN line, rccl-tests' ``Test NCCL failure`` and
  ``Test failure`` lines and Open MPI's MPI_ABORT text, exit 3; ``gpu``: a ``Test HIP failure`` line, on one host
  too), ``wrong`` (non-zero ``#wrong`` from ``at`` bytes on, ``# Out of bounds values : N FAILED``, exit 1: data
  corrupted), ``unreachable`` (the launcher cannot start: ssh and Open MPI's ORTE message, no rccl-tests output,
  exit 1: a run that broke, not a measurement).
"""

import argparse
import glob
import json
import math
import os
import random
import socket
import sys
import tempfile
import time
import zlib

NET_EFFICIENCY = 0.78
CROSS_NUMA_PENALTY = 0.40
GOVERNOR_LATENCY = 1.5
RENDEZVOUS_SECONDS = 60
# the launchers' rank variables: (world size, rank, local rank, job id), Open MPI then PMI then Slurm
_RANK_ENV = (("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
              ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")),
             ("PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", ("PMI_ID", "PMIX_NAMESPACE")),
             ("SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", ("SLURM_JOB_ID",)))
STANDIN_VERSION = "standin-sim"
# single-node all_reduce busbw plateau (GB/s), NICs per node and their rate (Gb/s), device name, GPU bus ids
GENERATIONS = {
    "mi300x": {"device": "AMD Instinct MI300X", "xgmi_busbw": 317.66, "nics": 8, "nic_gbps": 400,
               "bus_ids": ["0000:0c:00", "0000:22:00", "0000:38:00", "0000:5c:00", "0000:9f:00", "0000:af:00",
                           "0000:bf:00", "0000:df:00"],
               "source": "knowledge/generations/mi300x.yml observed (ROCm blog, 8 GiB in-place 317.66 GB/s); NICs and "
                         "bus ids: sim/profiles/mi300x-8gpu-spx.yml"},
    "mi355x": {"device": "AMD Instinct MI355X", "xgmi_busbw": 407.26, "nics": 8, "nic_gbps": 400,
               "bus_ids": ["0000:05:00", "0000:15:00", "0000:65:00", "0000:75:00", "0000:85:00", "0000:95:00",
                           "0000:e5:00", "0000:f5:00"],
               "source": "knowledge/generations/mi355x.yml observed (8 GiB in-place 407.26 GB/s); NICs and bus ids "
                         "illustrative"},
    "mi210": {"device": "AMD Instinct MI210", "xgmi_busbw": 36.7, "nics": 1, "nic_gbps": 200,
              "bus_ids": ["0000:47:00", "0000:4a:00", "0000:05:00", "0000:08:00", "0000:c5:00", "0000:c8:00",
                          "0000:85:00", "0000:88:00"],
              "source": "knowledge/generations/mi210.yml observed (large messages ~36.7 GB/s); bus ids: the MI210 "
                        "captures; the NIC illustrative"},
}
FAIL_KINDS = ("nic", "gpu")
HEADER = (
    "#\n"
    "#                                                              out-of-place                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n")
_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class StandinError(Exception):
    """A bad argument, host list or fault file (one-line message)."""


def parse_size(text):
    """A size as rccl-tests' -b/-e read it: ``8``, ``512K``, ``1M``, ``8G`` (binary units)."""
    text = str(text).strip()
    unit = _SIZE_UNITS.get(text[-1:].upper())
    try:
        value = int(text[:-1] if unit else text)
    except ValueError:
        raise StandinError("size %r is not a number with an optional K/M/G/T suffix" % text) from None
    if value < 0:
        raise StandinError("size %r is negative" % text)
    return value * (unit or 1)


def read_hostfile(path):
    """Host names of an Open MPI / Slurm style hostfile (``host``, ``host slots=8``, ``host:8``; ``#`` comments)."""
    hosts = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line:
                hosts.append(line.split()[0].split(":")[0])
    return hosts


def _fault(host, spec):
    if not isinstance(spec, dict):
        raise StandinError("fault of %s must be a mapping (slow, fail, wrong, unreachable, at), got %r" % (host, spec))
    unknown = sorted(set(spec) - {"slow", "fail", "wrong", "unreachable", "at"})
    if unknown:
        raise StandinError("fault of %s: unknown key(s) %s" % (host, ", ".join(unknown)))
    out = {}
    if "slow" in spec:
        factor = spec["slow"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
            raise StandinError("fault of %s: slow must be a factor in (0, 1], got %r" % (host, factor))
        out["slow"] = float(factor)
    if spec.get("fail"):
        kind = "nic" if spec["fail"] is True else spec["fail"]
        if kind not in FAIL_KINDS:
            raise StandinError("fault of %s: fail must be true or one of %s, got %r" % (host, ", ".join(FAIL_KINDS),
                                                                                        spec["fail"]))
        out["fail"] = kind
    if spec.get("wrong"):
        out["wrong"] = True
    if spec.get("unreachable"):
        out["unreachable"] = True
    if "at" in spec:
        out["at"] = parse_size(spec["at"])
    return out


def load_faults(path):
    """``{host: fault}`` from a JSON file: ``{"n03": {"slow": 0.5}, "n07": {"fail": "nic", "at": "1M"}}`` (or the same
    under ``hosts``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise StandinError("fault file %s: %s" % (path, err)) from None
    if isinstance(data, dict) and isinstance(data.get("hosts"), dict):
        data = data["hosts"]
    if not isinstance(data, dict):
        raise StandinError("fault file %s: expected a mapping of host to fault" % path)
    return {str(host): _fault(host, spec) for host, spec in data.items()}


def _host_model(host, generation, model):
    spec = dict(GENERATIONS[generation])
    overrides = dict((model or {}).get("defaults") or {})
    overrides.update(((model or {}).get("hosts") or {}).get(host) or {})
    gen = overrides.get("generation", generation)
    if gen not in GENERATIONS:
        raise StandinError("host %s: generation %r is not one of %s" % (host, gen, ", ".join(sorted(GENERATIONS))))
    if gen != generation:
        spec = dict(GENERATIONS[gen])
    for key in ("xgmi_busbw", "nics", "nic_gbps"):
        if key in overrides:
            spec[key] = float(overrides[key])
    spec["generation"] = gen
    return spec


def run_model(hosts, gpus_per_host=8, generation="mi300x", faults=None, model=None):
    """The model's figures for a run over ``hosts`` (see the module docstring)::

        {"hosts": {host: {"intra": GB/s, "inter": GB/s or None, "slow": factor, "limit": GB/s}},
         "plateau": GB/s, "slowest": host, "ranks": n, "latency_us": us}
    """
    if not hosts:
        raise StandinError("no hosts")
    if len(set(hosts)) != len(hosts):
        raise StandinError("hosts named twice: %s" % ", ".join(sorted({h for h in hosts if hosts.count(h) > 1})))
    if generation not in GENERATIONS:
        raise StandinError("generation %r is not one of %s" % (generation, ", ".join(sorted(GENERATIONS))))
    faults = faults or {}
    multi = len(hosts) > 1
    per_host = {}
    for host in hosts:
        spec = _host_model(host, generation, model)
        intra = spec["xgmi_busbw"]
        inter = spec["nics"] * spec["nic_gbps"] / 8.0 * NET_EFFICIENCY if multi else None
        slow = (faults.get(host) or {}).get("slow", 1.0)
        per_host[host] = {"generation": spec["generation"], "device": spec["device"], "intra": intra,
                          "inter": None if inter is None else round(inter, 3), "slow": slow,
                          "limit": round(min(intra, inter if inter is not None else intra) * slow, 3)}
    slowest = min(hosts, key=lambda h: (per_host[h]["limit"], hosts.index(h)))
    latency = 30.0 if not multi else 250.0 + 50.0 * math.ceil(math.log2(len(hosts)))
    return {"hosts": per_host, "plateau": per_host[slowest]["limit"], "slowest": slowest,
            "ranks": len(hosts) * gpus_per_host, "latency_us": latency}


def _sizes(min_bytes, max_bytes, factor, increment):
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        if factor > 1:
            if size == 0:
                break
            size *= factor
        elif increment > 0:
            size += increment
        else:
            break
    return sizes


def _time_text(us):
    if us >= 10000:
        return "%7.0f" % us
    if us >= 100:
        return "%7.1f" % us
    return "%7.2f" % us


def _pid(host, device):
    return 1000 + zlib.crc32(host.encode()) % 60000 + device


def _fail_lines(host, kind, hosts):
    index = hosts.index(host)
    pid = _pid(host, 0)
    if kind == "gpu":
        return ["%s: Test HIP failure common.cu:1130 'unspecified launch failure'" % host,
                " .. %s pid %d: Test failure common.cu:1169" % (host, pid)]
    peer = hosts[(index + 1) % len(hosts)]
    peer_ip = "10.0.0.%d" % (hosts.index(peer) + 1)
    error = ("NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
             "hca mlx5_0" % (peer_ip, 40000 + index))
    return ["%s:%d:%d [0] NCCL WARN %s" % (host, pid, pid + 64, error),
            "%s: Test NCCL failure common.cu:1285 'remote process exited or there was a network error / %s'"
            % (host, error),
            " .. %s pid %d: Test failure common.cu:1169" % (host, pid)]


def _mpi_abort(rank):
    return ["--------------------------------------------------------------------------",
            "MPI_ABORT was invoked on rank %d in communicator MPI_COMM_WORLD" % rank,
            "with errorcode 3.",
            "",
            "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
            "You may or may not see output from other processes, depending on",
            "exactly when Open MPI kills them.",
            "--------------------------------------------------------------------------"]


def render(hosts, gpus_per_host=8, min_bytes=8, max_bytes=8 << 30, factor=2, increment=0, generation="mi300x",
           faults=None, model=None, seed=0, iters=20, warmup=5, latency_factor=1.0, devices=None, process_gpus=1):
    """``(text, exit code)``: what all_reduce_perf would print for a run over ``hosts`` under the model and faults.
    ``latency_factor`` multiplies the per-message latency (the governor model); ``devices`` the device index of each
    rank of a host (default 0..gpus_per_host-1); ``process_gpus`` the GPUs each process drives (``-g``: the header's
    ``nGpus``; 1 for one process per GPU)."""
    hosts = [str(h) for h in hosts]
    if gpus_per_host < 1:
        raise StandinError("GPUs per host must be at least 1")
    if min_bytes > max_bytes:
        raise StandinError("invalid sizes for 'minbytes' and 'maxbytes': %d > %d" % (min_bytes, max_bytes))
    figures = run_model(hosts, gpus_per_host, generation, faults, model)
    faults = {h: f for h, f in (faults or {}).items() if h in figures["hosts"]}
    unreachable = [h for h in hosts if faults.get(h, {}).get("unreachable")]
    if unreachable:
        host = unreachable[0]
        return "\n".join([
            "ssh: connect to host %s port 22: No route to host" % host,
            "--------------------------------------------------------------------------",
            "ORTE was unable to reliably start one or more daemons.",
            "This usually is caused by:",
            "",
            "* not finding the required libraries and/or binaries on",
            "  one or more nodes.",
            "--------------------------------------------------------------------------", ""]), 1
    n = figures["ranks"]
    lines = ["# STAND-IN SIMULATOR (topotune sim/bench_standin.py): not rccl-tests; no GPU ran; figures from a model "
             "of the nodes' links",
             "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 "
             "validation: 1 graph: 0" % (process_gpus, min_bytes, max_bytes, "%d(factor)" % factor if factor > 1
                                         else "%d(bytes)" % increment, warmup, iters),
             "#",
             "rccl-tests: Version %s" % STANDIN_VERSION,
             "# Using devices"]
    for index, host in enumerate(hosts):
        spec = GENERATIONS[figures["hosts"][host]["generation"]]
        for local, device in enumerate(devices or range(gpus_per_host)):
            bus = spec["bus_ids"][device % len(spec["bus_ids"])]
            lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" % (
                index * gpus_per_host + local, 0, _pid(host, device), host, device, bus, spec["device"]))
    lines += ["RCCL version : simulated (stand-in, no RCCL)",
              "HIP version  : simulated",
              "ROCm version : simulated",
              "Hostname     : %s" % hosts[0],
              "Librccl path : none (stand-in simulator)"]
    text = "\n".join(lines) + "\n" + HEADER
    multi = len(hosts) > 1
    failing = [(h, faults[h]["fail"], faults[h].get("at", 1 << 20)) for h in hosts
               if faults.get(h, {}).get("fail") and (multi or faults[h]["fail"] == "gpu")]
    abort_at = min((at for _h, _k, at in failing), default=None)
    wrong = [(h, faults[h].get("at", 1 << 20)) for h in hosts if faults.get(h, {}).get("wrong")]
    bus_factor = 2.0 * (n - 1) / n if n > 1 else 0.0
    plateau = figures["plateau"]
    rng = random.Random("%s|%s|%d" % (",".join(hosts), seed, gpus_per_host))
    rows, busbws, wrong_total = [], [], 0
    for size in _sizes(min_bytes, max_bytes, factor, increment):
        if abort_at is not None and size >= abort_at:
            out = []
            for host, kind, _at in failing:
                out += _fail_lines(host, kind, hosts)
            out += _mpi_abort(hosts.index(failing[0][0]) * gpus_per_host)
            return text + "".join(r + "\n" for r in rows) + "\n".join(out) + "\n", 3
        count = size // 4
        cells = []
        for _group in ("out_of_place", "in_place"):
            moved = size * (bus_factor if n > 1 else 1.0)
            time_us = figures["latency_us"] * latency_factor + moved / (plateau * 1e3)
            time_us *= 1.0 + rng.uniform(-0.005, 0.005)
            algbw = size / (time_us * 1e3)
            busbw = algbw * bus_factor
            busbws.append(busbw)
            errors = sum(max(1, count // len(hosts)) for _h, at in wrong if size >= at and count)
            wrong_total += errors
            cells.append("  %s  %6.2f  %6.2f  %5g" % (_time_text(time_us), algbw, busbw, errors))
        rows.append("%12d  %12d  %8s  %6s  %6d%s" % (size, count, "float", "sum", -1, "".join(cells)))
    footer = ["# Errors with asterisks indicate errors that have exceeded the maximum threshold.",
              "# Out of bounds values : %d %s" % (wrong_total, "FAILED" if wrong_total else "OK"),
              "# Avg bus bandwidth    : %g " % (sum(busbws) / len(busbws) if busbws else 0.0),
              "#", ""]
    return text + "".join(r + "\n" for r in rows) + "\n".join(footer) + "\n", 1 if wrong_total else 0


# --- rank mode: one process per GPU under a launcher, the binding and governor models --------------------------------

def _cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if part:
            low, _sep, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def node_model(sysroot):
    """What the models read from a simulated node's tree: ``{"gpu_numa": [node per GPU], "cpu_node": {cpu: node},
    "governor": {cpu: name}}`` (empty when the tree is absent)."""
    cpu_node = {}
    for path in glob.glob(os.path.join(sysroot, "sys/devices/system/node/node[0-9]*/cpulist")):
        node = int(os.path.basename(os.path.dirname(path))[4:])
        for cpu in _cpulist(_read(path) or ""):
            cpu_node[cpu] = node
    gpus = []
    for dev in sorted(glob.glob(os.path.join(sysroot, "sys/bus/pci/devices/*"))):
        if _read(os.path.join(dev, "vendor")) == "0x1002" and (_read(os.path.join(dev, "class")) or "").startswith(
                ("0x0380", "0x0300", "0x1200")):
            numa = _read(os.path.join(dev, "numa_node"))
            gpus.append(int(numa) if numa not in (None, "") else -1)
    governor = {}
    for path in glob.glob(os.path.join(sysroot, "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")):
        governor[int(path.split("/cpu")[-2].rsplit("cpu", 1)[-1])] = _read(path)
    return {"gpu_numa": gpus, "cpu_node": cpu_node, "governor": governor}


def rank_factors(ranks, model):
    """``(bandwidth factor, latency factor, why)`` of a run whose ranks (``{"gpu", "cpus"}`` each) ran on a node
    described by ``model`` (``node_model``): the worst rank's share of CPUs outside its GPU's NUMA node, and whether any
    rank's CPUs run under another governor than ``performance``."""
    worst, why = 1.0, []
    for rank in ranks:
        gpu, cpus = rank["gpu"], rank["cpus"]
        numa = model["gpu_numa"][gpu % len(model["gpu_numa"])] if model["gpu_numa"] else -1
        known = [c for c in cpus if c in model["cpu_node"]]
        if numa < 0 or not known:
            continue
        remote = sum(1 for c in known if model["cpu_node"][c] != numa) / len(known)
        factor = 1.0 - CROSS_NUMA_PENALTY * remote
        if factor < worst:
            worst = factor
            why = ["rank %d: GPU %d on NUMA node %d, %d of its %d CPUs elsewhere" % (
                rank["rank"], gpu, numa, round(remote * len(known)), len(known))]
    slow_governors = sorted({model["governor"][c] for r in ranks for c in r["cpus"]
                             if model["governor"].get(c) not in (None, "performance")})
    latency = GOVERNOR_LATENCY if slow_governors else 1.0
    if slow_governors:
        why.append("governor %s on the ranks' CPUs" % ", ".join(slow_governors))
    return round(worst, 4), latency, why


def launcher_rank(environ=None):
    """``{"size", "rank", "local_rank", "job"}`` when this process is one rank of several under a launcher, else None."""
    environ = os.environ if environ is None else environ
    for size_var, rank_var, local_var, job_vars in _RANK_ENV:
        if environ.get(size_var, "").isdigit() and int(environ[size_var]) > 1 and environ.get(rank_var, "").isdigit():
            job = next((environ[v] for v in job_vars if environ.get(v)), None)
            if job is None:
                raise StandinError("rank mode needs the launcher's job id (%s)" % ", ".join(job_vars))
            if size_var == "SLURM_NTASKS":
                job += "." + environ.get("SLURM_STEP_ID", "0")
            rank = int(environ[rank_var])
            return {"size": int(environ[size_var]), "rank": rank, "job": job,
                    "local_rank": int(environ.get(local_var) or rank)}
    return None


def rendezvous(me, record, directory=None, timeout=RENDEZVOUS_SECONDS):
    """Write this rank's ``record``; rank 0 waits for every rank's and returns them in rank order (others: None)."""
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in me["job"])
    directory = directory or os.path.join(tempfile.gettempdir(), "topotune-standin-%s" % safe)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "rank-%05d.json" % me["rank"])
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(path + ".tmp", path)
    if me["rank"] != 0:
        return None
    deadline = time.monotonic() + timeout
    names = ["rank-%05d.json" % r for r in range(me["size"])]
    while not all(os.path.exists(os.path.join(directory, n)) for n in names):
        if time.monotonic() > deadline:
            missing = [r for r, n in enumerate(names) if not os.path.exists(os.path.join(directory, n))]
            raise StandinError("rank(s) %s did not report within %d s" % (",".join(map(str, missing)), timeout))
        time.sleep(0.05)
    ranks = []
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            ranks.append(json.load(handle))
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
    return ranks


def run_as_rank(me, args, faults, model, sysroot):
    """``(text, code)`` for rank 0 (the whole run), ``("", 0)`` for the others."""
    gpu = os.environ.get("TOPOTUNE_GPU", "")
    record = {"rank": me["rank"], "host": socket.gethostname().split(".")[0],
              "gpu": int(gpu) if gpu.isdigit() else me["local_rank"], "cpus": sorted(os.sched_getaffinity(0))}
    ranks = rendezvous(me, record)
    if ranks is None:
        return "", 0
    hosts = list(dict.fromkeys(r["host"] for r in ranks))
    if len(hosts) > 1:
        raise StandinError("rank mode runs on one node (its rendezvous is a local directory), got %s" % ", ".join(hosts))
    bandwidth, latency, _why = rank_factors(ranks, node_model(sysroot))
    host = hosts[0]
    fault = dict(faults.get(host) or {})
    fault["slow"] = round(fault.get("slow", 1.0) * bandwidth, 6)
    faults = dict(faults, **{host: fault})
    return render([host], len(ranks) * args.gpus_per_host, parse_size(args.minbytes), parse_size(args.maxbytes),
                  args.stepfactor, parse_size(args.stepbytes), args.generation, faults, model, args.seed, args.iters,
                  args.warmup_iters, latency, [r["gpu"] for r in ranks])


def _pairs(values, what):
    out = {}
    for item in values or []:
        host, sep, value = item.partition("=")
        if not host:
            raise StandinError("%s %r: expected HOST or HOST=VALUE" % (what, item))
        out[host] = value if sep else None
    return out


def _parser():
    parser = argparse.ArgumentParser(
        prog="bench_standin.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="STAND-IN SIMULATOR of rccl-tests all_reduce_perf (topotune sim/): not rccl-tests, no GPU runs.\n"
                    "Prints all_reduce_perf's output format for a host list, with figures from a model of the\n"
                    "nodes' links (intra-node xGMI busbw per generation, inter-node NIC bandwidth per host; the\n"
                    "slowest host sets the pace), and injected slow, failing or corrupting hosts.",
        epilog="fault file (JSON):\n"
               "  {\"n03\": {\"slow\": 0.5}, \"n07\": {\"fail\": \"nic\", \"at\": \"1M\"}, \"n09\": {\"wrong\": true},\n"
               "   \"n11\": {\"unreachable\": true}}\n"
               "exit: 0; 1 (#wrong values, or the launcher failed); 3 (aborted); 2 (bad arguments)")
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hosts", help="comma-separated host names, in rank order (default: this host; under a "
                                       "launcher, the ranks' hosts)")
    hosts.add_argument("--hostfile", help="Open MPI style hostfile (host [slots=N] per line)")
    parser.add_argument("-g", "--gpus-per-host", type=int, default=8,
                        help="ranks (GPUs) per host, one MPI process each (default 8)")
    parser.add_argument("-b", "--minbytes", default="8", help="smallest message size (default 8)")
    parser.add_argument("-e", "--maxbytes", default="8G", help="largest message size (default 8G)")
    parser.add_argument("-f", "--stepfactor", type=int, default=2, help="multiplication factor between sizes")
    parser.add_argument("-i", "--stepbytes", default="0", help="fixed increment between sizes (with -f 1)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="printed in the header only (default 20)")
    parser.add_argument("-w", "--warmup_iters", type=int, default=5, help="printed in the header only (default 5)")
    parser.add_argument("--generation", default="mi300x", choices=sorted(GENERATIONS),
                        help="GPU generation of every host (default mi300x)")
    parser.add_argument("--model", help="JSON per-host model overrides: {\"defaults\": {...}, \"hosts\": {HOST: "
                                        "{generation, xgmi_busbw, nics, nic_gbps}}}")
    parser.add_argument("--faults", help="JSON fault file (see below)")
    parser.add_argument("--slow", action="append", metavar="HOST=FACTOR", help="slow host: bandwidth times FACTOR")
    parser.add_argument("--fail", action="append", metavar="HOST[=nic|gpu]", help="failing host: the run aborts")
    parser.add_argument("--wrong", action="append", metavar="HOST", help="corrupting host: non-zero #wrong")
    parser.add_argument("--unreachable", action="append", metavar="HOST", help="the launcher cannot reach HOST")
    parser.add_argument("--seed", type=int, default=0, help="seed of the in-place/out-of-place jitter")
    parser.add_argument("--explain", action="store_true", help="print the model's figures (JSON) instead")
    parser.add_argument("--sysroot", default=os.environ.get("TOPOTUNE_STANDIN_SYSROOT", "/sim"),
                        help="the simulated node's tree the binding and governor models read (default /sim)")
    return parser


# TransferBench a2a: the average GPU-to-GPU pair bandwidth (GB/s) a node of each generation shows (illustrative
# of a healthy node, from published output: MI300X the example of AMD's MI300X acceptance guide,
# ROCm/system-acceptance-docs docs/mi300x/performance-bench.rst at b754ce7, "Average bandwidth 35.776"; MI355X the
# MI350X capture tests/fixtures/acceptance/transferbench_a2a__mi350x-8gpu__mhilgema-ihc.txt, 51.417)
A2A_PAIR_GBS = {"mi300x": 35.776, "mi355x": 51.417}


def render_a2a(host, generation="mi300x", faults=None, seed=0, gpus=8):
    """TransferBench ``a2a`` output (the current ``Summary: [...]`` layout of the MI350X capture) for one node: every
    GPU pair at the generation's pair bandwidth, a deterministic jitter under 1 %, times the host's slow factor."""
    if generation not in A2A_PAIR_GBS:
        raise StandinError("no TransferBench a2a figure is modelled for %s (known: %s)" % (
            generation, ", ".join(sorted(A2A_PAIR_GBS))))
    slow = float(((faults or {}).get(host) or {}).get("slow") or 1.0)
    rng = random.Random(zlib.crc32(("%s/%d" % (host, seed)).encode()))
    cells = [[None if i == j else A2A_PAIR_GBS[generation] * slow * (1 + rng.uniform(-0.01, 0.01))
              for j in range(gpus)] for i in range(gpus)]
    stotal = [sum(c for c in row if c is not None) for row in cells]
    rtotal = [sum(cells[i][j] for i in range(gpus) if i != j) for j in range(gpus)]
    actual = [t * 0.988 for t in stotal]
    pairs = [c for row in cells for c in row if c is not None]
    out = ["TransferBench a2a", "Summary: [268435456 bytes per Transfer] [GFX:8] [1 Read(s) 1 Write(s)]", "=" * 75,
           "SRC\\DST  " + "".join("GPU %02d     " % j for j in range(gpus)) + "   STotal      Actual"]
    for i, row in enumerate(cells):
        out.append("GPU %02d " % i + "".join("%10s " % ("N/A" if c is None else "%.3f" % c) for c in row)
                   + "   %10.3f  %10.3f" % (stotal[i], actual[i]))
    out += ["", "RTotal " + "".join("%10.3f " % t for t in rtotal) + "   %10.3f  %10.3f  %10.3f" % (
        sum(stotal), min(actual), max(actual)), "",
        "Average   bandwidth (GPU Timed): %8.3f GB/s" % (sum(pairs) / len(pairs)),
        "Aggregate bandwidth (GPU Timed): %8.3f GB/s" % sum(stotal),
        "Aggregate bandwidth (CPU Timed): %8.3f GB/s" % (sum(stotal) * 0.928),
        "# STAND-IN SIMULATOR (topotune sim/bench_standin.py): not TransferBench, no GPU ran"]
    return "\n".join(out) + "\n"


def main_transferbench(argv):
    """``bench_standin.py transferbench a2a --hosts HOST [--generation G] [--faults FILE] [--seed N]``."""
    parser = argparse.ArgumentParser(prog="bench_standin.py transferbench",
                                     description="STAND-IN SIMULATOR of TransferBench a2a (topotune sim/): not "
                                                 "TransferBench, no GPU runs.")
    parser.add_argument("test", choices=["a2a"])
    parser.add_argument("--hosts", required=True, help="the node's name (the first of a comma list)")
    parser.add_argument("--generation", default="mi300x", choices=sorted(A2A_PAIR_GBS))
    parser.add_argument("--faults", help="JSON fault file: {HOST: {\"slow\": FACTOR}}")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        faults = load_faults(args.faults) if args.faults else {}
        text = render_a2a(args.hosts.split(",")[0], args.generation, faults, args.seed)
    except (StandinError, OSError, ValueError) as err:
        print("bench_standin.py (stand-in simulator): %s" % err, file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["transferbench"]:
        return main_transferbench(argv[1:])
    args = _parser().parse_args(argv)
    try:
        me = None if args.hosts or args.hostfile else launcher_rank()
        if args.hosts:
            hosts = [h for h in args.hosts.split(",") if h]
        elif args.hostfile:
            hosts = read_hostfile(args.hostfile)
        else:
            hosts = [socket.gethostname().split(".")[0]]
        faults = load_faults(args.faults) if args.faults else {}
        for host, value in _pairs(args.slow, "--slow").items():
            try:
                faults.setdefault(host, {}).update(_fault(host, {"slow": float(value)}))
            except (TypeError, ValueError):
                raise StandinError("--slow %s: expected HOST=FACTOR" % host) from None
        for host, value in _pairs(args.fail, "--fail").items():
            faults.setdefault(host, {}).update(_fault(host, {"fail": value or "nic"}))
        for host in args.wrong or []:
            faults.setdefault(host, {})["wrong"] = True
        for host in args.unreachable or []:
            faults.setdefault(host, {})["unreachable"] = True
        model = None
        if args.model:
            with open(args.model, encoding="utf-8") as handle:
                model = json.load(handle)
        if args.explain:
            figures = run_model(hosts, args.gpus_per_host, args.generation, faults, model)
            figures["faults"] = {h: faults[h] for h in hosts if h in faults}
            figures["simulator"] = "stand-in (sim/bench_standin.py), not rccl-tests"
            print(json.dumps(figures, indent=2, sort_keys=True))
            return 0
        if me is not None:
            text, code = run_as_rank(me, args, faults, model, args.sysroot)
        else:
            bandwidth, latency, _why = (1.0, 1.0, []) if len(hosts) > 1 else rank_factors(
                [{"rank": 0, "gpu": g, "cpus": sorted(os.sched_getaffinity(0))} for g in range(args.gpus_per_host)],
                node_model(args.sysroot))
            if bandwidth < 1.0:
                fault = faults.setdefault(hosts[0], {})
                fault["slow"] = round(fault.get("slow", 1.0) * bandwidth, 6)
            text, code = render(hosts, args.gpus_per_host, parse_size(args.minbytes), parse_size(args.maxbytes),
                                args.stepfactor, parse_size(args.stepbytes), args.generation, faults, model, args.seed,
                                args.iters, args.warmup_iters, latency,
                                process_gpus=1 if args.hosts or args.hostfile else args.gpus_per_host)
    except (StandinError, OSError, ValueError) as err:
        print("bench_standin.py (stand-in simulator): %s" % err, file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
