"""env_rules: every knowledge rule fires on its target and stays quiet otherwise; unsafe values are refused.

Rules that depend on the topology (xGMI peers, MEC firmware) are tested on the topology models of the simulated
profiles (the ``sim_model`` fixture), changed where a row needs another firmware or ROCm version.
"""

import copy
import os

import pytest

from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.env import rules as env_rules

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _load(name):
    return load_knowledge(name)


KNOWLEDGE = _load("env_vars")
PROFILES = _load("env_profiles")

MI250 = {"gfx": ["gfx90a"], "rocm": "6.2.1", "xgmi": True, "fabric": "none"}
MI300X = {"gfx": ["gfx942"], "rocm": "6.4.0", "xgmi": True, "fabric": "none"}
MI355X = {"gfx": ["gfx950"], "rocm": "7.0.0", "xgmi": True, "fabric": "none"}
PCIE = {"gfx": ["gfx90a"], "rocm": "6.2.1", "xgmi": False, "fabric": "none"}
CONSUMER = {"gfx": ["gfx1030"], "rocm": "6.2.1", "xgmi": False, "fabric": "none"}
UNKNOWN = {"gfx": [], "rocm": None, "xgmi": None, "fabric": None}


def ctx(base, **changes):
    merged = dict(base)
    merged.update(changes)
    return merged


class Sim:
    """A node described by a simulated profile's topology model: ``firmware`` {GPU index: MEC version or None}
    and ``drop_links`` (number of links removed) change the model before the context is built from it."""

    def __init__(self, profile, rocm="6.4.2", fabric="none", firmware=None, drop_links=0):
        self.profile, self.rocm, self.fabric = profile, rocm, fabric
        self.firmware, self.drop_links = firmware or {}, drop_links

    def model(self, sim_model):
        model = copy.deepcopy(sim_model(self.profile))
        for gpu in model["gpus"]:
            if gpu["index"] in self.firmware:
                mec = self.firmware[gpu["index"]]
                gpu["firmware"] = None if mec is None else {"mec": mec}
        if self.drop_links:
            del model["links"][-self.drop_links :]
        return model

    def context(self, sim_model):
        return env_rules.context_from_topology(self.model(sim_model), self.rocm, self.fabric)

    def __repr__(self):
        return "Sim(%s, rocm=%s, firmware=%s)" % (self.profile, self.rocm, self.firmware)


SPX = "mi300x-8gpu-spx"  # 8 x gfx942, every pair one direct xGMI hop, MEC 177
CPX = "mi300x-8gpu-cpx"  # 63 CPX partitions of gfx942, all direct xGMI, no firmware in the capture
HIVES = "mi210-8gpu-2hive"  # 8 x gfx90a in two xGMI hives joined by PCIe
MI250X = "mi250x-8gcd"  # 8 GCDs of gfx90a, 12 pairs direct xGMI and 16 pairs two xGMI hops apart


def node(spec, sim_model):
    """The rule context of a table row: a Sim, or a hand-written context dict."""
    return spec.context(sim_model) if isinstance(spec, Sim) else spec


def fired(result):
    """{rule id: action} of every finding."""
    found = {}
    for kind, action in (("refusals", "refuse"), ("warnings", "warn"), ("drops", "drop"), ("notes", "note")):
        for entry in result[kind]:
            found[entry["rule"]] = action
    return found


# (rule id, variable, value, context that targets the rule, context where it must stay quiet)
RULES = [
    ("hsa-override-native", "HSA_OVERRIDE_GFX_VERSION", "9.0.0", MI250, CONSUMER),
    ("hsa-override-unverified", "HSA_OVERRIDE_GFX_VERSION", "10.3.0", CONSUMER, MI300X),
    ("hcc-target-build-only", "HCC_AMDGPU_TARGET", "gfx942", Sim(SPX), None),
    ("hcc-target-misses-node-gfx", "HCC_AMDGPU_TARGET", "gfx90a", Sim(SPX), Sim(MI250X)),
    ("sdma-off-outside-debug", "HSA_ENABLE_SDMA", "0", ctx(MI250, profile="debug"), ctx(MI250, profile="debug", debug=True)),
    ("fine-grain-pcie-all-xgmi", "HSA_FORCE_FINE_GRAIN_PCIE", "1", Sim(SPX), Sim(HIVES)),
    ("dev-kernarg-default", "HIP_FORCE_DEV_KERNARG", "1", MI300X, ctx(MI300X, rocm="6.1.3")),
    ("scratch-reclaim-needed-mec", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(SPX, firmware={3: 176}), Sim(SPX)),
    ("scratch-reclaim-missing-mec", "HSA_NO_SCRATCH_RECLAIM", "0", Sim(SPX, firmware={3: 176}), Sim(SPX)),
    ("scratch-reclaim-needed-rocm", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(SPX, rocm="6.4.1"), Sim(SPX)),
    ("scratch-reclaim-missing-rocm", "HSA_NO_SCRATCH_RECLAIM", "0", Sim(SPX, rocm="6.4.1"), Sim(SPX)),
    ("scratch-reclaim-fixed-profile", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(SPX), Sim(SPX, rocm="6.4.1")),
    ("scratch-reclaim-fixed", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(SPX), Sim(SPX, firmware={0: 100})),
    ("scratch-reclaim-mec-unknown", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(CPX), Sim(MI250X)),
    ("scratch-reclaim-rocm-unknown", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(SPX, rocm=None), Sim(SPX)),
    ("scratch-reclaim-gfx90a", "HSA_NO_SCRATCH_RECLAIM", "1", Sim(MI250X, rocm="7.13.0"), Sim(MI250X, rocm="7.2.0")),
    ("scratch-reclaim-missing-gfx90a", "HSA_NO_SCRATCH_RECLAIM", "0", Sim(HIVES, rocm="7.14"), Sim(SPX, rocm="7.14")),
    ("proto-ll128-unsafe", "NCCL_PROTO", "LL128", ctx(MI250, rocm="5.7.1"), MI300X),
    ("proto-ll128-gfx942", "NCCL_PROTO", "LL128", MI300X, ctx(MI250, rocm="5.7.1")),
    ("proto-ll128-redundant", "NCCL_PROTO", "LL128", ctx(MI250, rocm="6.2"), MI300X),
    ("proto-forced", "NCCL_PROTO", "Simple", MI300X, None),
    ("ll128-force-gfx942", "RCCL_LL128_FORCE_ENABLE", "1", MI300X, MI355X),
    ("ll128-force-enable", "RCCL_LL128_FORCE_ENABLE", "1", CONSUMER, MI300X),
    ("gdr-level-integer", "NCCL_NET_GDR_LEVEL", "3", MI250, None),
    ("nsocks-on-rdma", "NCCL_NSOCKS_PERTHREAD", "4", ctx(MI250, fabric="rdma"), ctx(MI250, fabric="socket")),
    ("socket-nthreads-on-rdma", "NCCL_SOCKET_NTHREADS", "4", ctx(MI250, fabric="rdma"), ctx(MI250, fabric="socket")),
    ("nchannels-default-gfx950", "NCCL_MIN_NCHANNELS", "112", MI355X, MI300X),
    ("msccl-removed", "RCCL_MSCCL_ENABLE", "0", ctx(MI300X, rocm="7.13.0"), MI300X),
    ("mscclpp-threshold-removed", "RCCL_MSCCLPP_THRESHOLD", "2147483648", ctx(MI300X, rocm="7.14"), MI300X),
    ("mscclpp-read-removed", "MSCCLPP_READ_ALLRED", "1", ctx(MI300X, rocm="7.14"), MI300X),
    ("rocr-visible-node-wide", "ROCR_VISIBLE_DEVICES", "0,1", MI300X, None),
    ("hip-visible-node-wide", "HIP_VISIBLE_DEVICES", "0,1,2,3", MI250, None),
    ("ib-hca-prefix-match", "NCCL_IB_HCA", "mlx5_0,mlx5_1", MI300X, None),
    ("gid-index-node-wide", "NCCL_IB_GID_INDEX", "3", MI300X, None),
    ("device-ordinal-opencl-only", "GPU_DEVICE_ORDINAL", "0,1", MI300X, None),
]
# Rules that read where the value comes from: the row's value is a profile's (default: an override).
ORIGIN = {"scratch-reclaim-fixed-profile": "profile"}

