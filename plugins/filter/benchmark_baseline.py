# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: a node's benchmark run against the baseline stored for it, and the record that becomes its next baseline."""

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_baseline
author: topotune contributors (@topotune)
short_description: Compare a benchmark run with the node's stored baseline; the record to store as the next one
description:
  - >-
    The source article's "record baseline metrics" and "verify": takes a node's M(topotune.instinct.rccl_bench) result
    and the text of its stored baseline (C(benchmark/baseline/<host>.json) on the controller, empty when there is
    none), and compares the run's in-place busbw and time at the baseline's headline size (8 GiB when both runs have
    it), and its small-message times (up to 64 KiB), with the baseline's.
  - >-
    C(status) is V(improved) or V(regressed) when busbw at that size (or, when busbw does not move, the
    small-message time) changed by 5 % or more, V(unchanged) within 5 %, V(recorded) when there was no baseline, and
    V(unknown) with the reason when the run gave no figures, a run failed validation or the stored file is not a
    baseline.
  - >-
    C(record) is the run as a baseline (schema 1) to store for the next run; null when the run gave no figures, when
    O(keep) is set, when the run failed validation, or when the stored file cannot be read as a baseline (it is left
    as it is, never overwritten).
options:
  _input:
    description: The registered M(topotune.instinct.rccl_bench) result of the node.
    type: dict
    required: true
  stored:
    description: The stored baseline's text (C(lookup('ansible.builtin.file', path, errors='ignore'))); empty for none.
    type: str
    required: true
  host:
    description: The node's inventory name (recorded in the baseline).
    type: str
    required: true
  recorded_at:
    description: When this run was made (ISO 8601), recorded in the baseline.
    type: str
    required: true
  keep:
    description: Keep the stored baseline (a reference run to compare every later run with), so C(record) is null.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Compare with the stored baseline
  ansible.builtin.set_fact:
    baseline: >-
      {{ rccl_run | topotune.instinct.benchmark_baseline(
           lookup('ansible.builtin.file', report_dir ~ '/benchmark/baseline/' ~ inventory_hostname ~ '.json',
                  errors='ignore') | default('', true),
           inventory_hostname, now(utc=true).isoformat()) }}
"""

RETURN = r"""
_value:
  description: C(status), C(reason), C(delta) (C(busbw_pct), C(time_pct), C(small_time_pct), C(sizes), C(verdict)),
    C(baseline) (the stored run's date, command and headline figures), C(record) (to store, or null) and C(stored)
    (whether C(record) replaces the baseline).
  type: dict
  sample: {status: improved, reason: "against the baseline of 2026-12-07T10:00:00+00:00: busbw at 8 GiB within 5 %;
           small-message time -33.3 %", stored: true}
"""

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.bench.compare import (
    baseline_record,
    compare_baseline,
    figures,
)


def benchmark_baseline(run, stored, host, recorded_at, keep=False):
    if not isinstance(run, dict):
        raise AnsibleFilterError("benchmark_baseline: input must be the rccl_bench result, got %s" % type(run).__name__)
    current = None
    if isinstance(run.get("result"), dict):
        try:
            current = figures(run["result"])
        except ValueError:
            current = None
    unreadable = None
    baseline = None
    if stored and str(stored).strip():
        try:
            baseline = json.loads(stored)
        except ValueError as err:
            unreadable = "the stored baseline of %s is not JSON (%s): remove it to record a new one" % (host, err)
    if unreadable:
        out = {"status": "unknown", "reason": unreadable, "delta": None, "baseline": None}
    else:
        # JSON that is not an object (a list, a number) is no baseline: compared as one of another schema
        stored_record = baseline if isinstance(baseline, dict) or baseline is None else {"schema_version": None}
        out = compare_baseline(current, stored_record)
    keepable = unreadable is None and not (baseline and out["status"] == "unknown" and out["delta"] is None)
    record = None
    # a run that failed validation is no measurement: it never becomes the baseline
    if current is not None and not current["failed"] and not keep and keepable:
        record = baseline_record(host, current, recorded_at, run.get("cmd") or [],
                                 (run.get("binding") or {}).get("comparison") if isinstance(run.get("binding"), dict)
                                 else None)
    out.update(record=record, stored=record is not None)
    return out


class FilterModule:
    def filters(self):
        return {"benchmark_baseline": benchmark_baseline}
