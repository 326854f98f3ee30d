# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate and resolve ROCm/HIP/HSA/RCCL environment variables against knowledge/env_vars.yml; the plan of the
rocm_env role.

Pure functions, standard library only. The knowledge (env_vars.yml, env_profiles.yml, gpu_generations.yml) is
passed in as parsed dicts so the same code serves the rocm_env action, the filter plugin and the unit tests.

``resolve()`` merges a named profile with user overrides and validates every variable; the result lists
refusals, warnings, drops (not rendered, with the reason) and notes, plus the rendered set and its shell
and env-file lines. A value is rendered only if it is literal in all three consumers (POSIX shell,
docker --env-file, systemd EnvironmentFile), so one quoting rule is enough.

``OPTIONS`` declares the action's options and the role's variables once (``module_utils/core/options.py``);
``NODE_INPUTS`` are those that give the node's facts rather than the plan's options; ``MODEL_INPUTS`` declares the
play's model inputs once for this action and the container_runtime one.

``role_plan()`` is the whole decision of the role: its input checks, the resolution for the node, the refusals
that stop it, the text of both files and what it manages (``profile_traits()``: what a profile's data says about
it, read here and by the container plan).
"""

from __future__ import annotations

import re

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_SAFE_VALUE = r"^[A-Za-z0-9_.,:/=+@%^-]*$"
ACTIONS = ("refuse", "warn", "drop", "note")
# What a profile's data may say about it (knowledge/env_profiles.yml), with the value a profile that says nothing has.
FABRICS = ("rdma", "socket", "none")
TRAIT_DEFAULTS = {"fabric": "none", "debug": False}
PROFILE_D_PATH = "/etc/profile.d/topotune-rocm.sh"
# The profiles of knowledge/env_profiles.yml, the choices of rocm_env_profile and container_runtime_profile
# (tests/unit/roles/test_argument_specs.py compares them with the knowledge).
PROFILES = ("xgmi-training", "rdma-training", "inference", "debug")
_PATH_RE = re.compile(r"^/[A-Za-z0-9_./-]+$")

# The node's model after the role's own topology, in the order of the one chain (plugin_utils/core/role_action.py
# node_model): what the rocm_env and container_runtime tasks pass from the play, options of both actions.
MODEL_INPUTS = {
    "inventory_topology": {
        "type": "dict", "default": {}, "role": False,
        "description": "C(topotune_topology), a model the inventory gives; empty for none.",
    },
    "discovery": {
        "type": "dict", "default": {}, "role": False,
        "description": "The play's C(topotune_discovery) (a gpu_topology result); empty for none.",
    },
}

# The options of the rocm_env action and the variables of role rocm_env, declared once
# (module_utils/core/options.py): the action's argument spec is built from here, its documentation
# (plugins/modules/rocm_env.py) and the role's argument specs, defaults, README table and task arguments generated
# from here (scripts/gen-options). The profile's choices are knowledge/env_profiles.yml's (a unit test compares).
OPTIONS = {
    "profile": {
        "type": "str", "required": True,
        "description": "Named profile of C(knowledge/env_profiles.yml) (C(xgmi-training), C(rdma-training), "
                       "C(inference), C(debug)); its data (C(fabric), C(debug)) decides how it behaves.",
        "role": {"default": "xgmi-training", "choices": list(PROFILES)},
    },
    "overrides": {
        "type": "dict", "default": {},
        "description": "Extra or changed variables C({NAME: \"value\"}); C(null) removes a profile variable. Every one "
                       "is validated (C(knowledge/env_vars.yml)): harmful ones are refused, outdated or misapplied ones "
                       "warned about.",
    },
    "allow": {
        "type": "dict", "default": {},
        "description": "Per-variable escape hatch C({NAME: \"why you need it\"}) for rules marked allowable, each "
                       "reason a non-empty string: a refusal becomes a warning, a warning a note. Values that would "
                       "break a shell or env file are never allowed.",
    },
    "rocm_version": {
        "type": "str", "default": "",
        "description": "ROCm version of the node (C(6.2.1)); empty takes the one of the play's C(topotune_discovery), "
                       "else the one M(topotune.instinct.gpu_topology) reads from C(/opt/rocm/.info/version) under "
                       "O(sysroot); when that is missing too, the version-gated drops (C(HIP_FORCE_DEV_KERNARG) >= "
                       "6.2, MSCCL knobs >= 7.13) are skipped with a note.",
    },
    "fabric": {
        "type": "str", "default": "",
        "description": "Inter-node fabric, C(rdma), C(socket) or C(none); empty takes the profile's C(fabric) data "
                       "(C(knowledge/env_profiles.yml); C(rdma-training): C(rdma)).",
        "role": {"choices": ["", "rdma", "socket", "none"]},
    },
    "topology": {
        "type": "dict", "default": {},
        "description": "The role's topology model (the C(gpu_topology) shape); empty uses C(topotune_topology) (a "
                       "model the inventory gives), else the play's C(topotune_discovery) (C(playbooks/topology.yml)), "
                       "else runs M(topotune.instinct.gpu_topology). Rules read its GPUs' gfx targets, its links "
                       "(C(HSA_FORCE_FINE_GRAIN_PCIE) is warned about only where every GPU pair has a direct xGMI "
                       "link) and the lowest MEC firmware version (C(HSA_NO_SCRATCH_RECLAIM)).",
    },
    **MODEL_INPUTS,
    "sysroot": {
        "type": "str", "default": "/",
        "description": "Root under which M(topotune.instinct.gpu_topology) reads sysfs and C(/opt/rocm/.info/version) "
                       "(C(/) on a real node, C(/sim) on a simulated one).",
        "role": {"type": "path", "default": "{{ topotune_sysroot | default('/') }}"},
    },
    "profile_d": {
        "type": "bool", "default": True,
        "description": "Write C(/etc/profile.d/topotune-rocm.sh) for login shells (false plans its removal).",
    },
    "env_dir": {
        "type": "raw", "default": "/etc/topotune/env",
        "description": "Directory of the C(KEY=VALUE) env file (for C(docker --env-file) and systemd "
                       "C(EnvironmentFile=)), an absolute path of C([A-Za-z0-9_./-]).",
        "role": {"type": "path"},
    },
    "fail_on_refusal": {
        "type": "bool", "default": True,
        "description": "Fail when a variable is refused (false reports the refusals and renders the rest).",
    },
}
# The inputs that are the node's facts or where to read them, not options of the plan.
NODE_INPUTS = ("rocm_version", "topology", "inventory_topology", "discovery", "sysroot")


class EnvPlanError(TopotuneError, ValueError):
    """A rocm_env input is wrong or a variable is refused; the message names the variable and the fix."""


# What each unsafe character does to a shell profile or an env file; checked in this order.
_UNSAFE = (
    ("\n", "a newline, which ends the line and starts a new, unvalidated one in the shell profile and env file"),
    ("\r", "a carriage return, which breaks the line in the env file"),
    ("\x00", "a NUL byte, which truncates the value"),
    ("$(", "command substitution ($(...)), which a shell would execute"),
    ("`", "command substitution (backtick), which a shell would execute"),
    ("${", "parameter expansion (${...}), which a shell expands but an env file keeps literally"),
    ("$", "a $, which a shell expands but an env file keeps literally"),
    (";", "a ';', a shell command separator"),
    ("|", "a '|', a shell pipe"),
    ("&", "a '&', a shell control operator"),
    ("<", "a '<', a shell redirection"),
    (">", "a '>', a shell redirection"),
    ("'", "a quote, which docker --env-file keeps literally but systemd and shells remove"),
    ('"', "a quote, which docker --env-file keeps literally but systemd and shells remove"),
    ("\\", "a backslash, which systemd and shells process but docker --env-file keeps"),
    (" ", "a blank, which systemd trims and shells split on"),
    ("\t", "a tab, which systemd trims and shells split on"),
)


def parse_version(text):
    """Return a tuple of ints for '6.2.1' / '7.0' / '6.4.0-123', or None when unknown or malformed."""
    if text is None:
        return None
    match = re.match(r"^\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text))
    if not match:
        return None
    return tuple(int(part) if part is not None else 0 for part in match.groups())


def gfx_for_override(value):
    """'9.0.10' -> 'gfx90a', '9.0.0' -> 'gfx900' (the target HSA_OVERRIDE_GFX_VERSION selects), else None."""
    match = re.match(r"^(\d{1,2})\.(\d{1,2})\.(\d{1,2})$", str(value))
    if not match:
        return None
    major, minor, step = (int(part) for part in match.groups())
    return "gfx%d%d%x" % (major, minor, step)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _gpu_indices(gpus):
    return sorted({gpu["index"] for gpu in gpus if isinstance(gpu, dict) and _is_int(gpu.get("index"))})


def all_peers_xgmi(topology):
    """True when every GPU pair has a direct xGMI link (``hops`` 1), False when some pair does not (PCIe, or
    xGMI through another GPU as between MI250X GCDs), None when unknown: no model, fewer than two GPUs, or
    pairs the links do not describe."""
    if not isinstance(topology, dict):
        return None
    indices = _gpu_indices(topology.get("gpus") or [])
    links = topology.get("links")
    if len(indices) < 2 or not isinstance(links, list):
        return None
    known = set(indices)
    direct = set()
    for link in links:
        ends = (link.get("a"), link.get("b")) if isinstance(link, dict) else (None, None)
        if not all(_is_int(end) and end in known for end in ends) or ends[0] == ends[1]:
            continue
        kind, hops = link.get("type"), link.get("hops")
        if kind == "pcie" or (kind == "xgmi" and _is_int(hops) and hops != 1):
            return False
        if kind == "xgmi" and _is_int(hops) and hops == 1:
            direct.add(tuple(sorted(ends)))
    return True if len(direct) == len(indices) * (len(indices) - 1) // 2 else None


def lowest_mec_firmware(topology):
    """The lowest MEC firmware version over the node's GPUs (``gpus[].firmware.mec``), None when any GPU's is
    unknown: one GPU on old firmware is enough for a firmware-gated rule."""
    if not isinstance(topology, dict):
        return None
    versions = []
    for gpu in topology.get("gpus") or []:
        firmware = gpu.get("firmware") if isinstance(gpu, dict) else None
        mec = firmware.get("mec") if isinstance(firmware, dict) else None
        if not _is_int(mec) or mec < 0:
            return None
        versions.append(mec)
    return min(versions) if versions else None


def context_from_topology(topology, rocm_version=None, fabric=None, profile=None, native_gfx=None):
    """Build the rule context from a topology model dict (or None when unknown).

    ``xgmi``: some GPU pair is xGMI-linked; ``all_peers_xgmi``: every pair is, directly (see all_peers_xgmi());
    ``mec_fw``: the lowest MEC firmware version (see lowest_mec_firmware()). Unknown facts are None. The profile's
    own facts (its ``fabric`` unless given, ``debug``) are added by resolve() from its data.
    """
    gfx = []
    xgmi = None
    if isinstance(topology, dict):
        gfx = sorted({str(gpu.get("gfx")) for gpu in topology.get("gpus") or [] if isinstance(gpu, dict) and gpu.get("gfx")})
        links = topology.get("links")
        if isinstance(links, list):
            xgmi = any(isinstance(link, dict) and link.get("type") == "xgmi" for link in links)
    return {
        "gfx": gfx,
        "rocm": rocm_version or None,
        "xgmi": xgmi,
        "all_peers_xgmi": all_peers_xgmi(topology),
        "mec_fw": lowest_mec_firmware(topology),
        "fabric": fabric or None,
        "profile": profile,
        "native_gfx": sorted(native_gfx) if native_gfx else None,
    }


class _Facts:
    """The node facts rules test, with unknowns kept as None."""

    def __init__(self, context, knowledge):
        context = context or {}
        self.gfx = [str(g) for g in context.get("gfx") or []]
        self.rocm_text = context.get("rocm") or None
        self.rocm = parse_version(self.rocm_text)
        self.xgmi = context.get("xgmi")
        self.all_peers_xgmi = context.get("all_peers_xgmi")
        mec = context.get("mec_fw")
        self.mec = mec if _is_int(mec) and mec >= 0 else None
        self.fabric = context.get("fabric")
        self.debug = bool(context.get("debug"))
        native = context.get("native_gfx")
        if not native:
            native = list(((knowledge.get("native_gfx") or {}).get("targets") or {}).keys())
        self.native = set(native)

    def gfx_native(self):
        return bool(self.gfx) and all(g in self.native for g in self.gfx)

    def mec_threshold(self, table):
        """The MEC firmware threshold ``table`` ({gfx: version}) sets for this node's GPUs; None when a GPU's gfx is
        unknown or not in the table, or the GPUs' thresholds differ."""
        if not self.gfx or not all(g in table for g in self.gfx):
            return None
        thresholds = {int(table[g]) for g in self.gfx}
        return thresholds.pop() if len(thresholds) == 1 else None

    def default_on(self, table):
        if not self.gfx or self.rocm is None:
            return False
        for gfx in self.gfx:
            if gfx not in table or self.rocm < parse_version(table[gfx]):
                return False
        return True


