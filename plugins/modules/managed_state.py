#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: managed_state
short_description: Record what topotune manages on a node in a manifest, and verify the node against it in one call
version_added: "0.1.0"
description:
  - O(state=recorded) takes O(entries), one mapping per owner role, reads the current digest, mode, owner and
    group of every managed file itself, and writes the manifest O(path) atomically (root-owned, 0644). Owners the
    call does not name keep their previous entries unless O(keep_other_owners=false). The manifest holds no
    timestamp, so recording an unchanged node reports C(changed=false).
  - O(state=recorded) also records, per owner, the directories of its files below O(owned_root) (not O(owned_root)
    itself); they are topotune's alone, and verification reports any other entry in them as C(stale). The manifest
    keeps O(owned_root) too, and a directory in it (or between it and an owner's directory) that leads to no owner's
    directory, such as an operator's C(mv container container.bak), is C(stale) as well (the drift check's own
    C(drift-exporter) directory excepted); files there (the manifest) are not watched. An owned directory replaced by
    a symlink or a file is a C(stale) item expecting C(directory), and nothing is listed through it.
  - O(state=verified) reads the manifest and checks every entry in one pass (globs expanded here, unit enablement
    read from the unit files on disk with the rules of C(systemctl is-enabled), groups from C(/etc/group) and
    C(/etc/passwd)); it changes nothing and returns RV(drifted). Files are compared as entries (C(lstat)); a managed
    file replaced by a symlink or a directory is drift.
  - Unit enablement is not asked of the running manager; C(systemctl show) answers from its cache, which keeps
    saying C(enabled) after a C(multi-user.target.wants) link was removed by hand until a C(daemon-reload). One
    C(systemctl show) call is made only for units whose C(active) flag is watched.
  - Values (sysfs/procfs) are read under each owner's C(sysroot); C(json_keys) compare only the owned keys, so keys
    a user added to a shared file never count as drift.
  - A manifest that is missing or cannot be read (truncated, not JSON, not a manifest) does not fail the task;
    RV(manifest_state) says C(missing) or C(unreadable), RV(drifted) holds one item of kind C(manifest), nothing else is
    verified, and a warning names the remedy (run C(playbooks/site.yml), or C(playbooks/drift.yml) with
    C(topotune_correct=true)).
  - O(state=pruned), run by a drift correction before the roles, removes what the roles cannot fix themselves, the
    C(stale) entries of O(previous) that are still stale (a stale directory with everything in it), and a directory
    standing where a managed file of an owner named in O(previous) belongs. It never removes anything the manifest
    does not place in topotune's directories or files, never reaches a path through a symlink below O(owned_root),
    and removes a symlink as a link (what it points to stays, also for links inside a stale directory).
author:
  - topotune contributors (@topotune)
options:
  state:
    description: Record the manifest, or verify the node against it.
    type: str
    choices: [recorded, verified, pruned]
    default: verified
  path:
    description: The manifest file.
    type: path
    default: /etc/topotune/manifest.json
  entries:
    description:
      - With O(state=recorded), one mapping per owner role with C(owner) (role name), C(sysroot) (default C(/)),
        and lists C(files) (absolute paths), C(values) (C({path, value}), path under C(sysroot), globs allowed),
        C(json_keys) (C({path, keys})), C(groups) (C({user, group})), C(units) (C({name, enabled, active}),
        C(null) leaves a flag unwatched).
    type: list
    elements: dict
    default: []
  keep_other_owners:
    description: With O(state=recorded), keep the entries of owners that O(entries) does not name.
    type: bool
    default: true
  owned_root:
    description:
      - With O(state=recorded), the directories of managed files below this one (not itself, it holds the manifest)
        are recorded as topotune's alone and watched for stale entries. Default the manifest's directory.
    type: path
  previous:
    description:
      - With O(state=verified), the RV(drifted) items of a run before a correction. RV(drifted) then lists them
        with C(corrected=true) when they no longer drift (C(false) when they still do), followed by any new drift.
      - With O(state=pruned), the drifted items of the run being corrected (what may be removed).
    type: list
    elements: dict
extends_documentation_fragment:
  - topotune.instinct.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Record what the roles manage (end of playbooks/site.yml)
  topotune.instinct.managed_state:
    state: recorded
    entries: "{{ query('ansible.builtin.vars', *query('ansible.builtin.varnames', '^(cpu_governor|rocm_env)_managed$')) }}"

- name: Check the whole node in one call
  topotune.instinct.managed_state:
    state: verified
  register: drift

- name: Before a correction, remove the stale entries it found (and directories in the way of managed files)
  topotune.instinct.managed_state:
    state: pruned
    previous: "{{ drift.drifted }}"
"""

RETURN = r"""
manifest:
  description: The manifest written (O(state=recorded), or as it would be in check mode).
  returned: state is recorded
  type: dict
drifted:
  description: Entries that differ from the manifest, in the shape of the report's C(drift/<host>.json) items.
  returned: state is verified
  type: list
  elements: dict
  sample: [{owner: cpu_governor, kind: value, item: sys/devices/system/cpu/cpu*/cpufreq/scaling_governor,
            expected: performance, observed: {powersave: [sys/devices/system/cpu/cpu0/cpufreq/scaling_governor]},
            corrected: false}]
checked:
  description: Number of settings compared (0 when the manifest could not be read).
  returned: state is verified
  type: int
