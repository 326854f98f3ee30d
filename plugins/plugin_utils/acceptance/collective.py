"""Multi-node collectives: the MPI names of the hosts, the cluster criterion and the summary record
(``collective/acceptance.json``) of a full-cluster run and the bad-node isolation after it.

Controller only, standard library, no Ansible imports, nothing run here: the action plugin
(``plugins/action/acceptance_collective.py``) runs the argv on the launcher host, parses the output (``parse_perf``),
judges it (``isolation.judge_run``) and drives ``isolation.Isolation`` when the full run fails. The argv of a run and
its hostfile come from ``module_utils/acceptance/launcher.py`` (the benchmark's binding comparison uses them too).

Public API:

``mpi_names(hosts, hostnames=None)``
    The names MPI reaches for inventory ``hosts`` (``hostnames`` maps inventory name to that name; others as they
    are). ValueError when two hosts map to one name.
``short_name(name)``
    rccl-tests prints each rank's host name cut at its first dot: the name ``judge_run`` compares.
``criterion_for(collective, generation=None, override=None)``
    The criterion ``judge_run`` reads (``{"kind", "busbw_gbs", "column", "message_bytes"}``) with ``generation``
    and ``sources``: ``override`` (a dict with at least ``busbw_gbs``) wins; else the figure of ``generation``. None
    when there is neither (the caller says so).
``summary(...)``
    The record ``collective/acceptance.json`` holds (``schema_version`` 1, below).
``lines(record)``
    One line per excluded host with its evidence (or one line saying why none is), for the play's output.

The policy (``knowledge/acceptance.yml`` ``collective.criterion``): AMD's network validation page gives 304 GB/s
(MI300X) and 350 GB/s (MI350X, MI355X) all_reduce "for a two node cluster" without a size or column; it is read as the
single-node criterion reads the same figure: the in-place busbw of the 8 GiB row, for any number of nodes.
"""

SCHEMA_VERSION = 1


def mpi_names(hosts, hostnames=None):
    """See the module docstring."""
    hostnames = hostnames or {}
    names = [str(hostnames.get(h, h)) for h in hosts]
    seen = {}
    for host, name in zip(hosts, names):
        if name in seen:
            raise ValueError("hosts %s and %s both map to %s (topotune_collective_hostnames)" % (seen[name], host, name))
        seen[name] = host
    return names


def short_name(name):
    """See the module docstring."""
    return str(name).split(".", 1)[0]


def criterion_for(collective, generation=None, override=None):
    """See the module docstring."""
    base = dict((collective or {}).get("criterion") or {})
    figures = base.pop("busbw_gbs", None) or {}
    out = {"kind": base.get("kind", "busbw_at_size"), "column": base.get("column", "in_place"),
           "message_bytes": base.get("message_bytes", 8 << 30)}
    if override:
        if override.get("busbw_gbs") is None:
            raise ValueError("the criterion given needs busbw_gbs, got %r" % (override,))
        out.update(override)
        out.setdefault("generation", generation)
        out.setdefault("sources", [{"document": "given by the caller (topotune_collective_criterion)"}])
        return out
    if not generation:
        return None
    key = next((g for g in figures if str(g).upper() == str(generation).upper()), None)
    if key is None:
        return None
    out.update(busbw_gbs=figures[key], generation=key, sources=base.get("sources") or [])
    return out


def run_entry(hosts, argv, verdict, evidence, rc=None, seconds=None):
    """One run of the record: its inventory hosts, argv, verdict, one-line evidence, exit code and wall seconds."""
    return {"hosts": list(hosts), "argv": list(argv), "verdict": verdict, "evidence": evidence, "rc": rc,
            "seconds": seconds}


def summary(hosts, criterion, full_run, isolation=None, template=None, launcher=None, check_mode=False,
            hostnames=None):
    """The record of ``collective/acceptance.json``::

        {"schema_version": 1, "status": "pass" | "fail" | "unknown" | "skipped", "launcher": host,
         "template": kind, "hosts": [...], "hostnames": {inventory: MPI name}, "criterion": {...},
         "full_run": {hosts, argv, verdict, evidence, rc, seconds},
         "isolation": Isolation.result() (each run with its argv) or None,
         "bad": [...], "good": [...], "undetermined": [...],
         "excluded": [{host, evidence, why, run, hosts}]}

    A passing full run proves every host good; a broken one (``unknown``) leaves every host undetermined and excludes
    nobody; a failing one without isolation (no budget) leaves them undetermined too.
    """
    hosts = list(hosts)
    verdict = (full_run or {}).get("verdict")
    record = {"schema_version": SCHEMA_VERSION, "status": None, "launcher": launcher, "template": template,
              "hosts": hosts, "hostnames": dict(hostnames or {}), "criterion": criterion, "full_run": full_run,
              "isolation": isolation, "bad": [], "good": [], "undetermined": [], "excluded": [],
              "check_mode": bool(check_mode)}
    if check_mode or verdict == "skipped":
        record.update(status="skipped", undetermined=hosts)
    elif verdict == "pass":
        record.update(status="pass", good=hosts)
    elif verdict == "fail" and isolation:
        record.update(status="fail", bad=list(isolation["bad"]), good=list(isolation["good"]),
                      undetermined=list(isolation["undetermined"]),
                      excluded=[{"host": e["host"], "evidence": e["evidence"], "why": e["why"], "run": e["run"],
                                 "hosts": list(e["hosts"])} for e in isolation["excluded"]])
    else:
        record.update(status="fail" if verdict == "fail" else "unknown", undetermined=hosts)
    return record


def lines(record):
    """See the module docstring."""
    full = record.get("full_run") or {}
    if record.get("status") == "skipped":
        return ["collective: not run (%s)" % (full.get("evidence") or "check mode")]
    if record.get("status") == "pass":
        return ["collective over %d hosts passed: %s" % (len(record["hosts"]), full.get("evidence"))]
    out = ["excluded %s: %s (%s)" % (e["host"], e["evidence"], e["why"]) for e in record.get("excluded") or []]
    if record.get("undetermined"):
        iso = record.get("isolation") or {}
        why = iso.get("undetermined_why") or {}
        out += ["undetermined %s: %s" % (h, why.get(h) or full.get("evidence") or "no evidence")
                for h in record["undetermined"]]
    if not out:
        out = ["collective %s: %s" % (record.get("status"), full.get("evidence"))]
    return out
