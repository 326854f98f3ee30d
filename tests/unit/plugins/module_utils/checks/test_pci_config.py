"""PCI config space decoding (module_utils/checks/pci_config.py) against the real ``lspci`` as an independent oracle.

Each vector is 4096 bytes laid out per the PCI Express Base Specification (sim/pcie_tree.config_bytes, what the
simulated nodes carry); pciutils' ``lspci -F <dump> -vvv`` decodes the same bytes in a ``lspci -xxxx`` dump and
must agree with our decoder on every register the health checks read (ACSCtl, LnkCtl ASPM, DevCap2/DevCtl2 10-bit
tags and ARI forwarding, resizable BAR size, header bus numbers). Needs the Debian package ``pciutils``
(``scripts/setup`` installs it); without ``lspci`` the oracle tests are skipped with that reason, the rest run.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks.pci_config import (
    ACS_BITS,
    EXT_CAP_ACS,
    EXT_CAP_AER,
    EXT_CAP_ARI,
    EXT_CAP_REBAR,
    ConfigSpace,
    human_bytes,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("sim_pcie_tree", os.path.join(REPO, "sim", "pcie_tree.py"))
tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tree)
LSPCI = shutil.which("lspci")
needs_lspci = pytest.mark.skipif(LSPCI is None, reason="pciutils is not installed: lspci not on PATH "
                                                       "(apt-get install pciutils; scripts/setup installs it)")

GPU = ("0x1002", "0x74a1", "0x120000")
BRIDGE = ("0x1000", "0xc030", "0x060400")
NIC = ("0x15b3", "0x1021", "0x020000")
SIZES_256M_256G = list(range(8, 19))

# (bdf, bytes, what our decoder must say): endpoint, root/switch ports, NIC; ACS, ASPM, tags, ARI, BAR variants
VECTORS = [
    ("0000:0c:00.0", tree.config_bytes(*GPU, 0, rebar=(18, SIZES_256M_256G), ari=True),
     {"port_type": "endpoint", "aspm_enabled": "disabled", "ten_bit_tag_requester_enabled": True,
      "acs": None, "bar_current": 256 << 30}),
    ("0000:5c:00.0", tree.config_bytes(*GPU, 0, rebar=(8, SIZES_256M_256G), aspm=2, ten_bit_tags=False),
     {"port_type": "endpoint", "aspm_enabled": "L1", "ten_bit_tag_requester_enabled": False,
      "acs": None, "bar_current": 256 << 20}),
    ("0000:09:01.1", tree.config_bytes("0x1022", "0x14ab", "0x060400", 4, bridge=(9, 10, 13), acs=0,
                                       ari_forwarding=True),
     {"port_type": "root port", "acs": [], "secondary_bus": 10, "subordinate_bus": 13,
      "ari_forwarding_enabled": True}),
    ("0000:37:00.0", tree.config_bytes(*BRIDGE, 6, bridge=(0x37, 0x38, 0x38), acs=0x1D, aspm=3),
     {"port_type": "downstream port", "acs": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"],
      "aspm_enabled": "L0s L1", "ari_forwarding_enabled": False}),
    ("0000:36:00.0", tree.config_bytes(*BRIDGE, 5, bridge=(0x36, 0x37, 0x39), acs=0x7F),
     {"port_type": "upstream port", "acs": list(("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                                "EgressCtrl", "DirectTrans"))}),
    ("0000:0d:00.0", tree.config_bytes(*NIC, 0, ari=True), {"port_type": "endpoint", "acs": None}),
    # ACS Enhanced Capability controls (pci_regs.h PCI_ACS_IORB 0x0080, PCI_ACS_USP_MT_RR 0x0800) and a reserved bit:
    # lspci's ACSCtl line shows SrcValid+ only, the register is not 0
    ("0000:38:00.0", tree.config_bytes(*BRIDGE, 6, bridge=(0x38, 0x39, 0x39), acs=0x2881),
     {"port_type": "downstream port", "acs": ["SrcValid", "IORB", "USP_MT_RR", "bit13"]}),
]


def _dump(vectors):
    """``lspci -xxxx`` text of ``[(bdf, bytes)]``: what ``lspci -F`` reads back."""
    lines = []
    for bdf, data in vectors:
        lines.append("%s Device" % bdf)
        for off in range(0, len(data), 16):
            lines.append("%02x: %s" % (off, " ".join("%02x" % b for b in data[off:off + 16])))
        lines.append("")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def lspci_text():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dump.txt")
        with open(path, "w", encoding="ascii") as fh:
            fh.write(_dump([(bdf, data) for bdf, data, _unused in VECTORS]))
        proc = subprocess.run([LSPCI, "-F", path, "-vvv", "-D"], capture_output=True, text=True, timeout=60,
                              check=False, env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"})
    assert proc.returncode == 0, proc.stderr
    blocks = {}
    for block in proc.stdout.split("\n\n"):
        if block.strip():
            blocks[block.split()[0]] = block
    return blocks


def _flag(block, field, name):
    """``+``/``-`` of ``name`` on lspci's ``field:`` line(s) -> True/False; None when lspci does not print it."""
    match = re.search(r"%s:(.*?)(?:\n\t\S|\Z)" % re.escape(field), block, re.S)
    if not match:
        return None
    flag = re.search(r"\b%s([+-])" % re.escape(name), match.group(1))
    return None if flag is None else flag.group(1) == "+"


