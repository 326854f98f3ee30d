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

At record time every owner also gets ``dirs``: the directories of its files that lie under ``owned_root`` (the
manifest's directory, ``/etc/topotune``, but not that directory itself, which holds the manifest and the run lock).
Those directories are topotune's alone, so verification reports any other entry in them as ``stale``. The manifest
also keeps ``owned_root``: in it and in the directories between it and the owners' ``dirs``, every *directory* that
leads to no owner's directory (an operator's ``mv container container.bak``) is ``stale`` too, except the ones
topotune writes without recording them (``UNRECORDED_DIRS``). Files there (the manifest, the reboot record) are not
watched. Nothing is listed through a symlink: an owned directory, or one on the way to it, that is a symlink (or a
file) is itself a ``stale`` item (expected ``directory``), and its target is never read or removed.

Unit enablement is read from the unit files on disk (``unit_file_state``, the rules of systemd's
``systemctl is-enabled``), not from the running manager: ``systemctl show`` answers from its cache, which still says
``enabled`` after the ``multi-user.target.wants`` link was removed by hand until someone runs ``daemon-reload``.

Public API (standard library only, Python 3.8+): ``normalize_entries``, ``file_state``, ``build_manifest``,
``merge_manifest``, ``load_manifest``, ``manifest_problem``, ``verify_manifest``, ``manifest_item``,
``unit_file_state``, ``parse_systemctl_show``, ``read_group_db``, ``flatten_keys``, ``stale_entries``, ``prune_plan``,
``remove_entry``, ``mark_corrected``, ``summarize``. Drift items have the shape of the report's ``drift/<host>.json``:
``{owner, kind, item, expected, observed, corrected}``; ``kind`` is ``file``, ``value``, ``json_key``, ``group``,
``unit``, ``stale`` or ``manifest``.
"""

import glob
import grp
import hashlib
import json
import os
import pwd
import shutil
import stat

from ..core.cpulist import parse as parse_cpulist
from ..core.errors import TopotuneError
from ..core.sysroot import join

MANIFEST_VERSION = 1
KINDS = ("files", "values", "json_keys", "groups", "units")
ABSENT = "absent"
_GLOB_CHARS = ("*", "?", "[")
# Directories directly below the owned root that topotune writes without recording them in the manifest, so never
# stale: the node-local drift check's configuration (role drift_exporter, /etc/topotune/drift-exporter/config.json;
# tests/unit/plugins/module_utils/state/test_managed_state.py compares it with the role).
UNRECORDED_DIRS = ("drift-exporter",)
# A stale directory's entries are counted up to this many (the count is for the report, not a limit on removal).
_COUNT_LIMIT = 1000


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


def _entry_type(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "other"


def file_state(path):
    """``{sha256, mode, owner, group}`` of the regular file ``path``, ``None`` when nothing is there.

    The path itself is examined, not what a symlink points to: a managed file replaced by a symlink (even to a copy
    of the same content) or by a directory is drift. Those give ``{type: symlink, target}`` or ``{type: directory,
    ...}``; a regular file has no ``type`` key, so manifests recorded before types were watched still compare.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        return {"error": err.strerror or err.__class__.__name__}
    kind = _entry_type(info.st_mode)
    if kind == "symlink":
        try:
            return {"type": "symlink", "target": os.readlink(path)}
        except OSError as err:
            return {"type": "symlink", "error": err.strerror or err.__class__.__name__}
    state = {
        "mode": "%04o" % (info.st_mode & 0o7777),
        "owner": _name(pwd.getpwuid, info.st_uid),
        "group": _name(grp.getgrgid, info.st_gid),
    }
    if kind != "file":
        return dict(state, type=kind)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as err:
        return {"error": err.strerror or err.__class__.__name__}
    return dict(state, sha256=digest.hexdigest())


def _is_glob(path):
    return any(char in path for char in _GLOB_CHARS)


def _value_paths(sysroot, path, cpus=None):
    if cpus is not None:
        return [join(sysroot, path.replace("{cpu}", str(cpu))) for cpu in cpus]
    full = join(sysroot, path)
    return sorted(glob.glob(full)) if _is_glob(path) else [full]


