# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: role drift_exporter's plan (plugin_utils/fleet/drift_exporter.py), the files and link its managed_files call writes."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drift_exporter_plan
author: topotune contributors (@topotune)
short_description: The files and link of role drift_exporter, its variables checked
description:
  - The front of C(plugins/plugin_utils/fleet/drift_exporter.py) C(plan), for role C(topotune.instinct.drift_exporter)'s one
    M(topotune.instinct.managed_files) call. It checks the role's variables (an error names each wrong one, its value
    and the fix), builds the checker's configuration (C(module_utils/state/drift_metrics.py) C(build_config)), and lists the
    checker's package (the collection's C(plugins/module_utils) files it imports, byte for byte), its data, its
    configuration, the checker script and its units, and the timer's enable link.
options:
  _input:
    description: The role's variables without their C(drift_exporter_) prefix.
    type: dict
    required: true
  knowledge:
    description: The parsed C(gpu_generations), C(pcie_health), C(gpu_health) and C(rocm_compatibility) knowledge files,
      under those keys.
    type: dict
    required: true
  contents:
    description: The rendered C(script), C(service) and C(timer).
    type: dict
    required: true
  paths:
    description: Where each goes (C(package), C(knowledge), C(config), C(script), C(service), C(timer), C(timer_link)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The files role drift_exporter would write with its defaults
  ansible.builtin.debug:
    msg: "{{ (options | topotune.instinct.drift_exporter_plan(knowledge, contents, paths)).files | map(attribute='path') }}"
"""

RETURN = r"""
_value:
  description: C(files) and C(links) (the M(topotune.instinct.managed_files) options), C(config), C(modules).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.drift_exporter import plan


def drift_exporter_plan(options, knowledge, contents, paths):
    try:
        return plan(options, knowledge, contents, paths)
    except TopotuneError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    def filters(self):
        return {"drift_exporter_plan": drift_exporter_plan}