@needs_lspci
@pytest.mark.parametrize("bdf,data,want", VECTORS, ids=[v[0] for v in VECTORS])
def test_decoder_agrees_with_lspci(bdf, data, want, lspci_text):
    block = lspci_text[bdf]
    space = ConfigSpace(data)
    # ACS control, bit by bit, as lspci prints it
    acs = re.search(r"ACSCtl:\s*(.*)", block)
    if space.acs_enabled_flags is None:
        assert acs is None
    else:
        # lspci names bits 0-6; the decoder names every set bit, so a register lspci shows as all '-' is not 0
        on = [tok[:-1] for tok in acs.group(1).split() if tok.endswith("+")]
        assert on == [flag for flag in space.acs_enabled_flags if flag in ACS_BITS]
        assert space.acs_enabled_flags == want["acs"]
    # ASPM control in LnkCtl
    aspm = re.search(r"LnkCtl:\s*ASPM ([^;]+);", block).group(1)
    assert {"Disabled": "disabled", "L0s Enabled": "L0s", "L1 Enabled": "L1",
            "L0s L1 Enabled": "L0s L1"}[aspm] == space.aspm_enabled
    # 10-bit tags and ARI forwarding in DevCap2/DevCtl2
    assert _flag(block, "DevCap2", "10BitTagReq") == space.ten_bit_tag_requester_supported
    assert _flag(block, "DevCtl2", "10BitTagReq") == space.ten_bit_tag_requester_enabled
    if space.port_type in ("root port", "downstream port"):
        assert _flag(block, "DevCtl2", "ARIFwd") == space.ari_forwarding_enabled
    # capabilities present
    assert ("Access Control Services" in block) == (EXT_CAP_ACS in space.ext_capabilities())
    assert ("Alternative Routing-ID Interpretation" in block) == (EXT_CAP_ARI in space.ext_capabilities())
    assert ("Advanced Error Reporting" in block) == (EXT_CAP_AER in space.ext_capabilities())
    # resizable BAR current size and the supported list
    rebar_line = re.search(r"BAR 0: current size: (\S+), supported: (.*)", block)
    if space.resizable_bars():
        current = space.resizable_bars()[0]
        assert rebar_line.group(1) == human_bytes(current["current_bytes"])
        assert rebar_line.group(2).split() == [human_bytes(s) for s in current["supported_bytes"]]
    else:
        assert rebar_line is None and EXT_CAP_REBAR not in space.ext_capabilities()
    # header: bus numbers of a bridge, the port type lspci names
    if space.header_type == 1:
        bus = re.search(r"Bus: primary=(\w+), secondary=(\w+), subordinate=(\w+)", block)
        assert (int(bus.group(2), 16), int(bus.group(3), 16)) == (space.secondary_bus, space.subordinate_bus)
    assert {"endpoint": "Endpoint", "root port": "Root Port", "upstream port": "Upstream Port",
            "downstream port": "Downstream Port"}[space.port_type] in block


