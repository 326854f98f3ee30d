"""playbooks/report.yml writes a 4-node report that a real headless browser (Debian's chromium) renders: the DOM
holds every node section and its SVG diagram, and a screenshot shows a non-blank page with the xGMI links drawn.

Set TOPOTUNE_SCREENSHOT_DIR to keep the report and the screenshot for a look."""

import html
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import discover

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
CHROMIUM = os.environ.get("TOPOTUNE_CHROMIUM", "/usr/bin/chromium")
NODES = {"gpu-a01": "mi250x-8gcd", "gpu-b02": "mi210-8gpu-2hive", "gpu-c03": "mi300x-8gpu-cpx",
         "<script>alert(1)&x": "fault-numa-minus1"}
WIDTH, HEIGHT = 1400, 2000
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sim = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sim)


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(value, handle)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The HTML written by playbooks/report.yml for four simulated nodes with checks, drift and a benchmark."""
    base = tmp_path_factory.mktemp("report")
    out = str(base / "out")
    for host, profile in NODES.items():
        root = str(base / ("sysroot-" + profile))
        sim.build(profile, root, force=True)
        _write(os.path.join(out, "topology", host + ".json"), discover(sysroot=root))
    _write(os.path.join(out, "checks", "gpu-a01.json"), {
        "host": "gpu-a01", "generation": "MI250X", "summary": {"pass": 1, "warn": 0, "fail": 1, "unknown": 0},
        "results": [{"id": "gpu_pcie_speed_width", "status": "fail", "observed": "x8 8.0 GT/s", "expected": "x16",
                     "remediation": "reseat the GPU", "source": "acceptance docs"},
                    {"id": "iommu_passthrough", "status": "pass", "observed": "pt", "expected": "pt",
                     "remediation": "", "source": "AMD"}]})
    _write(os.path.join(out, "drift", "gpu-a01.json"), {
        "host": "gpu-a01", "mode": "full", "checked": 40, "drifted": [
            {"owner": "kernel_tuning", "kind": "value", "item": "kernel.numa_balancing", "expected": 0,
             "observed": 1, "corrected": True}]})
    _write(os.path.join(out, "run", "summary.json"), {"failed_hosts": [], "unreachable_hosts": ["gpu-d04"],
                                                      "playbook": "site.yml", "finished": "2026-11-30T10:00:00Z"})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
        [os.path.join(REPO, ".cache", "collections"), os.path.join(REPO, ".vendor", "collections")]),
        ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(REPO, "playbooks", "report.yml"),
                           "-e", "topotune_report_dir=%s" % out], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = os.path.join(out, "report.html")
    assert os.path.isfile(page) and "wrote %s" % page in proc.stdout
    return page


def _chromium(tmp_path, *args):
    if not os.path.exists(CHROMIUM):
        pytest.fail("%s not found: install Debian's chromium (apt-get install chromium) or set TOPOTUNE_CHROMIUM; "
                    "this test needs a real browser" % CHROMIUM)
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=%s" % profile] + list(args)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, "chromium failed (rc=%s): %s" % (proc.returncode, proc.stderr[-2000:])
    return proc.stdout


def _png_rows(path):
    """Decoded scanlines (bytes per row) and the size of an 8-bit RGB/RGBA PNG, with the standard library."""
    with open(path, "rb") as handle:
        blob = handle.read()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path
    pos, idat, header = 8, [], None
    while pos < len(blob):
        length, kind = struct.unpack(">I4s", blob[pos:pos + 8])
        chunk = blob[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + length
    width, height, depth, colour, _unused, _unused, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG format %r" % (header,)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows


def test_dom_has_every_node_and_its_diagram(report, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", "file://" + report)
    assert "<svg" in dom and "Cluster overview" in dom
    for host in list(NODES) + ["gpu-d04"]:
        assert "<h2>%s <span" % html.escape(host, quote=False) in dom, "no section for %s in the DOM" % host
    assert dom.count('<svg class="topology"') == len(NODES)
    # MI250X 12 + MI210 12 + CPX 28 device pairs + MI300X SPX seen from a VM 28
    assert dom.count('class="link xgmi"') == 12 + 12 + 28 + 28
    assert dom.count('<g class="gpu"') == 8 + 8 + 8 + 8
    assert "<script" not in dom.lower().replace("&lt;script", "")
    assert "not collected" in dom and "unreachable" in dom


def test_screenshot_is_rendered_and_not_blank(report, tmp_path):
    shot = str(tmp_path / "report.png")
    _chromium(tmp_path, "--screenshot=%s" % shot, "--window-size=%d,%d" % (WIDTH, HEIGHT), "--hide-scrollbars",
              "file://" + report)
    keep = os.environ.get("TOPOTUNE_SCREENSHOT_DIR")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(shot, os.path.join(keep, "report.png"))
        shutil.copy(report, os.path.join(keep, "report.html"))
    assert os.path.getsize(shot) > 30000, "screenshot is only %d bytes" % os.path.getsize(shot)
    width, height, bpp, rows = _png_rows(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(rows)) > 300, "only %d distinct pixel rows: the page looks blank" % len(set(rows))
    pixels = [row[i:i + 3] for row in rows[::2] for i in range(0, len(row), bpp * 2)]
    colours = set(pixels)
    assert len(colours) > 50
    # the dark title bar and the orange xGMI curves are painted (not only the page background)
    dark = sum(1 for r, g, b in pixels if r < 40 and g < 50 and b < 60)
    orange = sum(1 for r, g, b in pixels if r > 180 and 50 < g < 140 and b < 100)
    assert dark > 5000, "title bar not painted (%d dark pixels)" % dark
    assert orange > 300, "no xGMI links painted (%d orange pixels)" % orange
    assert re.search(r"\S", open(report).read())