def _lower(values):
    return [str(v).lower() for v in values or []]


def value_gfx(value):
    """The gfx targets of a target list ('gfx90a:xnack+,gfx942' -> {'gfx90a', 'gfx942'})."""
    return {part.split(":", 1)[0].strip().lower() for part in str(value).split(",") if part.strip()}


def _known_is(fact, want):
    return fact is not None and bool(fact) == bool(want)


def _mec_compare(table, facts, below):
    threshold = facts.mec_threshold(table)
    if threshold is None or facts.mec is None:
        return False
    return facts.mec < threshold if below else facts.mec >= threshold


def _rocm_compare(want, facts, below):
    if facts.rocm is None:
        return False
    return facts.rocm < parse_version(want) if below else facts.rocm >= parse_version(want)


# Rule conditions: key in `when` -> test(want, value, facts, origin). Unknown facts make positive ones false.
_CONDITIONS = {
    "value_in": lambda want, value, facts, origin: str(value).lower() in _lower(want),
    "value_not_in": lambda want, value, facts, origin: str(value).lower() not in _lower(want),
    "value_regex": lambda want, value, facts, origin: re.search(want, str(value)) is not None,
    "value_not_regex": lambda want, value, facts, origin: re.search(want, str(value)) is None,
    "value_gfx_covers_node": lambda want, value, facts, origin: bool(facts.gfx) and (set(facts.gfx) <= value_gfx(value)) == bool(want),
    "gfx_native": lambda want, value, facts, origin: facts.gfx_native() == bool(want),
    "gfx_all_in": lambda want, value, facts, origin: bool(facts.gfx) and all(g in want for g in facts.gfx),
    "gfx_any_in": lambda want, value, facts, origin: any(g in want for g in facts.gfx),
    # the negative form holds when the GPUs are unknown: a rule kept for "not this gfx" still fires there
    "gfx_none_in": lambda want, value, facts, origin: not any(g in want for g in facts.gfx),
    "xgmi": lambda want, value, facts, origin: _known_is(facts.xgmi, want),
    "all_peers_xgmi": lambda want, value, facts, origin: _known_is(facts.all_peers_xgmi, want),
    "mec_below": lambda want, value, facts, origin: _mec_compare(want, facts, True),
    "mec_at_least": lambda want, value, facts, origin: _mec_compare(want, facts, False),
    "mec_unknown_on": lambda want, value, facts, origin: facts.mec_threshold(want) is not None and facts.mec is None,
    "fabric_in": lambda want, value, facts, origin: facts.fabric in want,
    # the profile's `debug` data (knowledge/env_profiles.yml), never its name
    "debug_profile": lambda want, value, facts, origin: facts.debug == bool(want),
    "origin_in": lambda want, value, facts, origin: (origin or "override") in want,
    "rocm_at_least": lambda want, value, facts, origin: _rocm_compare(want, facts, False),
    "rocm_below": lambda want, value, facts, origin: _rocm_compare(want, facts, True),
    "rocm_unknown": lambda want, value, facts, origin: (facts.rocm is None) == bool(want),
    "default_on": lambda want, value, facts, origin: facts.default_on(want),
    "not_default_on": lambda want, value, facts, origin: not facts.default_on(want),
}
_MEC_KEYS = ("mec_below", "mec_at_least", "mec_unknown_on")


