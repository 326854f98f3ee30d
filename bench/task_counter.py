# Benchmark-only callback: not part of the collection, loaded by bench/cluster_bench.py through
# ANSIBLE_CALLBACK_PLUGINS (a directory holding a link to this file) + ANSIBLE_CALLBACKS_ENABLED=task_counter.
import json
import os
from collections import defaultdict

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: task_counter
type: aggregate
short_description: count tasks and module invocations per host (bench/cluster_bench.py)
description:
  - Per host, counts task results that ran (ok, changed, failed, unreachable), results that were skipped, and
    module invocations. A module invocation is one execution of a module, that is a task that ran, or each item of a
    looped task that ran; skipped tasks and items are not. Invocations are split into C(remote) (on the node)
    and C(controller) (delegated to localhost), and tasks whose action never leaves the controller
    (set_fact, debug, assert, include_role, ...) are counted as tasks but not as module invocations, nor is a topotune
    action whose result carries no module invocation (a plan computed on the controller, such as rocm_env's when the
    play's discovery gives the topology).
  - Writes JSON to the path in the environment variable C(TOPOTUNE_TASK_COUNTER_OUT) at the end of the run.
requirements:
  - enabled with C(ANSIBLE_CALLBACKS_ENABLED=task_counter)
"""

# Actions served by the controller alone: no module is shipped to or run on the node.
CONTROLLER_ONLY = frozenset(
    "ansible.builtin." + name if "." not in name else name
    for name in (
        "set_fact", "debug", "assert", "fail", "meta", "include_role", "import_role", "include_tasks",
        "import_tasks", "include_vars", "add_host", "group_by", "set_stats", "pause", "validate_argument_spec",
        # an action that writes on the controller in its own process, running no module
        "topotune.instinct.report_files",
    )
)


COLLECTION = "topotune.instinct."


def _action(task):
    action = task.action or ""
    return action if "." in action else "ansible.builtin." + action


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_counter"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.hosts = defaultdict(lambda: {"tasks": 0, "skipped": 0, "modules_remote": 0, "modules_controller": 0,
                                          "controller_only": 0, "failed": 0, "unreachable": 0})

    def _count(self, result, outcome):
        row = self.hosts[result._host.get_name()]
        task = result._task
        if outcome == "skipped":
            row["skipped"] += 1
            return
        row["tasks"] += 1
        by_action = row.setdefault("by_action", {})
        by_action[_action(task)] = by_action.get(_action(task), 0) + 1
        if outcome in ("failed", "unreachable"):
            row[outcome] += 1
        action = _action(task)
        if action in CONTROLLER_ONLY:
            row["controller_only"] += 1
            return
        res = result._result if isinstance(result._result, dict) else {}
        if action.startswith(COLLECTION) and "invocation" not in res:
            # a topotune action that computed its plan on the controller and ran no module on the node (a module's
            # result always carries its invocation, and the actions that run one return it)
            row["controller_only"] += 1
            return
        items = res.get("results") if isinstance(res.get("results"), list) and task.loop else None
        runs = 1 if items is None else sum(1 for item in items if not (isinstance(item, dict) and item.get("skipped")))
        delegated = (res.get("_ansible_delegated_vars") or {}).get("ansible_host") or task.delegate_to
        key = "modules_controller" if delegated in ("localhost", "127.0.0.1") else "modules_remote"
        row[key] += runs

    def v2_runner_on_ok(self, result):
        self._count(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_playbook_on_stats(self, stats):
        self._write()

    def _write(self):
        path = os.environ.get("TOPOTUNE_TASK_COUNTER_OUT")
        if not path:
            return
        for row in self.hosts.values():
            row["modules"] = row["modules_remote"] + row["modules_controller"]
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"hosts": dict(self.hosts)}, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
