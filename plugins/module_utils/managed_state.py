"""The manifest of what topotune manages on a node, and its verification in one pass.

Bring-up records, per owner role, what it manages; a drift check then reads the manifest and compares every
entry with the node in one module call (one round trip per host instead of one per setting).

Entry kinds of one owner (``entries`` is a list of these mappings, one per role)::

    {owner: cpu_governor, sysroot: /sim,
     files: [/etc/systemd/system/x.service],                  # digest, mode, owner, group read at record time
     values: [{path: sys/devices/system/cpu/cpu*/cpufreq/scaling_governor, value: performance}],
     json_keys: [{path: /etc/docker/daemon.json, keys: {default-ulimits: {memlock: {...}}}}],
     groups: [{user: trainer, group: render}],
     units: [{name: x.service, enabled: true, active: null}]}

``values`` paths are joined under the owner's ``sysroot`` and may hold glob patterns; ``json_keys`` compare
only the owned keys (nested mappings key by key), so keys a user added never count as drift.

Public API (standard library only, Python 3.8+): ``normalize_entries``, ``file_state``, ``build_manifest``,
``merge_manifest``, ``verify_manifest``, ``parse_systemctl_show``, ``read_group_db``, ``flatten_keys``,
``mark_corrected``, ``summarize``. Drift items have the shape of the report's ``drift/<host>.json``:
``{owner, kind, item, expected, observed, corrected}``.
"""

import glob
import grp
import hashlib
import json
import os
import pwd
import stat

from .cpulist import parse as parse_cpulist
from .sysroot import TopotuneError, join

MANIFEST_VERSION = 1
KINDS = ("files", "values", "json_keys", "groups", "units")
ABSENT = "absent"
_GLOB_CHARS = ("*", "?", "[")


class ManifestError(TopotuneError):
    """The entries or the manifest are malformed."""


def _fail(owner, message):
    raise ManifestError("managed_state: owner %s: %s" % (owner, message))


def normalize_entries(entries):
    """Validate ``entries`` (list of per-owner mappings) and return ``{owner: {sysroot, kinds...}}``."""
    if isinstance(entries, dict):
        entries = [dict(v, owner=k) if isinstance(v, dict) else v for k, v in entries.items()]
    if not isinstance(entries, list):
        raise ManifestError("managed_state: entries must be a list of per-role mappings, got %s" % type(entries).__name__)
    owners = {}
    for raw in entries:
        if not isinstance(raw, dict) or not isinstance(raw.get("owner"), str) or not raw.get("owner"):
            raise ManifestError("managed_state: every entry needs owner: <role name>, got %r" % (raw,))
        owner = raw["owner"]
        unknown = sorted(set(raw) - set(KINDS) - {"owner", "sysroot"})
        if unknown:
            _fail(owner, "unknown keys %s (known: owner, sysroot, %s)" % (", ".join(unknown), ", ".join(KINDS)))
        sysroot = raw.get("sysroot") or "/"
        if not isinstance(sysroot, str) or not sysroot.startswith("/"):
            _fail(owner, "sysroot must be an absolute path, got %r" % (sysroot,))
        out = {"sysroot": sysroot}
        for kind in KINDS:
            items = raw.get(kind) or []
            if not isinstance(items, list):
                _fail(owner, "%s must be a list, got %s" % (kind, type(items).__name__))
            out[kind] = [_normalize_item(owner, kind, item) for item in items]
        if owner in owners:
            _fail(owner, "given twice")
        owners[owner] = out
    return owners


