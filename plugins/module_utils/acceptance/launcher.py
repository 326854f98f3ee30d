"""Launcher argv templates: one collective run's argv (mpirun, srun, or a user's command) over a host list, and the
hostfile it reads. Standard library only: the multi-node collective's action (controller) and the benchmark's
binding comparison (``rccl_bench`` on the node) build their runs here.

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
"""

import re

KINDS = ("mpirun", "srun", "command")
PLACEHOLDERS = ("hostfile", "hosts", "np", "ppn", "nodes", "binary", "bind", "export")
_WORD_ONLY = ("bind", "export")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


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