def _under(path, root):
    """True when ``path`` lies strictly below the directory ``root``."""
    root = os.path.normpath(root)
    return os.path.normpath(path).startswith(root.rstrip("/") + "/")


def owned_dirs(files, owned_root):
    """The directories of ``files`` strictly below ``owned_root``: topotune's alone, watched for stale entries."""
    if not owned_root:
        return []
    return sorted({os.path.dirname(path) for path in files if _under(os.path.dirname(path), owned_root)})


def build_manifest(entries, read_file=file_state, owned_root=None):
    """The manifest for ``entries``: files with their current state, values with their glob match counts, the
    directories below ``owned_root`` that hold the owner's files (``dirs``), and ``owned_root`` itself."""
    if owned_root is not None and not (isinstance(owned_root, str) and owned_root.startswith("/")):
        raise ManifestError("managed_state: owned_root must be an absolute path, got %r" % (owned_root,))
    owners = normalize_entries(entries)
    for spec in owners.values():
        spec["dirs"] = owned_dirs(spec["files"], owned_root)
        spec["files"] = {path: read_file(path) for path in sorted(set(spec["files"]))}
        for value in spec["values"]:
            if "cpus" in value:
                # CPUs without the file (no cpufreq) are left alone by the roles, so they are not watched
                value["cpus"] = [c for c in value["cpus"] if os.path.exists(join(spec["sysroot"], value["path"].replace("{cpu}", str(c))))]
            elif _is_glob(value["path"]):
                value["matched"] = len(_value_paths(spec["sysroot"], value["path"]))
    manifest = {"version": MANIFEST_VERSION, "owners": owners}
    if owned_root:
        manifest["owned_root"] = os.path.normpath(owned_root)
    return manifest


def merge_manifest(previous, new, keep_other_owners=True):
    """``new`` plus, with ``keep_other_owners``, the owners of ``previous`` that ``new`` does not name; the owned
    root is ``new``'s (``previous``'s when ``new`` has none)."""
    owners = {}
    previous = previous if isinstance(previous, dict) else {}
    if keep_other_owners and isinstance(previous.get("owners"), dict):
        owners.update(previous["owners"])
    owners.update(new["owners"])
    merged = {"version": MANIFEST_VERSION, "owners": dict(sorted(owners.items()))}
    owned_root = new.get("owned_root") or previous.get("owned_root")
    if owned_root:
        merged["owned_root"] = owned_root
    return merged


def dumps(manifest):
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


# The manifest's own states: what a drift check says instead of verifying when it cannot read the record.
MANIFEST_OK, MANIFEST_MISSING, MANIFEST_UNREADABLE = "ok", "missing", "unreadable"
MANIFEST_REMEDY = "run playbooks/site.yml (or playbooks/drift.yml -e topotune_correct=true) to record it again"