# Values that are valid and stay quiet for the rules of their variable (in the given context).
QUIET_VALUES = [
    ("HSA_ENABLE_SDMA", "1", MI250),
    ("HSA_FORCE_FINE_GRAIN_PCIE", "0", MI250),
    ("HSA_NO_SCRATCH_RECLAIM", "0", MI250),
    ("HSA_NO_SCRATCH_RECLAIM", "1", MI250),
    ("HIP_FORCE_DEV_KERNARG", "0", MI300X),
    ("NCCL_PROTO", "^LL128", MI300X),
    ("NCCL_NET_GDR_LEVEL", "PHB", MI250),
    ("NCCL_MIN_NCHANNELS", "64", MI355X),
    ("RCCL_LL128_FORCE_ENABLE", "0", MI300X),
    ("NCCL_ALGO", "Tree", MI250),
    ("NCCL_DEBUG", "INFO", MI250),
    ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1", MI300X),
    ("NCCL_IB_HCA", "^=mlx5_1,mlx5_4", MI300X),
]


def test_every_knowledge_rule_is_in_the_table():
    ids = {rule["id"] for spec in KNOWLEDGE["variables"].values() for rule in spec.get("rules") or []}
    assert ids == {row[0] for row in RULES}


def test_every_variable_and_rule_has_a_source():
    for name, spec in KNOWLEDGE["variables"].items():
        assert spec.get("source"), name
        assert spec.get("meaning"), name
        assert spec.get("valid"), name
        for rule in spec.get("rules") or []:
            assert rule.get("source") and rule.get("reason"), (name, rule["id"])
            assert rule["action"] in env_rules.ACTIONS
            assert isinstance(rule.get("allowable"), bool), (name, rule["id"])
    for profile in PROFILES["profiles"].values():
        for name, entry in profile["variables"].items():
            assert entry.get("source") and entry.get("why"), name
            assert name in KNOWLEDGE["variables"], name


@pytest.mark.parametrize("rule_id,name,value,target,_quiet", RULES, ids=[r[0] for r in RULES])
def test_rule_fires_on_its_target(rule_id, name, value, target, _quiet, sim_model):
    origins = {name: ORIGIN.get(rule_id, "override")}
    result = env_rules.validate({name: value}, {}, node(target, sim_model), KNOWLEDGE, origins)
    assert fired(result).get(rule_id), result
    entry = next(e for k in ("refusals", "warnings", "drops", "notes") for e in result[k] if e["rule"] == rule_id)
    assert name in entry["reason"] and entry["source"]
    assert "{" not in entry["reason"], entry["reason"]  # every placeholder filled in


@pytest.mark.parametrize(
    "rule_id,name,value,_target,quiet", [r for r in RULES if r[4] is not None], ids=[r[0] for r in RULES if r[4] is not None]
)
def test_rule_stays_quiet_elsewhere(rule_id, name, value, _target, quiet, sim_model):
    origins = {name: ORIGIN.get(rule_id, "override")}
    assert rule_id not in fired(env_rules.validate({name: value}, {}, node(quiet, sim_model), KNOWLEDGE, origins))


@pytest.mark.parametrize("name,value,context", QUIET_VALUES)
def test_sound_values_raise_nothing(name, value, context):
    result = env_rules.validate({name: value}, {}, context, KNOWLEDGE)
    assert fired(result) == {}
    assert result["rendered"] == {name: value}


def test_unknown_facts_never_drop_or_claim_support():
    result = env_rules.validate(
        {
            "HIP_FORCE_DEV_KERNARG": "1",
            "HSA_OVERRIDE_GFX_VERSION": "9.0.0",
            "NCCL_PROTO": "LL128",
            "HSA_FORCE_FINE_GRAIN_PCIE": "1",
            "HSA_NO_SCRATCH_RECLAIM": "1",
        },
        {},
        UNKNOWN,
        KNOWLEDGE,
    )
    assert fired(result) == {"hsa-override-unverified": "warn", "proto-ll128-unsafe": "refuse"}


# LL128 on gfx942 (MI300X, MI308X, MI325X, MI300A): AMD's own multi-node scripts force it, RCCL has had it there since
# RCCL 2.22.3 (ROCm 6.4.2): a warning that says so, never a refusal. (variable, value, rule)
LL128_GFX942 = [
    ("RCCL_LL128_FORCE_ENABLE", "1", "ll128-force-gfx942"),
    ("NCCL_PROTO", "LL128", "proto-ll128-gfx942"),
    ("NCCL_PROTO", "LL,LL128,Simple", "proto-ll128-gfx942"),
]


@pytest.mark.parametrize("spec", [MI300X, ctx(MI300X, rocm="6.4.2"), ctx(MI300X, rocm="7.0.2"), ctx(MI300X, rocm=None),
                                  Sim(SPX), Sim(CPX)], ids=["6.4.0", "6.4.2", "7.0.2", "rocm-unknown", "spx", "cpx"])
