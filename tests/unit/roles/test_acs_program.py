"""The ACS program of role kernel_tuning (roles/kernel_tuning/files/topotune-acs, kernel_tuning_acs_disable), run as
the boot-time unit runs it, on writable copies of simulated nodes' PCI trees (sim/sysroot.py): after it, check pci_acs
passes; on a good node it writes nothing; a bad list or bridge is one line on stderr and no bridge written."""

import ast
import importlib.machinery
import importlib.util
import os
import struct
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import pcie_health as ph
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROGRAM = os.path.join(REPO, "roles", "kernel_tuning", "files", "topotune-acs")
KNOWLEDGE = load_knowledge("pcie_health")
FAULT, GOOD = "fault-acs-enabled", "mi300x-8gpu-spx"
# the switch downstream port above GPU 2 of the fault profile (sim/profiles/fault-acs-enabled.yml), ACS Control 0x001d
ENABLED = "0000:37:00.0"


def _program():
    loader = importlib.machinery.SourceFileLoader("topotune_acs", PROGRAM)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("topotune_acs", loader))
    loader.exec_module(module)
    return module


def devices(root):
    return os.path.join(root, "sys/bus/pci/devices")


def configs(root):
    """``{bdf: (config bytes, mtime_ns)}`` of every PCI function of the tree."""
    out = {}
    for bdf in sorted(os.listdir(devices(root))):
        path = os.path.join(devices(root), bdf, "config")
        with open(path, "rb") as handle:
            out[bdf] = (handle.read(), os.stat(path).st_mtime_ns)
    return out


def listed(root):
    """The bridges role kernel_tuning lists: those check pci_acs reads that have the ACS capability."""
    return [b["bdf"] for b in ph.acs_bridges(ph.gather(root))["bridges"] if b["control"] is not None]


def write_list(tmp_path, lines, mode=0o644):
    path = tmp_path / "acs-bridges.conf"
    path.write_text("# Managed by topotune\n" + "".join(line + "\n" for line in lines))
    os.chmod(path, mode)
    return str(path)


def run(root, list_file):
    return subprocess.run([sys.executable, PROGRAM, devices(root), list_file], capture_output=True, text=True,
                          check=False)


def pci_acs(root):
    return next(r for r in ph.run_checks(ph.gather(root), KNOWLEDGE) if r["id"] == "pci_acs")


def test_the_program_clears_the_fault_and_pci_acs_then_passes(sim_pci_tree, tmp_path):
    root = sim_pci_tree(FAULT)
    assert pci_acs(root)["status"] == "fail" and ENABLED in pci_acs(root)["observed"]
    bridges = listed(root)
    before = configs(root)
    proc = run(root, write_list(tmp_path, bridges))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    # one line per bridge, in the list's order
    assert len(lines) == len(bridges) == 32 and [line.split()[1] for line in lines] == bridges
    assert "topotune-acs: %s ACS Control 0x001d -> 0x0000" % ENABLED in lines
    assert sum(line.endswith("already clear") for line in lines) == 31
    res = pci_acs(root)
    assert res["status"] == "pass" and res["observed"] == "ACS off on 32 bridge(s) (0 without the capability)"
    # only the two bytes of that register changed, nowhere else
    after = configs(root)
    changed = [bdf for bdf in after if after[bdf][0] != before[bdf][0]]
    assert changed == [ENABLED]
    offset = ph.ConfigSpace(before[ENABLED][0]).ext_capabilities()[0x000D] + 6
    old, new = before[ENABLED][0], after[ENABLED][0]
    assert old[:offset] == new[:offset] and old[offset + 2:] == new[offset + 2:] and new[offset:offset + 2] == b"\0\0"
    # again: nothing left to do
    again = run(root, write_list(tmp_path, bridges))
    assert again.returncode == 0 and all(line.endswith("already clear") for line in again.stdout.splitlines())


def test_on_a_good_node_nothing_is_written(sim_pci_tree, tmp_path):
    root = sim_pci_tree(GOOD)
    before = configs(root)
    proc = run(root, write_list(tmp_path, listed(root)))
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 32
    assert all(line.endswith("ACS Control 0x0000, already clear") for line in proc.stdout.splitlines())
    assert configs(root) == before  # bytes and modification times


def test_an_empty_list_clears_nothing(sim_pci_tree, tmp_path):
    root = sim_pci_tree(FAULT)
    before = configs(root)
    proc = run(root, write_list(tmp_path, []))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("lists no bridge: nothing to clear")
    assert configs(root) == before


def _strip_acs(data):
    """The config bytes with the ACS capability unlinked from the extended list (the one before it points past it)."""
    buf, space = bytearray(data), ph.ConfigSpace(data)
    caps = space.ext_capabilities()
    acs = caps[0x000D]
    prev = max(pos for pos in caps.values() if pos < acs)
    header, acs_next = struct.unpack_from("<I", buf, prev)[0], struct.unpack_from("<I", buf, acs)[0] >> 20
    struct.pack_into("<I", buf, prev, (header & 0xFFFFF) | (acs_next << 20))
    return bytes(buf)


