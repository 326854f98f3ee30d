"""Make the repository importable as the collection ``ansible_collections.topotune.instinct``.

Tests import collection code by its real name, as Ansible does. The repository is not checked out under an
``ansible_collections/<ns>/<name>`` path, so a symlink tree under ``.cache/collections`` provides one.
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
_COLLECTIONS = os.path.join(REPO, ".cache", "collections")
_LINK = os.path.join(_COLLECTIONS, "ansible_collections", "topotune", "instinct")

if not os.path.islink(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(REPO, _LINK)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)
