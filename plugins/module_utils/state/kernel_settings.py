# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel settings as data: additive ``{name, value, state}`` lists, kernel command line tokens, what a reboot must
bring, and topotune's GRUB drop-in line. The one implementation of each, for role ``kernel_tuning``'s plan
(``kernel_runtime.py``), the platform checks, the node-local drift check and the ``settings_merge`` /
``cmdline_pending`` filters.

Public API (standard library only, Python 3.8+):

``SettingsError(TopotuneError)``
    A malformed entry; the message names the list (the variable it came from), the entry and the fix.
``merge(lists, key="name")``
    ``lists``: ``[(variable, items), ...]`` applied in order, the way ``linux-system-roles/kernel_settings`` treats
    its additive lists. ``key="name"`` (sysctl): a later entry replaces an earlier one of the same name,
    ``state: absent`` removes it. ``key="token"`` (kernel command line, where ``pci=`` may appear several times):
    entries are keyed by ``name=value``; ``state: absent`` with a value removes that token, without a value every
    token of that name. Returns ``{"present": [{name, value, token}], "absent": [token or name]}``.
``tokens(cmdline)``
    A command line -> its tokens, quotes removed.
``has_param(tokens, param)``
    ``param`` (``name`` or ``name=value``) is in ``tokens``; ``pci=realloc=off`` is also in ``pci=bfsort,realloc=off``.
``pending(cmdline, wanted)``
    What only a reboot brings in line with ``wanted`` (a ``merge(..., key="token")`` result): ``+token`` to add,
    ``-token`` to remove, in order.
``GRUB_DROPIN``, ``grub_dropin_line(tokens)`` / ``grub_dropin_params(text)``
    Topotune's GRUB drop-in (role ``kernel_tuning`` writes it, the node-local drift check reads it), its
    ``GRUB_CMDLINE_LINUX`` line, and the parameters a drop-in's text configures.
"""

import re

from ..core.errors import TopotuneError

GRUB_DROPIN = "/etc/default/grub.d/90-topotune.cfg"
_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.,:=+\-/@]*$")
_GRUB_LINE = re.compile(r'^\s*GRUB_CMDLINE_LINUX(?:_DEFAULT)?="(.*)"\s*$')
_GRUB_SELF = re.compile(r"\$\{?GRUB_CMDLINE_LINUX(?:_DEFAULT)?\}?")


class SettingsError(TopotuneError):
    """A setting entry that cannot be applied."""


def _entry(variable, item, pos):
    if not isinstance(item, dict) or "name" not in item:
        raise SettingsError("%s: entry %d (%r) is not a mapping with a 'name'" % (variable, pos, item))
    name = str(item["name"])
    state = item.get("state", "present")
    if state not in ("present", "absent"):
        raise SettingsError("%s: entry %s has state %r: use present or absent" % (variable, name, state))
    if not _NAME.match(name):
        raise SettingsError("%s: name %r has characters outside [A-Za-z0-9_.-/]" % (variable, name))
    value = item.get("value")
    if isinstance(value, bool):
        raise SettingsError("%s: %s has a YAML boolean value %r: quote it ('0', 'on')" % (variable, name, value))
    if value is not None:
        value = str(value)
        if not _VALUE.match(value):
            raise SettingsError("%s: %s=%r has characters outside [A-Za-z0-9_.,:=+-/@] (no spaces or quotes)"
                                % (variable, name, value))
    return name, value, state


def merge(lists, key="name"):
    if key not in ("name", "token"):
        raise SettingsError("key=%r is not one of name, token" % (key,))
    present, absent = {}, []
    for variable, items in lists:
        if not isinstance(items, list):
            raise SettingsError("%s: expected a list of {name, value, state}, got %s" % (variable, type(items).__name__))
        for pos, item in enumerate(items):
            name, value, state = _entry(variable, item, pos)
            token = name if value is None else "%s=%s" % (name, value)
            if key == "name":
                if state == "absent":
                    present.pop(name, None)
                    absent.append(name)
                    continue
                if value is None:
                    raise SettingsError("%s: %s has no value" % (variable, name))
                present[name] = {"name": name, "value": value, "token": token}
                if name in absent:
                    absent.remove(name)
            elif state == "absent":
                for k in [k for k, v in present.items() if (k == token if value is not None else v["name"] == name)]:
                    del present[k]
                absent.append(token)
            else:
                present[token] = {"name": name, "value": value, "token": token}
                if token in absent:
                    absent.remove(token)
    return {"present": list(present.values()), "absent": absent}


def tokens(cmdline):
    return [tok.replace('"', "") for tok in str(cmdline or "").split()]


def has_param(tokens, param):
    if "=" not in param:
        return any(tok == param or tok.startswith(param + "=") for tok in tokens)
    name, value = param.split("=", 1)
    for tok in tokens:
        if tok == param:
            return True
        tname, _unused, tvalue = tok.partition("=")
        if tname == name and name == "pci" and value in tvalue.split(","):
            return True
    return False


def pending(cmdline, wanted):
    if not isinstance(wanted, dict) or "present" not in wanted:
        raise SettingsError("wanted must be the result of merge(..., key='token'), got %r" % (wanted,))
    running = tokens(cmdline)
    out = ["+" + p["token"] for p in wanted["present"] if not has_param(running, p["token"])]
    for token in wanted.get("absent", []):
        if "=" in token:
            if token in running:
                out.append("-" + token)
        elif any(t == token or t.startswith(token + "=") for t in running):
            out.append("-" + token)
    return out


def grub_dropin_line(params):
    """The drop-in's line, appended to what /etc/default/grub sets."""
    return 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX %s"' % " ".join(params)


def grub_dropin_params(text):
    params = []
    for line in (text or "").splitlines():
        match = _GRUB_LINE.match(line)
        if match:
            params.extend(tokens(_GRUB_SELF.sub(" ", match.group(1))))
    return params