@pytest.mark.parametrize("bdf,data,want", VECTORS, ids=[v[0] for v in VECTORS])
def test_decoder_reads_the_vector(bdf, data, want):
    space = ConfigSpace(data)
    assert space.port_type == want["port_type"]
    assert space.acs_enabled_flags == want["acs"]
    for key in ("aspm_enabled", "ten_bit_tag_requester_enabled", "secondary_bus", "subordinate_bus",
                "ari_forwarding_enabled"):
        if key in want:
            assert getattr(space, key) == want[key], key
    if "bar_current" in want:
        assert space.resizable_bars()[0]["current_bytes"] == want["bar_current"]


@pytest.mark.parametrize("ident,data", [
    (GPU, VECTORS[0][1]), (BRIDGE, VECTORS[3][1]), (NIC, VECTORS[5][1])])
def test_header_identity(ident, data):
    space = ConfigSpace(data)
    assert (space.vendor, space.device, space.class_code) == tuple(int(x, 16) for x in ident)


def _loop_caps(data):
    """The capability list's last entry pointing back at the first: a walk must stop, not spin."""
    buf = bytearray(data)
    buf[0x61] = 0x50
    return bytes(buf)


def _loop_ext(data):
    buf = bytearray(data)
    header = int.from_bytes(buf[0x100:0x104], "little")
    buf[0x100:0x104] = ((header & 0xFFFFF) | (0x100 << 20)).to_bytes(4, "little")
    return bytes(buf)


@pytest.mark.parametrize("case,data,check", [
    # an unprivileged read: the kernel returns the 64-byte header only
    ("unprivileged", VECTORS[2][1][:64], lambda s: s.acs_control is None and s.aspm_enabled is None
     and s.vendor == 0x1022 and "root" in s.reason("ACS") and "root" in s.reason("LnkCtl", extended=False)),
    ("standard 256 bytes", VECTORS[3][1][:256], lambda s: s.aspm_enabled == "L0s L1" and s.acs_control is None
     and "extended space" in s.reason("ACS") and s.reason("LnkCtl", extended=False) is None),
    ("empty", b"", lambda s: s.vendor is None and s.capabilities() == {} and "shorter" in s.reason("ACS")),
    ("cut inside PCIe capability", VECTORS[0][1][:0x70], lambda s: s.aspm_enabled is None
     and s.port_type == "endpoint"),
    ("cut inside ACS", VECTORS[3][1][:0x154], lambda s: s.acs_control is None),
    ("capability loop", _loop_caps(VECTORS[0][1]), lambda s: set(s.capabilities()) == {0x01, 0x10}),
    ("extended loop", _loop_ext(VECTORS[3][1]), lambda s: list(s.ext_capabilities()) == [EXT_CAP_AER]),
    ("all ones (device gone)", b"\xff" * 4096, lambda s: s.ext_capabilities() == {} and s.acs_control is None),
    ("no capability list", bytes(4096), lambda s: s.capabilities() == {} and s.port_type is None),
])
def test_short_and_malformed_bytes_degrade(case, data, check):
    assert check(ConfigSpace(data)), case


def test_human_bytes_is_lspci_spelling():
    assert [human_bytes(v) for v in (256 << 20, 1 << 30, 256 << 30, 2 << 40)] == ["256MB", "1GB", "256GB", "2TB"]