@pytest.mark.parametrize("name,value,rule", LL128_GFX942, ids=[r[0] + "=" + r[1] for r in LL128_GFX942])
def test_ll128_on_gfx942_is_a_warning_that_says_why(name, value, rule, spec, sim_model):
    result = env_rules.validate({name: value}, {}, node(spec, sim_model), KNOWLEDGE)
    assert result["refusals"] == [] and fired(result) == {rule: "warn"}
    assert result["rendered"] == {name: value}
    reason, source = result["warnings"][0]["reason"], result["warnings"][0]["source"]
    # why: RCCL's own release note, and AMD's scripts that set it
    assert "RCCL 2.22.3 (ROCm 6.4.2" in reason and "container-toolkit" in reason and "maxtext-slurm" in reason
    assert "CHANGELOG.md (RCCL 2.22.3 for ROCm 6.4.2" in source and "rccl_tests_sbatch.sh" in source
    if name == "NCCL_PROTO":
        # NCCL_PROTO cannot turn LL128 on by itself: the warning points at the variable AMD's scripts use
        assert "no algorithm/protocol available" in reason and "RCCL_LL128_FORCE_ENABLE=1" in reason


def test_ll128_where_rccl_has_none():
    # a GPU without RCCL's LL128 path: forcing it does nothing (a warning), restricting NCCL_PROTO to it breaks
    # every collective (still a refusal), and unknown GPUs are not taken for gfx942
    force = env_rules.validate({"RCCL_LL128_FORCE_ENABLE": "1"}, {}, CONSUMER, KNOWLEDGE)
    assert fired(force) == {"ll128-force-enable": "warn"} and "does nothing" in force["warnings"][0]["reason"]
    proto = env_rules.validate({"NCCL_PROTO": "LL128"}, {}, CONSUMER, KNOWLEDGE)
    assert fired(proto) == {"proto-ll128-unsafe": "refuse"} and "no algorithm/protocol available" in (
        proto["refusals"][0]["reason"])
    unknown = env_rules.validate({"RCCL_LL128_FORCE_ENABLE": "1", "NCCL_PROTO": "LL128"}, {}, UNKNOWN, KNOWLEDGE)
    assert fired(unknown) == {"ll128-force-enable": "warn", "proto-ll128-unsafe": "refuse"}
    # gfx950 from ROCm 7.0 and gfx90a from 6.1 run LL128 by default: forcing it is quiet
    assert fired(env_rules.validate({"RCCL_LL128_FORCE_ENABLE": "1"}, {}, MI355X, KNOWLEDGE)) == {}


# HSA_NO_SCRATCH_RECLAIM on real model shapes: (node, value, origin, the one rule that fires or None, rendered)
SCRATCH_RECLAIM = [
    (Sim(SPX), "1", "profile", "scratch-reclaim-fixed-profile", False),
    (Sim(SPX, rocm="7.0.2"), "1", "override", "scratch-reclaim-fixed", True),
    (Sim(SPX), "0", "override", None, True),
    (Sim(SPX, firmware={5: 150}), "1", "profile", "scratch-reclaim-needed-mec", True),
    (Sim(SPX, firmware={5: 150}), "0", "override", "scratch-reclaim-missing-mec", True),
    (Sim(SPX, rocm="6.4.1"), "1", "profile", "scratch-reclaim-needed-rocm", True),
    (Sim(SPX, rocm="6.4.1"), "0", "override", "scratch-reclaim-missing-rocm", True),
    (Sim(SPX, rocm=None), "1", "profile", "scratch-reclaim-rocm-unknown", True),
    (Sim(SPX, firmware={2: None}), "1", "profile", "scratch-reclaim-mec-unknown", True),
    (Sim(CPX), "1", "profile", "scratch-reclaim-mec-unknown", True),
    (Sim(CPX), "0", "override", None, True),
    (Sim(MI250X, rocm="6.2.1"), "1", "profile", None, True),
    (Sim(MI250X, rocm="7.14.0"), "1", "profile", "scratch-reclaim-gfx90a", True),
    (Sim(HIVES, rocm="7.13"), "0", "override", "scratch-reclaim-missing-gfx90a", True),
]


@pytest.mark.parametrize("spec,value,origin,rule,rendered", SCRATCH_RECLAIM, ids=[repr(r[0]) + r[1] + r[2] for r in SCRATCH_RECLAIM])
def test_scratch_reclaim_follows_the_lowest_mec_firmware_and_rocm(spec, value, origin, rule, rendered, sim_model):
    result = env_rules.validate(
        {"HSA_NO_SCRATCH_RECLAIM": value}, {}, spec.context(sim_model), KNOWLEDGE, {"HSA_NO_SCRATCH_RECLAIM": origin}
    )
    assert set(fired(result)) == ({rule} if rule else set()), result
    assert ("HSA_NO_SCRATCH_RECLAIM" in result["rendered"]) == rendered
    reasons = " ".join(e["reason"] for k in ("warnings", "drops", "notes") for e in result[k])
    expected = {
        "scratch-reclaim-needed-mec": "lowest MEC firmware on this node is 150, below 177 (gfx942)",
        "scratch-reclaim-missing-mec": "MEC firmware 150 below 177 (gfx942)",
        "scratch-reclaim-fixed-profile": "MEC firmware (177) is at least 177 and ROCm 6.4.2",
        "scratch-reclaim-fixed": "MEC firmware (177) is at least 177 and ROCm 7.0.2",
        "scratch-reclaim-needed-rocm": "ROCm 6.4.1 is older than 6.4.2",
        "scratch-reclaim-mec-unknown": "firmware unknown",
        "scratch-reclaim-rocm-unknown": "ROCm version is not known",
    }.get(rule, "")
    assert expected in reasons, reasons


def test_scratch_reclaim_thresholds_are_data_per_gfx():
    """gfx950's fixed MEC version is 24, gfx942's 177; a node whose GPUs map to two thresholds gets no verdict."""
    gfx950 = {"gfx": ["gfx950"], "rocm": "7.0.2", "mec_fw": 24}
    assert fired(env_rules.validate({"HSA_NO_SCRATCH_RECLAIM": "1"}, {}, gfx950, KNOWLEDGE)) == {"scratch-reclaim-fixed": "warn"}
    result = env_rules.validate({"HSA_NO_SCRATCH_RECLAIM": "1"}, {}, ctx(gfx950, mec_fw=23), KNOWLEDGE)
    assert "below 24 (gfx950)" in result["notes"][0]["reason"]
    mixed = {"gfx": ["gfx942", "gfx950"], "rocm": "7.0.2", "mec_fw": 100}
    assert fired(env_rules.validate({"HSA_NO_SCRATCH_RECLAIM": "1"}, {}, mixed, KNOWLEDGE)) == {}


