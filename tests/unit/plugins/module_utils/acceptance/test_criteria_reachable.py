"""Every acceptance criterion of the cards names a measurement a parser produces: the criteria and the parsers agree
on tool, test, case and metric (a criterion no parse can feed would stay `unknown` on every node, silently)."""

import glob
import os

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.tools import detect, parse
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
VIEW = load_knowledge("acceptance")
# The measurements no real capture holds whole, with why; each parser's own tests feed them from derived or
# synthetic outputs built from the tool's source (test_rvs.py).
NOT_CAPTURED = {
    ("rvs", "gpup", None, "gpus"): "the gpup capture is a cut excerpt: the GPU count is not concluded from it",
    ("rvs", "gpup", None, "errors"): "the same cut excerpt",
    ("rvs", "iet", None, "pass"): "no published iet output was found",
    ("rvs", "pebb", None, "measured"): "no published pebb output was found",
}


def _produced():
    commands = {c.get("command") for g in VIEW["generations"] for c in criteria_of(VIEW, g["name"])} - {None}
    keys = set()
    for path in glob.glob(os.path.join(REPO, "tests", "fixtures", "acceptance", "*.txt")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        if not detect(text):
            continue
        # rocblas-bench prints no precision: the card's commands give it, as the acceptance run does
        for command in [None] + sorted(c for c in commands if c.startswith("rocblas-bench")):
            result = parse(text, path, command=command)
            for one in [result] + list(result.get("others") or []):
                keys.update((one["tool"], one["test"], m["case"], m["metric"]) for m in one.get("measurements") or [])
    return keys


def test_each_criterion_is_fed_by_a_real_capture_or_is_listed_with_why():
    produced = _produced()
    missing = sorted({(c["tool"], c["test"], c.get("case"), c["metric"]) for g in VIEW["generations"]
                      for c in criteria_of(VIEW, g["name"])} - produced, key=str)
    assert missing == sorted(NOT_CAPTURED, key=str)
    # and the list holds nothing a capture now feeds
    assert not set(NOT_CAPTURED) & produced