# the bridge list's lines after the fault bridge, an edit of the tree, and what the one stderr line must name
BAD = {
    "not an address": (["0000:37:00"], None, "line 3: '0000:37:00' is not a PCI address dddd:bb:dd.f"),
    "upper-case hex": (["0000:5C:00.0"], None, "'0000:5C:00.0' is not a PCI address"),
    "listed twice": ([ENABLED], None, "line 3: %s is listed twice" % ENABLED),
    "missing device": (["0000:ee:00.0"], None, "0000:ee:00.0: no such PCI device"),
    "not a bridge": (["0000:38:00.0"], None, "0000:38:00.0 is not a PCI bridge (header type 0)"),
    "no ACS capability": (["0000:0b:00.0"], ("0000:0b:00.0", _strip_acs), "0000:0b:00.0 has no ACS capability"),
    "short config": (["0000:0b:00.0"], ("0000:0b:00.0", lambda data: data[:256]),
                     "0000:0b:00.0: %s holds 256 bytes, not the extended config space"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_list_or_bridge_is_one_line_and_nothing_written(sim_pci_tree, tmp_path, case):
    lines, edit, words = BAD[case]
    root = sim_pci_tree(FAULT)
    if edit:
        path = os.path.join(devices(root), edit[0], "config")
        with open(path, "rb") as handle:
            data = edit[1](handle.read())
        with open(path, "wb") as handle:
            handle.write(data)
        words = words.replace("%s", path)
    before = configs(root)
    # the bridge that needs clearing comes first: a program that wrote as it went would have written it
    proc = run(root, write_list(tmp_path, [ENABLED] + lines))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("topotune-acs: ") and words in proc.stderr, proc.stderr
    assert proc.stderr.rstrip().endswith("; no bridge was written")
    assert configs(root) == before


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_a_list_others_may_write_is_refused(sim_pci_tree, tmp_path, mode):
    if os.geteuid() != 0:
        pytest.skip("the owner and mode are enforced when the program runs as root, as the unit does")
    root = sim_pci_tree(FAULT)
    before = configs(root)
    proc = run(root, write_list(tmp_path, [ENABLED], mode=mode))
    assert proc.returncode == 2 and "must be owned by root and writable by root only" in proc.stderr
    assert "mode %04o" % mode in proc.stderr and configs(root) == before


def test_usage_and_an_unreadable_list(tmp_path):
    proc = subprocess.run([sys.executable, PROGRAM, str(tmp_path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: topotune-acs DEVICES_DIR LIST_FILE")
    proc = run(str(tmp_path), str(tmp_path / "absent.conf"))
    assert proc.returncode == 2 and "absent.conf: cannot read the bridge list" in proc.stderr


def test_a_register_that_does_not_keep_0_fails_the_run_and_the_others_are_still_cleared(sim_pci_tree, tmp_path,
                                                                                        monkeypatch, capsys):
    root = sim_pci_tree(FAULT)
    program = _program()
    other = "0000:21:00.0"
    path = os.path.join(devices(root), other, "config")
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    offset = ph.ConfigSpace(bytes(data)).ext_capabilities()[0x000D] + 6
    struct.pack_into("<H", data, offset, 0x0001)
    with open(path, "wb") as handle:
        handle.write(data)
    real_clear = program.clear
    # the bridge at 37:00.0 ignores the write (hardware that does not implement the bits as writable)
    monkeypatch.setattr(program, "clear", lambda p, o: 0x001d if "0000:37:00.0" in p else real_clear(p, o))
    code = program.main(["topotune-acs", devices(root), write_list(tmp_path, [ENABLED, other])])
    out, err = capsys.readouterr()
    assert code == 1
    assert "topotune-acs: %s ACS Control 0x001d: wrote 0, reads back 0x001d" % ENABLED in err
    assert err.rstrip().endswith("ACS still on at %s (the other bridges are clear)" % ENABLED)
    assert out.strip() == "topotune-acs: %s ACS Control 0x0001 -> 0x0000" % other
    assert [b["bdf"] for b in ph.acs_bridges(ph.gather(root))["enabled"]] == [ENABLED]


def test_the_capability_walk_stops_on_a_loop_and_finds_acs_anywhere_in_the_list():
    program = _program()
    loop = bytearray(4096)
    struct.pack_into("<I", loop, 0x100, 0x0001 | (1 << 16) | (0x100 << 20))  # AER pointing at itself
    assert program.acs_control_offset(bytes(loop)) is None
    chain = bytearray(4096)
    struct.pack_into("<I", chain, 0x100, 0x0001 | (0x180 << 20))
    struct.pack_into("<I", chain, 0x180, 0x000E | (0x240 << 20))
    struct.pack_into("<I", chain, 0x240, 0x000D)
    assert program.acs_control_offset(bytes(chain)) == 0x246
    assert program.acs_control_offset(bytes(chain[:0x247])) is None  # the register lies past the bytes read


def test_the_program_is_python_3_6_and_managed():
    with open(PROGRAM, encoding="utf-8") as handle:
        text = handle.read()
    assert text.startswith("#!/usr/bin/python3\n# Managed by topotune (role topotune.instinct.kernel_tuning)")
    # early in boot it runs on the distribution's python3: RHEL 8's is 3.6
    ast.parse(text, feature_version=(3, 6))
