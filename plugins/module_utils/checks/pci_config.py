"""PCI configuration space decoding (the bytes of ``/sys/bus/pci/devices/<bdf>/config``), standard library only.

Register layouts are those of the PCI Express Base Specification as Linux names them in
``include/uapi/linux/pci_regs.h`` (what ``lspci -vvv`` decodes too):

- header: vendor 0x00, device 0x02, status 0x06 (bit 4: capability list), class 0x09-0x0b, header type 0x0e,
  capability pointer 0x34; type 1 (bridge) secondary/subordinate bus 0x19/0x1a;
- capability list from 0x34, each ``[id, next]``; PCI Express capability (id 0x10): flags +0x02 (port type
  bits 7:4), DevCap +0x04, LnkCap +0x0c (ASPM support bits 11:10), LnkCtl +0x10 (ASPM control bits 1:0),
  DevCap2 +0x24 (ARI forwarding bit 5, 10-bit tag completer/requester bits 16/17), DevCtl2 +0x28 (ARI
  forwarding enable bit 5, 10-bit tag requester enable bit 12);
- extended capabilities from 0x100, each a 32-bit header ``id[15:0] version[19:16] next[31:20]``: AER 0x0001,
  ACS 0x000d (capability +0x04, control +0x06: bits 0-6 SV TB RR CR UF EC DT, and with the ACS Enhanced Capability
  bit 7 I/O Request Blocking, 9:8 DSP and 11:10 USP Memory Target Access Control, 12 Unclaimed Request Redirect),
  ARI 0x000e, resizable BAR 0x0015 (per BAR: capability +0x04,
  control +0x08 with BAR index bits 2:0, count bits 7:5 and current size bits 13:8 = 1 MiB << n).

Unprivileged reads of ``config`` return only the first 64 bytes (the kernel hides the rest from non-root):
every decoder returns ``None`` for what the bytes do not reach, and ``ConfigSpace.reason(...)`` says why.
"""

import struct

PCI_CAP_ID_EXP = 0x10
EXT_CAP_AER = 0x0001
EXT_CAP_ACS = 0x000D
EXT_CAP_ARI = 0x000E
EXT_CAP_REBAR = 0x0015
HEADER_SIZE = 64
EXT_START = 0x100
# ACS control bits 0-6, in lspci's order and spelling (ls-ecaps.c cap_acs prints only these)
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# the ACS Enhanced Capability controls above them (pci_regs.h PCI_ACS_IORB, PCI_ACS_DSP_MT_RB/RR, PCI_ACS_USP_MT_RB/RR;
# PCIe Base Specification ACS Control Register: bit 12 Unclaimed Request Redirect); bits 13-15 are reserved
ACS_ENHANCED_BITS = ("IORB", "DSP_MT_RB", "DSP_MT_RR", "USP_MT_RB", "USP_MT_RR", "UnclaimedRR")
# PCI Express capability port types (flags bits 7:4)
PORT_TYPES = {0: "endpoint", 1: "legacy endpoint", 4: "root port", 5: "upstream port", 6: "downstream port",
              7: "pcie-to-pci bridge", 8: "pci-to-pcie bridge", 9: "rc integrated endpoint",
              10: "rc event collector"}
ASPM_STATES = {0: "disabled", 1: "L0s", 2: "L1", 3: "L0s L1"}
_MAX_CAPS = 48  # 256 bytes of 4-byte-aligned capabilities at most: a longer walk is a loop
_MAX_EXT_CAPS = (4096 - EXT_START) // 4


