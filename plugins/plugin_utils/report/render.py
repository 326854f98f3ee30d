# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster report page: report_data's plain data rendered with the jinja2 templates in templates/.

Controller-only (the cluster_report action and ``bin/topotune report``); needs jinja2, not Ansible. Autoescaping is
on for every template and nothing is marked safe: the only markup is what the templates write, and every value read
from the nodes is escaped wherever it appears.
"""

from __future__ import annotations

import os

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from .data import link_summary, load_report_dir, report_view, summarize, text, topology_diagram

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

__all__ = ["TEMPLATES", "link_summary", "load_report_dir", "render_report", "summarize", "topology_svg"]

_ENVIRONMENT = []


def _shown(value):
    """What ``{{ value }}`` prints: None as nothing, containers as JSON (report_data.text); a macro's markup as is."""
    return value if isinstance(value, Markup) else text(value)


def environment():
    """The one jinja2 environment (built on first use): templates beside this file, autoescaped, strict."""
    if not _ENVIRONMENT:
        _ENVIRONMENT.append(Environment(
            loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(enabled_extensions=("html", "j2"), default=True),
            undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
            finalize=_shown))
    return _ENVIRONMENT[0]


def render_report(data, title=None):
    """The whole report as one HTML string (no external assets, no script) for ``load_report_dir()``'s data."""
    return environment().get_template("report.html.j2").render(report_view(data, title))


def topology_svg(topology):
    """``(svg, info)``: one node's diagram as SVG markup, and what it drew (``report_data.topology_diagram``)."""
    diagram, info = topology_diagram(topology)
    return str(environment().get_template("macros.html.j2").module.topology_svg(diagram)), info
