"""HTML cluster report (plugins/plugin_utils/report/data.py + report_render.py and its jinja2 templates, action
cluster_report) on the real topology models of
simulated nodes plus synthetic checks / drift / benchmark JSON."""

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.topotune.instinct.plugins.action.cluster_report import ActionModule
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import compare_busbw, parse_perf
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import discover
from ansible_collections.topotune.instinct.plugins.plugin_utils.bench.advice import advise
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.report.render import (
    link_summary,
    load_report_dir,
    render_report,
    summarize,
    topology_svg,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)

PROFILES = ["mi250x-8gcd", "mi210-8gpu-2hive", "mi300x-8gpu-cpx", "fault-numa-minus1"]
PLAIN = ["mi250x-8gcd", "mi210-8gpu-2hive", "fault-numa-minus1"]
HOSTILE = "<script>alert(1)&x"
MI300X_RUN = os.path.join(REPO, "tests", "fixtures", "smi",
                          "rccl-tests_all_reduce_perf__mi300x-8gpu-1node-mpi__rocm-blogs-rccl-xgmi.txt")
ASSET = re.compile(r"(?:\bsrc|\bhref|xlink:href)\s*=\s*[\"']?\s*(?:https?:)?//|url\(|@import|<script|<link|<img|<iframe",
                   re.IGNORECASE)


@pytest.fixture(scope="module")
def models(sim_tree):
    # discovered from the session's shared trees (tests/conftest.py), read only
    return {profile: discover(sysroot=sim_tree(profile)) for profile in PROFILES}


def _knowledge(name):
    return load_knowledge(name)


def _benchmark(host, topology):
    with open(MI300X_RUN) as handle:
        result = parse_perf(handle.read(), MI300X_RUN)
    advice = advise(_knowledge("advice"), model_size_b=13, step_time_ms=450, busbw_gbs=result["peak_busbw"],
                    ranks=result["n_ranks"], topology=topology)
    return {"host": host, "skipped": False, "msg": "parsed", "cmd": [], "result": result,
            "comparison": compare_busbw(result, _knowledge("rccl_expectations"), "MI300X"), "advice": advice}


CHECKS = {"host": "n", "generation": "MI250X", "summary": {"pass": 1, "warn": 1, "fail": 1, "unknown": 1},
          "results": [
              {"id": "iommu_passthrough", "status": "pass", "observed": "iommu=pt", "expected": "iommu=pt",
               "remediation": "", "source": "AMD MI250X tuning guide"},
              {"id": "gpu_pcie_speed_width", "status": "fail", "observed": "0000:c1:00.0 x8 8.0 GT/s",
               "expected": "x16 at 16.0 GT/s", "remediation": "reseat <img src=x onerror=alert(2)>",
               "source": "system acceptance docs"},
              {"id": "numa_balancing", "status": "warn", "observed": "1", "expected": "0",
               "remediation": "sysctl kernel.numa_balancing=0", "source": "AMD tuning guide"},
              {"id": "determinism_slider", "status": "unknown", "observed": None, "expected": "Power",
               "remediation": "attest in BIOS setup", "source": "AMD BIOS guide"}]}
DRIFT = {"host": "n", "mode": "fast", "checked": 42, "drifted": [
    {"owner": "kernel_tuning", "kind": "value", "item": "kernel.numa_balancing", "expected": 0, "observed": 1,
     "corrected": False},
    {"owner": "rocm_env", "kind": "file", "item": "/etc/profile.d/topotune-rocm.sh", "expected": "sha1 1a2b",
     "observed": "sha1 9f8e", "corrected": True}]}


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