manifest_state:
  description: The manifest's state, C(ok), C(missing) or C(unreadable) (then nothing else was verified).
  returned: state is verified
  type: str
  sample: ok
manifest_reason:
  description: Why the manifest is unreadable (or C(no such file)); null when it is C(ok).
  returned: state is verified
  type: str
  sample: "not valid JSON (Expecting ',' delimiter: line 12 column 3 (char 301))"
removed:
  description: Paths removed by O(state=pruned) (in check mode, that would be), each with why.
  returned: state is pruned
  type: list
  elements: dict
  sample: [{path: /etc/topotune/env/old.env, why: stale file},
           {path: /etc/topotune/container.bak, why: stale directory (3 entries)}]
owners_drifted:
  description: Roles owning at least one drifted entry, sorted.
  returned: state is verified
  type: list
  elements: str
summary:
  description: One short line naming what drifted, per owner (empty when nothing did).
  returned: state is verified
  type: str
remaining:
  description: Number of RV(drifted) items that still drift (with O(previous), those not corrected).
  returned: state is verified
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.files import write_atomic
from ansible_collections.topotune.instinct.plugins.module_utils.state.managed_state import (
    MANIFEST_OK,
    MANIFEST_REMEDY,
    build_manifest,
    dumps,
    load_manifest,
    mark_corrected,
    merge_manifest,
    parse_systemctl_show,
    prune_plan,
    remove_entry,
    summarize,
    verify_path,
)


class ManagedState:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.path = self.params["path"]

    def read_manifest(self):
        """``(text, manifest)`` of the current manifest for recording over it; ``(None, None)`` when there is none."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except FileNotFoundError:
            return None, None
        except OSError as err:
            raise TopotuneError("managed_state: cannot read %s: %s" % (self.path, err.strerror)) from None
        state, manifest, _reason = load_manifest(self.path)
        return text, manifest if state == MANIFEST_OK else None

    def unit_states(self, names):
        systemctl = self.module.get_bin_path("systemctl")
        if not systemctl:
            return {}
        rc, out, err = self.module.run_command([systemctl, "show", "--property=Id,LoadState,UnitFileState,ActiveState", "--"] + names)
        if rc != 0:
            self.module.warn("systemctl show failed (rc=%d): %s; units are reported as unknown" % (rc, err.strip()))
            return {}
        return parse_systemctl_show(out, names)

    def write(self, text):
        write_atomic(self.module, self.path, text, 0o644, root_owned=False, temp_prefix=".manifest.")

    def record(self):
        before_text, previous = self.read_manifest()
        owned_root = self.params["owned_root"] or os.path.dirname(self.path)
        manifest = merge_manifest(previous, build_manifest(self.params["entries"], owned_root=owned_root),
                                  self.params["keep_other_owners"])
        after_text = dumps(manifest)
        changed = after_text != before_text
        result = {
            "changed": changed,
            "manifest": manifest,
            "diff": {"before": before_text or "", "after": after_text, "before_header": self.path, "after_header": self.path},
        }
        if not self.module.check_mode:
            if changed:
                self.write(after_text)
            file_args = {"path": self.path, "mode": "0644", "owner": "root", "group": "root", "secontext": None, "attributes": None}
            if os.geteuid() == 0:
                result["changed"] = self.module.set_fs_attributes_if_different(file_args, result["changed"])
        return result

    def verify(self):
        result = verify_path(self.path, unit_states=self.unit_states)
        if result["manifest_state"] != MANIFEST_OK:
            self.module.warn("managed_state: the manifest %s is %s (%s): nothing on this node was verified; %s"
                             % (self.path, result["manifest_state"], result["manifest_reason"], MANIFEST_REMEDY))
        result["changed"] = False
        result["remaining"] = len(result["drifted"])
        if self.params["previous"] is not None:
            result["drifted"] = mark_corrected(self.params["previous"], result["drifted"])
            result["owners_drifted"] = sorted({d["owner"] for d in result["drifted"] if isinstance(d.get("owner"), str)})
        result["summary"] = summarize(result["drifted"])
        return result

    def prune(self):
        state, manifest, _reason = load_manifest(self.path)
        plan = prune_plan(manifest, self.params["previous"]) if state == MANIFEST_OK else []
        if not self.module.check_mode:
            for path, why in plan:
                try:
                    remove_entry(path)
                except FileNotFoundError:
                    pass
                except OSError as err:
                    raise TopotuneError("managed_state: cannot remove %s (%s): %s" % (path, why, err.strerror)) from None
        return {
            "changed": bool(plan),
            "removed": [{"path": path, "why": why} for path, why in plan],
            "diff": [{"before_header": path, "after_header": path + " (removed)", "before": why + "\n", "after": ""}
                     for path, why in plan],
        }

    def run(self):
        if self.params["state"] == "recorded":
            return self.record()
        if self.params["state"] == "pruned":
            return self.prune()
        return self.verify()


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "default": "verified", "choices": ["recorded", "verified", "pruned"]},
            "path": {"type": "path", "default": "/etc/topotune/manifest.json"},
            "entries": {"type": "list", "elements": "dict", "default": []},
            "keep_other_owners": {"type": "bool", "default": True},
            "owned_root": {"type": "path"},
            "previous": {"type": "list", "elements": "dict"},
        },
        supports_check_mode=True,
    )
    try:
        result = ManagedState(module).run()
    except TopotuneError as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
