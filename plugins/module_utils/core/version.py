# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's version, as the nodes see it (module_utils are shipped to them; galaxy.yml is not).

tests/unit/plugins/module_utils/checks/test_nfd_labels.py checks that it equals galaxy.yml's ``version``.
"""

COLLECTION_VERSION = "0.1.0"