SOURCE_ARTICLE = {
    "HIP_VISIBLE_DEVICES": "0,1,2,3",
    "NCCL_DEBUG": "INFO",
    "NCCL_NET_GDR_LEVEL": "3",
    "HSA_ENABLE_SDMA": "0",
    "HSA_FORCE_FINE_GRAIN_PCIE": "1",
    "HSA_OVERRIDE_GFX_VERSION": "9.0.0",
    "HCC_AMDGPU_TARGET": "gfx90a",
    "NCCL_ALGO": "Tree",
    "NCCL_PROTO": "LL128",
    "NCCL_NSOCKS_PERTHREAD": "4",
}
# The article's node: 8-GCD MI250X (gfx90a; 12 GCD pairs one xGMI hop apart, 16 pairs two), ROCm 5.7,
# InfiniBand between nodes.
ARTICLE_NODE = Sim(MI250X, rocm="5.7.1", fabric="rdma")


def test_source_article_block_yields_exactly_its_refusals_and_warnings(sim_model):
    result = env_rules.resolve("rdma-training", SOURCE_ARTICLE, {}, ARTICLE_NODE.context(sim_model), KNOWLEDGE, PROFILES)
    assert [(e["variable"], e["rule"]) for e in result["refusals"]] == [
        ("HSA_OVERRIDE_GFX_VERSION", "hsa-override-native"),
        ("NCCL_PROTO", "proto-ll128-unsafe"),
    ]
    assert [(e["variable"], e["rule"]) for e in result["warnings"]] == [
        ("HCC_AMDGPU_TARGET", "hcc-target-build-only"),
        ("HIP_VISIBLE_DEVICES", "hip-visible-node-wide"),
        ("HSA_ENABLE_SDMA", "sdma-off-outside-debug"),
        ("NCCL_NET_GDR_LEVEL", "gdr-level-integer"),
        ("NCCL_NSOCKS_PERTHREAD", "nsocks-on-rdma"),
    ]
    assert "gfx900" in result["refusals"][0]["reason"] and "9.0.10" in result["refusals"][0]["reason"]
    assert "data corruption" in result["refusals"][1]["reason"]
    assert "does nothing at run time" in result["warnings"][0]["reason"]
    assert "HSA_OVERRIDE_GFX_VERSION" not in result["rendered"] and "NCCL_PROTO" not in result["rendered"]
    assert result["rendered"]["NCCL_ALGO"] == "Tree" and result["rendered"]["NCCL_DEBUG"] == "INFO"
    # MI250X has GCD pairs two xGMI hops apart: topotune does not call HSA_FORCE_FINE_GRAIN_PCIE unneeded there
    assert result["rendered"]["HSA_FORCE_FINE_GRAIN_PCIE"] == "1" and result["context"]["all_peers_xgmi"] is False
    # the profile's MI300X-only channel count is dropped on gfx90a, not warned about
    assert [(e["variable"], e["rule"]) for e in result["drops"]] == [("NCCL_MIN_NCHANNELS", "applies-to")]


