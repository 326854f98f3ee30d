# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one subprocess runner of topotune: no shell, a timeout, ``LC_ALL=C``, never a traceback.

Standard library only (Python 3.8+): it runs in modules on the managed node and in the offline CLI.
``AnsibleModule.run_command`` has no timeout, and a wedged driver makes ``amd-smi`` hang, a hung collective
``all_reduce_perf``: whatever topotune runs on a node with a time limit goes through run().

``run(argv, timeout=30, env=None)``
    Run ``argv`` (a list, no shell) with stdin closed, ``LC_ALL=C`` / ``LANG=C`` (tool output is parsed) plus
    ``env``; returns ``(rc, stdout, stderr)`` as text (undecodable bytes replaced). A command that cannot be
    started or outlives ``timeout`` seconds raises ``CommandError``.
``CommandError(TopotuneError)``
    One line naming the command and why; ``err.rc`` is the shell's code for it: 124 timed out (as
    ``timeout(1)``), 126 cannot be executed, 127 not found.
"""

import os
import subprocess

from .errors import TopotuneError

TIMED_OUT, NOT_EXECUTABLE, NOT_FOUND = 124, 126, 127


class CommandError(TopotuneError):
    """A command could not be started or did not finish in time; ``rc`` as a shell reports it."""

    def __init__(self, message, rc):
        super().__init__(message)
        self.rc = rc


def run(argv, timeout=30, env=None):
    """Run argv; see the module docstring."""
    argv = [str(arg) for arg in argv]
    command = " ".join(argv)
    if not argv:
        raise CommandError("an empty command cannot be started", NOT_FOUND)
    environ = dict(os.environ, LC_ALL="C", LANG="C")
    environ.update({str(key): str(value) for key, value in (env or {}).items()})
    try:
        proc = subprocess.run(argv, capture_output=True, env=environ, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CommandError("`%s` timed out after %ss" % (command, timeout), TIMED_OUT) from None
    except FileNotFoundError:
        raise CommandError("`%s` cannot be started: command not found" % command, NOT_FOUND) from None
    except OSError as err:
        # permission denied, not an executable (ENOEXEC), a directory, ...
        raise CommandError("`%s` cannot be started: %s" % (command, err.strerror or err), NOT_EXECUTABLE) from None
    except (TypeError, ValueError) as err:
        # a NUL byte in an argument
        raise CommandError("`%s` cannot be started: %s" % (command, err), NOT_EXECUTABLE) from None
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