@pytest.fixture()
def report_dir(tmp_path, models):
    """4 nodes: full data (MI250X), malformed checks (MI210, failed), CPX topology only, hostile host name."""
    base = str(tmp_path / "out")
    _write(os.path.join(base, "topology", "gpu-a01.json"), models["mi250x-8gcd"])
    # applied with non-default options: the report must show these, not a recomputation with the defaults
    _write(os.path.join(base, "launch", "gpu-a01.json"), render(models["mi250x-8gcd"], {
        "cpu_binding": "l3", "reserved_cpus": "0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120"})["plan"])
    _write(os.path.join(base, "checks", "gpu-a01.json"), CHECKS)
    _write(os.path.join(base, "drift", "gpu-a01.json"), DRIFT)
    _write(os.path.join(base, "benchmark", "gpu-a01.json"), _benchmark("gpu-a01", models["mi250x-8gcd"]))
    _write(os.path.join(base, "topology", "gpu-b02.json"), models["mi210-8gpu-2hive"])
    _write(os.path.join(base, "checks", "gpu-b02.json"), "{not json")
    _write(os.path.join(base, "drift", "gpu-b02.json"), [1, 2])
    _write(os.path.join(base, "topology", "gpu-c03.json"), models["mi300x-8gpu-cpx"])
    _write(os.path.join(base, "launch", "gpu-c03.json"), render(models["mi300x-8gpu-cpx"], {})["plan"])
    _write(os.path.join(base, "topology", HOSTILE + ".json"), models["fault-numa-minus1"])
    _write(os.path.join(base, "run", "summary.json"),
           {"failed_hosts": ["gpu-b02"], "unreachable_hosts": ["gpu-d04"], "playbook": "site.yml",
            "finished": "2026-11-30T10:00:00Z"})
    return base


def _node(page, host):
    """The HTML section of one node."""
    head = '<h2>%s <span' % html.escape(host, quote=True)
    sections = [part for part in page.split('<section class="node"')[1:] if head in part]
    assert len(sections) == 1, "no single section for %s" % host
    return sections[0]


def _svg_tree(svg):
    return ET.fromstring(svg)


def _rects_by_numa(root):
    return {r.get("data-numa"): r for r in root.iter("rect") if r.get("data-numa") is not None}


def _inside(inner, outer):
    ix, iy = float(inner.get("x")), float(inner.get("y"))
    ox, oy = float(outer.get("x")), float(outer.get("y"))
    return (ox <= ix and ix + float(inner.get("width")) <= ox + float(outer.get("width"))
            and oy <= iy and iy + float(inner.get("height")) <= oy + float(outer.get("height")))


@pytest.mark.parametrize("profile", PLAIN)
def test_each_gpu_is_drawn_inside_its_numa_box(models, profile):
    model = models[profile]
    root = _svg_tree(topology_svg(model)[0])
    numa_rects = _rects_by_numa(root)
    seen = []
    for group in root.iter("g"):
        if group.get("class") != "gpu":
            continue
        gpu = int(group.get("data-gpus"))
        numa = model["gpus"][gpu]["numa_node"]
        expected = "unknown" if numa is None else str(numa)
        assert group.get("data-numa") == expected
        assert _inside(group.find("rect"), numa_rects[expected]), "GPU %d not inside NUMA %s" % (gpu, expected)
        assert "GPU %d" % gpu in [t.text for t in group.iter("text")]
        seen.append(gpu)
    assert sorted(seen) == [g["index"] for g in model["gpus"]]
    # every NUMA node of the model has its box, GPUs or not
    assert {str(n["node"]) for n in model["numa_nodes"]} <= set(numa_rects)


@pytest.mark.parametrize("profile", PLAIN)
def test_drawn_xgmi_links_are_the_models_direct_xgmi_links(models, profile):
    model = models[profile]
    svg, info = topology_svg(model)
    root = _svg_tree(svg)
    drawn = {tuple(sorted((int(p.get("data-a")[3:]), int(p.get("data-b")[3:]))))
             for p in root.iter("path") if p.get("class") == "link xgmi"}
    direct = {(link["a"], link["b"]) for link in model["links"] if link["type"] == "xgmi" and link["hops"] == 1}
    assert drawn == direct and info["drawn_links"] == len(direct) > 0
    assert svg.count('class="link xgmi"') == len(direct)
    # what is not drawn is summarised with its count
    summary = {label: (count, note) for label, count, note in link_summary(model)}
    assert sum(count for count, _unused in summary.values()) == len(model["links"])
    assert sum(count for count, note in summary.values() if note == "drawn") == len(direct)