def condition_holds(when, value, facts, origin=None):
    """True when every condition in ``when`` holds for ``value`` (set by ``origin``: 'profile' or 'override') on
    the node described by ``facts``."""
    for key, want in (when or {}).items():
        test = _CONDITIONS.get(key)
        if test is None:
            raise ValueError("unknown rule condition %r in knowledge/env_vars.yml" % (key,))
        if not test(want, value, facts, origin):
            return False
    return True


class _Fmt(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def _reason(template, name, value, facts, when=None):
    override = gfx_for_override(value)
    tables = [table for key, table in (when or {}).items() if key in _MEC_KEYS]
    threshold = facts.mec_threshold(tables[0]) if tables else None
    return " ".join(str(template).split()).format_map(
        _Fmt(
            name=name,
            value=value,
            gfx=", ".join(facts.gfx) or "unknown GPUs",
            rocm=facts.rocm_text or "unknown",
            gfx_override=override or "another target's",
            mec="unknown" if facts.mec is None else str(facts.mec),
            mec_threshold="unknown" if threshold is None else str(threshold),
        )
    )


def unsafe_value_reason(value, knowledge=None):
    """Why ``value`` cannot be written to a shell profile and an env file, or None when it is safe."""
    safety = (knowledge or {}).get("value_safety") or {}
    max_length = int(safety.get("max_length", 4096))
    if len(value) > max_length:
        return "it is %d characters long (limit %d)" % (len(value), max_length)
    for needle, why in _UNSAFE:
        if needle in value:
            return "it contains " + why
    if not re.match(safety.get("regex", DEFAULT_SAFE_VALUE), value):
        bad = sorted({ch for ch in value if not re.match(safety.get("regex", DEFAULT_SAFE_VALUE), ch)})
        return "it contains %s, outside the characters every consumer reads literally" % ", ".join(repr(c) for c in bad)
    return None


def value_text(name, raw):
    """Return (text, error): the value as a string, or why its YAML type is not accepted."""
    if isinstance(raw, bool):
        return None, "%s: value %r is a YAML boolean; quote the string you mean (e.g. '1' or '0')" % (name, raw)
    if isinstance(raw, int):
        return str(raw), None
    if isinstance(raw, float):
        return None, "%s: value %r is a YAML float; quote the string you mean (e.g. '9.0')" % (name, raw)
    if not isinstance(raw, str):
        return None, "%s: value of type %s is not a string; give a quoted string" % (name, type(raw).__name__)
    return raw, None


def check_valid(spec, value):
    """Why ``value`` is not valid per the knowledge `valid:` spec, or None."""
    if not spec:
        return None
    kind = spec.get("type")
    if kind == "int":
        if not re.match(r"^-?[0-9]+$", value):
            return "expected an integer"
        number = int(value)
        if "min" in spec and number < spec["min"] or "max" in spec and number > spec["max"]:
            return "expected an integer in %s..%s" % (spec.get("min", ""), spec.get("max", ""))
        return None
    if kind == "choice":
        choices = [str(c) for c in spec.get("choices") or []]
        if value.lower() not in [c.lower() for c in choices]:
            return "expected one of %s" % ", ".join(choices)
        return None
    if kind == "regex":
        if not re.search(spec["regex"], value):
            return "expected %s" % spec.get("hint", "a value matching %s" % spec["regex"])
        return None
    raise ValueError("unknown valid type %r in knowledge/env_vars.yml" % (kind,))


def _entry(name, value, reason, source, rule=None, origin=None):
    return {"variable": name, "value": value, "rule": rule, "reason": reason, "source": source, "origin": origin}


def validate(user_vars, allow, context, knowledge, origins=None):
    """Validate ``user_vars`` ({NAME: value}); return refusals, warnings, drops, notes and the rendered set.

    ``allow`` is {NAME: written reason}: the explicit, per-variable escape hatch for rules marked
    ``allowable``. ``origins`` maps NAME to 'profile' or 'override' (default 'override').
    """
    knowledge = knowledge or {}
    variables = knowledge.get("variables") or {}
    reserved = knowledge.get("reserved_names") or {}
    facts = _Facts(context, knowledge)
    origins = origins or {}
    result = {"rendered": {}, "refusals": [], "warnings": [], "drops": [], "notes": []}
    allow = allow or {}

    for name, reason in sorted(allow.items(), key=lambda kv: str(kv[0])):
        if not isinstance(reason, str) or not reason.strip():
            result["refusals"].append(
                _entry(
                    name,
                    None,
                    "rocm_env_allow.%s needs a written reason (a non-empty string), not %r" % (name, reason),
                    "topotune policy: escape hatches are explicit",
                    "allow-reason",
                )
            )
        elif name not in (user_vars or {}):
            result["notes"].append(_entry(name, None, "rocm_env_allow.%s is unused: the variable is not set" % name, None, "allow-unused"))

    for name in sorted(user_vars or {}, key=str):
        raw = user_vars[name]
        origin = origins.get(name, "override")
        if not isinstance(name, str) or not NAME_RE.match(name):
            result["refusals"].append(
                _entry(
                    str(name),
                    raw,
                    "variable name %r is not a valid environment name ([A-Za-z_][A-Za-z0-9_]*); a shell or env file would misparse it"
                    % (name,),
                    "POSIX sh 2.10.2 (names)",
                    "name",
                    origin,
                )
            )
            continue
        if name in (reserved.get("names") or []):
            result["refusals"].append(
                _entry(
                    name,
                    raw,
                    _reason(reserved.get("reason", "{name} is reserved"), name, raw, facts),
                    reserved.get("source"),
                    "reserved-name",
                    origin,
                )
            )
            continue
        value, error = value_text(name, raw)
        if error:
            result["refusals"].append(_entry(name, raw, error, "topotune policy: env values are strings", "type", origin))
            continue
        unsafe = unsafe_value_reason(value, knowledge)
        if unsafe:
            result["refusals"].append(
                _entry(
                    name,
                    value,
                    "%s: value %r rejected: %s. Fix: use a literal value of %s"
                    % (name, value, unsafe, (knowledge.get("value_safety") or {}).get("charset", DEFAULT_SAFE_VALUE)),
                    (knowledge.get("value_safety") or {}).get("source"),
                    "unsafe-value",
                    origin,
                )
            )
            continue
        spec = variables.get(name)
        if spec is None:
            result["notes"].append(
                _entry(
                    name,
                    value,
                    "%s is not in knowledge/env_vars.yml: only its name and value safety were checked" % name,
                    None,
                    "unknown-variable",
                    origin,
                )
            )
            result["rendered"][name] = value
            continue
        invalid = check_valid(spec.get("valid"), value)
        if invalid:
            result["refusals"].append(
                _entry(
                    name,
                    value,
                    "%s: value %r is not valid: %s (%s)" % (name, value, invalid, spec.get("meaning", "").strip()),
                    spec.get("source"),
                    "valid",
                    origin,
                )
            )
            continue

        refused = dropped = False
        for rule in spec.get("rules") or []:
            if not condition_holds(rule.get("when"), value, facts, origin):
                continue
            action = rule.get("action")
            if action not in ACTIONS:
                raise ValueError("rule %r of %s has unknown action %r" % (rule.get("id"), name, action))
            reason = _reason(rule.get("reason", ""), name, value, facts, rule.get("when"))
            entry = _entry(name, value, reason, rule.get("source"), rule.get("id"), origin)
            allowed = rule.get("allowable") and isinstance(allow.get(name), str) and allow[name].strip()
            if action == "drop":
                result["drops"].append(entry)
                dropped = True
            elif action == "note":
                result["notes"].append(entry)
            elif allowed:
                entry["reason"] = "allowed by rocm_env_allow.%s (%s): %s" % (name, allow[name].strip(), entry["reason"])
                result["warnings" if action == "refuse" else "notes"].append(entry)
            elif action == "refuse":
                if not rule.get("allowable"):
                    entry["reason"] += " (no escape hatch for this rule)"
                result["refusals"].append(entry)
                refused = True
            else:
                result["warnings"].append(entry)
        if not refused and not dropped:
            result["rendered"][name] = value
    return result


def _profile_table(profiles, name):
    table = (profiles or {}).get("profiles") or {}
    if name not in table:
        raise ValueError("unknown environment profile %r (known: %s)" % (name, ", ".join(sorted(table)) or "none"))
    return table


def profile_variables(profiles, name, _seen=None):
    """Return {NAME: {value, source, why}} of profile ``name`` with its includes merged first."""
    table = _profile_table(profiles, name)
    seen = _seen or []
    if name in seen:
        raise ValueError("environment profile %r includes itself (%s)" % (name, " -> ".join(seen + [name])))
    merged = {}
    for parent in table[name].get("include") or []:
        merged.update(profile_variables(profiles, parent, seen + [name]))
    merged.update(table[name].get("variables") or {})
    return merged


def profile_traits(profiles, name):
    """What the data of profile ``name`` says about it: {fabric: rdma|socket|none, debug: bool}.

    A profile's own value wins, else the last of its includes that has one (as for its variables), else
    TRAIT_DEFAULTS. Every consumer
    (the env rules' ``fabric_in`` and ``debug_profile``, the container flags) reads these, never the profile's name,
    so a new profile behaves as its data says. Raise ValueError naming the profile and the bad value.
    """
    return dict(TRAIT_DEFAULTS, **_own_traits(profiles, name, []))


def _own_traits(profiles, name, seen):
    table = _profile_table(profiles, name)
    if name in seen:
        raise ValueError("environment profile %r includes itself (%s)" % (name, " -> ".join(seen + [name])))
    entry = table[name] or {}
    traits = {}
    for parent in entry.get("include") or []:
        traits.update(_own_traits(profiles, parent, seen + [name]))
    fabric, debug = entry.get("fabric"), entry.get("debug")
    if fabric is not None:
        if fabric not in FABRICS:
            raise ValueError("knowledge/env_profiles.yml: profile %s has fabric %r; use one of %s" % (name, fabric, ", ".join(FABRICS)))
        traits["fabric"] = fabric
    if debug is not None:
        if not isinstance(debug, bool):
            raise ValueError("knowledge/env_profiles.yml: profile %s has debug %r; use true or false" % (name, debug))
        traits["debug"] = debug
    return traits


def resolve(profile, overrides, allow, context, knowledge, profiles):
    """Merge ``profile`` (from env_profiles.yml) with ``overrides`` and validate the result.

    An override of None removes a profile variable. Profile entries whose `applies_to` gfx list excludes
    the node's GPUs are dropped with the reason. The profile's data gives the context its ``fabric`` (unless
    the context has one) and ``debug`` (profile_traits()). Returns the validate() result plus `shell_lines`,
    `env_lines`, `profile`, `fabric` and `context`.
    """
    context = dict(context or {})
    context["profile"] = profile
    traits = profile_traits(profiles, profile) if profile is not None else dict(TRAIT_DEFAULTS)
    if not context.get("fabric") and profile is not None:
        context["fabric"] = traits["fabric"]
    context["debug"] = traits["debug"]
    variables = (knowledge or {}).get("variables") or {}
    facts = _Facts(context, knowledge or {})

    values, origins, pre_drops, pre_notes = {}, {}, [], []
    if profile is not None:
        for name, entry in sorted(profile_variables(profiles, profile).items()):
            applies = ((variables.get(name) or {}).get("applies_to") or {}).get("gfx")
            if applies and facts.gfx and not any(g in applies for g in facts.gfx):
                pre_drops.append(
                    _entry(
                        name,
                        entry.get("value"),
                        "%s is not rendered: profile %s sets it for %s, and this node has %s"
                        % (name, profile, ", ".join(applies), ", ".join(facts.gfx)),
                        entry.get("source"),
                        "applies-to",
                        "profile",
                    )
                )
                continue
            values[name] = entry.get("value")
            origins[name] = "profile"
    for name, value in (overrides or {}).items():
        if value is None:
            if name in values:
                pre_notes.append(
                    _entry(
                        name,
                        values.pop(name),
                        "%s removed from profile %s by rocm_env_overrides" % (name, profile),
                        None,
                        "override-unset",
                        "override",
                    )
                )
                origins.pop(name, None)
            continue
        values[name] = value
        origins[name] = "override"

    result = validate(values, allow, context, knowledge, origins)
    result["drops"] = pre_drops + result["drops"]
    result["notes"] = pre_notes + result["notes"]
    result["shell_lines"] = render_shell(result["rendered"])
    result["env_lines"] = render_env_file(result["rendered"])
    result["profile"] = profile
    result["fabric"] = context.get("fabric")
    result["context"] = {k: context.get(k) for k in ("gfx", "rocm", "xgmi", "all_peers_xgmi", "mec_fw", "fabric", "profile", "debug")}
    return result


def shell_quote(value):
    """POSIX single-quote ``value`` (values are already restricted to a literal charset)."""
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


def render_shell(rendered):
    """Lines for /etc/profile.d: export NAME='value', sorted."""
    return ["export %s=%s" % (name, shell_quote(rendered[name])) for name in sorted(rendered)]


def render_env_file(rendered):
    """Lines for docker --env-file and systemd EnvironmentFile: NAME=value, sorted."""
    return ["%s=%s" % (name, rendered[name]) for name in sorted(rendered)]


def format_report(result):
    """Human-readable lines: one per refusal, warning, drop and note, with the source."""
    lines = []
    for kind, label in (("refusals", "REFUSED"), ("warnings", "WARNING"), ("drops", "DROPPED"), ("notes", "NOTE")):
        for entry in result.get(kind) or []:
            text = "%s %s: %s" % (label, entry["variable"], entry["reason"])
            if entry.get("source"):
                text += " [source: %s]" % entry["source"]
            lines.append(text)
    return lines


def native_gfx_targets(env_knowledge, generations=None):
    """gfx targets of knowledge/env_vars.yml native_gfx plus those of knowledge/gpu_generations.yml."""
    targets = set((((env_knowledge or {}).get("native_gfx") or {}).get("targets") or {}).keys())
    for generation in (generations or {}).get("generations") or []:
        if isinstance(generation, dict) and generation.get("gfx"):
            targets.add(str(generation["gfx"]))
    return sorted(targets)


def check_options(options):
    """Raise EnvPlanError naming every wrong rocm_env input a type cannot catch (types and choices are
    meta/argument_specs.yml's), each with its value and the fix; the messages are joined with '; '."""
    errors = []
    allow = options.get("allow") or {}
    unreasoned = sorted(str(name) for name, why in allow.items() if not isinstance(why, str) or not why.strip())
    if unreasoned:
        errors.append(
            "rocm_env_allow: every entry needs a non-empty string saying why the rule does not apply here (none for %s), "
            'e.g. rocm_env_allow: {HSA_OVERRIDE_GFX_VERSION: "testing an unsupported APU"}' % ", ".join(unreasoned)
        )
    env_dir = options.get("env_dir")
    if not (isinstance(env_dir, str) and _PATH_RE.match(env_dir)):
        errors.append("rocm_env_env_dir must be an absolute path of [A-Za-z0-9_./-] (got %s)" % (env_dir,))
    if errors:
        raise EnvPlanError("; ".join(errors))


def role_plan(options, topology, rocm_version, knowledge, header):
    """The rocm_env role's decision for one node: check the input, resolve the profile with the overrides against
    the node, stop on refusals (``fail_on_refusal``), and give the text of both files and what the role manages.

    ``options``: the role variables without their ``rocm_env_`` prefix (profile, overrides, allow, fabric, profile_d,
    env_dir, fail_on_refusal). ``topology``: the node's model (empty when unknown); ``rocm_version``: '' when unknown.
    ``knowledge``: {env_vars, env_profiles, gpu_generations}. ``header``: the managed-file comment the files start
    with. Returns {resolved, report, files (managed_files entries), managed}; raises EnvPlanError.
    """
    check_options(options)
    env_knowledge = knowledge.get("env_vars") or {}
    profile = options.get("profile")
    name = None if profile in (None, "", "none") else str(profile)
    try:
        context = context_from_topology(topology or None, rocm_version or None, options.get("fabric") or None, name,
                                        native_gfx_targets(env_knowledge, knowledge.get("gpu_generations")))
        resolved = resolve(name, dict(options.get("overrides") or {}), dict(options.get("allow") or {}), context, env_knowledge,
                           knowledge.get("env_profiles"))
    except ValueError as err:
        raise EnvPlanError("rocm_env_profile %s: %s" % (profile, err)) from None
    report = format_report(resolved)
    resolved["report"] = report
    if options.get("fail_on_refusal", True) and resolved["refusals"]:
        others = [line for line in report if not line.startswith("REFUSED ")]
        raise EnvPlanError(
            "rocm_env refused %s: %s. Fix rocm_env_overrides, or where a rule allows it add rocm_env_allow: "
            '{NAME: "reason"}.%s'
            % (", ".join(e["variable"] for e in resolved["refusals"]), " | ".join(e["reason"] for e in resolved["refusals"]),
               (" Other findings: " + " | ".join(others)) if others else "")
        )
    env_file = "%s/%s.env" % (options["env_dir"], profile)
    node = "# Node: %s, ROCm %s, fabric %s." % (",".join(resolved["context"]["gfx"]) or "unknown GPUs",
                                                resolved["context"]["rocm"] or "unknown", resolved["fabric"] or "none")
    env_text = [header, "# topotune.instinct.rocm_env profile %s for docker --env-file and systemd EnvironmentFile=." % profile,
                node, "# Values are validated literals: no quoting needed or done."] + resolved["env_lines"]
    shell_text = [header, "# topotune.instinct.rocm_env profile %s for login shells." % profile, node] + resolved["shell_lines"]
    profile_d = bool(options.get("profile_d", True))
    files = [
        {"path": env_file, "content": "\n".join(env_text) + "\n", "mode": "0644"},
        # checked with sh -n before either file is moved into place; removed with rocm_env_profile_d: false
        {"path": PROFILE_D_PATH, "content": "\n".join(shell_text) + "\n", "mode": "0644",
         "state": "present" if profile_d else "absent", "validate": "/bin/sh -n %s"},
    ]
    return {
        "resolved": resolved,
        "report": report,
        "files": files,
        "managed": {"owner": "rocm_env", "files": [env_file] + ([PROFILE_D_PATH] if profile_d else [])},
    }