class ConfigSpace:
    """Decoded view of one function's configuration space bytes (possibly short)."""

    def __init__(self, data):
        self.data = bytes(data or b"")

    # -------------------------------------------------------------------------------------- raw access
    def _u8(self, off):
        return self.data[off] if 0 <= off < len(self.data) else None

    def _u16(self, off):
        if off < 0 or off + 2 > len(self.data):
            return None
        return struct.unpack_from("<H", self.data, off)[0]

    def _u32(self, off):
        if off < 0 or off + 4 > len(self.data):
            return None
        return struct.unpack_from("<I", self.data, off)[0]

    @property
    def size(self):
        return len(self.data)

    @property
    def extended(self):
        """True when the bytes reach the extended space (a root read of a PCIe function: 4096 bytes)."""
        return len(self.data) > EXT_START

    def reason(self, what, extended=True):
        """Why ``what`` (in the extended space, else in the standard 256 bytes) cannot be decoded, or ``None``."""
        if len(self.data) < HEADER_SIZE:
            return "config space is %d bytes, shorter than the 64-byte header" % len(self.data)
        if not extended and len(self.data) < 0x100:
            return ("config space is %d bytes: %s lives past the 64-byte header, which the kernel shows to root "
                    "only" % (len(self.data), what))
        if extended and not self.extended:
            return ("config space is %d bytes: %s lives in the extended space (offset >= 0x100), which the kernel "
                    "shows to root only" % (len(self.data), what))
        return None

    # ----------------------------------------------------------------------------------------- header
    @property
    def vendor(self):
        return self._u16(0x00)

    @property
    def device(self):
        return self._u16(0x02)

    @property
    def class_code(self):
        """24-bit class code (base class, subclass, prog-if), as sysfs ``class`` prints it."""
        value = self._u32(0x08)
        return None if value is None else value >> 8

    @property
    def header_type(self):
        value = self._u8(0x0E)
        return None if value is None else value & 0x7F

    @property
    def secondary_bus(self):
        return self._u8(0x19) if self.header_type == 1 else None

    @property
    def subordinate_bus(self):
        return self._u8(0x1A) if self.header_type == 1 else None

    # ------------------------------------------------------------------------------------ capabilities
    def capabilities(self):
        """``{id: offset}`` of the standard capability list (first occurrence), loop- and bounds-safe."""
        status = self._u16(0x06)
        if status is None or not status & 0x10:
            return {}
        caps, seen = {}, set()
        pos = self._u8(0x34)
        while pos and len(seen) < _MAX_CAPS:
            pos &= 0xFC
            if pos < 0x40 or pos in seen or pos + 2 > min(len(self.data), 0x100):
                break
            seen.add(pos)
            cap_id = self.data[pos]
            caps.setdefault(cap_id, pos)
            pos = self.data[pos + 1]
        return caps

    def ext_capabilities(self):
        """``{id: offset}`` of the extended capability list from 0x100 (first occurrence), loop- and bounds-safe."""
        caps, seen = {}, set()
        pos = EXT_START
        while pos and len(seen) < _MAX_EXT_CAPS:
            header = self._u32(pos)
            if pos < EXT_START or pos in seen or header is None or header in (0, 0xFFFFFFFF):
                break
            seen.add(pos)
            caps.setdefault(header & 0xFFFF, pos)
            pos = (header >> 20) & 0xFFC
        return caps

    def _exp(self, rel, width):
        pos = self.capabilities().get(PCI_CAP_ID_EXP)
        if pos is None:
            return None
        return self._u16(pos + rel) if width == 16 else self._u32(pos + rel)

    @property
    def port_type(self):
        flags = self._exp(0x02, 16)
        return None if flags is None else PORT_TYPES.get((flags >> 4) & 0xF, "type %d" % ((flags >> 4) & 0xF))

    @property
    def aspm_supported(self):
        lnkcap = self._exp(0x0C, 32)
        return None if lnkcap is None else ASPM_STATES[(lnkcap >> 10) & 0x3]

    @property
    def aspm_enabled(self):
        """ASPM control of the link (LnkCtl bits 1:0): ``disabled``, ``L0s``, ``L1`` or ``L0s L1``."""
        lnkctl = self._exp(0x10, 16)
        return None if lnkctl is None else ASPM_STATES[lnkctl & 0x3]

    @property
    def devcap2(self):
        return self._exp(0x24, 32)

    @property
    def devctl2(self):
        return self._exp(0x28, 16)

    @property
    def ten_bit_tag_requester_supported(self):
        cap = self.devcap2
        return None if cap is None else bool(cap & (1 << 17))

    @property
    def ten_bit_tag_completer_supported(self):
        cap = self.devcap2
        return None if cap is None else bool(cap & (1 << 16))

    @property
    def ten_bit_tag_requester_enabled(self):
        ctl = self.devctl2
        return None if ctl is None else bool(ctl & (1 << 12))

    @property
    def ari_forwarding_supported(self):
        cap = self.devcap2
        return None if cap is None else bool(cap & (1 << 5))

    @property
    def ari_forwarding_enabled(self):
        ctl = self.devctl2
        return None if ctl is None else bool(ctl & (1 << 5))

    # --------------------------------------------------------------------------- extended capabilities
    def has_ext(self, cap_id):
        return cap_id in self.ext_capabilities() if self.extended else None

    @property
    def acs_control(self):
        """ACS control register (16 bits), or None without the ACS capability or extended space."""
        pos = self.ext_capabilities().get(EXT_CAP_ACS)
        return None if pos is None else self._u16(pos + 6)

    @property
    def acs_enabled_flags(self):
        """Names of every ACS control bit that is set, or None without ACS: bits 0-6 in lspci's spelling (its ``+`` in
        ``ACSCtl``), then the Enhanced Capability bits lspci does not print, reserved bits as ``bit13``..``bit15``."""
        ctl = self.acs_control
        if ctl is None:
            return None
        names = ACS_BITS + ACS_ENHANCED_BITS
        return [names[bit] if bit < len(names) else "bit%d" % bit for bit in range(16) if ctl >> bit & 1]

    def resizable_bars(self):
        """``[{bar, current_bytes, supported_bytes}]`` from the resizable BAR capability; [] without it."""
        pos = self.ext_capabilities().get(EXT_CAP_REBAR)
        if pos is None:
            return []
        first = self._u32(pos + 8)
        if first is None:
            return []
        count = max(1, min(6, (first >> 5) & 0x7))
        bars = []
        for k in range(count):
            cap, ctl = self._u32(pos + 4 + 8 * k), self._u32(pos + 8 + 8 * k)
            if cap is None or ctl is None:
                break
            # capability bits 31:4 = sizes 1 MiB..128 TiB; control bits 31:16 extend them to 2^63
            sizes = [1 << (20 + bit - 4) for bit in range(4, 32) if cap >> bit & 1]
            sizes += [1 << (20 + 28 + bit - 16) for bit in range(16, 32) if ctl >> bit & 1]
            bars.append({"bar": ctl & 0x7, "current_bytes": 1 << (20 + ((ctl >> 8) & 0x3F)),
                         "supported_bytes": sorted(sizes)})
        return bars


def human_bytes(value):
    """``274877906944`` -> ``256GB`` (lspci's spelling of BAR sizes)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if value < 1024 or unit == "EB":
            return "%d%s" % (value, unit)
        value //= 1024
    return "%dEB" % value