def load_manifest(path):
    """``(state, manifest, reason)``: ``ok`` with the parsed manifest, or ``missing`` / ``unreadable`` with ``None``
    and why (an OS error, not JSON, or JSON that is not a manifest). Never raises for the file's content."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return MANIFEST_MISSING, None, "no such file"
    except OSError as err:
        return MANIFEST_UNREADABLE, None, err.strerror or err.__class__.__name__
    if not raw.strip():
        return MANIFEST_UNREADABLE, None, "empty file (%d bytes)" % len(raw)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        return MANIFEST_UNREADABLE, None, "not UTF-8 text (byte %d)" % err.start
    except ValueError as err:
        return MANIFEST_UNREADABLE, None, "not valid JSON (%s)" % err
    problem = manifest_problem(data)
    if problem:
        return MANIFEST_UNREADABLE, None, problem
    return MANIFEST_OK, data, None


def _is_str_list(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _spec_problem(spec):
    """Why the recorded entries of one owner cannot be verified, or None."""
    if not isinstance(spec, dict):
        return "is not a mapping"
    if not isinstance(spec.get("sysroot", "/"), str):
        return "sysroot is not a string"
    files = spec.get("files") or {}
    if not isinstance(files, dict) or not all(v is None or isinstance(v, dict) for v in files.values()):
        return "files is not a mapping of path to state"
    if not _is_str_list(spec.get("dirs") or []):
        return "dirs is not a list of paths"
    shapes = {"values": {"path": str, "value": str}, "json_keys": {"path": str, "keys": dict},
              "groups": {"user": str, "group": str}, "units": {"name": str}}
    for kind, fields in shapes.items():
        items = spec.get(kind) or []
        if not isinstance(items, list):
            return "%s is not a list" % kind
        for item in items:
            if not isinstance(item, dict) or not all(isinstance(item.get(k), t) for k, t in fields.items()):
                return "%s entry %s lacks %s" % (kind, json.dumps(item)[:80], ", ".join(fields))
            if kind == "values" and not (_is_int_list(item.get("cpus", [])) and isinstance(item.get("matched", 0), int)):
                return "values entry %s: cpus or matched malformed" % item["path"]
            if kind == "units" and not all(item.get(f) in (None, True, False) for f in ("enabled", "active")):
                return "units entry %s: enabled/active not true, false or null" % item["name"]
    return None


def _is_int_list(value):
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def manifest_problem(data):
    """Why parsed JSON is not a manifest this code can verify (hand-edited, another file), or None."""
    if not isinstance(data, dict):
        return "not a manifest: a JSON %s, not an object" % type(data).__name__
    if not isinstance(data.get("owners"), dict):
        return "not a manifest: no owners mapping"
    if "owned_root" in data and not (isinstance(data["owned_root"], str) and data["owned_root"].startswith("/")):
        return "owned_root is not an absolute path"
    for owner, spec in sorted(data["owners"].items()):
        problem = _spec_problem(spec)
        if problem:
            return "owner %s: %s" % (owner, problem)
    return None


def manifest_item(path, state, reason):
    """The drift item standing for a manifest that could not be read: nothing else on the node was verified."""
    observed = state if state == MANIFEST_MISSING else "%s: %s" % (state, reason)
    return _drift("manifest", "manifest", path, "recorded by playbooks/site.yml", observed)


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


# systemd's unit search path for the system manager, in its order (`systemd-analyze unit-paths` of Debian 12's
# systemd 252; /lib/systemd/system is the same directory on merged-/usr systems). The first one holding the name
# wins: a unit file in /etc/systemd/system shadows a runtime mask in /run/systemd/system.
UNIT_SEARCH_PATH = (
    "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
    "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached", "/run/systemd/system",
    "/run/systemd/system.attached", "/run/systemd/generator", "/usr/local/lib/systemd/system",
    "/lib/systemd/system", "/usr/lib/systemd/system", "/run/systemd/generator.late",
)
_UNIT_CONFIG = "/etc/systemd/system"  # where `systemctl enable` puts its links
_UNIT_GENERATORS = ("/run/systemd/generator.early", "/run/systemd/generator", "/run/systemd/generator.late")
_UNIT_TRANSIENT = "/run/systemd/transient"
_UNIT_LINK_DIRS = (".wants", ".requires", ".upholds")
_INSTALL_KEYS = ("Alias", "WantedBy", "RequiredBy", "UpheldBy", "Also", "DefaultInstance")


def _unit_template(name):
    """``foo@.service`` for the instance ``foo@bar.service``, else None."""
    prefix, at, rest = name.partition("@")
    if not at or "." not in rest or rest.startswith("."):
        return None
    return "%s@%s" % (prefix, rest[rest.rindex("."):])


def _lstat(root, path):
    try:
        return os.lstat(join(root, path))
    except OSError:
        return None


def _null_or_empty(info):
    # systemd's null_or_empty(): an empty regular file or a device node masks a unit
    return info is not None and ((stat.S_ISREG(info.st_mode) and info.st_size == 0)
                                 or stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode))


def _find_unit_file(name, root):
    """``(path, how)`` of the unit file ``name`` resolves to, following alias and linked-unit symlinks as systemd
    does; ``how`` is ``regular``, ``masked`` or ``bad`` (a directory, socket or FIFO stands there: systemctl fails).
    None when there is none or a symlink dangles."""
    path = None
    for candidate in filter(None, (name, _unit_template(name))):
        path = next((d + "/" + candidate for d in UNIT_SEARCH_PATH if _lstat(root, d + "/" + candidate)), None)
        if path:
            break
    for _unused in range(64):
        info = _lstat(root, path) if path else None
        if info is None:
            return None
        if not stat.S_ISLNK(info.st_mode):
            if _null_or_empty(info):
                return path, "masked"
            return path, "regular" if stat.S_ISREG(info.st_mode) else "bad"
        try:
            target = os.readlink(join(root, path))
        except OSError:
            return None
        target = os.path.normpath(target if target.startswith("/") else os.path.join(os.path.dirname(path), target))
        if target == "/dev/null" or _null_or_empty(_stat(root, target)):
            return path, "masked"
        path = target
    return path, "bad"  # a symlink loop


def _stat(root, path):
    try:
        return os.stat(join(root, path))
    except (OSError, TopotuneError):
        return None


def _install_section(root, path, name):
    """``{key: [values]}`` of the ``[Install]`` section of the unit file and its drop-ins (``<name>.d/*.conf``)."""
    found = {key: [] for key in _INSTALL_KEYS}
    sources = [path]
    for unit in filter(None, (name, _unit_template(name))):
        for d in UNIT_SEARCH_PATH:
            dropins = join(root, "%s/%s.d" % (d, unit))
            try:
                sources.extend("%s/%s.d/%s" % (d, unit, f) for f in sorted(os.listdir(dropins)) if f.endswith(".conf"))
            except OSError:
                continue
    for source in sources:
        try:
            with open(join(root, source), encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        section = None
        for line in lines:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Install" and "=" in line and not line.startswith(("#", ";")):
                key, value = (part.strip() for part in line.split("=", 1))
                if key in found:
                    # an empty assignment resets the list, as in systemd's config parser
                    found[key] = found[key] + value.split() if value else []
    return found


def _symlinks_in(root, directory, name, link_dir, known, ignore_same_name, config_dir):
    """systemd's find_symlinks_in_directory(): ``(found, same_name_link)`` for the symlinks in ``directory``."""
    try:
        entries = sorted(os.listdir(join(root, directory)))
    except OSError:
        return False, False
    same_name = False
    for entry in entries:
        full = directory + "/" + entry
        info = _lstat(root, full)
        if info is None or not stat.S_ISLNK(info.st_mode):
            continue
        found_dest = found_path = False
        if not link_dir:
            try:
                found_dest = os.path.basename(os.readlink(join(root, full))) == name
            except OSError:
                continue
        if link_dir or not ignore_same_name:
            found_path = entry == name
        if not found_path and link_dir:
            found_dest = _unit_template(entry) == name
        if found_path and found_dest and full == config_dir + "/" + name:
            same_name = True
        elif (found_path or found_dest) and (known is None or entry in known):
            return True, same_name
    return False, same_name


def _find_symlinks(root, directory, name, known, ignore_same_name):
    """systemd's find_symlinks(): links in ``*.wants``, ``*.requires``, ``*.upholds`` of ``directory``, then in it."""
    try:
        entries = sorted(os.listdir(join(root, directory)))
    except OSError:
        return False, False
    for entry in entries:
        info = _lstat(root, directory + "/" + entry)
        if info is not None and stat.S_ISDIR(info.st_mode) and os.path.splitext(entry)[1] in _UNIT_LINK_DIRS:
            found, _unused = _symlinks_in(root, directory + "/" + entry, name, True, known, ignore_same_name, directory)
            if found:
                return True, False
    return _symlinks_in(root, directory, name, False, known, ignore_same_name, directory)


def _links_state(root, name, path, known):
    """systemd's find_symlinks_in_scope(): enabled / enabled-runtime / static (instance) / linked, or None."""
    in_runtime = at_all = same_config = same_runtime = ignore_same_name = False
    for directory in UNIT_SEARCH_PATH:
        found, same_name = _find_symlinks(root, directory, name, known, ignore_same_name)
        runtime = directory.startswith("/run/")
        if found:
            if directory == _UNIT_CONFIG:
                return "enabled"
            in_runtime, at_all = in_runtime or runtime, at_all or not runtime
        elif same_name:
            same_config, same_runtime = same_config or directory == _UNIT_CONFIG, same_runtime or runtime
        ignore_same_name = ignore_same_name or path.startswith(directory + "/")
    if in_runtime:
        return "enabled-runtime"
    if at_all and _unit_template(name):
        return "static"
    if same_config:
        return "linked"
    if same_runtime:
        return "linked-runtime"
    return None


def unit_file_state(name, root="/"):
    """What ``systemctl is-enabled NAME`` answers, read from the unit files under ``root``: ``enabled``,
    ``enabled-runtime``, ``linked``, ``linked-runtime``, ``alias``, ``masked``, ``masked-runtime``, ``static``,
    ``indirect``, ``disabled``, ``generated``, ``transient``, ``bad`` (not a unit file), or ``not-found``.

    A port of systemd's unit_file_lookup_state() (src/shared/install.c) for the system manager: the unit file is the
    first one on the search path (an instance falls back to its template), a symlink to /dev/null or an empty file
    masks it, and it is enabled by a symlink with its name in a ``*.wants``/``*.requires``/``*.upholds`` directory
    of /etc/systemd/system (of /run/systemd/system: ``enabled-runtime``). Presets are not read: they only matter to
    ``systemctl preset``.
    """
    found = _find_unit_file(name, root)
    if found is None:
        return "not-found"
    path, how = found
    if how != "regular":
        return how if how == "bad" else "masked-runtime" if path.startswith("/run/") else "masked"
    if os.path.basename(path) != name and os.path.basename(path) != _unit_template(name):
        return "alias"
    directory = os.path.dirname(path)
    if directory in _UNIT_GENERATORS:
        return "generated"
    if directory == _UNIT_TRANSIENT:
        return "transient"
    install = _install_section(root, path, name)
    known = {name} | set(install["Alias"])
    template = _unit_template(name) is None and "@." in name
    if template and install["DefaultInstance"]:
        known.add(name.replace("@.", "@%s." % install["DefaultInstance"][-1], 1))
    state = _links_state(root, name, path, known)
    if state:
        return state
    if _links_state(root, name, path, None):
        return "indirect"
    if any(install[key] for key in ("Alias", "WantedBy", "RequiredBy", "UpheldBy")):
        return "disabled"
    return "indirect" if install["Also"] else "static"


_ENABLED = ("enabled", "static", "alias", "indirect", "generated")


def _drift(owner, kind, item, expected, observed):
    return {"owner": owner, "kind": kind, "item": item, "expected": expected, "observed": observed, "corrected": False}


def _differing(expected, observed):
    if observed is None:
        return expected, ABSENT
    if expected is None:
        return ABSENT, observed
    if expected.get("type", "file") != observed.get("type", "file"):
        # another kind of entry stands at the path: its type (and a symlink's target) says it all
        keys = ("type", "target")
        return ({k: expected.get(k, "file") for k in keys if k in expected or k == "type"},
                {k: observed.get(k, "file") for k in keys if k in observed or k == "type"})
    keys = [k for k in ("target", "sha256", "mode", "owner", "group") if expected.get(k) != observed.get(k)]
    if "error" in observed:
        keys.append("error")
    return {k: expected.get(k) for k in keys}, {k: observed.get(k) for k in keys}


def _count_entries(path):
    """Entries below the directory ``path``, symlinks counted, never followed; ``(count, capped)``."""
    count = 0
    for _top, dirs, files in os.walk(path, followlinks=False):
        count += len(dirs) + len(files)
        if count >= _COUNT_LIMIT:
            return _COUNT_LIMIT, True
    return count, False


def _describe_entry(path):
    """``file``, ``directory (N entries)``, ``symlink to <target>`` or ``other``: what stands at a stale path."""
    state = file_state(path) or {}
    kind = state.get("type", "file")
    if kind == "symlink":
        return "symlink to %s" % state.get("target", "?")
    if kind == "directory":
        count, capped = _count_entries(path)
        if capped:
            return "directory (%d+ entries)" % count
        return "directory (%s)" % ("empty" if count == 0 else "1 entry" if count == 1 else "%d entries" % count)
    return kind


def _lstat_mode(path):
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def stale_entries(owners, owned_root=None):
    """``([(owner, path, expected, observed)], checked)``: what stands in topotune's directories and no owner manages.

    - every entry of an owner's ``dirs`` that is neither a managed file nor a watched directory (each directory is
      checked for the first owner, by name, that lists it);
    - with ``owned_root``, every directory in it and in the directories between it and the ``dirs`` that leads to
      no watched directory (``UNRECORDED_DIRS`` excepted in ``owned_root``), for the owner whose directory name
      begins its name (``container.bak``: the owner of ``container``), else the first owner below;
    - an owned directory, or one on the way to it, that is not a real directory (a symlink, a file): the item is
      that path, expected ``directory``, and nothing is listed through it.

    ``expected`` is ``absent`` for a stale entry. ``checked`` counts the directories examined. A missing directory
    is not stale (its files are reported absent). Symlinks are never followed below ``owned_root``.
    """
    managed = {os.path.normpath(path) for spec in owners.values() for path in (spec.get("files") or {})}
    root = os.path.normpath(owned_root) if owned_root else None
    dir_owner = {}
    for owner in sorted(owners):
        for directory in owners[owner].get("dirs") or []:
            dir_owner.setdefault(os.path.normpath(directory), owner)
    # the directories between the owned root and the owners' dirs: {directory: {child name: [owners below it]}}
    ways = {}
    if root:
        for directory, owner in sorted(dir_owner.items()):
            if not _under(directory, root):
                continue
            parent = root
            for name in os.path.relpath(directory, root).split(os.sep):
                below = ways.setdefault(parent, {}).setdefault(name, [])
                if owner not in below:
                    below.append(owner)
                parent = os.path.join(parent, name)
    watched = set(dir_owner) | set(ways)

    def owner_below(directory):
        below = sorted({o for d, o in dir_owner.items() if d == directory or _under(d, directory)})
        return below[0] if below else dir_owner.get(directory)

    def owner_by_name(directory, name):
        prefixes = sorted((-len(child), sorted(below)[0]) for child, below in ways[directory].items()
                          if name.startswith(child))
        return prefixes[0][1] if prefixes else owner_below(directory)

    stale, blocked, checked = [], [], 0
    for directory in sorted(watched):  # a directory sorts before what lies below it
        if any(directory == b or _under(directory, b) for b in blocked):
            continue
        if directory != root:
            mode = _lstat_mode(directory)
            if mode is None:
                blocked.append(directory)  # missing: its files are reported absent
                continue
            if not stat.S_ISDIR(mode):
                stale.append((owner_below(directory), directory, "directory", _describe_entry(directory)))
                blocked.append(directory)
                continue
        checked += 1
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if path in managed or path in watched:
                continue
            if directory in dir_owner:
                stale.append((dir_owner[directory], path, ABSENT, _describe_entry(path)))
            elif stat.S_ISDIR(_lstat_mode(path) or 0) and not (directory == root and name in UNRECORDED_DIRS):
                stale.append((owner_by_name(directory, name), path, ABSENT, _describe_entry(path)))
    return stale, checked


def remove_entry(path):
    """Remove what ``prune_plan`` names: a file or symlink with ``unlink`` (a symlink's target is never touched), a
    directory with everything below it. False when nothing was there.

    ``shutil.rmtree`` never follows a symlink below the directory: on Linux it walks by file descriptor
    (``os.scandir``/``unlink``/``rmdir`` relative to each opened directory, checked with ``fstat`` against the
    ``lstat`` it opened), so a link inside a stale directory pointing out of topotune's directories is removed as
    a link and what it points to stays."""
    mode = _lstat_mode(path)
    if mode is None:
        return False
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return True


def verify_manifest(manifest, read_file=file_state, unit_states=None, group_db=None, unit_root="/"):
    """Compare the node with ``manifest``; returns ``{checked, drifted, owners_drifted}``.

    Unit enablement is read from the unit files under ``unit_root`` (``unit_file_state``); ``unit_states(names)``
    (``parse_systemctl_show``'s shape, one call for all names) is asked only for units whose ``active`` flag is
    watched. ``group_db`` is ``read_group_db()``'s result (read lazily when groups are watched).
    """
    if not isinstance(manifest, dict) or not isinstance(manifest.get("owners"), dict):
        raise ManifestError("managed_state: the manifest has no owners mapping; %s" % MANIFEST_REMEDY)
    owners = manifest["owners"]
    drifted, checked = [], 0
    active_names = sorted({u["name"] for spec in owners.values() for u in spec.get("units") or [] if u.get("active") is not None})
    units = unit_states(active_names) if active_names and unit_states else {}
    enablement = {}
    if group_db is None and any(spec.get("groups") for spec in owners.values()):
        group_db = read_group_db()
    stale, dirs_checked = stale_entries(owners, manifest.get("owned_root"))
    checked += dirs_checked
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
        for stale_owner, path, wanted, found in stale:
            if stale_owner == owner:
                drifted.append(_drift(owner, "stale", path, wanted, found))
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
            name = entry["name"]
            if entry.get("enabled") is not None:
                checked += 1
                if name not in enablement:
                    enablement[name] = unit_file_state(name, unit_root)
                if (enablement[name] in _ENABLED) != entry["enabled"]:
                    drifted.append(_drift(owner, "unit", "%s enabled" % name, entry["enabled"], enablement[name]))
            if entry.get("active") is not None:
                checked += 1
                state = units.get(name, {"active": "", "load": "unknown"})
                if (state["active"] in ("active", "activating", "reloading")) != entry["active"]:
                    observed = state["active"] or state["load"] or "unknown"
                    drifted.append(_drift(owner, "unit", "%s active" % name, entry["active"], observed))
    return {"checked": checked, "drifted": drifted, "owners_drifted": sorted({d["owner"] for d in drifted})}


def verify_path(path, unit_states=None, unit_root="/", group_db=None):
    """``verify_manifest`` of the manifest at ``path`` plus its state (``manifest_state``: ok, missing or unreadable,
    and ``manifest_reason``). A manifest that cannot be read gives one ``manifest`` drift item and nothing checked."""
    state, manifest, reason = load_manifest(path)
    if state != MANIFEST_OK:
        return {"checked": 0, "drifted": [manifest_item(path, state, reason)], "owners_drifted": ["manifest"],
                "manifest_state": state, "manifest_reason": reason}
    result = verify_manifest(manifest, unit_states=unit_states, group_db=group_db, unit_root=unit_root)
    return dict(result, manifest_state=state, manifest_reason=None)


def prune_plan(manifest, previous):
    """What a correction removes before the roles run, as ``[(path, what)]``: the ``stale`` entries of ``previous``
    (drift items of the run being corrected) that are still stale (a directory with what it holds; a symlink or file
    standing where an owned directory belongs), and a directory standing where a managed file of an owner
    ``previous`` names belongs (the roles' atomic rename cannot replace a directory). Nothing outside the manifest's
    files, ``dirs`` and owned root is ever named, and nothing reached through a symlink below the owned root."""
    if manifest_problem(manifest):
        return []
    owners = manifest["owners"]
    items = [d for d in previous or [] if isinstance(d, dict)]
    named = {d.get("owner") for d in items}
    found, _checked = stale_entries(owners, manifest.get("owned_root"))
    still_stale = {path: wanted for _owner, path, wanted, _found in found}
    # managed files are not looked at below a path that is not a real directory (its own stale item says so)
    blocked = [path for path, wanted in still_stale.items() if wanted != ABSENT]
    plan = []
    for d in items:
        path = d.get("item")
        if d.get("kind") != "stale" or path not in still_stale:
            continue
        what = _describe_entry(path)
        plan.append((path, "stale %s" % what if still_stale[path] == ABSENT else "%s in place of a topotune directory" % what))
    for owner in sorted(named & set(owners)):
        for path in sorted(owners[owner].get("files") or {}):
            if any(_under(path, b) for b in blocked):
                continue
            if (file_state(path) or {}).get("type") == "directory":
                plan.append((path, "directory in place of a managed file"))
    return sorted(set(plan))


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
        elif item["kind"] == "stale":
            text = "stale %s (%s)" % (item["item"], item["observed"])
        elif item["kind"] == "manifest":
            text = "%s %s: nothing verified; %s" % (item["item"], item["observed"], MANIFEST_REMEDY)
        else:
            text = "%s (%s)" % (item["item"], item["observed"])
        parts.setdefault(item["owner"], []).append(text)
    return "; ".join("%s: %s" % (owner, ", ".join(texts)) for owner, texts in sorted(parts.items()))
