"""Bad-node isolation: which hosts make a multi-node collective (rccl-tests) fail its criterion.

When a run over many nodes fails, further runs over subsets of them find the hosts responsible. Controller only,
standard library, no Ansible imports: a stepper that any driver feeds (a Python loop, an Ansible action plugin):
``next_run()`` names the hosts of the next run, the driver runs it and ``record()``s its verdict, until ``next_run()``
returns None; ``result()`` is then the run summary's and the report's entry.

Public API (standard library only, Python 3.8+):

``Isolation(hosts, strategy="auto", reference=None, known_good=(), max_runs=None, retries=1, expected_bad=None,
trigger=None)``
    ``hosts``: the hosts to isolate (at least 2, in the order runs name them). ``strategy``: ``pairwise``,
    ``bisect`` or ``auto`` (below). ``reference``: a host believed good, tried first as a partner; a hint, never
    trusted (a bad reference costs one run). ``known_good``: hosts proven good by earlier evidence (a passing run),
    trusted: never tested again, partners from the start. ``max_runs``: the budget, every run proposed counted
    (broken ones too); once spent, the hosts not yet classified are ``undetermined``. ``retries``: how many times a
    run that broke (verdict ``unknown``) is tried again before the planner tries another one. ``expected_bad``: how
    many bad hosts the caller expects (``auto`` starts pairwise when that is at its crossover or above). ``trigger``:
    the evidence (one line) of the failing run over all ``hosts`` that started the isolation: recorded as run 0, not
    counted in the budget nor the bound (bisection does not repeat it).

    ``next_run()``
        The host list of the next run (>= 2 hosts: a run of one node is no multi-node run), or None when done (every
        host classified, the budget spent, or no run can tell more). Asked twice without a ``record``, the same list.
    ``record(hosts, verdict, evidence="")``
        The run's index. ``verdict``: ``pass``; ``fail`` (below the criterion, failed in the collective, or wrong
        data); ``unknown`` (the run itself broke: launcher, ssh, timeout before the tool reported: counted, never
        concluded from). Any host list may be recorded, not only the one proposed: every recorded run is evidence.
    ``result()``::

        {"hosts": [...], "strategy": "auto", "used": ["bisect"], "auto": {"k_star": 4, "switched_at": None,
         "why": "..."}, "bad": ["n07"], "good": [...], "undetermined": [], "undetermined_why": {host: reason},
         "excluded": [{"host": "n07", "run": 5, "hosts": ["n07", "n01"], "evidence": "...", "cleared_by":
         {"n01": 2}, "why": "run 5 [n07, n01] failed and n01 passed in run 2"}],
         "runs": [{"index": 1, "hosts": [...], "verdict": "fail", "evidence": "...", "planner": "bisect",
         "proposed": True, "trigger": False}], "runs_used": 7, "runs_decisive": 7, "runs_broken": 0,
         "bound": 11, "bound_formula": "k < k*=4, bisection: k(ceil(log2 n)+1)+1 = 2(4+1)+1 (n=16, k=2)",
         "within_bound": True,
         "complete": True, "stopped": None, "conflicts": [], "max_runs": None}

        ``stopped``: None (complete), ``budget``, or ``no informative run`` (what is left cannot be told apart, e.g.
        fewer than two good hosts). ``within_bound``: the decisive runs against ``bound`` for the bad hosts found.
``run_bound(strategy, n, k, known_good=0, trigger=True)``
    The most decisive runs ``strategy`` needs for ``n`` hosts of which ``k`` are bad (``known_good`` of them given as
    good, so ``n - known_good`` to classify): the guarantees below, as a number; ``trigger`` False adds the
    full-cluster run bisection then starts with.
``crossover(n, known_good=0)``
    ``k*``: the fewest bad hosts at which bisection's bound reaches pairwise's; ``auto`` bisects below it.
``judge_run(parsed, criterion, error=None, hosts=None)``
    ``(verdict, evidence)`` of one multi-host rccl-tests run, ready for ``record``: ``parsed`` is ``parse_perf``'s
    result (``module_utils/bench/rccl.py``), or None with ``error`` the output of a run without a result table (or
    the ``RcclParseError`` message): a failure line of the tool there is a ``fail``, anything else (the launcher's
    errors) ``unknown``. ``criterion``: ``{"busbw_gbs": 304, "column": "in_place",
    "message_bytes": 8589934592}`` (busbw of that row; no ``message_bytes``: the largest size the run printed) or
    ``{"kind": "avg_busbw", "busbw_gbs": 30}`` ('# Avg bus bandwidth'); a card's criterion (``bounds`` with a
    ``below: fail`` entry) reads the same. ``fail``: the tool's failure lines (``Test NCCL failure``, ``NCCL WARN``,
    MPI_ABORT after them), ``#wrong`` values, out-of-bounds values, or busbw below the bound. ``unknown``: the run
    broke before the tool reported (launcher errors), output of other hosts than ``hosts``, or no row to judge.
``STRATEGIES``, ``VERDICTS``

The model: a run passes its criterion exactly when every member is good. A bad host (slow links, a failing NIC,
corrupted data) makes every run it joins fail, since a collective runs at the pace of its slowest member; a good host
never does. Good and bad are then decided only from evidence:

* good: the host was in a passing run (or is ``known_good``);
* bad: the host was in a failing run whose every other member is proven good. Never on suspicion: a host that was
  only ever in failing runs with other unproven hosts is ``undetermined``, never excluded;
* conflicts (the model broken: a failing run of proven-good hosts, a flaky host or fabric): reported in
  ``conflicts``, their hosts ``undetermined``, no one excluded for them.

So under the model no good host is ever excluded and every excluded host carries the failing run and the passing
runs that clear its partners. With at least two good hosts among ``hosts`` (the least any proof of good needs) and
budget enough, every host ends ``good`` or ``bad``.

Strategies (``n`` hosts to classify, ``k`` of them bad, ``L = ceil(log2 n)``). Bounds count the decisive runs
(``pass`` / ``fail``) after the failing full-cluster run that started the isolation (the ``trigger``); runs that broke
come on top, each run retried at most ``retries`` times:

``pairwise``
    A reference first: the first two-node run that passes (disjoint pairs, the ``reference`` hint first, hosts in
    no failing run before suspected ones); then every other host once with the reference. A failing pair is settled
    by its members' runs with the reference: when the first passes, the other is bad by the pair's run, without a
    run of its own. Bound: ``n - 1 + f``, ``f`` the failing pairs before the first passing one, each holding a bad
    host: ``n - 1 + k`` for ``k < n // 2``; ``n - known_good`` with known-good hosts (ROCm CVS's pairwise test takes
    its first node as the reference after a one-node run, which cannot see a NIC). With ``k >= n // 2`` two disjoint
    good hosts may not be found by pairs of fresh hosts; every pair is then tried once at most: ``n(n-1)/2 + n``.
``bisect``
    Group testing by halving (binary splitting). The pool of unclassified hosts runs together; when it fails, the
    smallest failing set is halved (least suspected hosts first) and its first half runs, with a known-good filler
    host when it is a single host: a passing half is proven good and leaves the bad host in the other half without a
    run; a failing half is halved again and its other half goes back to the pool. Until some host is proven good
    (every run so far failed) there is no filler and a single host never runs alone: the untested other halves of
    failing sets run first, then failing sets of 3 or more are halved, then pairs as in ``pairwise``. Accounting:
    each bad host found ends a chain of failing sets halved down to it, opened by one run over hosts not yet
    suspected (the trigger, a pool run, an untested half) and at most ``L`` halvings long; beyond the chains at most
    two passing runs prove hosts outside them (the untested half that gives the first known-good host, the last pool
    run). Bound: ``k * (L + 1) + 1`` after the trigger (the trigger opens the first chain); ``+ 1`` without a
    trigger, when bisection starts with the full-cluster run itself. Checked on every placement of 1 to 3 bad hosts
    among 16 (the tests; all of 4 and 3000 of 5 while it was written) and on random placements among 64
    (``bench/isolation_bench.py``).
``auto``
    Bisection while the hosts proven bad plus the disjoint failing sets not yet explained (a lower bound of ``k``)
    stay below ``k* = crossover(n)``, the fewest bad hosts for which ``k * (L + 1) + 1 >= n - 1 + k`` (16 hosts: 4;
    64 hosts: 11); from then on pairwise, with a reference from the hosts bisection proved good. ``expected_bad >=
    k*`` (or ``k* = 1``: 5 hosts or fewer) starts pairwise. Bound: bisection's for ``k < k*`` (it never switches
    then); for ``k >= k*``, bisection's for ``k* - 1`` plus pairwise's for ``k``.
"""

