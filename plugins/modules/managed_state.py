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
  - O(state=verified) reads the manifest and checks every entry in one pass (globs expanded here, all units in one
    C(systemctl show) call, groups from C(/etc/group) and C(/etc/passwd)); it changes nothing and returns
    RV(drifted).
  - Values (sysfs/procfs) are read under each owner's C(sysroot); C(json_keys) compare only the owned keys, so keys
    a user added to a shared file never count as drift.
  - A missing manifest fails with a message saying to run C(playbooks/site.yml) first.
author:
  - topotune contributors (@topotune)
options:
  state:
    description: Record the manifest, or verify the node against it.
    type: str
    choices: [recorded, verified]
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
  previous:
    description:
      - With O(state=verified), the RV(drifted) items of a run before a correction. RV(drifted) then lists them
        with C(corrected=true) when they no longer drift (C(false) when they still do), followed by any new drift.
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
  description: Number of settings compared.
  returned: state is verified
  type: int
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

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.files import write_atomic
from ansible_collections.topotune.instinct.plugins.module_utils.managed_state import (
    build_manifest,
    dumps,
    mark_corrected,
    merge_manifest,
    parse_systemctl_show,
    summarize,
    verify_manifest,
)
from ansible_collections.topotune.instinct.plugins.module_utils.sysroot import TopotuneError


class ManagedState:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.path = self.params["path"]

    def read_manifest(self, required):
        try:
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            if required:
                raise TopotuneError(
                    "managed_state: no manifest at %s: this node was never brought up by topotune (or the file was removed); "
                    "run playbooks/site.yml first" % self.path
                ) from None
            return None, None
        except OSError as err:
            raise TopotuneError("managed_state: cannot read %s: %s" % (self.path, err.strerror)) from None
        try:
            return text, json.loads(text)
        except ValueError as err:
            if required:
                raise TopotuneError(
                    "managed_state: %s is not valid JSON (%s); run playbooks/site.yml to record it again" % (self.path, err)
                ) from None
            return text, None

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
        before_text, previous = self.read_manifest(required=False)
        manifest = merge_manifest(previous, build_manifest(self.params["entries"]), self.params["keep_other_owners"])
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
        _unused, manifest = self.read_manifest(required=True)
        result = verify_manifest(manifest, unit_states=self.unit_states)
        result["changed"] = False
        result["remaining"] = len(result["drifted"])
        if self.params["previous"] is not None:
            result["drifted"] = mark_corrected(self.params["previous"], result["drifted"])
            result["owners_drifted"] = sorted({d["owner"] for d in result["drifted"] if isinstance(d.get("owner"), str)})
        result["summary"] = summarize(result["drifted"])
        return result

    def run(self):
        if self.params["state"] == "recorded":
            return self.record()
        return self.verify()


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "default": "verified", "choices": ["recorded", "verified"]},
            "path": {"type": "path", "default": "/etc/topotune/manifest.json"},
            "entries": {"type": "list", "elements": "dict", "default": []},
            "keep_other_owners": {"type": "bool", "default": True},
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
