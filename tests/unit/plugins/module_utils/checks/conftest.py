"""Shared by the tests of the checks: what docs/health-checks.md documents (the tests that hold the code to it), and
the platform checks of a simulated profile's tree, run once per session."""

import os
import re

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import checks_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
HEALTH_CHECKS_MD = os.path.join(REPO, "docs", "health-checks.md")
COVERAGE_HEADING = "## Coverage: ROCm CVS and AMD's acceptance guide"


class HealthChecksDoc:
    """docs/health-checks.md (or ``text`` in its form) split into its check tables and its coverage section.

    ``documented_ids``: the check ids of the check tables (their first column, asides in parentheses left out),
    ``prefix_*`` patterns included; the coverage section is left out (its first column names CVS tests, not
    topotune checks).
    ``coverage_lines``: the lines of the coverage section, from its heading to the next ``## `` heading; ``text``:
    the whole text."""

    coverage_heading = COVERAGE_HEADING

    def __init__(self, text):
        self.text = text
        lines = text.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith(COVERAGE_HEADING)), len(lines))
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        self.coverage_lines = lines[start:end]
        # the first cell, without its asides: "`pci_acs` (CVS `test_check_pci_acs`)" documents pci_acs only
        rows = [re.sub(r"\([^)]*\)", "", line.split("|")[1]) for line in lines[:start] + lines[end:]
                if line.startswith("| `")]
        self.documented_ids = {name for row in rows for name in re.findall(r"`([a-z0-9_]+\*?)`", row)}

    def is_documented(self, check_id):
        return check_id in self.documented_ids or any(
            name.endswith("*") and check_id.startswith(name[:-1]) for name in self.documented_ids)


@pytest.fixture(scope="session")
def health_checks_doc():
    """``health_checks_doc(text=None)``: the ``HealthChecksDoc`` of docs/health-checks.md, or of ``text``."""
    def parse(text=None):
        if text is None:
            with open(HEALTH_CHECKS_MD, encoding="utf-8") as handle:
                text = handle.read()
        return HealthChecksDoc(text)
    return parse


@pytest.fixture(scope="session")
def node_checks(sim_tree):
    """``node_checks(profile)``: ``(facts, {check id: result})`` of ``platform_checks.gather`` and ``run_checks`` on
    the profile's tree with the knowledge the module's action passes (``checks_knowledge``), once per session. Read
    them, never change them (copy first)."""
    cache = {}
    knowledge = checks_knowledge()

    def get(name):
        if name not in cache:
            facts = pc.gather(sim_tree(name))
            cache[name] = (facts, {r["id"]: r for r in pc.run_checks(facts, knowledge)})
        return cache[name]
    return get