import re

STRATEGIES = ("auto", "pairwise", "bisect")
VERDICTS = ("pass", "fail", "unknown")
# partners tried per host before a pairwise host is given up on (its runs with each broke `retries + 1` times)
_MAX_PARTNERS = 2
_QUOTE = 120


def _ceil_log2(n):
    return 0 if n <= 1 else (n - 1).bit_length()


def _bisect_bound(n, k):
    return k * (_ceil_log2(n) + 1) + 1


def _pairwise_bound(n, k, known_good=0):
    if known_good:
        return n
    if k < n // 2 or n < 2:
        return max(n - 1 + k, 0)
    return n * (n - 1) // 2 + n


def crossover(n, known_good=0):
    """See the module docstring."""
    m = max(n - known_good, 1)
    for k in range(1, m + 1):
        pairwise = m if known_good else m - 1 + k
        if _bisect_bound(m, k) >= pairwise:
            return k
    return m + 1


def run_bound(strategy, n, k, known_good=0, trigger=True):
    """See the module docstring."""
    return _bound(strategy, n, k, known_good, trigger)[0]


def _bound(strategy, n, k, known_good=0, trigger=True):
    """(bound, how it was computed) for ``run_bound``."""
    if strategy not in STRATEGIES:
        raise ValueError("strategy %r is not one of %s" % (strategy, ", ".join(STRATEGIES)))
    m = max(n - known_good, 0)
    what = "n=%d, k=%d%s" % (m, k, ", %d known good" % known_good if known_good else "")
    if strategy == "pairwise" or (strategy == "auto" and crossover(n, known_good) <= 1):
        value = _pairwise_bound(m, k, known_good)
        if known_good:
            text = "n = %d (each host once with a known-good partner)" % m
        elif k < m // 2:
            text = "n-1+k = %d-1+%d" % (m, k)
        else:
            text = "n(n-1)/2+n = %d (k >= n/2: each pair once at most)" % value
        return value, "%s%s (%s)" % ("k*=1, pairwise: " if strategy == "auto" else "", text, what)
    extra = 0 if trigger else 1
    if not trigger:
        what += ", +1: the full-cluster run bisection starts with"
    bisect = "k(ceil(log2 n)+1)+1 = %d(%d+1)+1" % (k, _ceil_log2(m))
    if strategy == "bisect":
        return _bisect_bound(m, k) + extra, "%s (%s)" % (bisect, what)
    k_star = crossover(n, known_good)
    if k < k_star:
        return _bisect_bound(m, k) + extra, "k < k*=%d, bisection: %s (%s)" % (k_star, bisect, what)
    pairwise = _pairwise_bound(m, k, known_good)
    value = _bisect_bound(m, k_star - 1) + extra + pairwise
    return value, ("k >= k*=%d, bisection then pairwise: (k*-1)(ceil(log2 n)+1)+1 + %d = %d(%d+1)+1 + %d (%s)" % (
        k_star, pairwise, k_star - 1, _ceil_log2(m), pairwise, what))