def test_mi250x_link_widths_follow_bandwidth(models):
    model = models["mi250x-8gcd"]
    root = _svg_tree(topology_svg(model)[0])
    width = {(int(p.get("data-a")[3:]), int(p.get("data-b")[3:])): float(p.get("stroke-width"))
             for p in root.iter("path")}
    bandwidth = {(link["a"], link["b"]): link["bandwidth_mbps"]["max"] for link in model["links"]
                 if link["type"] == "xgmi" and link["hops"] == 1}
    # wider line <=> more bandwidth (in-package GCD pairs 200 GB/s, the rest 50-100 GB/s)
    for pair, other in [(p, q) for p in width for q in width]:
        if bandwidth[pair] > bandwidth[other]:
            assert width[pair] > width[other]
    assert max(width.values()) > min(width.values())
    summary = dict((label, count) for label, count, _unused in link_summary(model))
    assert summary == {"xGMI, 1 hop(s), weight 15": 12, "xGMI, 2 hop(s), weight 30": 16}


def test_partitioned_node_is_drawn_as_physical_devices(models):
    model = models["mi300x-8gpu-cpx"]
    assert len(model["gpus"]) == 63
    svg, info = topology_svg(model)
    root = _svg_tree(svg)
    devices = [g for g in root.iter("g") if g.get("class") == "gpu"]
    assert len(devices) == len(model["physical_devices"]) == 8 and info["partitioned"]
    covered = sorted(int(i) for g in devices for i in g.get("data-gpus").split(","))
    assert covered == list(range(63))
    labels = [t.text for g in devices for t in g.iter("text")]
    assert labels.count("8/8 partitions") == 7 and labels.count("7/7 partitions") == 1
    pairs = set()
    device_of = {g["index"]: g["physical_index"] for g in model["gpus"]}
    for link in model["links"]:
        if link["type"] == "xgmi" and link["hops"] == 1 and device_of[link["a"]] != device_of[link["b"]]:
            pairs.add(tuple(sorted((device_of[link["a"]], device_of[link["b"]]))))
    assert svg.count('class="link xgmi"') == len(pairs) == 28
    notes = {label: (count, note) for label, count, note in link_summary(model)}
    inside = [v for k, v in notes.items() if k.endswith("inside one device")]
    assert inside and inside[0][1] == "not drawn: inside one device"
    assert sum(count for count, _unused in notes.values()) == len(model["links"])


def test_unknown_numa_gpus_get_their_own_box_and_run_unbound(models, tmp_path):
    model = models["fault-numa-minus1"]
    root = _svg_tree(topology_svg(model)[0])
    assert [g.get("data-numa") for g in root.iter("g") if g.get("class") == "gpu"] == ["unknown"] * 8
    _write(os.path.join(str(tmp_path), "topology", "vm.json"), model)
    _write(os.path.join(str(tmp_path), "launch", "vm.json"), render(model, {})["plan"])
    page = render_report(load_report_dir(str(tmp_path)))
    assert page.count("(unbound)") == 8 and "NUMA unknown" in page


