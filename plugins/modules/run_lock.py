#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: run_lock
short_description: Serialize the topotune runs that change a node, after checking the node can take their writes
version_added: "0.3.0"
description:
  - O(state=acquired) first checks that the node can take the run's writes (unless O(preflight=false)), failing
    with one line per problem and its fix before anything is changed, then takes the node's run lock, waiting up
    to O(timeout) seconds for another run that holds it.
  - The preflight finds a directory of O(writable) on a read-only mount, a filesystem holding one with less than
    O(min_free_kib) free or without free inodes, and a file of the O(manifest) (or a directory of O(writable))
    that is immutable or append-only (C(chattr +i) / C(+a)).
  - The lock is an C(fcntl.flock) on O(path) held by a small holder process that the acquiring call leaves running
    on the node (a python3 whose command line holds C(topotune-run-lock) and the run id). O(state=released) ends it.
    The kernel drops the lock when the holder is gone (killed, node rebooted), so a dead holder never leaves a
    stale lock, and the holder exits by itself after O(expires) seconds, for a run that died on the controller
    without releasing. Waiting and expiry use elapsed time, never the node's wall clock.
  - Who holds the lock is kept beside it in C(<path>.json) (run id, O(holder), holder pid, the node's and the
    controller's start time, C(released)); a run that waited, took over the lock of a run that ended without
    releasing it, or broke it, says so in a warning naming that run.
  - With O(controller_time), a node clock more than O(max_clock_skew) seconds away from the controller's is
    reported as a warning (and RV(clock_skew)); nothing topotune does depends on the node's clock.
  - In check mode the preflight runs, the lock is neither taken nor released, and a run holding it is named.
author:
  - topotune contributors (@topotune)
options:
  state:
    description: Take the lock (after the preflight) or release it.
    type: str
    choices: [acquired, released]
    default: acquired
  run_id:
    description:
      - Identifies the run. O(state=released) needs the RV(run_id) the acquiring call returned; without one, acquiring
        generates it. Acquiring again with the run id that holds the lock returns at once.
    type: str
  holder:
    description: What is running, for the messages of other runs (e.g. C(playbooks/site.yml)).
    type: str
    default: topotune
  path:
    description: The lock file; the holder record is C(<path>.json). On a tmpfs, so a reboot clears it.
    type: path
    default: /run/topotune/run.lock
  timeout:
    description: Seconds to wait for a run holding the lock before failing with a message naming it.
    type: int
    default: 600
  expires:
    description: Seconds after which the holder gives the lock up by itself (a run that never released it).
    type: int
    default: 7200
  force:
    description:
      - Acquiring, break the lock of another run (its holder is stopped) instead of waiting; releasing, release a lock
        that another run id holds. Only for a run known to be gone.
    type: bool
    default: false
  controller_time:
    description: The controller's time (ISO 8601), recorded with the lock and compared with the node's clock.
    type: str
  max_clock_skew:
    description: Seconds of difference between the node's and the controller's clock reported as a warning.
    type: int
    default: 300
  preflight:
    description: With O(state=acquired), check the node can take the run's writes first.
    type: bool
    default: true
  writable:
    description: Directories the run writes (a missing one is checked at its nearest existing parent).
    type: list
    elements: path
    default: [/etc/topotune, /etc/systemd/system, /etc/sysctl.d, /etc/default/grub.d, /etc/profile.d, /etc/docker,
              /usr/local/bin, /usr/local/sbin]
  min_free_kib:
    description: Free space (KiB) each filesystem of O(writable) must have.
    type: int
    default: 512
  manifest:
    description: The manifest of managed settings (M(topotune.instinct.managed_state)); its files must not be immutable.
    type: path
    default: /etc/topotune/manifest.json
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - C(playbooks/site.yml) acquires after the topology discovery and C(playbooks/summary.yml) releases at the end of the
    run, also on the nodes that failed (they left the play). C(playbooks/drift.yml) acquires on the nodes it corrects.
  - Never remove the lock file while a run holds it; C(/run) is cleared by a reboot.
"""

EXAMPLES = r"""
- name: Take the run lock (one run changes a node at a time)
  topotune.instinct.run_lock:
    holder: playbooks/site.yml
    controller_time: "{{ now(utc=true, fmt='%Y-%m-%dT%H:%M:%SZ') }}"
    timeout: 600
  register: __topotune_run_lock

- name: Release it
  topotune.instinct.run_lock:
    state: released
    run_id: "{{ __topotune_run_lock.run_id }}"
"""

RETURN = r"""
run_id:
  description: The run id holding (or that held) the lock.
  returned: always
  type: str
  sample: 3f9c2a71b0de
acquired:
  description: The lock is held by this run (false in check mode).
  returned: state is acquired
  type: bool
released:
  description: This run's lock is released.
  returned: state is released
  type: bool
waited:
  description: Seconds waited for another run (to a tenth).
  returned: state is acquired
  type: float
holder:
  description: The holder record (after the call), or the run holding the lock in check mode.
  returned: always
  type: dict
  sample: {run_id: 3f9c2a71b0de, holder: playbooks/site.yml, pid: 4242, started: "2026-12-01T10:00:00Z",
           controller_time: "2026-12-01T10:00:00Z", expires_in: 7200, released: false}
previous:
  description: The record found when the lock was taken (the run before, or one that ended without releasing).
  returned: state is acquired and the lock was taken
  type: dict
clock_skew:
  description: Seconds the node's clock is ahead of the controller's (negative when behind).
  returned: state is acquired and controller_time is given
  type: int
problems:
  description: The preflight's findings (the call fails when there are any).
  returned: state is acquired
  type: list
  elements: str
notes:
  description: What was also reported as warnings (waited, took over, broke, clock skew).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.node_faults import DEFAULT_WRITABLE, preflight
from ansible_collections.topotune.instinct.plugins.module_utils.core.run_lock import RunLock, clock_note, new_run_id


def run(module):
    params = module.params
    lock = RunLock(params["path"])
    if params["state"] == "released":
        if not params["run_id"]:
            raise TopotuneError("run_lock: state=released needs run_id (the run_id the acquiring call returned)")
        return lock.release(params["run_id"], force=params["force"], check_mode=module.check_mode)
    notes = []
    skew = None
    if params["controller_time"]:
        skew, note = clock_note(params["controller_time"], params["max_clock_skew"])
        if note:
            notes.append(note)
    problems = preflight(params["writable"], params["min_free_kib"], params["manifest"]) if params["preflight"] else []
    if problems:
        module.fail_json(msg="node cannot take this run's writes, nothing was changed: " + "; ".join(problems),
                         problems=problems, notes=notes, clock_skew=skew, run_id=params["run_id"])
    if params["timeout"] < 0 or params["expires"] < 1:
        raise TopotuneError("run_lock: timeout must be >= 0 and expires >= 1 (seconds), got %d and %d"
                            % (params["timeout"], params["expires"]))
    result = lock.acquire(params["run_id"] or new_run_id(), params["holder"], timeout=params["timeout"],
                          expires=params["expires"], controller_time=params["controller_time"], force=params["force"],
                          check_mode=module.check_mode)
    result["notes"] = notes + result["notes"]
    result["problems"] = []
    if skew is not None:
        result["clock_skew"] = skew
    return result


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "default": "acquired", "choices": ["acquired", "released"]},
            "run_id": {"type": "str"},
            "holder": {"type": "str", "default": "topotune"},
            "path": {"type": "path", "default": "/run/topotune/run.lock"},
            "timeout": {"type": "int", "default": 600},
            "expires": {"type": "int", "default": 7200},
            "force": {"type": "bool", "default": False},
            "controller_time": {"type": "str"},
            "max_clock_skew": {"type": "int", "default": 300},
            "preflight": {"type": "bool", "default": True},
            "writable": {"type": "list", "elements": "path", "default": list(DEFAULT_WRITABLE)},
            "min_free_kib": {"type": "int", "default": 512},
            "manifest": {"type": "path", "default": "/etc/topotune/manifest.json"},
        },
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except TopotuneError as err:
        module.fail_json(msg=str(err), run_id=module.params["run_id"])
    for note in result.get("notes", []):
        module.warn(note)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