class _State:
    """What the recorded runs prove (see ``Isolation._derive``)."""

    def __init__(self):
        self.good = set()
        self.good_by = {}       # host -> index of the first passing run holding it (None: given as known good)
        self.bad = {}           # host -> (failing run index, {other member: the run that proved it good})
        self.live = []          # failing runs not explained by a bad host, less their good members (>= 2 hosts)
        self.flaky = {}         # host -> why its runs contradict each other
        self.conflicts = []
        self.unresolved = set()


class Isolation:
    """See the module docstring."""

    def __init__(self, hosts, strategy="auto", reference=None, known_good=(), max_runs=None, retries=1,
                 expected_bad=None, trigger=None):
        hosts = [str(h) for h in hosts or []]
        if len(hosts) < 2:
            raise ValueError("isolation needs at least 2 hosts, got %d" % len(hosts))
        if len(set(hosts)) != len(hosts):
            raise ValueError("hosts named twice: %s" % ", ".join(sorted({h for h in hosts if hosts.count(h) > 1})))
        if strategy not in STRATEGIES:
            raise ValueError("strategy %r is not one of %s" % (strategy, ", ".join(STRATEGIES)))
        if reference is not None and reference not in hosts:
            raise ValueError("reference %r is not one of the hosts" % reference)
        known_good = [str(h) for h in known_good or []]
        strangers = [h for h in known_good if h not in hosts]
        if strangers:
            raise ValueError("known_good hosts not among the hosts: %s" % ", ".join(strangers))
        if max_runs is not None and (not isinstance(max_runs, int) or max_runs < 0):
            raise ValueError("max_runs must be a non-negative integer or None, got %r" % (max_runs,))
        if not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a non-negative integer, got %r" % (retries,))
        if expected_bad is not None and (not isinstance(expected_bad, int) or expected_bad < 0):
            raise ValueError("expected_bad must be a non-negative integer or None, got %r" % (expected_bad,))
        self.hosts = hosts
        self.strategy = strategy
        self.reference = reference
        self.known_good = [h for h in hosts if h in set(known_good)]
        self.max_runs = max_runs
        self.retries = retries
        self.expected_bad = expected_bad
        self._index = {h: i for i, h in enumerate(hosts)}
        self._runs = []
        self._broken = {}       # frozenset(hosts) -> runs of exactly those hosts that broke
        self._given_up = {}     # host -> why no run of it can be made
        self._pending = None
        self._stopped = None
        self._k_star = crossover(len(hosts), len(self.known_good))
        self._switched_at = None
        self._auto_why = None
        if strategy == "auto":
            if self._k_star <= 1:
                self._switched_at = 0
                self._auto_why = "k*=%d: bisection never beats pairwise on %d hosts" % (
                    self._k_star, len(hosts) - len(self.known_good))
            elif expected_bad is not None and expected_bad >= self._k_star:
                self._switched_at = 0
                self._auto_why = "expected_bad=%d >= k*=%d: pairwise from the start" % (expected_bad, self._k_star)
        if trigger is not None:
            self._add(hosts, "fail", trigger, planner="trigger", proposed=False, trigger=True)

    # --- recording ----------------------------------------------------------------------------------

    def _add(self, hosts, verdict, evidence, planner, proposed, trigger=False):
        index = 0 if trigger else self.runs_used() + 1
        run = {"index": index, "hosts": list(hosts), "verdict": verdict, "evidence": _one_line(evidence),
               "planner": planner, "proposed": proposed, "trigger": trigger}
        self._runs.append(run)
        if verdict == "unknown":
            key = frozenset(hosts)
            self._broken[key] = self._broken.get(key, 0) + 1
        return index

    def record(self, hosts, verdict, evidence=""):
        """See the module docstring."""
        hosts = [str(h) for h in hosts or []]
        if verdict not in VERDICTS:
            raise ValueError("verdict %r is not one of %s" % (verdict, ", ".join(VERDICTS)))
        strangers = [h for h in hosts if h not in self._index]
        if strangers:
            raise ValueError("hosts not under isolation: %s" % ", ".join(strangers))
        if len(set(hosts)) != len(hosts) or len(hosts) < 2:
            raise ValueError("a run holds 2 or more distinct hosts, got %s" % hosts)
        pending, self._pending = self._pending, None
        proposed = pending is not None and frozenset(pending[0]) == frozenset(hosts)
        planner = pending[1] if proposed else "caller"
        return self._add(hosts, verdict, evidence, planner, proposed)

    def runs_used(self):
        """Runs recorded, the trigger not counted (what ``max_runs`` limits)."""
        return sum(1 for run in self._runs if not run["trigger"])

    # --- what the runs prove ------------------------------------------------------------------------

    def _ordered(self, hosts):
        return sorted(hosts, key=self._index.__getitem__)

    def _derive(self):
        st = _State()
        for host in self.known_good:
            st.good_by[host] = None
        decisive = [run for run in self._runs if run["verdict"] != "unknown"]
        for run in decisive:
            if run["verdict"] == "pass":
                for host in run["hosts"]:
                    st.good_by.setdefault(host, run["index"])
        proven = set(st.good_by)
        failing = [run for run in decisive if run["verdict"] == "fail"]
        for run in failing:
            if set(run["hosts"]) <= proven:
                cleared = sorted({st.good_by[h] for h in run["hosts"] if st.good_by[h] is not None})
                st.conflicts.append({"run": run["index"], "hosts": list(run["hosts"]),
                                     "why": "run %d failed though every member is proven good (%s): a flaky host or "
                                            "fabric, or a criterion too tight; its hosts stay undetermined" % (
                                                run["index"], ", ".join("run %d" % i for i in cleared) or "given")})
                for host in run["hosts"]:
                    st.flaky.setdefault(host, "in run %d, which failed though every member passed elsewhere"
                                        % run["index"])
        st.good = proven - set(st.flaky)
        for run in failing:
            rest = [h for h in run["hosts"] if h not in st.good]
            if len(rest) == 1 and rest[0] not in st.flaky and rest[0] not in st.bad:
                host = rest[0]
                st.bad[host] = (run["index"], {h: st.good_by[h] for h in run["hosts"] if h != host})
        for run in failing:
            if any(h in st.bad or h in st.flaky for h in run["hosts"]):
                continue
            rest = frozenset(h for h in run["hosts"] if h not in st.good)
            if len(rest) >= 2 and rest not in st.live:
                st.live.append(rest)
        st.unresolved = {h for h in self.hosts if h not in st.good and h not in st.bad and h not in st.flaky
                         and h not in self._given_up}
        return st

    def _partners(self, st):
        """Known-good hosts to run with: the reference hint when proven, the given ones, then in host order."""
        first = [self.reference] if self.reference in st.good else []
        rest = [h for h in self.known_good if h in st.good] + self._ordered(st.good)
        return list(dict.fromkeys(first + rest))

    def _blocked(self, hosts):
        return self._broken.get(frozenset(hosts), 0) > self.retries

    def _known(self, hosts, st):
        """True when the outcome of a run of ``hosts`` follows from the runs recorded."""
        members = set(hosts)
        if members <= st.good or members & set(st.bad) or any(s <= members for s in st.live):
            return True
        return any(run["verdict"] != "unknown" and set(run["hosts"]) == members for run in self._runs)

    def _usable(self, hosts, st):
        return len(hosts) >= 2 and not self._known(hosts, st) and not self._blocked(hosts)

    @staticmethod
    def _disjoint(live):
        picked = []
        for s in sorted(live, key=len):
            if all(not (s & other) for other in picked):
                picked.append(s)
        return len(picked)

    # --- planning -----------------------------------------------------------------------------------

    def _mode(self, st):
        if self.strategy != "auto":
            return self.strategy
        if self._switched_at is not None:
            return "pairwise"
        lower = len(st.bad) + self._disjoint(st.live)
        if lower >= self._k_star:
            self._switched_at = self.runs_used()
            self._auto_why = ("after %d run(s) at least %d hosts are bad (%d proven, %d disjoint failing sets), "
                              "k*=%d: pairwise from here" % (self._switched_at, lower, len(st.bad),
                                                             lower - len(st.bad), self._k_star))
            return "pairwise"
        return "bisect"

    def _plan_pairwise(self, st):
        todo = self._ordered(st.unresolved)
        if not todo:
            return None
        partners = self._partners(st)
        if not partners:
            return self._reference_pair(st, todo)
        in_live = {}
        for s in st.live:
            for host in s:
                in_live[host] = min(in_live.get(host, len(s)), len(s))
        # members of small failing sets first: when one passes, the other is bad without a run of its own
        todo.sort(key=lambda h: (in_live.get(h, len(self.hosts) + 1), self._index[h]))
        for host in todo:
            for partner in partners[:_MAX_PARTNERS]:
                if not self._blocked([partner, host]):
                    return [partner, host]
            self._given_up[host] = ("its runs with known-good partners (%s) broke %d time(s) each (verdict unknown)"
                                    % (", ".join(partners[:_MAX_PARTNERS]), self.retries + 1))
        return None

    def _reference_pair(self, st, todo):
        """Two unclassified hosts to run together when no host is proven good: the least suspected first."""
        suspicion = {h: max([1.0 / len(s) for s in st.live if h in s] or [0.0]) for h in todo}
        order = sorted(todo, key=lambda h: (suspicion[h], h != self.reference, self._index[h]))
        for i, first in enumerate(order):
            for second in order[i + 1:]:
                if self._usable([first, second], st):
                    return [first, second]
        for host in todo:
            self._given_up[host] = "no run left that could prove it good or bad (no two hosts pass together)"
        return None

    def _plan_bisect(self, st):
        partners = self._partners(st)[:1]
        live = [s & st.unresolved for s in st.live if s & st.unresolved]
        if not live:
            pool = self._ordered(st.unresolved)
            if not pool:
                return None
            candidate = pool if len(pool) >= 2 else pool + partners
            return candidate if self._usable(candidate, st) else self._plan_pairwise(st)
        # the least suspected hosts first (in fewer and larger failing sets): a first half that passes proves the
        # most, and without a known-good host yet it is the likeliest to give one
        suspicion = {h: sum(1.0 / len(s) for s in live if h in s) for h in st.unresolved}

        def ordered(hosts):
            return sorted(hosts, key=lambda h: (suspicion[h], self._index[h]))

        by_size = sorted(live, key=lambda s: (len(s), min(self._index[h] for h in s)))
        candidates = []
        if partners:
            members = ordered(by_size[0])
            half = (len(members) + 1) // 2
            for part in (members[:half], members[half:]):   # the second half only when the first cannot run
                candidates.append(part if len(part) >= 2 else part + partners)
        else:
            # no known-good host yet, so no filler (a single host never runs alone): run the untested other halves
            # of failing sets first, each as likely as not clean, then halve the smallest failing set of 3 or more
            for small in by_size:
                for parent in by_size:
                    if small < parent and len(parent - small) >= 2:
                        candidates.append(self._ordered(parent - small))
            candidates.extend(ordered(s)[:(len(s) + 1) // 2] for s in by_size if len(s) >= 3)
        for candidate in candidates:
            if self._usable(candidate, st):
                return candidate
        return self._plan_pairwise(st)

    def next_run(self):
        """See the module docstring."""
        if self._pending is not None:
            return list(self._pending[0])
        if self.max_runs is not None and self.runs_used() >= self.max_runs:
            st = self._derive()
            self._stopped = "budget" if st.unresolved else None
            return None
        st = self._derive()
        if not st.unresolved:
            self._stopped = None if self._complete(st) else "no informative run"
            return None
        mode = self._mode(st)
        run = self._plan_bisect(st) if mode == "bisect" else self._plan_pairwise(st)
        if run is None:
            st = self._derive()
            self._stopped = "no informative run" if not self._complete(st) else None
            return None
        self._pending = (list(run), mode)
        return list(run)

    def _complete(self, st):
        return all(h in st.good or h in st.bad for h in self.hosts)

    # --- the answer ---------------------------------------------------------------------------------

    def result(self):
        """See the module docstring."""
        st = self._derive()
        bad = self._ordered(st.bad)
        undetermined = [h for h in self.hosts if h not in st.good and h not in st.bad]
        why = {}
        for host in undetermined:
            if host in st.flaky:
                why[host] = "contradictory runs: " + st.flaky[host]
            elif host in self._given_up:
                why[host] = self._given_up[host]
            elif self._stopped == "budget":
                why[host] = "the budget of %d runs was spent first" % self.max_runs
            else:
                why[host] = "not classified yet (isolation not finished)"
        excluded = []
        for host in bad:
            index, cleared = st.bad[host]
            run = self._run(index)
            proofs = ", ".join("%s %s" % (h, "given as known good" if i is None else "passed in run %d" % i)
                               for h, i in cleared.items())
            excluded.append({"host": host, "run": index, "hosts": list(run["hosts"]), "evidence": run["evidence"],
                             "cleared_by": dict(cleared),
                             "why": "run %d [%s] failed and %s" % (index, ", ".join(run["hosts"]), proofs)})
        counted = [run for run in self._runs if not run["trigger"]]
        decisive = sum(1 for run in counted if run["verdict"] != "unknown")
        used = list(dict.fromkeys(run["planner"] for run in counted if run["planner"] in STRATEGIES))
        trigger = bool(self._runs) and self._runs[0]["trigger"]
        strategy = "pairwise" if self.strategy == "auto" and self._switched_at == 0 else self.strategy
        bound, formula = _bound(strategy, len(self.hosts), len(bad), len(self.known_good), trigger)
        complete = not undetermined
        return {
            "hosts": list(self.hosts), "strategy": self.strategy, "used": used,
            "auto": None if self.strategy != "auto" else {"k_star": self._k_star, "switched_at": self._switched_at,
                                                          "why": self._auto_why or "bisection throughout"},
            "bad": bad, "good": self._ordered(st.good), "undetermined": undetermined, "undetermined_why": why,
            "excluded": excluded, "runs": [dict(run, hosts=list(run["hosts"])) for run in self._runs],
            "runs_used": len(counted), "runs_decisive": decisive, "runs_broken": len(counted) - decisive,
            "bound": bound, "bound_formula": formula,
            "within_bound": decisive <= bound, "complete": complete,
            "stopped": None if complete else (self._stopped or "not finished"), "conflicts": st.conflicts,
            "max_runs": self.max_runs,
        }

    def _run(self, index):
        return next(run for run in self._runs if run["index"] == index)


# --- judging one run -------------------------------------------------------------------------------------

# The tool's own failure lines (rccl-tests / nccl-tests src/common.h NCCLCHECK / HIPCHECK / TESTCHECK), NCCL's WARN
# lines, MPI_ABORT after them: the collective failed on a host, which is evidence.
_TOOL_FAILURE = re.compile(
    r"\bTest (?:NCCL|RCCL|HIP|CUDA) failure\b|\bTest failure\b|\b(?:NCCL|RCCL) WARN\b|\bnccl(?:System|Remote|Internal)"
    r"Error\b|remote process exited or there was a network error|\bMPI_ABORT\b|#wrong|\bOut of bounds values\s*:\s*"
    r"[1-9]|\bthe run failed before\b")


def _one_line(text):
    text = " ".join(str(text or "").split())
    return text if len(text) <= 2 * _QUOTE else text[:2 * _QUOTE - 3] + "..."


def _quote(text):
    text = " ".join(str(text).split())
    return text if len(text) <= _QUOTE else text[:_QUOTE - 3] + "..."


def _size_text(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return "%d %s" % (size // factor, unit)
    return "%d B" % size


def _criterion(criterion):
    """(kind, minimum GB/s, column, message bytes or None) of a criterion, or ValueError."""
    criterion = criterion or {}
    kind = criterion.get("kind") or "busbw_at_size"
    if kind not in ("busbw_at_size", "avg_busbw"):
        raise ValueError("criterion kind %r is not busbw_at_size or avg_busbw" % kind)
    bound = criterion.get("busbw_gbs")
    if bound is None:
        fails = [b for b in criterion.get("bounds") or [] if isinstance(b, dict) and b.get("below") == "fail"]
        bound = fails[0].get("busbw_gbs") if fails else None
    if bound is None:
        raise ValueError("criterion without busbw_gbs (nor a bounds entry with below: fail)")
    size = criterion.get("message_bytes")
    return kind, float(bound), criterion.get("column") or "in_place", None if size is None else int(size)


def judge_run(parsed, criterion, error=None, hosts=None):
    """See the module docstring."""
    kind, bound, column, size = _criterion(criterion)
    if parsed is None:
        lines = [line.strip() for line in str(error or "").splitlines() if line.strip().strip("-")]
        failed = [line for line in lines if _TOOL_FAILURE.search(line)]
        if failed:
            tool = [line for line in failed if "Test " in line and "failure" in line]
            return "fail", "the run failed in the collective: %s" % _quote((tool or failed)[0])
        return "unknown", "the run broke before rccl-tests reported (no evidence against any host): %s" % _quote(
            lines[0] if lines else "no output")
    ran_on = sorted(parsed.get("hosts") or [])
    where = "%d hosts, %s ranks" % (len(ran_on), parsed.get("n_ranks") or "?")
    if hosts is not None and ran_on and ran_on != sorted(hosts):
        return "unknown", "the output is of hosts %s, not of the run's %s" % (", ".join(ran_on), ", ".join(sorted(hosts)))
    if parsed.get("wrong_rows"):
        first = parsed["wrong_rows"][0]
        counts = ", ".join("%s %s" % (g.replace("_", "-"), first[g]) for g in ("out_of_place", "in_place") if g in first)
        return "fail", "#wrong values (data corrupted) in %d row(s), first at %s (%s) (%s)" % (
            len(parsed["wrong_rows"]), _size_text(first["size"]), counts, where)
    if parsed.get("failures"):
        first = parsed["failures"][0]
        return "fail", "the run failed in the collective: line %d %s (%s)" % (first["line"], _quote(first["text"]), where)
    oob = parsed.get("out_of_bounds")
    if parsed.get("failed") or (oob and not oob.get("ok")):
        reason = next((w for w in parsed.get("warnings") or [] if "fail" in w.lower()), "the run failed validation")
        return "fail", "%s (%s)" % (_quote(reason), where)
    if kind == "avg_busbw":
        value = parsed.get("avg_busbw")
        if value is None:
            return "unknown", "no '# Avg bus bandwidth' line: the run was cut before its end (%s)" % where
        what = "avg bus bandwidth %.2f GB/s" % value
    else:
        rows = parsed.get("rows") or []
        sizes = [r["size"] for r in rows if (r.get(column) or {}).get("busbw") is not None]
        wanted = size if size is not None else (max(sizes) if sizes else None)
        row = next((r for r in rows if r["size"] == wanted and (r.get(column) or {}).get("busbw") is not None), None)
        if row is None:
            return "unknown", "no %s row at %s to judge (%s)" % (
                column.replace("_", "-"), _size_text(wanted) if wanted is not None else "any size", where)
        value = row[column]["busbw"]
        what = "%s busbw %.2f GB/s at %s" % (column.replace("_", "-"), value, _size_text(row["size"]))
    if value >= bound:
        return "pass", "%s >= %g GB/s (%s)" % (what, bound, where)
    return "fail", "%s < %g GB/s (%s)" % (what, bound, where)