def test_full_report_content(report_dir):
    data = load_report_dir(report_dir)
    page = render_report(data)
    assert sorted(data["hosts"]) == sorted(["gpu-a01", "gpu-b02", "gpu-c03", "gpu-d04", HOSTILE])
    counts = summarize(data)
    assert counts["nodes"] == 5 and counts["gpus"] == 8 + 8 + 63 + 8
    assert counts["checks_failed"] == 1 and counts["checks_warned"] == 1 and counts["drifted"] == 2
    assert counts["failed_hosts"] == ["gpu-b02"] and counts["unreachable_hosts"] == ["gpu-d04"]
    assert "5 node(s), 87 GPU(s); 1 failing and 1 warning check(s); 2 drifted setting(s); 1 failed and 1 unreachable" \
        in page
    # one section per node, linked from the overview
    for number in range(1, 6):
        assert 'id="node-%d"' % number in page and 'href="#node-%d"' % number in page
    # checks: fail first, status colours
    a01 = _node(page, "gpu-a01")
    order = [a01.index(check) for check in ("gpu_pcie_speed_width", "numa_balancing", "determinism_slider",
                                            "iommu_passthrough")]
    assert order == sorted(order)
    assert 'class="st-fail">fail<' in a01 and 'class="st-pass">pass<' in a01
    # drift, benchmark, advice, groups and bindings
    assert "kernel.numa_balancing" in a01 and "/etc/profile.d/topotune-rocm.sh" in a01 and "2 drifted, 1 corrected" in a01
    assert a01.count('<rect class="busbw"') == 32 and "reference 304.0 GB/s" in a01
    assert "318.98" in a01 and "Communication-bound" in a01 and "Rebuild as a 3x4-card topology" in a01
    assert "ROCR_VISIBLE_DEVICES=0,1 numactl --cpunodebind=3 --membind=3 &lt;command&gt;" in a01
    # the applied plan: Frontier's L3 regions without their first core, and the Slurm cores of each GCD
    assert "As applied: CPU binding l3" in a01 and "reserved CPUs 0,8,16" in a01
    assert "--physcpubind=1-7,65-71 --membind=0" in a01 and "--physcpubind=49-55,113-119 --membind=3" in a01
    assert "SlurmdParameters=l3cache_as_socket" in a01
    # CPX: 63 GPUs, no group size divides it: said, not crashed
    c03 = _node(page, "gpu-c03")
    assert "none of launch_templates_sizes [2, 4, 8] divides the 63 GPUs" in c03
    assert "Platform checks: not collected" in c03
    # a node whose launch plan was not recorded says so rather than guessing
    b02 = _node(page, "gpu-b02")
    assert "GPU groups and per-rank binding: not collected" in b02


def test_missing_and_malformed_sections_are_noted(report_dir):
    data = load_report_dir(report_dir)
    b02 = data["hosts"]["gpu-b02"]
    assert b02["checks"]["state"] == "unreadable" and "is not valid JSON" in b02["checks"]["reason"]
    assert b02["drift"]["state"] == "unreadable" and "expected a JSON object, found list" in b02["drift"]["reason"]
    assert b02["benchmark"]["state"] == "missing"
    page = render_report(data)
    section = _node(page, "gpu-b02")
    assert "Platform checks: unreadable: " in section and "is not valid JSON" in section
    assert "Drift: unreadable: " in section and "Benchmark: not collected" in section
    assert 'badge s-failed">failed<' in section
    d04 = _node(page, "gpu-d04")
    assert "unreachable" in d04 and "Topology: not collected" in d04


def test_wrongly_shaped_values_degrade_one_section(tmp_path, models):
    base = str(tmp_path)
    broken = dict(models["mi210-8gpu-2hive"], links=[None, {"a": "x"}, 7], numa_nodes="zz", physical_devices=3)
    _write(os.path.join(base, "topology", "n1.json"), broken)
    _write(os.path.join(base, "topology", "n2.json"), {"gpus": [{"index": "a"}, None, {"index": 0}]})
    _write(os.path.join(base, "checks", "n1.json"), {"results": [None, {"status": "weird"}, {"id": 3}]})
    _write(os.path.join(base, "benchmark", "n1.json"), {"result": {"rows": [None, {"size": "x"}]}, "advice": []})
    _write(os.path.join(base, "drift", "n1.json"), {"drifted": [{"item": {"nested": "<marquee>"}}]})
    _write(os.path.join(base, "run", "summary.json"), "[]")
    page = render_report(load_report_dir(base))
    assert 'id="node-1"' in page and 'id="node-2"' in page and "<marquee>" not in page
    assert "Run summary: unreadable" in page


def test_hostile_names_and_values_are_escaped(report_dir):
    page = render_report(load_report_dir(report_dir))
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;alert(1)&amp;x" in page
    assert "reseat &lt;img src=x onerror=alert(2)&gt;" in page


def test_no_external_assets(report_dir):
    page = render_report(load_report_dir(report_dir))
    assert "http://" not in page and "https://" not in page
    assert not ASSET.search(page)
    assert "default-src 'none'" in page


def test_empty_dir_and_determinism(tmp_path, report_dir):
    empty = render_report(load_report_dir(str(tmp_path / "nothing")))
    assert "No node data found" in empty
    assert render_report(load_report_dir(report_dir)) == render_report(load_report_dir(report_dir))


def _action(args, check_mode=False, diff=False):
    task = MagicMock(args=args, check_mode=check_mode, diff=diff, async_val=0)
    return ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None).run(task_vars={})


