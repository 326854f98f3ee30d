# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action: check role platform_checks' variables with the module's own check (``platform_checks.check_role_options``)
on the controller, then run the read-only platform_checks module: a wrong role variable is named before anything
reaches the node. A ``report_dir`` of ``None`` (the role's default) becomes ``checks`` under the run's report
directory (``platform_checks.default_report_dir``), returned as ``report_dir`` for the role's report task.

Without a ``knowledge`` argument the action passes the collection's own (``gpu_generations`` with ``pcie_health``,
``gpu_health`` and ``rocm_compatibility``: the loader's ``checks_knowledge``) and leaves it out of the returned ``invocation``: no per-node
templating of about 55 KB of data, and no copy of it in every node's registered result (docs/performance.md)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import (
    check_role_options,
    default_report_dir,
)
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import (
    CHECK_TABLES,
    KnowledgeError,
    checks_knowledge,
)

# The run's report directory, the first of these that is set: the one the collection's playbooks resolve
# (playbooks/vars/topotune.yml), else the collection-wide variable of a play of the user's own.
RUN_REPORT_DIRS = ("__topotune_report_dir", "topotune_report_dir")
# The knowledge the checks read (the module's ``knowledge`` option): the generations, with these tables as keys (the
# loader's one list).
KNOWLEDGE_TABLES = CHECK_TABLES


def collection_knowledge():
    """The module's ``knowledge`` from the collection's files; KnowledgeError with the reason."""
    return checks_knowledge()


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        if "report_dir" in args and args["report_dir"] is None:
            args["report_dir"] = default_report_dir(self._run_report_dir(task_vars))
        options = {key: args[key] for key in ("sysroot", "report_dir", "fail_on") if key in args}
        if "gpu_count" in args:
            options["gpu_count"] = _int(args["gpu_count"])
        if args.get("rdma_gid_index") is not None:
            options["rdma_gid_index"] = _int(args["rdma_gid_index"])
        try:
            check_role_options(options)
        except TopotuneError as err:
            return dict(result, failed=True, msg=str(err))
        own_knowledge = args.get("knowledge") is None
        if own_knowledge:
            try:
                args["knowledge"] = collection_knowledge()
            except KnowledgeError as err:
                return dict(result, failed=True, msg="platform_checks: cannot read the collection's knowledge: %s" % err)
        result.update(self._execute_module(module_name="topotune.instinct.platform_checks", module_args=args,
                                           task_vars=task_vars))
        module_args = (result.get("invocation") or {}).get("module_args")
        if own_knowledge and isinstance(module_args, dict):
            module_args["knowledge"] = "the collection's knowledge: gpu_generations, %s" % ", ".join(KNOWLEDGE_TABLES)
        result["report_dir"] = args.get("report_dir", "")
        return result

    def _run_report_dir(self, task_vars):
        for name in RUN_REPORT_DIRS:
            if task_vars.get(name) is not None:
                return self._templar.template(task_vars[name]) or ""
        return ""
