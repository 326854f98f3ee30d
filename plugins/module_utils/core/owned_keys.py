# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The keys topotune owns in a file shared with other owners (``/etc/docker/daemon.json``): merged in or removed,
every other key kept. Standard library only (runs on the node, in ``docker_daemon_config``)."""

from __future__ import annotations

import copy


def merge_owned(existing, owned):
    """Return ``existing`` with the keys of ``owned`` set; nested dicts merge, every other key survives."""
    merged = copy.deepcopy(existing) if isinstance(existing, dict) else {}
    for key, value in (owned or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_owned(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def remove_owned(existing, owned):
    """Return ``existing`` without the keys of ``owned`` (nested dicts: only the owned sub-keys)."""
    merged = copy.deepcopy(existing) if isinstance(existing, dict) else {}
    for key, value in (owned or {}).items():
        if key not in merged:
            continue
        if isinstance(value, dict) and value and isinstance(merged[key], dict):
            merged[key] = remove_owned(merged[key], value)
            if not merged[key]:
                del merged[key]
        else:
            del merged[key]
    return merged
