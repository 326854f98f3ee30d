# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error hierarchy of topotune (standard library only, Python 3.8+).

``TopotuneError``
    Base class of every error topotune raises on purpose; its message is one line that names what,
    which and why, and the fix. Modules turn it into ``fail_json(msg=str(err))``, action plugins into
    ``AnsibleActionFail``, the CLI into ``exit 2``. Every project exception class derives from it
    (``tests/unit/plugins/module_utils/core/test_errors.py`` checks), so one ``except TopotuneError`` catches them all.

The subclasses live beside the code that raises them (``SysrootError`` in ``sysroot``, ``CommandError`` in
``process``, ...).
"""


class TopotuneError(Exception):
    """An expected failure with a one-line, user-facing message."""