def test_action_check_mode_write_and_idempotence(report_dir):
    dest = os.path.join(report_dir, "html", "report.html")
    result = _action({"report_dir": report_dir, "dest": dest}, check_mode=True, diff=True)
    assert result["changed"] and result["msg"].startswith("would write") and not os.path.exists(dest)
    assert result["diff"]["before"]["size"] is None and result["diff"]["after"]["size"] == result["size"]
    result = _action({"report_dir": report_dir, "dest": dest})
    assert result["changed"] and os.path.isfile(dest) and result["msg"].startswith("wrote %s" % dest)
    assert result["hosts"][0] == HOSTILE and result["counts"]["nodes"] == 5
    assert any("gpu-b02 checks" in line for line in result["unreadable"])
    assert result["warnings"] == result["unreadable"]
    assert oct(os.stat(dest).st_mode & 0o777) == "0o644"
    assert not [name for name in os.listdir(os.path.dirname(dest)) if name != "report.html"], "temp file left"
    with open(dest) as handle:
        page = handle.read()
    assert page.startswith("<!DOCTYPE html>") and page == render_report(load_report_dir(report_dir))
    result = _action({"report_dir": report_dir, "dest": dest})
    assert not result["changed"] and "is up to date" in result["msg"]
    # the mode is applied even when the content is unchanged; check mode only says so
    assert _action({"report_dir": report_dir, "dest": dest, "mode": "0640"}, check_mode=True)["changed"]
    assert oct(os.stat(dest).st_mode & 0o777) == "0o644"
    assert _action({"report_dir": report_dir, "dest": dest, "mode": "0640"})["changed"]
    assert oct(os.stat(dest).st_mode & 0o777) == "0o640"
    assert not _action({"report_dir": report_dir, "dest": dest, "mode": 0o640})["changed"]


@pytest.mark.parametrize("args, message", [
    ({"report_dir": "/nonexistent/topotune"}, "run playbooks/topology.yml first"),
    ({"dest": "{dir}"}, "is a directory"),
    ({"mode": "u=rw"}, "cluster_report: mode .u=rw. must be octal permission bits"),
    ({"mode": "0666"}, "world-writable"),
])
def test_action_refuses_bad_arguments(tmp_path, args, message):
    args = {key: value.format(dir=str(tmp_path)) for key, value in args.items()}
    with pytest.raises(AnsibleActionFail, match=message):
        _action(dict({"report_dir": str(tmp_path)}, **args))


def test_cli_report_subcommand(report_dir, tmp_path):
    output = str(tmp_path / "cli.html")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bin", "topotune"), "report", report_dir,
                           "--output", output], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    with open(output) as handle:
        assert handle.read() == render_report(load_report_dir(report_dir))
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bin", "topotune"), "report",
                           str(tmp_path / "none")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_report_without_jinja2_says_so(report_dir, tmp_path):
    # python3 -S: no site-packages, so no jinja2 (as on a login node's bare python3)
    proc = subprocess.run([sys.executable, "-S", os.path.join(REPO, "bin", "topotune"), "report", report_dir,
                           "--output", str(tmp_path / "x.html")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and not os.path.exists(str(tmp_path / "x.html"))
    assert proc.stderr.strip() == "topotune report needs jinja2 (pip install jinja2, or use the project venv)"


def test_cli_imports_no_jinja2_at_start_up():
    """Every other subcommand runs on a bare python3: loading the CLI (and running one) must not import jinja2."""
    code = ("import importlib.machinery, importlib.util, sys\n"
            "loader = importlib.machinery.SourceFileLoader('topotune_cli', sys.argv[1])\n"
            "module = importlib.util.module_from_spec(importlib.util.spec_from_loader('topotune_cli', loader))\n"
            "loader.exec_module(module)\n"
            "module.main(['rccl', sys.argv[2]])\n"
            "assert 'jinja2' not in sys.modules and 'markupsafe' not in sys.modules, 'jinja2 imported'\n")
    proc = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "bin", "topotune"), MI300X_RUN],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_hostile_host_name_is_escaped_everywhere(models, tmp_path):
    """A node name with markup, in every section and in the overview, is text wherever it appears."""
    base = str(tmp_path / "out")
    host = '<script>alert("x")</script>\'"&'
    _write(os.path.join(base, "topology", host + ".json"), models["mi250x-8gcd"])
    _write(os.path.join(base, "launch", host + ".json"), render(models["mi250x-8gcd"], {})["plan"])
    _write(os.path.join(base, "checks", host + ".json"), dict(CHECKS, host=host))
    _write(os.path.join(base, "drift", host + ".json"), dict(DRIFT, host=host))
    _write(os.path.join(base, "benchmark", host + ".json"), _benchmark(host, models["mi250x-8gcd"]))
    _write(os.path.join(base, "run", "summary.json"), {"failed_hosts": [host], "unreachable_hosts": [host + "2"],
                                                       "playbook": "<b>site.yml</b>", "finished": "<i>now</i>"})
    page = render_report(load_report_dir(base), title="<title>t</title>")
    assert "<script" not in page.lower() and "<b>site" not in page and "<i>" not in page and "<title>t<" not in page
    assert page.count("&lt;script&gt;alert(") == page.count("alert(") >= 4  # every occurrence is escaped
    assert "&lt;b&gt;site.yml&lt;/b&gt;" in page and "&lt;title&gt;t&lt;/title&gt;" in page
    # the report parses as XML-ish markup: every tag the templates open is theirs
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "main", "section",
                    "table", "tr", "th", "td", "a", "span", "svg", "rect", "g", "path", "text", "line", "code", "b",
                    "ul", "li", "details", "summary"}, tags


