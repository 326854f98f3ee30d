#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the acceptance_collective action (plugins/action/acceptance_collective.py): it runs on the
controller and has no module code of its own."""

from __future__ import annotations

DOCUMENTATION = r"""
module: acceptance_collective
author: topotune contributors (@topotune)
short_description: Run rccl-tests all_reduce across nodes, judge it, and isolate the bad nodes when it fails
description:
  - >-
    An action (on the controller, no module code on the nodes): it runs one multi-node rccl-tests
    C(all_reduce_perf) over O(hosts) from the task's host, the launcher (use C(run_once) and C(delegate_to)): each
    run is M(ansible.builtin.command) with an argv (no shell) under coreutils C(timeout), built from a template of
    C(knowledge/acceptance.yml) C(collective) (C(mpirun), C(srun)) or the O(command) given.
  - >-
    The output is parsed (C(bench/rccl.py parse_perf): hosts, ranks, rows) and judged against the cluster criterion
    (C(plugin_utils/acceptance/isolation.py judge_run)): AMD's network validation page gives an all_reduce of 304
    GB/s for MI300X and 350 GB/s for MI350X and MI355X "for a two node cluster" (the knowledge holds MI300X and
    MI355X, O(criterion) serves others); topotune reads it as the in-place busbw of the 8 GiB row, for any number of
    nodes. C(pass), C(fail) (below it, failed in the collective, wrong
    data) or C(unknown) (the run broke: the launcher, ssh, a timeout; never evidence against a host).
  - >-
    When the full run fails, the bad-node isolation runs subsets of the hosts (O(strategy): two-node runs against a
    known-good reference, group bisection, or C(auto)), bounded (each run counted, O(max_runs) the budget), until
    every host is C(good), C(bad) or C(undetermined) (with why). A host is excluded only on evidence: a failing run
    whose every other member passed in another run.
  - >-
    With a C({hostfile}) template, each run's hostfile (C(host slots=N) per line, the names O(hostnames) gives) is
    written into a temporary directory under O(tmpdir) on the launcher (mode 0700, owned by the task's user) and
    the directory is removed at the end.
  - Check mode runs nothing and says what the full run would have run. Nothing on the nodes is changed.
version_added: "0.9.0"
options:
  hosts:
    description: Inventory names of the hosts of the full run (at least 2), in rank order (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  template:
    description:
      - >-
        C(mpirun) (Open MPI, C(mpirun --hostfile {hostfile} -np {np} --map-by ppr:{ppn}:node --bind-to none {export}
        {bind} {binary} -b 8 -e 8G -f 2 -g 1)), C(srun) (Slurm, inside an allocation holding the nodes: C(srun -N
        {nodes} --nodelist={hosts} --ntasks-per-node={ppn} --gpus-per-node={ppn} --cpu-bind=none {bind} {binary}
        ...)) or C(command) (O(command)).
    type: str
    choices: [mpirun, srun, command]
    default: mpirun
  command:
    description:
      - An argv template of your own (one word per item), used whatever O(template) says. Placeholders
        C({hostfile}), C({hosts}) (comma list), C({np}), C({ppn}), C({nodes}), C({binary}); the words C({bind}) and
        C({export}) expand to the wrapper (or nothing) and C(-x NAME) pairs.
    type: list
    elements: str
    default: []
  ppn:
    description: Ranks (GPUs) per node; default C(collective.ppn) of the knowledge (8).
    type: int
  binary:
    description: The rccl-tests binary (a path or a name on the launcher's PATH); default C(all_reduce_perf).
    type: str
  bind:
    description: The binding wrapper each rank runs under (C(launch_templates)); empty for none.
    type: str
    default: /usr/local/bin/topotune-bind
  export:
    description: Variables mpirun forwards to the ranks (C(-x NAME) for the C({export}) word).
    type: list
    elements: str
    default: []
  hostnames:
    description: Inventory name to the name MPI (and the rank lines of rccl-tests) reach, where they differ.
    type: dict
    default: {}
  generation:
    description: GPU generation of the hosts (C(MI300X)...), which picks the criterion.
    type: str
    default: ""
  criterion:
    description:
      - >-
        A criterion of your own instead of AMD's, C({busbw_gbs: N}) with optional C(column) (C(in_place)),
        C(message_bytes) (8 GiB) or C(kind: avg_busbw).
    type: dict
    default: {}
  strategy:
    description: Isolation strategy (C(plugin_utils/acceptance/isolation.py), C(docs/acceptance.md)).
    type: str
    choices: [auto, pairwise, bisect]
    default: auto
  max_runs:
    description: The isolation's budget of runs (broken runs counted); hosts left unclassified are undetermined.
    type: int
  reference:
    description: A host believed good, tried first as a partner (a hint, never trusted).
    type: str
  known_good:
    description: Hosts proven good by earlier evidence (trusted, never tested again).
    type: list
    elements: str
    default: []
  retries:
    description: How many times a run that broke is tried again.
    type: int
    default: 1
  timeout:
    description: Seconds each run may take (coreutils C(timeout) on the launcher); 0 for none.
    type: int
    default: 1800
  tmpdir:
    description: Directory on the launcher under which the hostfiles' temporary directory is made.
    type: str
    default: /tmp
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - name: AMD Instinct Customer Acceptance Guide, Network and Cluster Validation
    description: The RCCL multi-node test and its two-node criteria.
    link: https://instinct.docs.amd.com/projects/system-acceptance/en/latest/network/validation.html
"""

EXAMPLES = r"""
- name: All-reduce across the play's nodes from the first one, isolating the bad nodes
  topotune.instinct.acceptance_collective:
    hosts: "{{ ansible_play_hosts }}"
    template: mpirun
    generation: MI300X
    strategy: auto
    max_runs: 20
  run_once: true
  delegate_to: "{{ ansible_play_hosts | first }}"
  register: collective

- name: Under Slurm, inside an allocation
  topotune.instinct.acceptance_collective:
    hosts: "{{ ansible_play_hosts }}"
    template: srun
    generation: MI355X
  run_once: true
"""

RETURN = r"""
collective:
  description:
    - The record C(collective/acceptance.json) holds (C(plugin_utils/acceptance/collective.py summary)), C(schema_version) 1.
    - C(status) pass, fail, unknown or skipped; C(criterion) with its C(sources); C(full_run) (C(hosts), C(argv),
      C(verdict), C(evidence), C(rc), C(seconds)); C(isolation) the stepper's C(result()) (each run with its C(argv))
      or null; C(bad), C(good), C(undetermined); C(excluded) one entry per bad host (C(host), C(evidence), C(why),
      C(run), C(hosts)).
  returned: always
  type: dict
  sample:
    schema_version: 1
    status: fail
    criterion: {busbw_gbs: 304, column: in_place, message_bytes: 8589934592, generation: MI300X}
    full_run: {verdict: fail, evidence: "in-place busbw 281.07 GB/s at 8 GiB < 304 GB/s (4 hosts, 32 ranks)"}
    bad: [node3]
    good: [node1, node2, node4]
    undetermined: []
    excluded:
      - host: node3
        evidence: "in-place busbw 281.07 GB/s at 8 GiB < 304 GB/s (2 hosts, 16 ranks)"
        why: "run 2 [node3, node1] failed and node1 passed in run 1"
lines:
  description: One line per excluded (or undetermined) host with its evidence.
  returned: always
  type: list
  elements: str
excluded:
  description: The excluded hosts' inventory names.
  returned: always
  type: list
  elements: str
"""
