"""Multi-node collectives: the argv of one rccl-tests run over a host list, the hostfile, the cluster criterion and
the summary record (``collective/acceptance.json``) of a full-cluster run and the bad-node isolation after it.

Controller only, standard library, no Ansible imports, nothing run here: the action plugin
(``plugins/action/acceptance_collective.py``) runs the argv on the launcher host, parses the output (``parse_perf``),
judges it (``isolation.judge_run``) and drives ``isolation.Isolation`` when the full run fails.

Public API:

``KINDS``
    ``mpirun``, ``srun``, ``command`` (a user-given argv template).
``template_argv(collective, kind, command=None)``
    The argv template of ``kind`` from ``collective`` (``knowledge/acceptance.yml`` ``collective``); ``command``, a
    list of words, replaces it (any kind; required for ``command`` when the knowledge has none). ValueError on a
    bad template (not a list of strings, an unknown placeholder).
``build_argv(template, hosts, ppn=8, binary="all_reduce_perf", bind=None, hostfile=None, export=())``
    One run's argv: ``{hostfile}``, ``{hosts}`` (comma list), ``{np}`` (hosts x ppn), ``{ppn}``, ``{nodes}``,
    ``{binary}`` substituted in every word; a word ``{bind}`` becomes ``bind`` (left out when None or empty), a word
    ``{export}`` becomes ``-x NAME`` for each of ``export``. ``{hostfile}`` with ``hostfile`` None is a ValueError.
``needs_hostfile(template)``
    True when a word of ``template`` holds ``{hostfile}``.
``hostfile_text(hosts, ppn=8, line="{host} slots={ppn}")``
    The hostfile: one line per host, in order.
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

import re

KINDS = ("mpirun", "srun", "command")
PLACEHOLDERS = ("hostfile", "hosts", "np", "ppn", "nodes", "binary", "bind", "export")
_WORD_ONLY = ("bind", "export")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SCHEMA_VERSION = 1


def _check_template(template, what):
    if not isinstance(template, (list, tuple)) or not template or not all(isinstance(w, str) for w in template):
        raise ValueError("%s must be a non-empty list of words (strings), got %r" % (what, template))
    for word in template:
        for name in _PLACEHOLDER.findall(word):
            if name not in PLACEHOLDERS:
                raise ValueError("%s: unknown placeholder {%s} in %r (known: %s)" % (
                    what, name, word, ", ".join("{%s}" % p for p in PLACEHOLDERS)))
            if name in _WORD_ONLY and word != "{%s}" % name:
                raise ValueError("%s: {%s} must be a word of its own, not part of %r" % (what, name, word))
    return list(template)


def template_argv(collective, kind, command=None):
    """See the module docstring."""
    if kind not in KINDS:
        raise ValueError("template kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    if command:
        return _check_template(command, "the command template")
    entry = ((collective or {}).get("templates") or {}).get(kind) or {}
    if not entry.get("argv"):
        raise ValueError("no %s template in knowledge/acceptance.yml collective.templates; give the command" % kind)
    return _check_template(entry["argv"], "the %s template" % kind)


def needs_hostfile(template):
    """See the module docstring."""
    return any("{hostfile}" in word for word in template)


def build_argv(template, hosts, ppn=8, binary="all_reduce_perf", bind=None, hostfile=None, export=()):
    """See the module docstring."""
    template = _check_template(template, "the template")
    hosts = [str(h) for h in hosts]
    if not hosts:
        raise ValueError("a run needs hosts")
    if needs_hostfile(template) and not hostfile:
        raise ValueError("the template names {hostfile} but no hostfile was written")
    values = {"hostfile": hostfile or "", "hosts": ",".join(hosts), "np": str(len(hosts) * int(ppn)),
              "ppn": str(int(ppn)), "nodes": str(len(hosts)), "binary": str(binary)}
    argv = []
    for word in template:
        if word == "{bind}":
            argv.extend([bind] if bind else [])
        elif word == "{export}":
            for name in export or ():
                argv.extend(["-x", str(name)])
        else:
            argv.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], word))
    return argv


def hostfile_text(hosts, ppn=8, line="{host} slots={ppn}"):
    """See the module docstring."""
    return "".join(line.format(host=host, ppn=int(ppn)) + "\n" for host in hosts)


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