@pytest.mark.parametrize(
    "spec,warned",
    [(Sim(SPX), True), (Sim(CPX), True), (Sim(HIVES), False), (Sim(MI250X), False), (Sim(SPX, drop_links=1), False)],
    ids=["mi300x-spx", "mi300x-cpx", "mi210-2hive-pcie-peers", "mi250x-2hop", "spx-links-incomplete"],
)
def test_fine_grain_pcie_is_warned_only_where_every_pair_is_direct_xgmi(spec, warned, sim_model):
    result = env_rules.resolve("xgmi-training", {"HSA_FORCE_FINE_GRAIN_PCIE": "1"}, {}, spec.context(sim_model), KNOWLEDGE, PROFILES)
    findings = [(e["variable"], e["rule"]) for k in ("warnings", "notes", "drops") for e in result[k]]
    expected = [("HSA_FORCE_FINE_GRAIN_PCIE", "fine-grain-pcie-all-xgmi")] if warned else []
    assert [f for f in findings if f[0] == "HSA_FORCE_FINE_GRAIN_PCIE"] == expected
    assert result["rendered"]["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"


def test_source_article_block_on_rocm_62_warns_hcc_and_ll128_redundant(sim_model):
    node_62 = Sim(MI250X, rocm="6.2.1", fabric="rdma").context(sim_model)
    result = env_rules.resolve("rdma-training", SOURCE_ARTICLE, {}, node_62, KNOWLEDGE, PROFILES)
    assert [e["rule"] for e in result["refusals"]] == ["hsa-override-native"]
    assert fired(result)["proto-ll128-redundant"] == "warn"
    assert fired(result)["hcc-target-build-only"] == "warn"
    assert [e["rule"] for e in result["drops"]] == ["applies-to", "dev-kernarg-default"]
    assert result["rendered"]["HCC_AMDGPU_TARGET"] == "gfx90a"


@pytest.mark.parametrize(
    "value,valid,misses",
    [
        ("gfx942", True, False),
        ("gfx942:xnack-", True, False),
        ("gfx90a,gfx942:sramecc+:xnack-", True, False),
        ("gfx90a", True, True),
        ("gfx942:foo+", False, None),
        ("942", False, None),
        ("gfx942,", False, None),
    ],
)
def test_hcc_target_lists_and_the_node_gfx(value, valid, misses, sim_model):
    result = env_rules.validate({"HCC_AMDGPU_TARGET": value}, {}, Sim(SPX).context(sim_model), KNOWLEDGE)
    assert (result["refusals"] == []) == valid
    if valid:
        assert fired(result) == dict({"hcc-target-build-only": "warn"}, **({"hcc-target-misses-node-gfx": "warn"} if misses else {}))
        assert result["rendered"] == {"HCC_AMDGPU_TARGET": value}


UNSAFE = [
    ("NEWLINE_VAR", "a\nexport LD_PRELOAD=/tmp/x.so", "newline"),
    ("CR_VAR", "a\rb", "carriage return"),
    ("NUL_VAR", "a\x00b", "NUL"),
    ("SUBST_VAR", "$(reboot)", "command substitution"),
    ("TICK_VAR", "`id`", "backtick"),
    ("EXPAND_VAR", "${HOME}", "parameter expansion"),
    ("DOLLAR_VAR", "$HOME", "a $"),
    ("SEMI_VAR", "1;reboot", "command separator"),
    ("PIPE_VAR", "1|sh", "pipe"),
    ("AMP_VAR", "1&", "control operator"),
    ("REDIR_VAR", "1>/etc/passwd", "redirection"),
    ("QUOTE_VAR", "a'b", "quote"),
    ("DQUOTE_VAR", 'a"b', "quote"),
    ("BSLASH_VAR", "a\\b", "backslash"),
    ("BLANK_VAR", "a b", "blank"),
    ("TAB_VAR", "a\tb", "tab"),
    ("UNICODE_VAR", "gfx90a\u202e", "outside the characters"),
    ("NCCL_PROTO", "LL128\n", "newline"),
]


@pytest.mark.parametrize("name,value,why", UNSAFE, ids=[u[0] for u in UNSAFE])
def test_unsafe_values_are_refused_naming_the_variable(name, value, why):
    result = env_rules.validate({name: value}, {}, MI250, KNOWLEDGE)
    assert result["rendered"] == {}
    assert len(result["refusals"]) == 1
    refusal = result["refusals"][0]
    assert refusal["variable"] == name and refusal["rule"] == "unsafe-value"
    assert refusal["reason"].startswith(name + ":") and why in refusal["reason"]


def test_unsafe_values_cannot_be_allowed():
    result = env_rules.validate({"HSA_ENABLE_SDMA": "0;id"}, {"HSA_ENABLE_SDMA": "debugging"}, MI250, KNOWLEDGE)
    assert [e["rule"] for e in result["refusals"]] == ["unsafe-value"]


@pytest.mark.parametrize(
    "name,value,rule,fragment",
    [
        ("1BAD", "1", "name", "not a valid environment name"),
        ("BAD-NAME", "1", "name", "not a valid environment name"),
        ("BAD NAME", "1", "name", "not a valid environment name"),
        ("X;id", "1", "name", "not a valid environment name"),
        ("PATH", "/opt/rocm/bin", "reserved-name", "PATH changes how every shell"),
        ("LD_PRELOAD", "/tmp/x.so", "reserved-name", "LD_PRELOAD"),
        ("BASH_ENV", "/tmp/x", "reserved-name", "BASH_ENV"),
        ("HSA_ENABLE_SDMA", True, "type", "YAML boolean"),
        ("HSA_ENABLE_SDMA", 0.5, "type", "YAML float"),
        ("HSA_ENABLE_SDMA", ["0"], "type", "not a string"),
        ("HSA_ENABLE_SDMA", "2", "valid", "expected one of 0, 1"),
        ("NCCL_NSOCKS_PERTHREAD", "many", "valid", "expected an integer"),
        ("NCCL_NSOCKS_PERTHREAD", "65", "valid", "1..64"),
        ("NCCL_PROTO", "LL256", "valid", "comma list"),
        ("NCCL_NET_GDR_LEVEL", "7", "valid", "PHB"),
        ("HSA_OVERRIDE_GFX_VERSION", "gfx90a", "valid", "MAJOR.MINOR.STEPPING"),
    ],
)
def test_invalid_names_types_and_values_are_refused(name, value, rule, fragment):
    result = env_rules.validate({name: value}, {}, MI250, KNOWLEDGE)
    assert [(e["variable"], e["rule"]) for e in result["refusals"]] == [(name, rule)]
    assert fragment in result["refusals"][0]["reason"]
    assert result["rendered"] == {}


def test_integers_are_accepted_as_strings():
    result = env_rules.validate({"NCCL_IB_GID_INDEX": 3}, {}, MI250, KNOWLEDGE)
    assert result["rendered"] == {"NCCL_IB_GID_INDEX": "3"} and result["refusals"] == []


def test_allow_turns_an_allowable_refusal_into_a_warning_and_a_warning_into_a_note():
    allow = {"HSA_OVERRIDE_GFX_VERSION": "vendor image built for gfx900 only", "HSA_ENABLE_SDMA": "bisecting a copy hang"}
    result = env_rules.validate({"HSA_OVERRIDE_GFX_VERSION": "9.0.0", "HSA_ENABLE_SDMA": "0"}, allow, MI250, KNOWLEDGE)
    assert result["refusals"] == []
    assert [(e["variable"], e["rule"]) for e in result["warnings"]] == [("HSA_OVERRIDE_GFX_VERSION", "hsa-override-native")]
    assert "allowed by rocm_env_allow.HSA_OVERRIDE_GFX_VERSION (vendor image" in result["warnings"][0]["reason"]
    assert ("HSA_ENABLE_SDMA", "sdma-off-outside-debug") in [(e["variable"], e["rule"]) for e in result["notes"]]
    assert result["rendered"] == {"HSA_OVERRIDE_GFX_VERSION": "9.0.0", "HSA_ENABLE_SDMA": "0"}


def test_allow_is_per_variable_and_needs_a_reason():
    result = env_rules.validate(
        {"HSA_OVERRIDE_GFX_VERSION": "9.0.0", "NCCL_PROTO": "LL128"}, {"NCCL_PROTO": "measured on gfx942"}, MI300X, KNOWLEDGE
    )
    assert [e["variable"] for e in result["refusals"]] == ["HSA_OVERRIDE_GFX_VERSION"]
    result = env_rules.validate({"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}, {"HSA_OVERRIDE_GFX_VERSION": " "}, MI250, KNOWLEDGE)
    assert {e["rule"] for e in result["refusals"]} == {"allow-reason", "hsa-override-native"}
    result = env_rules.validate({}, {"NCCL_PROTO": "x"}, MI250, KNOWLEDGE)
    assert [e["rule"] for e in result["notes"]] == ["allow-unused"]


def test_unknown_variables_render_with_a_note():
    result = env_rules.validate({"MY_SITE_FLAG": "on"}, {}, MI250, KNOWLEDGE)
    assert result["rendered"] == {"MY_SITE_FLAG": "on"}
    assert [e["rule"] for e in result["notes"]] == ["unknown-variable"]


@pytest.mark.parametrize("profile", sorted(PROFILES["profiles"]))
@pytest.mark.parametrize(
    "spec",
    [
        MI250,
        MI300X,
        MI355X,
        PCIE,
        UNKNOWN,
        ctx(MI300X, rocm="7.14"),
        Sim(SPX),
        Sim(SPX, rocm="6.4.1"),
        Sim(SPX, firmware={1: 120}),
        Sim(CPX),
        Sim(HIVES, rocm="7.14"),
        Sim(MI250X, rocm="5.7.1"),
    ],
    ids=[
        "mi250",
        "mi300x",
        "mi355x",
        "pcie",
        "unknown",
        "rocm714",
        "sim-spx",
        "sim-spx-rocm641",
        "sim-spx-oldmec",
        "sim-cpx",
        "sim-2hive-rocm714",
        "sim-mi250x",
    ],
)
def test_profiles_alone_raise_no_refusal_or_warning(profile, spec, sim_model):
    result = env_rules.resolve(profile, {}, {}, node(spec, sim_model), KNOWLEDGE, PROFILES)
    assert result["refusals"] == [] and result["warnings"] == []
    assert result["rendered"]


def test_profile_version_and_gpu_gating():
    result = env_rules.resolve("xgmi-training", {}, {}, MI355X, KNOWLEDGE, PROFILES)
    dropped = {e["variable"]: e["rule"] for e in result["drops"]}
    assert dropped == {"HIP_FORCE_DEV_KERNARG": "dev-kernarg-default", "NCCL_MIN_NCHANNELS": "nchannels-default-gfx950"}
    result = env_rules.resolve("xgmi-training", {}, {}, ctx(MI300X, rocm="6.1"), KNOWLEDGE, PROFILES)
    assert result["drops"] == [] and result["rendered"]["HIP_FORCE_DEV_KERNARG"] == "1"
    result = env_rules.resolve("rdma-training", {}, {}, ctx(MI300X, rocm="7.13", fabric=None), KNOWLEDGE, PROFILES)
    assert "RCCL_MSCCL_ENABLE" not in result["rendered"] and result["fabric"] == "rdma"
    assert result["rendered"]["TORCH_NCCL_HIGH_PRIORITY"] == "1"


@pytest.mark.parametrize("profile,channels", [("xgmi-training", "112"), ("rdma-training", "40"), ("inference", "112")])
def test_channel_counts_follow_amd_single_and_multi_node_examples(profile, channels, sim_model):
    result = env_rules.resolve(profile, {}, {}, Sim(SPX, rocm="6.4.1").context(sim_model), KNOWLEDGE, PROFILES)
    assert result["rendered"]["NCCL_MIN_NCHANNELS"] == channels
    source = env_rules.profile_variables(PROFILES, profile)["NCCL_MIN_NCHANNELS"]["source"]
    assert ("prerequisite-system-validation.rst" in source) == (profile == "rdma-training")


@pytest.mark.parametrize(
    "spec,kept,rule",
    [
        (Sim(SPX), False, "scratch-reclaim-fixed-profile"),
        (Sim(SPX, firmware={7: 176}), True, "scratch-reclaim-needed-mec"),
        (Sim(CPX), True, "scratch-reclaim-mec-unknown"),
        (Sim(HIVES, rocm="6.4.2"), True, None),
    ],
    ids=["spx-mec177-rocm642", "spx-one-gpu-mec176", "cpx-mec-unknown", "mi210"],
)
@pytest.mark.parametrize("profile", ["xgmi-training", "rdma-training", "inference"])
def test_profiles_keep_scratch_reclaim_only_where_the_firmware_needs_it(profile, spec, kept, rule, sim_model):
    result = env_rules.resolve(profile, {}, {}, spec.context(sim_model), KNOWLEDGE, PROFILES)
    assert ("HSA_NO_SCRATCH_RECLAIM" in result["rendered"]) == kept
    rules = [e["rule"] for k in ("drops", "notes") for e in result[k] if e["variable"] == "HSA_NO_SCRATCH_RECLAIM"]
    assert rules == ([rule] if rule else [])


def test_override_null_removes_a_profile_variable():
    result = env_rules.resolve("inference", {"NCCL_MIN_NCHANNELS": None}, {}, MI300X, KNOWLEDGE, PROFILES)
    assert "NCCL_MIN_NCHANNELS" not in result["rendered"]
    assert [(e["variable"], e["rule"]) for e in result["notes"]] == [
        ("NCCL_MIN_NCHANNELS", "override-unset"),
        ("HSA_NO_SCRATCH_RECLAIM", "scratch-reclaim-mec-unknown"),  # MI300X without a firmware version
    ]


def test_unknown_profile_and_include_loops_fail_clearly():
    with pytest.raises(ValueError, match="unknown environment profile 'nope'"):
        env_rules.resolve("nope", {}, {}, MI250, KNOWLEDGE, PROFILES)
    looped = {"profiles": {"a": {"include": ["b"]}, "b": {"include": ["a"]}}}
    with pytest.raises(ValueError, match="includes itself"):
        env_rules.profile_variables(looped, "a")


def test_rendering_shell_and_env_lines():
    rendered = {"B": "x,y", "A": "1"}
    assert env_rules.render_shell(rendered) == ["export A='1'", "export B='x,y'"]
    assert env_rules.render_env_file(rendered) == ["A=1", "B=x,y"]
    assert env_rules.shell_quote("a'b") == "'a'\"'\"'b'"


@pytest.mark.parametrize(
    "text,expected", [("6.2.1", (6, 2, 1)), ("7.0", (7, 0, 0)), ("6.4.0-15396", (6, 4, 0)), ("", None), ("x", None), (None, None)]
)
def test_parse_version(text, expected):
    assert env_rules.parse_version(text) == expected


@pytest.mark.parametrize(
    "value,gfx", [("9.0.0", "gfx900"), ("9.0.10", "gfx90a"), ("9.4.2", "gfx942"), ("10.3.0", "gfx1030"), ("bad", None)]
)
def test_override_value_decodes_to_the_target_it_selects(value, gfx):
    assert env_rules.gfx_for_override(value) == gfx


def test_context_from_topology():
    topology = {"gpus": [{"index": 0, "gfx": "gfx942"}, {"index": 1, "gfx": "gfx942"}], "links": [{"a": 0, "b": 1, "type": "xgmi"}]}
    context = env_rules.context_from_topology(topology, "6.4", None, "inference")
    assert context["gfx"] == ["gfx942"] and context["xgmi"] is True
    assert context["all_peers_xgmi"] is None and context["mec_fw"] is None  # no hops, no firmware: unknown
    assert env_rules.context_from_topology({"gpus": [], "links": [{"type": "pcie"}]})["xgmi"] is False
    assert env_rules.context_from_topology(None)["xgmi"] is None
    assert env_rules.context_from_topology(None)["all_peers_xgmi"] is None


@pytest.mark.parametrize(
    "spec,gfx,all_peers,mec",
    [
        (Sim(SPX), ["gfx942"], True, 177),
        (Sim(CPX), ["gfx942"], True, None),
        (Sim(HIVES), ["gfx90a"], False, None),
        (Sim(MI250X), ["gfx90a"], False, None),
        (Sim(SPX, firmware={4: 160, 6: 170}), ["gfx942"], True, 160),
        (Sim(SPX, firmware={6: None}), ["gfx942"], True, None),
        (Sim(SPX, drop_links=3), ["gfx942"], None, 177),
    ],
    ids=["spx", "cpx", "mi210-2hive", "mi250x", "spx-lowest-mec", "spx-one-mec-unknown", "spx-links-incomplete"],
)
def test_context_carries_peers_and_lowest_mec_of_real_models(spec, gfx, all_peers, mec, sim_model):
    context = spec.context(sim_model)
    assert context["gfx"] == gfx and context["xgmi"] is True
    assert context["all_peers_xgmi"] is all_peers
    assert context["mec_fw"] == mec


def test_all_peers_xgmi_edge_cases(sim_model):
    model = copy.deepcopy(sim_model(SPX))
    model["links"][5]["type"] = "pcie"
    assert env_rules.all_peers_xgmi(model) is False
    model = copy.deepcopy(sim_model(SPX))
    model["links"][0]["hops"] = None  # unknown hops for one pair
    assert env_rules.all_peers_xgmi(model) is None
    model["links"][1]["hops"] = 2  # a known non-direct pair decides
    assert env_rules.all_peers_xgmi(model) is False
    one_gpu = {"gpus": [{"index": 0, "gfx": "gfx942", "firmware": {"mec": 177}}], "links": []}
    assert env_rules.all_peers_xgmi(one_gpu) is None and env_rules.lowest_mec_firmware(one_gpu) == 177
    bad = {"gpus": [{"index": 0}, {"index": 1}], "links": [{"a": [0], "b": 1, "type": "xgmi", "hops": 1}, "x"]}
    assert env_rules.all_peers_xgmi(bad) is None
    assert env_rules.lowest_mec_firmware({"gpus": [{"firmware": {"mec": True}}]}) is None
    assert env_rules.lowest_mec_firmware({"gpus": [{"firmware": {"mec": -1}}]}) is None


def test_filter_uses_gpu_generations_and_renders_report(sim_model):
    from ansible_collections.topotune.instinct.plugins.filter.rocm_env_resolve import native_gfx_targets, rocm_env_resolve

    assert {"gfx90a", "gfx942", "gfx950"} <= set(native_gfx_targets(KNOWLEDGE))
    result = rocm_env_resolve("rdma-training", SOURCE_ARTICLE, {}, sim_model(MI250X), "5.7.1")
    assert len(result["refusals"]) == 2 and len(result["warnings"]) == 5
    assert result["report"][0].startswith("REFUSED HSA_OVERRIDE_GFX_VERSION:")
    assert result["context"]["all_peers_xgmi"] is False and result["fabric"] == "rdma"
    result = rocm_env_resolve("inference", {}, {}, sim_model(SPX), "6.4.2")
    assert result["context"]["mec_fw"] == 177 and result["context"]["all_peers_xgmi"] is True
    assert [e["rule"] for e in result["drops"]] == ["dev-kernarg-default", "scratch-reclaim-fixed-profile"]


def test_filter_rejects_non_mapping_overrides():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.topotune.instinct.plugins.filter.rocm_env_resolve import rocm_env_resolve

    with pytest.raises(AnsibleFilterError, match="overrides must be a dict"):
        rocm_env_resolve("debug", ["HSA_ENABLE_SDMA=0"])


def test_role_readme_shows_the_source_article_report_verbatim(sim_model):
    result = env_rules.resolve("rdma-training", SOURCE_ARTICLE, {}, ARTICLE_NODE.context(sim_model), KNOWLEDGE, PROFILES)
    with open(os.path.join(REPO, "roles", "rocm_env", "README.md"), encoding="utf-8") as handle:
        readme = handle.read().splitlines()
    for line in env_rules.format_report(result) + result["env_lines"]:
        assert line in readme, line


# --- profile behaviour from profile data (knowledge/env_profiles.yml), never from a profile's name ---

def profiles_with(**new):
    """A copy of the knowledge's profiles with ``new`` ones added (or replaced)."""
    copied = copy.deepcopy(PROFILES)
    copied["profiles"].update(new)
    return copied


def test_every_profile_states_its_data():
    for name, profile in PROFILES["profiles"].items():
        assert profile.get("fabric") in env_rules.FABRICS and isinstance(profile.get("debug"), bool), name
    assert env_rules.profile_traits(PROFILES, "rdma-training") == {"fabric": "rdma", "debug": False}
    assert env_rules.profile_traits(PROFILES, "debug") == {"fabric": "none", "debug": True}


def test_a_new_profile_behaves_as_its_data_says(sim_model):
    profiles = profiles_with(**{
        "roce-inference": {"description": "serving over RoCE", "fabric": "rdma", "include": ["inference"], "variables": {}},
        "bringup": {"description": "a second debugging profile", "debug": True, "variables": {}},
    })
    node = Sim(SPX, fabric=None).context(sim_model)
    overrides = {"NCCL_NSOCKS_PERTHREAD": "4", "HSA_ENABLE_SDMA": "0"}
    rdma = env_rules.resolve("roce-inference", overrides, {}, node, KNOWLEDGE, profiles)
    assert rdma["fabric"] == "rdma" and rdma["context"]["debug"] is False
    assert {e["rule"] for e in rdma["warnings"]} == {"nsocks-on-rdma", "sdma-off-outside-debug"}
    assert rdma["rendered"]["TORCH_BLAS_PREFER_HIPBLASLT"] == "1"  # the included profile's variables
    bringup = env_rules.resolve("bringup", overrides, {}, node, KNOWLEDGE, profiles)
    assert bringup["warnings"] == [] and bringup["context"]["debug"] is True and bringup["fabric"] == "none"
    # the name alone decides nothing: a profile called debug without the data is warned about
    renamed = profiles_with(debug=dict(PROFILES["profiles"]["debug"], debug=False))
    assert [e["rule"] for e in env_rules.resolve("debug", {"HSA_ENABLE_SDMA": "0"}, {}, node, KNOWLEDGE, renamed)["warnings"]] \
        == ["sdma-off-outside-debug"]


def test_an_explicit_fabric_wins_over_the_profiles():
    context = dict(MI300X, fabric="socket")
    result = env_rules.resolve("rdma-training", {"NCCL_NSOCKS_PERTHREAD": "4"}, {}, context, KNOWLEDGE, PROFILES)
    assert result["fabric"] == "socket" and result["warnings"] == []


def test_profile_traits_are_inherited_and_checked():
    profiles = profiles_with(**{"a": {"include": ["debug", "rdma-training"], "variables": {}},
                                "b": {"include": ["a"], "debug": True, "variables": {}},
                                "c": {"include": ["b"], "fabric": "socket", "variables": {}},
                                "plain": {"variables": {}},
                                "bad": {"fabric": "ib", "variables": {}},
                                "loop": {"include": ["loop"], "variables": {}}})
    # the last include that sets a value wins, as for variables; a profile's own value wins over its includes'
    assert env_rules.profile_traits(profiles, "a") == {"fabric": "rdma", "debug": False}
    assert env_rules.profile_traits(profiles, "b") == {"fabric": "rdma", "debug": True}
    assert env_rules.profile_traits(profiles, "c") == {"fabric": "socket", "debug": True}
    assert env_rules.profile_traits(profiles, "plain") == env_rules.TRAIT_DEFAULTS == {"fabric": "none", "debug": False}
    with pytest.raises(ValueError, match="profile bad has fabric 'ib'"):
        env_rules.profile_traits(profiles, "bad")
    with pytest.raises(ValueError, match="includes itself"):
        env_rules.profile_traits(profiles, "loop")


# --- the rocm_env role's plan ---

HEADER = "#\n# Ansible managed\n#"
ROLE = {"profile": "xgmi-training", "overrides": {}, "allow": {}, "fabric": "", "profile_d": True, "env_dir": "/etc/topotune/env",
        "fail_on_refusal": True}
ROLE_KNOWLEDGE = {"env_vars": KNOWLEDGE, "env_profiles": PROFILES, "gpu_generations": _load("gpu_generations")}


def test_role_plan_renders_both_files_for_the_node(sim_model):
    plan = env_rules.role_plan(dict(ROLE, overrides={"NCCL_DEBUG": "INFO"}), sim_model(SPX), "6.4.1", ROLE_KNOWLEDGE, HEADER)
    env, shell = plan["files"]
    node = "# Node: gfx942, ROCm 6.4.1, fabric none."
    assert env == {"path": "/etc/topotune/env/xgmi-training.env", "mode": "0644", "content": "\n".join(
        [HEADER, "# topotune.instinct.rocm_env profile xgmi-training for docker --env-file and systemd EnvironmentFile=.", node,
         "# Values are validated literals: no quoting needed or done."] + plan["resolved"]["env_lines"]) + "\n"}
    assert shell["content"] == "\n".join([HEADER, "# topotune.instinct.rocm_env profile xgmi-training for login shells.", node]
                                         + plan["resolved"]["shell_lines"]) + "\n"
    assert shell["path"] == "/etc/profile.d/topotune-rocm.sh" and shell["state"] == "present" and shell["validate"] == "/bin/sh -n %s"
    assert "NCCL_DEBUG=INFO" in env["content"] and "HIP_FORCE_DEV_KERNARG" not in env["content"]  # dropped: the default
    assert plan["report"] == env_rules.format_report(plan["resolved"]) and plan["report"]
    assert plan["managed"] == {"owner": "rocm_env", "files": [env["path"], shell["path"]]}


def test_role_plan_without_the_login_shell_profile_and_on_an_unknown_node():
    plan = env_rules.role_plan(dict(ROLE, profile="debug", profile_d=False, env_dir="/srv/env"), {}, "", ROLE_KNOWLEDGE, HEADER)
    assert plan["files"][1]["state"] == "absent" and plan["managed"]["files"] == ["/srv/env/debug.env"]
    assert "# Node: unknown GPUs, ROCm unknown, fabric none." in plan["files"][0]["content"]


def test_role_plan_native_targets_include_the_gpu_generations():
    generations = {"generations": [{"name": "MI400", "gfx": "gfx1250"}]}
    assert "gfx1250" in env_rules.native_gfx_targets(KNOWLEDGE, generations)
    plan = env_rules.role_plan(dict(ROLE, overrides={"HSA_OVERRIDE_GFX_VERSION": "9.4.2"}, fail_on_refusal=False),
                               {"gpus": [{"index": 0, "gfx": "gfx1250"}]},
                               "7.0.0", dict(ROLE_KNOWLEDGE, gpu_generations=generations), HEADER)
    assert plan["resolved"]["refusals"][0]["rule"] == "hsa-override-native"
    assert "gfx1250" not in env_rules.native_gfx_targets(KNOWLEDGE, {})


def test_role_plan_stops_on_refusals_naming_them_and_the_other_findings(sim_model):
    options = dict(ROLE, profile="rdma-training", overrides=SOURCE_ARTICLE)
    with pytest.raises(env_rules.EnvPlanError) as failed:
        env_rules.role_plan(options, ARTICLE_NODE.model(sim_model), "5.7.1", ROLE_KNOWLEDGE, HEADER)
    message = str(failed.value)
    assert message.startswith("rocm_env refused HSA_OVERRIDE_GFX_VERSION, NCCL_PROTO: HSA_OVERRIDE_GFX_VERSION=9.0.0 on natively")
    assert ('. Fix rocm_env_overrides, or where a rule allows it add rocm_env_allow: {NAME: "reason"}. Other findings: '
            "WARNING HCC_AMDGPU_TARGET:") in message
    assert "gfx900" in message and "data corruption" in message and "REFUSED" not in message
    # reported, not fatal: everything not refused is rendered, the report lists the refusals first
    plan = env_rules.role_plan(dict(options, fail_on_refusal=False), ARTICLE_NODE.model(sim_model), "5.7.1", ROLE_KNOWLEDGE, HEADER)
    assert plan["report"][0].startswith("REFUSED HSA_OVERRIDE_GFX_VERSION:") and "NCCL_PROTO" not in plan["files"][0]["content"]


@pytest.mark.parametrize("options,message", [
    ({"allow": {"HSA_OVERRIDE_GFX_VERSION": " ", "B": 3, "C": "ok"}},
     'rocm_env_allow: every entry needs a non-empty string saying why the rule does not apply here (none for B, '
     'HSA_OVERRIDE_GFX_VERSION), e.g. rocm_env_allow: {HSA_OVERRIDE_GFX_VERSION: "testing an unsupported APU"}'),
    ({"env_dir": "/etc/topo tune"}, "rocm_env_env_dir must be an absolute path of [A-Za-z0-9_./-] (got /etc/topo tune)"),
    ({"env_dir": "relative"}, "rocm_env_env_dir must be an absolute path"),
    ({"env_dir": "/etc/x", "allow": {"A": None}, "profile": "nope"}, "none for A"),
])
def test_role_input_errors_name_the_variable_and_the_fix(options, message):
    with pytest.raises(env_rules.EnvPlanError) as failed:
        env_rules.role_plan(dict(ROLE, **options), {}, "", ROLE_KNOWLEDGE, HEADER)
    assert message in str(failed.value)


def test_role_input_errors_come_together_and_an_unknown_profile_is_named():
    with pytest.raises(env_rules.EnvPlanError, match=r"rocm_env_allow: .*; rocm_env_env_dir must be"):
        env_rules.check_options(dict(ROLE, allow={"X": ""}, env_dir="x"))
    with pytest.raises(env_rules.EnvPlanError, match="rocm_env_profile nope: unknown environment profile 'nope'"):
        env_rules.role_plan(dict(ROLE, profile="nope"), {}, "", ROLE_KNOWLEDGE, HEADER)