def _normalize_item(owner, kind, item):
    if kind == "files":
        if not isinstance(item, str) or not item.startswith("/"):
            _fail(owner, "files entries must be absolute paths, got %r" % (item,))
        return item
    if kind in ("values", "groups") and isinstance(item, (list, tuple)) and len(item) == 2:
        # [path, value] and [user, group] pairs, as Jinja's zip and product build them
        item = dict(zip(("path", "value") if kind == "values" else ("user", "group"), item))
    if not isinstance(item, dict):
        _fail(owner, "%s entries must be mappings, got %r" % (kind, item))
    need = {"values": ("path", "value"), "json_keys": ("path", "keys"), "groups": ("user", "group"), "units": ("name",)}[kind]
    missing = [key for key in need if key not in item]
    if missing:
        _fail(owner, "%s entry %r lacks %s" % (kind, item, ", ".join(missing)))
    if kind == "values":
        value = {"path": str(item["path"]), "value": str(item["value"]).strip()}
        if item.get("cpus") not in (None, "", "all"):
            # a cpulist expands the path's {cpu} placeholder (cpu_governor_cpus: "0-95,192-287")
            if "{cpu}" not in value["path"]:
                _fail(owner, "values entry %s: cpus needs a {cpu} placeholder in the path" % value["path"])
            try:
                value["cpus"] = sorted(parse_cpulist(str(item["cpus"])))
            except (TopotuneError, ValueError) as err:
                _fail(owner, "values entry %s: cpus %r is not a cpulist (%s)" % (value["path"], item["cpus"], err))
        return value
    if kind == "json_keys":
        if not isinstance(item["keys"], dict) or not str(item["path"]).startswith("/"):
            _fail(owner, "json_keys entry needs an absolute path and keys as a mapping, got %r" % (item,))
        return {"path": str(item["path"]), "keys": item["keys"]}
    if kind == "groups":
        return {"user": str(item["user"]), "group": str(item["group"])}
    enabled, active = item.get("enabled"), item.get("active")
    for name, flag in (("enabled", enabled), ("active", active)):
        if flag is not None and not isinstance(flag, bool):
            _fail(owner, "units entry %s: %s must be true, false or null, got %r" % (item["name"], name, flag))
    return {"name": str(item["name"]), "enabled": enabled, "active": active}


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def file_state(path):
    """``{sha256, mode, owner, group}`` of ``path``, or ``None`` when it does not exist."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        return {"error": err.strerror or err.__class__.__name__}
    digest = hashlib.sha256()
    if stat.S_ISREG(info.st_mode):
        try:
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as err:
            return {"error": err.strerror or err.__class__.__name__}
    return {
        "sha256": digest.hexdigest(),
        "mode": "%04o" % (info.st_mode & 0o7777),
        "owner": _name(pwd.getpwuid, info.st_uid),
        "group": _name(grp.getgrgid, info.st_gid),
    }


def _is_glob(path):
    return any(char in path for char in _GLOB_CHARS)


def _value_paths(sysroot, path, cpus=None):
    if cpus is not None:
        return [join(sysroot, path.replace("{cpu}", str(cpu))) for cpu in cpus]
    full = join(sysroot, path)
    return sorted(glob.glob(full)) if _is_glob(path) else [full]


def build_manifest(entries, read_file=file_state):
    """The manifest for ``entries``: files with their current state, values with their glob match counts."""
    owners = normalize_entries(entries)
    for spec in owners.values():
        spec["files"] = {path: read_file(path) for path in sorted(set(spec["files"]))}
        for value in spec["values"]:
            if "cpus" in value:
                # CPUs without the file (no cpufreq) are left alone by the roles, so they are not watched
                value["cpus"] = [c for c in value["cpus"] if os.path.exists(join(spec["sysroot"], value["path"].replace("{cpu}", str(c))))]
            elif _is_glob(value["path"]):
                value["matched"] = len(_value_paths(spec["sysroot"], value["path"]))
    return {"version": MANIFEST_VERSION, "owners": owners}


def merge_manifest(previous, new, keep_other_owners=True):
    """``new`` plus, with ``keep_other_owners``, the owners of ``previous`` that ``new`` does not name."""
    owners = {}
    if keep_other_owners and isinstance(previous, dict) and isinstance(previous.get("owners"), dict):
        owners.update(previous["owners"])
    owners.update(new["owners"])
    return {"version": MANIFEST_VERSION, "owners": dict(sorted(owners.items()))}


def dumps(manifest):
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def flatten_keys(keys, prefix=()):
    """Owned leaves of a nested mapping as ``[(('a', 'b'), value)]``; an empty mapping is a leaf."""
    leaves = []
    for key, value in keys.items():
        path = prefix + (str(key),)
        if isinstance(value, dict) and value:
            leaves.extend(flatten_keys(value, path))
        else:
            leaves.append((path, value))
    return leaves


_MISSING = object()


def _dig(data, path):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


def read_group_db(group_file="/etc/group", passwd_file="/etc/passwd"):
    """``({group: set(members)}, {user: primary group name})`` from the account files (no NSS round trips)."""
    members, gid_names, primary = {}, {}, {}
    try:
        with open(group_file, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.rstrip("\n").split(":")
                if len(parts) >= 4 and parts[0]:
                    members[parts[0]] = {m for m in parts[3].split(",") if m}
                    gid_names[parts[2]] = parts[0]
    except OSError:
        pass
    try:
        with open(passwd_file, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.rstrip("\n").split(":")
                if len(parts) >= 4 and parts[0]:
                    primary[parts[0]] = gid_names.get(parts[3], parts[3])
    except OSError:
        pass
    return members, primary


def parse_systemctl_show(text, names):
    """``{name: {enabled, active, load}}`` from ``systemctl show -p Id,LoadState,UnitFileState,ActiveState``.

    Blocks come in argument order, separated by blank lines; a unit systemd does not know has LoadState=not-found.
    """
    blocks = text.strip().split("\n\n") if text.strip() else []
    states = {}
    for name, block in zip(names, blocks):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        states[name] = {
            "enabled": props.get("UnitFileState", ""),
            "active": props.get("ActiveState", ""),
            "load": props.get("LoadState", ""),
        }
    return states


_ENABLED = ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated")


def _drift(owner, kind, item, expected, observed):
    return {"owner": owner, "kind": kind, "item": item, "expected": expected, "observed": observed, "corrected": False}


def _differing(expected, observed):
    if observed is None:
        return expected, ABSENT
    if expected is None:
        return ABSENT, observed
    keys = [k for k in ("sha256", "mode", "owner", "group") if expected.get(k) != observed.get(k)]
    if "error" in observed:
        keys.append("error")
    return {k: expected.get(k) for k in keys}, {k: observed.get(k) for k in keys}


def verify_manifest(manifest, read_file=file_state, unit_states=None, group_db=None):
    """Compare the node with ``manifest``; returns ``{checked, drifted, owners_drifted}``.

    ``unit_states(names)`` returns ``parse_systemctl_show``'s shape for all unit names at once;
    ``group_db`` is ``read_group_db()``'s result (read lazily when groups are watched).
    """
    if not isinstance(manifest, dict) or not isinstance(manifest.get("owners"), dict):
        raise ManifestError("managed_state: the manifest has no owners mapping; run playbooks/site.yml to record it again")
    owners = manifest["owners"]
    drifted, checked = [], 0
    unit_names = sorted({u["name"] for spec in owners.values() for u in spec.get("units") or []})
    units = unit_states(unit_names) if unit_names and unit_states else {}
    if group_db is None and any(spec.get("groups") for spec in owners.values()):
        group_db = read_group_db()
    json_cache = {}
    for owner in sorted(owners):
        spec = owners[owner]
        sysroot = spec.get("sysroot") or "/"
        for path, expected in sorted((spec.get("files") or {}).items()):
            checked += 1
            observed = read_file(path)
            if observed != expected:
                exp, obs = _differing(expected, observed)
                drifted.append(_drift(owner, "file", path, exp, obs))
        for value in spec.get("values") or []:
            checked += 1
            paths = _value_paths(sysroot, value["path"], value.get("cpus"))
            wanted = value["value"]
            if _is_glob(value["path"]) and not paths:
                if value.get("matched"):
                    drifted.append(_drift(owner, "value", value["path"], wanted, "no path matches (%d at record time)" % value["matched"]))
                continue
            wrong = {}
            for full in paths:
                try:
                    with open(full, encoding="utf-8", errors="replace") as handle:
                        current = handle.read().strip()
                except OSError:
                    current = ABSENT
                if current != wanted:
                    wrong.setdefault(current, []).append(os.path.relpath(full, sysroot) if sysroot != "/" else full)
            if wrong:
                if _is_glob(value["path"]) or "cpus" in value:
                    observed = dict(wrong)
                else:
                    observed = next(iter(wrong))
                drifted.append(_drift(owner, "value", value["path"], wanted, observed))
        for entry in spec.get("json_keys") or []:
            path = entry["path"]
            if path not in json_cache:
                try:
                    with open(path, encoding="utf-8") as handle:
                        json_cache[path] = json.load(handle)
                except FileNotFoundError:
                    json_cache[path] = _MISSING
                except (OSError, ValueError) as err:
                    json_cache[path] = "unreadable: %s" % err
            data = json_cache[path]
            for keypath, wanted in flatten_keys(entry["keys"]):
                checked += 1
                current = _dig(data, keypath) if isinstance(data, dict) else _MISSING
                if current != wanted:
                    observed = data if isinstance(data, str) else (ABSENT if current is _MISSING else current)
                    drifted.append(_drift(owner, "json_key", "%s#/%s" % (path, "/".join(keypath)), wanted, observed))
        for entry in spec.get("groups") or []:
            checked += 1
            members, primary = group_db
            user, group = entry["user"], entry["group"]
            if group not in members:
                drifted.append(_drift(owner, "group", "%s in %s" % (user, group), True, "group %s does not exist" % group))
            elif user not in members[group] and primary.get(user) != group:
                drifted.append(_drift(owner, "group", "%s in %s" % (user, group), True, False))
        for entry in spec.get("units") or []:
            state = units.get(entry["name"], {"enabled": "", "active": "", "load": "unknown"})
            for flag, key, truthy in (("enabled", "enabled", _ENABLED), ("active", "active", ("active", "activating", "reloading"))):
                if entry.get(flag) is None:
                    continue
                checked += 1
                current = state[key] in truthy
                if current != entry[flag]:
                    observed = state[key] or state["load"] or "unknown"
                    drifted.append(_drift(owner, "unit", "%s %s" % (entry["name"], flag), entry[flag], observed))
    return {"checked": checked, "drifted": drifted, "owners_drifted": sorted({d["owner"] for d in drifted})}


def _key(item):
    return (item.get("owner"), item.get("kind"), item.get("item"))


def mark_corrected(previous, current):
    """``previous`` drift items with ``corrected`` set (true when no longer in ``current``), then new items of ``current``."""
    still = {_key(item) for item in current}
    seen = set()
    report = []
    for item in previous or []:
        if not isinstance(item, dict):
            continue
        seen.add(_key(item))
        report.append(dict(item, corrected=_key(item) not in still))
    report.extend(dict(item, corrected=False) for item in current if _key(item) not in seen)
    return report


def summarize(drifted):
    """One short phrase per drifted item, grouped by owner: 'cpu_governor: 4 paths not performance; ...'."""
    parts = {}
    for item in drifted:
        if item["kind"] == "value" and isinstance(item["observed"], dict):
            count = sum(len(v) for v in item["observed"].values())
            text = "%d path(s) of %s not %s" % (count, item["item"], item["expected"])
        elif item["kind"] == "file":
            what = ", ".join(sorted(item["observed"])) if isinstance(item["observed"], dict) else item["observed"]
            text = "%s %s" % (item["item"], what)
        else:
            text = "%s (%s)" % (item["item"], item["observed"])
        parts.setdefault(item["owner"], []).append(text)
    return "; ".join("%s: %s" % (owner, ", ".join(texts)) for owner, texts in sorted(parts.items()))
