# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Descriptions of the module attributes; each module states only its C(support) level."""

from __future__ import annotations


class ModuleDocFragment:
    # Shared by every module: the description of check_mode and diff_mode.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a changed status prediction without modifying the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run in diff mode.
"""

    # Only for the modules that state their idempotence.
    IDEMPOTENT = r"""
options: {}
attributes:
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second run reports no change.
      - This assumes the system the module controls or reads has not changed in a relevant way in between.
"""