def test_templates_and_css_ship_with_the_code():
    """The page's CSS is plugin_utils/report/templates/report.css, verbatim; the environment autoescapes and is strict."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.report.render import TEMPLATES, environment

    with open(os.path.join(TEMPLATES, "report.css")) as handle:
        css = handle.read()
    page = render_report(load_report_dir(os.path.join(REPO, "nonexistent")))
    assert "<style>\n%s</style>" % css in page
    env = environment()
    assert env.autoescape("report.html.j2") and env.autoescape("macros.html.j2")
    for name in ("report.html.j2", "macros.html.j2"):
        with open(os.path.join(TEMPLATES, name)) as handle:
            assert "|safe" not in handle.read().replace(" ", "")


def _inventory(vbios):
    return {"gpus": [{"bdf": "0000:0c:00.0", "vbios": vbios, "firmware": {"mec": "0x000000b1"},
                      "compute_partition": "SPX", "memory_partition": "NPS1"}],
            "rocm_version": None, "kernel_release": "6.8.0-45-generic", "bios_version": "1.0.0"}


def test_cluster_consistency_table_names_the_odd_node(tmp_path):
    base = str(tmp_path / "out")
    odd = "113-<b>odd</b>"
    for host, vbios in (("n1", "113-M3000100-102"), ("n2", "113-M3000100-102"), ("n3", odd)):
        _write(os.path.join(base, "checks", host + ".json"), dict(CHECKS, host=host, inventory=_inventory(vbios)))
    # a node without an inventory (checks from before issue 16) is left out of the comparison
    _write(os.path.join(base, "checks", "n4.json"), dict(CHECKS, host="n4"))
    data = load_report_dir(base)
    page = render_report(data)
    section = page.split('<section class="consistency"')[1].split("</section>")[0]
    assert "3 node(s) compared within their hardware class (GPU product and partition mode): 1 item(s) differ, " \
           "0 without a majority value." in section
    # inventories without identity: one class, named as such
    assert '<p class="hw-class">unidentified GPU SPX/NPS1: n1, n2, n3</p>' in section
    assert "Odd node out: n3 (vbios)" in section
    # the differing item first, red; its majority value and the odd node with its value (escaped)
    first_row = section.split("<tr>")[2]
    assert ('<td>unidentified GPU SPX/NPS1</td><td>VBIOS</td><td class="st-fail">differs</td><td>113-M3000100-102</td>'
            '<td class="num">2</td>') in first_row
    assert "113-&lt;b&gt;odd&lt;/b&gt;: n3" in first_row and "<b>odd</b>" not in page
    assert '<td class="st-pass">same</td>' in section
    assert '<td>ROCm</td><td class="st-unknown">unknown</td>' in section


def test_no_consistency_section_without_inventories(report_dir):
    assert 'class="consistency"' not in render_report(load_report_dir(report_dir))


def test_cluster_consistency_names_the_node_whose_rails_are_swapped(tmp_path):
    base = str(tmp_path / "out")
    rails = [{"rail": i, "gpu": "0000:%02x:00.0" % i, "nic": "mlx5_%d" % i, "netdev": "eth%d" % i,
              "rate": "400 Gb/sec (4X NDR)", "fw_ver": "28.39.1002", "ipv4_subnet": "10.%d.0.0/24" % i} for i in range(2)]
    swapped = [dict(rails[1], rail=0), dict(rails[0], rail=1)]
    for host, node_rails in (("n1", rails), ("n2", rails), ("n3", swapped)):
        _write(os.path.join(base, "checks", host + ".json"),
               dict(CHECKS, host=host, inventory=dict(_inventory("113-M3000100-102"), rails=node_rails)))
    section = render_report(load_report_dir(base)).split('<section class="consistency"')[1].split("</section>")[0]
    assert "Odd node out: n3 (rail:0, rail:1)" in section
    assert ('<p class="rail-check">rail_consistency <span class="badge s-fail">fail</span> n3: rail 0 (GPU 0&#39;s '
            'NIC): mlx5_1 eth1 400 Gb/sec (4X NDR) fw 28.39.1002 10.1.0.0/24, 2 other node(s): mlx5_0 eth0') in section
    assert section.count('class="rail-check"') == 1  # the nodes that pass are not listed
    assert '<td>rail 1 (GPU 1&#39;s NIC)</td><td class="st-fail">differs</td>' in section


def test_acceptance_section_shows_each_verdict_its_margins_and_the_runs(tmp_path):
    """An acceptance report as playbooks/acceptance.yml writes it (verdicts.node_report, then the class median)."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.verdicts import cluster, node_report
    criterion = {"id": "a2a", "test": "a2a", "case": None, "metric": "avg_bandwidth", "unit": "GB/s", "min": 32.9,
                 "per": "node", "command": "TransferBench a2a",
                 "sources": [{"document": "docs/gpus/mi300x.md", "commit": "e42af24", "says": "Pass: >= 32.9 GB/s"}]}
    knowledge = {"acceptance": {"generations": [{"name": "MI300X", "transferbench": [criterion]}]}}
    reports = {}
    for host, value in (("n1", 40.0), ("n2", 39.0), ("n3", 31.0)):
        record = {"id": "transferbench.a2a", "tool": "transferbench", "test": "a2a", "status": "parsed", "reason": "",
                  "cmd": ["/opt/rocm/bin/TransferBench", "a2a"], "rc": 0, "source": "x", "result": {
                      "tool": "transferbench", "test": "a2a", "measurements": [
                          {"case": None, "metric": "avg_bandwidth", "unit": "GB/s", "value": value, "scope": {}}]}}
        reports[host] = node_report(host, {"generation": "MI300X", "product": "MI300X"}, [record], knowledge)
    cluster(reports, {h: "MI300X" for h in reports})
    (tmp_path / "acceptance").mkdir()
    for host, report in reports.items():
        (tmp_path / "acceptance" / ("%s.json" % host)).write_text(json.dumps(report))
    (tmp_path / "acceptance" / "junit.xml").write_text("<testsuites/>")
    page = render_report(load_report_dir(str(tmp_path)))
    assert "<th>acceptance</th>" in page and "1 fail, 0 warn, 0 unknown, 0 pass" in page
    section = page.split("<h3>Acceptance (AMD's criteria)</h3>")[3]
    assert "against the MI300X criteria" in section and "transferbench.a2a" in section
    assert "-5.8 %" in section and "-20.5 %" in section  # n3: vs AMD's 32.9, vs the class median 39.0
    assert "/opt/rocm/bin/TransferBench a2a" in section


