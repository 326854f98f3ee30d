# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles that own managed settings, declared once: each role's ``meta/topotune.yml``.

Every role of the collection has ``roles/<role>/meta/topotune.yml`` (topotune's own role metadata; Ansible reads
only ``meta/main.yml`` and ``meta/argument_specs.yml``, and refuses keys of its own there) with ``owner: true`` or
``owner: false``. An owner role manages settings on the node: it exports ``<role>_managed`` for the manifest
(``playbooks/site.yml``), the ``drift_capture`` callback records its check-mode changes, and a drift correction
re-runs it. Their order is the bring-up's: the order of the ``roles:`` lists of ``playbooks/site.yml``.

Public API (controller only; PyYAML, no Ansible):

``OwnersError(TopotuneError, ValueError)``
    Missing or malformed metadata, or an owner role that site.yml does not run; the message names the file.
``ROOT``
    The collection's root directory (``roles/``, ``playbooks/``).
``owner_roles(root=ROOT)``
    The owner role names in bring-up order, a new list; parsed once per controller process.
``declared(root=ROOT)``
    ``{role: bool}`` of every role's ``meta/topotune.yml``.
"""

from __future__ import annotations

import os

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import KnowledgeError, parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the collection root
META = os.path.join("meta", "topotune.yml")
PREFIX = "topotune.instinct."
_CACHE = {}


class OwnersError(TopotuneError, ValueError):
    """Owner-role metadata that cannot be read."""


def _read(path):
    try:
        with open(path, "rb") as handle:
            return parse(handle.read(), path, "role metadata")
    except OSError as exc:
        raise OwnersError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    except KnowledgeError as exc:
        raise OwnersError(str(exc)) from None


def declared(root=ROOT):
    """``{role: owner}`` from every ``roles/<role>/meta/topotune.yml``; OwnersError naming a missing or bad one."""
    roles_dir = os.path.join(root, "roles")
    if not os.path.isdir(roles_dir):
        raise OwnersError("no roles directory %s" % roles_dir)
    out = {}
    for role in sorted(os.listdir(roles_dir)):
        if not os.path.isdir(os.path.join(roles_dir, role, "tasks")):
            continue
        path = os.path.join(roles_dir, role, META)
        if not os.path.isfile(path):
            raise OwnersError("role %s has no %s: add one with `owner: true` (the role manages settings the drift "
                              "check watches) or `owner: false`" % (role, META))
        data = _read(path)
        owner = data.get("owner") if isinstance(data, dict) else None
        if not isinstance(owner, bool):
            raise OwnersError("%s: owner must be true or false, got %r" % (path, owner))
        out[role] = owner
    return out


def _site_order(root):
    """The roles of playbooks/site.yml's plays, in the order they run (each once)."""
    path = os.path.join(root, "playbooks", "site.yml")
    plays = _read(path)
    if not isinstance(plays, list):
        raise OwnersError("%s is not a list of plays" % path)
    order = []
    for play in plays:
        for entry in (play.get("roles") or []) if isinstance(play, dict) else []:
            name = (entry.get("role") or entry.get("name")) if isinstance(entry, dict) else entry
            name = str(name or "")
            name = name[len(PREFIX):] if name.startswith(PREFIX) else name
            if name and name not in order:
                order.append(name)
    return order


def owner_roles(root=ROOT):
    """The owner roles in bring-up order (see the module docstring), a new list."""
    if root not in _CACHE:
        owners = [role for role, owner in declared(root).items() if owner]
        order = _site_order(root)
        missing = [role for role in owners if role not in order]
        if missing:
            raise OwnersError("owner role(s) %s (meta/topotune.yml owner: true) are not run by playbooks/site.yml: "
                              "add them to its plays, in bring-up order" % ", ".join(missing))
        _CACHE[root] = [role for role in order if role in owners]
    return list(_CACHE[root])