def test_collective_section_names_each_excluded_host_with_its_evidence(tmp_path):
    """collective/acceptance.json as playbooks/acceptance.yml's second play writes it (collective.summary)."""
    from ansible_collections.topotune.instinct.plugins.plugin_utils.acceptance.collective import summary
    runs = [{"index": 1, "hosts": ["n1", "n2"], "verdict": "pass", "evidence": "in-place busbw 310.37 GB/s at 8 GiB"},
            {"index": 2, "hosts": ["n1", "n3"], "verdict": "fail", "evidence": "in-place busbw 279.03 GB/s < 304"}]
    isolation = {"bad": ["n3"], "good": ["n1", "n2", "n4"], "undetermined": [], "runs": runs,
                 "excluded": [{"host": "n3", "evidence": "in-place busbw 279.03 GB/s < 304", "run": 2,
                               "hosts": ["n1", "n3"], "why": "run 2 [n1, n3] failed and n1 passed in run 1"}]}
    record = summary(["n1", "n2", "n3", "n4"], {"busbw_gbs": 304, "column": "in_place"},
                     {"hosts": ["n1", "n2", "n3", "n4"], "argv": [], "verdict": "fail",
                      "evidence": "in-place busbw 278.05 GB/s < 304", "rc": 0, "seconds": 1.0}, isolation)
    (tmp_path / "collective").mkdir()
    (tmp_path / "collective" / "acceptance.json").write_text(json.dumps(record))
    page = render_report(load_report_dir(str(tmp_path)))
    section = page.split('<section class="collective" id="collective">')[1].split("</section>")[0]
    assert '<span class="badge s-fail">fail</span> 4 node(s), criterion in-place busbw &gt;= 304 GB/s' in section
    assert "excluded</span> n3: in-place busbw 279.03 GB/s &lt; 304 (run 2 [n1, n3] failed and n1 passed in run 1)" in section
    assert "Good: n1, n2, n4" in section and "<td>n1, n3</td><td class=\"st-fail\">fail</td>" in section
    assert "collective" not in list(load_report_dir(str(tmp_path))["hosts"])  # never a host of its own
    (tmp_path / "collective" / "acceptance.json").write_text("{}")
    assert "not a collective record" in render_report(load_report_dir(str(tmp_path)))


def test_binding_plans_and_the_baseline_are_shown(tmp_path, models):
    """The article's comparison in the benchmark section: one row per plan in run order, and the baseline verdict."""
    from ansible_collections.topotune.instinct.plugins.module_utils.bench.compare import compare_plans, figures

    doc = _benchmark("n1", models["mi250x-8gcd"])
    fig = figures(doc["result"])
    slow = dict(fig, busbw=round(fig["busbw"] * 0.8, 2), sizes={
        size: {"busbw": round(cell["busbw"] * 0.8, 2), "time_us": cell["time_us"] / 0.8}
        for size, cell in fig["sizes"].items()})
    runs = {"none": {"figures": slow}, "numa": {"figures": fig}, "l3": {"error": "mpirun: <b>not found</b>"}}
    doc["binding"] = {"runs": [dict(run, plan=plan, cmd=["mpirun", "-np", "8"]) for plan, run in runs.items()],
                      "comparison": compare_plans(runs, deployed="l3")}
    doc["baseline"] = {"status": "improved", "reason": "against the baseline of 2026-12-07: busbw at 8 GiB +25.0 %",
                       "delta": {"busbw_pct": 25.0, "time_pct": -20.0, "small_time_pct": -1.0},
                       "baseline": {"recorded_at": "2026-12-07"}, "stored": True}
    _write(os.path.join(str(tmp_path), "benchmark", "n1.json"), doc)
    _write(os.path.join(str(tmp_path), "topology", "n1.json"), models["mi250x-8gcd"])
    page = render_report(load_report_dir(str(tmp_path)))
    section = _node(page, "n1")
    plans = section.split("Binding plans")[1]
    assert plans.index("<td>none</td><td>8 GiB</td>") < plans.index(">numa (best)<") < plans.index(">l3 (deployed)<")
    assert "numa: busbw at 8 GiB +25.0 % over no binding (254.13 -&gt; 317.66 GB/s" in plans
    assert "mpirun: &lt;b&gt;not found&lt;/b&gt;" in plans
    assert 'class="st-pass">improved<' in section and "This run is now the node's baseline" in section
    assert "317.66 GB/s peak" not in page and ", improved vs baseline" in page
