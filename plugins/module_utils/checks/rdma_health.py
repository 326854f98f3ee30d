"""RDMA health of an AMD Instinct node's NICs, read from sysfs and procfs (read-only: no ibv tools, no ``rdma``,
``ethtool`` or ``ip``).

Public API (standard library only, Python 3.8+; hooked into ``platform_checks.gather`` / ``run_checks``):

``gather(sysroot="/")``
    Per RDMA device (``sys/class/infiniband/<dev>``): ``name``, ``bdf`` (None when ``device`` is not a PCI function:
    a software device such as ``rxe0``), ``vf`` (an SR-IOV virtual function: ``physfn`` link), PCI ``vendor`` and
    ``device``, ``fw_ver``, ``link`` (``current_speed_gts``, ``max_speed_gts``, ``current_width``, ``max_width`` of its
    PCI function), ``ports`` (``read_rdma_ports``, each with the ``netdevs`` it carries: the ``gid_attrs/ndevs`` of its
    GIDs, else the function's ``net/*``) and ``netdevs`` (the function's ``net/*``); ``netdevs``: per netdev named
    there ``operstate``, ``speed_mbps`` (``sys/class/net/<if>/speed``, None when unknown), ``address`` and
    ``ipv4_subnets`` (its connected routes in ``proc/net/route``; None when that file cannot be read); ``routes``
    (``parse_routes`` of ``proc/net/route``, None when unreadable); ``rdma_dir``. Missing files become ``None``,
    never an exception.
``run_checks(facts, knowledge, options=None, affinity=None)``
    Pure: ``rdma_nic_pcie_link``, ``rdma_port_state``, ``rdma_gid`` (the shape of ``platform_checks``); ``knowledge``
    is ``knowledge/pcie_health.yml`` (sections ``rdma_nic_pcie_link``, ``rdma_port``, ``rdma_gid``), ``options`` the
    platform options (``rdma_gid_index``: the GID index the user set, None: the one RCCL picks), ``affinity``
    ``pcie_health.nic_affinity``'s answer (the NICs paired with a GPU are the backend rails whose rate is judged).
``rails(facts, affinity)``
    Per physical GPU, in BDF order (rail ``i`` is the i-th GPU), its rail: the NIC ``nic_affinity`` pairs with it and
    that NIC's first port, netdev, rate, firmware and IPv4 subnet (shape below): the node's part of the cluster-wide
    ``rail_consistency`` comparison (``inventory["rails"]`` of the platform_checks module).
``node_rails(sysroot="/")``
    ``rails`` of the node under ``sysroot``, read alone (the gpu_topology module returns them, so the launch_templates
    role can compare the rails of the play's nodes before it writes ``NCCL_IB_HCA``).
``read_rdma_ports(sysroot, name)``
    The ports of RDMA device ``name``: state, physical state, rate, link layer, link counters and GID table.
``roce_v2_gid_index(port)``
    ``(index, None)`` of the GID RCCL uses on a RoCE port, or ``(None, why not)``.
``launch_rdma_options(sysroot)``
    The node's ``NCCL_IB_HCA`` suggestion (``pcie_health.nic_affinity``), with each NIC's ports and their RoCE v2 GID
    index, as ``launch_render`` options (the launch_templates module and ``bin/topotune launch``).
``parse_routes(text)``, ``parse_rate(text)``
    ``proc/net/route`` -> ``{netdev: [connected IPv4 subnets]}``; a port's ``rate`` -> Gb/s.

Layouts (linux ``drivers/infiniband/core/sysfs.c``): ``ports/<n>/state`` ``"4: ACTIVE"`` (``state_show``, ``"%d: %s"``),
``phys_state`` ``"5: LinkUp"`` (``phys_state_show``: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5
LinkUp, 6 LinkErrorRecovery, 7 Phy Test), ``rate`` ``"400 Gb/sec (4X NDR)"`` (``rate_show``: lanes x per-lane speed,
SDR when the speed is unknown), ``counters/link_downed`` and ``counters/link_error_recovery`` (``show_pma_counter``, the
PMA PortCounters LinkDownedCounter and LinkErrorRecoveryCounter, 8 bits that stop at 255); the device's ``fw_ver``.
"""

import ipaddress
import os
import re

from ..core.sysroot import is_dir, join, list_dir, numeric_entries, read_text, real_path
from .pcie_health import gather as gather_pcie
from .pcie_health import nic_affinity

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_SPEED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s")
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")
# a netdev name the kernel accepts (dev_valid_name: no '/', no whitespace, not '.' or '..')
_NETDEV = re.compile(r"^[^/\s]{1,15}$")
ROUTE_FILE = "proc/net/route"
# include/uapi/linux/route.h
RTF_UP, RTF_GATEWAY = 0x0001, 0x0002
COUNTERS = ("link_downed", "link_error_recovery")
CHECK_IDS = ("rdma_nic_pcie_link", "rdma_port_state", "rdma_gid")
_RANK = {"pass": 0, "unknown": 1, "warn": 2, "fail": 3}
# The PCIe link an SR-IOV guest sees is the hypervisor's virtual one (platform_checks._as_guest)
HOST_ONLY = ("rdma_nic_pcie_link",)

# RDMA ports and GIDs, as drivers/infiniband/core/sysfs.c lays them out under sys/class/infiniband/<dev>/ports/<n>:
# state ("4: ACTIVE"), link_layer ("Ethernet", "InfiniBand"), gids/<i> (the GID, "%pI6": zeros for an empty entry),
# gid_attrs/types/<i> ("IB/RoCE v1" or "RoCE v2", ib_cache_gid_type_str) and gid_attrs/ndevs/<i> (the netdev);
# reading types/ndevs of an empty entry fails with EINVAL (_show_port_gid_attr), which reads as None here.
ROCE_V2 = "RoCE v2"


# ------------------------------------------------------------------------------------------------ parsing
def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _named_state(text):
    """``"4: ACTIVE"`` -> ``"ACTIVE"``, ``"5: LinkUp"`` -> ``"LinkUp"`` (a text without ``N:`` as it is); None."""
    if text is None:
        return None
    number, sep, name = text.partition(":")
    return name.strip() if sep and number.strip().isdigit() else text.strip() or None


def _speed_gts(text):
    """``"32.0 GT/s PCIe"`` (also the older ``"8 GT/s"``) -> 32.0; None for ``"Unknown"`` or unreadable."""
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def parse_rate(text):
    """A port's ``rate`` (``"400 Gb/sec (4X NDR)"``, ``"2.5 Gb/sec (1X SDR)"``) -> Gb/s as a float; None."""
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


def _ipv4(hex_text):
    """A ``proc/net/route`` address: the kernel prints the network-order ``__be32`` with ``%08X`` (fib_route_seq_show),
    so on the little-endian hosts of Instinct nodes (x86-64) the hex shows the bytes reversed."""
    return ipaddress.IPv4Address(int(hex_text, 16).to_bytes(4, "little"))


def parse_routes(text):
    """``proc/net/route`` -> ``{netdev: ["10.3.0.0/24", ...]}``: each interface's connected routes (gateway 0, flag
    RTF_UP without RTF_GATEWAY, not the default route), in address order; lines that do not parse are skipped.

    Format (linux net/ipv4/fib_trie.c ``fib_route_seq_show``, the main table): a header, then ``Iface Destination
    Gateway Flags RefCnt Use Metric Mask MTU Window IRTT``, tab-separated, addresses and mask as 8 hex digits."""
    routes = {}
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        iface, dest, gateway, flags, mask = fields[0], fields[1], fields[2], fields[3], fields[7]
        try:
            flag_bits, network = int(flags, 16), ipaddress.IPv4Network("%s/%s" % (_ipv4(dest), _ipv4(mask)))
            direct = int(gateway, 16) == 0
        except ValueError:
            continue
        if direct and flag_bits & RTF_UP and not flag_bits & RTF_GATEWAY and network.prefixlen > 0:
            routes.setdefault(iface, []).append(network)
    return {iface: [str(net) for net in sorted(set(nets))] for iface, nets in routes.items()}


def _fmt_speed(gts):
    return "%.1f GT/s" % gts if gts is not None else "? GT/s"


def _fmt_link(width, gts):
    return "x%s %s" % (width if width is not None else "?", _fmt_speed(gts))


# ------------------------------------------------------------------------------------------------ gather
def read_rdma_ports(sysroot, name):
    """``[{port, state, active, phys_state, rate, rate_gbps, link_layer, counters, gids: [{index, gid, type, ndev}],
    netdevs}]`` of RDMA device ``name``, in port order; ``[]`` when it has no readable ``ports/`` directory.
    ``counters``: ``{link_downed, link_error_recovery}``, None where unreadable (or ``N/A (no PMA)``); ``netdevs``: the
    distinct ``gid_attrs/ndevs`` of the port's GIDs, in GID order."""
    base = join(sysroot, os.path.join("sys/class/infiniband", name, "ports"))
    ports = []
    for port in numeric_entries(base):
        pdir = os.path.join(base, str(port))
        state = read_text(os.path.join(pdir, "state"), None)
        rate = read_text(os.path.join(pdir, "rate"), None)
        gids = []
        for index in numeric_entries(os.path.join(pdir, "gids")):
            gids.append({"index": index, "gid": read_text(os.path.join(pdir, "gids", str(index)), None),
                         "type": read_text(os.path.join(pdir, "gid_attrs", "types", str(index)), None),
                         "ndev": read_text(os.path.join(pdir, "gid_attrs", "ndevs", str(index)), None)})
        netdevs = []
        for gid in gids:
            if gid["ndev"] and gid["ndev"] not in netdevs:
                netdevs.append(gid["ndev"])
        ports.append({"port": port, "state": state,
                      # ib_port_state "%d: %s"; RCCL uses only IBV_PORT_ACTIVE ports (ncclIbInit)
                      "active": _named_state(state) == "ACTIVE",
                      "phys_state": read_text(os.path.join(pdir, "phys_state"), None),
                      "rate": rate, "rate_gbps": parse_rate(rate),
                      "link_layer": read_text(os.path.join(pdir, "link_layer"), None),
                      "counters": {counter: _int_or_none(read_text(os.path.join(pdir, "counters", counter), None))
                                   for counter in COUNTERS},
                      "gids": gids, "netdevs": netdevs})
    return ports


def _is_link(path):
    return real_path(path) != path


def _netdev(sysroot, name, routes):
    base = join(sysroot, os.path.join("sys/class/net", name))
    speed = _int_or_none(read_text(os.path.join(base, "speed"), None))
    return {"operstate": read_text(os.path.join(base, "operstate"), None),
            # SPEED_UNKNOWN (-1) while the link is down
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "address": read_text(os.path.join(base, "address"), None),
            "dev_port": _int_or_none(read_text(os.path.join(base, "dev_port"), None)),
            "ipv4_subnets": None if routes is None else list(routes.get(name, []))}


def gather(sysroot="/"):
    """The RDMA devices, their ports and netdevs under ``sysroot`` (read-only)."""
    ib = join(sysroot, "sys/class/infiniband")
    route_text = read_text(join(sysroot, ROUTE_FILE), None)
    routes = parse_routes(route_text) if route_text is not None else None
    nics, netdevs = [], {}
    for name in list_dir(ib):
        real = real_path(os.path.join(ib, name, "device"))
        bdf = os.path.basename(real) if _BDF.match(os.path.basename(real)) and is_dir(real) else None
        nic = {"name": name, "bdf": bdf, "vf": False, "vendor": None, "device": None,
               "fw_ver": read_text(os.path.join(ib, name, "fw_ver"), None),
               "link": {"current_speed_gts": None, "max_speed_gts": None, "current_width": None, "max_width": None},
               "netdevs": []}
        if bdf:
            nic.update(
                vf=_is_link(os.path.join(real, "physfn")),
                vendor=(read_text(os.path.join(real, "vendor"), None) or "").lower() or None,
                device=(read_text(os.path.join(real, "device"), None) or "").lower() or None,
                link={"current_speed_gts": _speed_gts(read_text(os.path.join(real, "current_link_speed"), None)),
                      "max_speed_gts": _speed_gts(read_text(os.path.join(real, "max_link_speed"), None)),
                      "current_width": _int_or_none(read_text(os.path.join(real, "current_link_width"), None)),
                      "max_width": _int_or_none(read_text(os.path.join(real, "max_link_width"), None))},
                netdevs=[n for n in list_dir(os.path.join(real, "net")) if _NETDEV.match(n) and n not in (".", "..")])
        nic["ports"] = read_rdma_ports(sysroot, name)
        for item in nic["netdevs"]:
            netdevs.setdefault(item, _netdev(sysroot, item, routes))
        for port in nic["ports"]:
            port["netdevs"] = [n for n in port["netdevs"] if _NETDEV.match(n) and n not in (".", "..")]
            for item in port["netdevs"]:
                netdevs.setdefault(item, _netdev(sysroot, item, routes))
            if not port["netdevs"] and nic["netdevs"]:
                # no GID names a netdev (InfiniBand, an empty table): the function's netdev of this port
                port["netdevs"] = list(nic["netdevs"]) if len(nic["ports"]) == 1 else [
                    n for n in nic["netdevs"] if netdevs[n]["dev_port"] == port["port"] - 1]
        nics.append(nic)
    return {"rdma_dir": is_dir(ib), "nics": nics, "netdevs": netdevs, "routes": routes}


# ---------------------------------------------------------------------------------------------- helpers
def _result(check_id, status, observed, expected, remediation="", source="", cvs=None):
    return {"id": check_id, "status": status, "observed": observed, "expected": expected,
            "remediation": remediation if status != "pass" else "", "source": source, "cvs": cvs}


def _spec(knowledge, key):
    return (knowledge or {}).get(key) or {}


def _short(items, limit=4):
    items = list(items)
    return ", ".join(items[:limit]) + (" and %d more" % (len(items) - limit) if len(items) > limit else "")


def _judged(facts):
    """``(nics, why none)``: the RDMA devices that are PCI physical functions (backend NICs), and when there are none,
    why (for ``unknown``)."""
    nics = (facts or {}).get("nics") or []
    judged = [n for n in nics if n["bdf"] and not n["vf"]]
    if judged:
        return judged, None
    if not nics:
        return [], "no RDMA device (sys/class/infiniband %s)" % ("empty" if (facts or {}).get("rdma_dir") else "missing")
    software = [n["name"] for n in nics if not n["bdf"]]
    vfs = [n["name"] for n in nics if n["bdf"] and n["vf"]]
    why = []
    if software:
        why.append("%s not a PCI function (a software RDMA device such as rxe or siw)" % _short(software))
    if vfs:
        why.append("%s SR-IOV virtual function(s): their physical functions are judged on the host" % _short(vfs))
    return [], "no RDMA device is a PCI physical function: " + "; ".join(why)


def _label(nic, port=None):
    """``mlx5_2 (0000:39:00.0)``, or ``mlx5_2:1`` for a port (RCCL's ``NCCL_IB_HCA`` form)."""
    if port is None:
        return "%s (%s)" % (nic["name"], nic["bdf"])
    return "%s:%d" % (nic["name"], port["port"])


# ----------------------------------------------------------------------------------------------- checks
def _model(spec, nic):
    """The entry of ``rdma_nic_pcie_link.models`` for ``nic``'s PCI vendor:device, or None."""
    for model in spec.get("models") or []:
        if str(model.get("vendor", "")).lower() == nic["vendor"] and str(model.get("device", "")).lower() == nic["device"]:
            return model
    return None


def check_nic_pcie_link(facts, knowledge):
    """Each RDMA NIC's PCIe link (``current_link_speed``/``current_link_width``) at its capability (``max_link_*``)
    and, for the models ``rdma_nic_pcie_link.models`` lists, at the link the model is built for."""
    spec = _spec(knowledge, "rdma_nic_pcie_link")
    source, cvs = spec.get("source", ""), "test_check_be_nic_pcie_speed_width"
    nics, why = _judged(facts)
    listed = ["%s %s:%s x%s %s" % (m.get("name", "?"), str(m.get("vendor", "")).replace("0x", ""),
                                   str(m.get("device", "")).replace("0x", ""), m.get("width"),
                                   _fmt_speed(m.get("speed_gts"))) for m in spec.get("models") or []]
    expected = "every RDMA NIC's PCIe link at its capability (max_link_speed/width), not downgraded%s" % (
        "; the models of knowledge/pcie_health.yml at their link: " + ", ".join(listed) if listed else "")
    if not nics:
        return _result("rdma_nic_pcie_link", "unknown", why, expected,
                       "nothing to judge: a node without RDMA NICs runs single-node jobs only", source, cvs)
    down, unreadable, at, sources = [], [], {}, []
    for nic in nics:
        link, model = nic["link"], _model(spec, nic)
        if model and model.get("source") and model["source"] not in sources:
            sources.append(model["source"])
        want_gts = max([v for v in (link["max_speed_gts"], (model or {}).get("speed_gts")) if v] or [None])
        want_width = max([v for v in (link["max_width"], (model or {}).get("width")) if v] or [None])
        if link["current_speed_gts"] is None or link["current_width"] is None or want_gts is None or \
                want_width is None:
            unreadable.append(_label(nic))
            continue
        if link["current_speed_gts"] < want_gts or link["current_width"] < want_width:
            capable = "capable of %s" % _fmt_link(link["max_width"], link["max_speed_gts"])
            if model:
                capable += ", %s: %s" % (model.get("name", "the model"),
                                         _fmt_link(model.get("width"), model.get("speed_gts")))
            down.append("%s %s, %s" % (_label(nic), _fmt_link(link["current_width"], link["current_speed_gts"]),
                                       capable))
        else:
            key = _fmt_link(link["current_width"], link["current_speed_gts"])
            at[key] = at.get(key, 0) + 1
    if sources:
        source = "; ".join([source] + sources) if source else "; ".join(sources)
    if down:
        observed = "downgraded: " + "; ".join(down)
        if unreadable:
            observed += "; link not readable on " + _short(unreadable)
        return _result("rdma_nic_pcie_link", spec.get("level", "fail"), observed, expected,
                       "a NIC link trained below its capability cuts the rail's bandwidth (x8 Gen4 carries about 128 "
                       "Gb/s, less than a 400G port): reseat the NIC or its riser/retimer, check the slot's PCIe "
                       "generation and bifurcation in BIOS and 'lspci -vvv -s <bdf>' LnkSta for '(downgraded)'; then "
                       "reboot", source, cvs)
    if unreadable:
        return _result("rdma_nic_pcie_link", "unknown", "current_link_speed/width or max_link_* not readable on %s%s"
                       % (_short(unreadable), "; at their capability: %d" % sum(at.values()) if at else ""),
                       expected, "read 'lspci -vvv -s <bdf>' LnkSta/LnkCap on the node (a VF or an old kernel has no "
                       "link attributes)", source, cvs)
    return _result("rdma_nic_pcie_link", "pass", "%d NIC link(s) at their capability: %s" % (
        len(nics), ", ".join("%s on %d" % (k, v) for k, v in sorted(at.items()))), expected, source=source, cvs=cvs)


def _backend(affinity):
    """The NICs ``nic_affinity`` pairs with a GPU (the rails), or None when no GPU is paired (judge every NIC)."""
    names = {pair["nic"] for pair in (affinity or {}).get("pairs") or [] if pair.get("nic")}
    return names or None


def check_port_state(facts, knowledge, affinity=None):
    """Every port ACTIVE and LinkUp; the rails' ports at least ``rdma_port.min_rate_gbps``; the flap counters within
    ``rdma_port.counters``."""
    spec = _spec(knowledge, "rdma_port")
    source, cvs = spec.get("source", ""), "test_interface_name_consistency"
    want_state, want_phys = spec.get("state", "ACTIVE"), spec.get("phys_state", "LinkUp")
    min_rate = spec.get("min_rate_gbps")
    if min_rate and spec.get("rate_source"):
        source = "; ".join(item for item in (source, spec["rate_source"]) if item)
    limits = spec.get("counters") or {}
    expected = "every port of every RDMA NIC state %s, phys_state %s" % (want_state, want_phys)
    expected += ", the GPU rails' ports at >= %g Gb/s" % min_rate if min_rate else \
        " (rate not judged: knowledge/pcie_health.yml rdma_port gives no min_rate_gbps)"
    if limits:
        expected += "; %s" % ", ".join("%s <= %s (fail above %s)" % (name, lim.get("warn_above"), lim.get("fail_above"))
                                       for name, lim in sorted(limits.items()))
    nics, why = _judged(facts)
    if not nics:
        return _result("rdma_port_state", "unknown", why, expected,
                       "nothing to judge: a node without RDMA NICs runs single-node jobs only", source, cvs)
    ports = [(nic, port) for nic in nics for port in nic["ports"]]
    no_ports = [_label(nic) for nic in nics if not nic["ports"]]
    if not ports:
        return _result("rdma_port_state", "unknown", "no ports/ under sys/class/infiniband/<dev> of %s"
                       % _short(no_ports), expected, "check that the NIC's RDMA driver (mlx5_ib, bnxt_re, ionic_rdma) "
                       "is loaded", source, cvs)
    backend = _backend(affinity)
    down, slow, unreadable, no_rate, no_counters = [], [], [], [], []
    flaps = {"warn": [], "fail": []}
    rates, judged_rate = {}, 0
    for nic, port in ports:
        label = _label(nic, port)
        state, phys = _named_state(port["state"]), _named_state(port.get("phys_state"))
        up = state == want_state and phys == want_phys
        if state is None or phys is None:
            unreadable.append("%s (%s)" % (label, "state" if state is None else "phys_state"))
        elif not up:
            down.append("%s (%s) state %s, phys_state %s" % (label, nic["bdf"], port["state"], port["phys_state"]))
        for counter, lim in sorted(limits.items()):
            value = (port.get("counters") or {}).get(counter)
            if value is None:
                no_counters.append("%s %s" % (label, counter))
            elif lim.get("fail_above") is not None and value > int(lim["fail_above"]):
                flaps["fail"].append("%s %s %d" % (label, counter, value))
            elif lim.get("warn_above") is not None and value > int(lim["warn_above"]):
                flaps["warn"].append("%s %s %d" % (label, counter, value))
        if not up:
            continue  # the rate of a port without a link means nothing
        rate = port.get("rate_gbps")
        netdev = next(iter(port.get("netdevs") or []), None)
        if rate is None and netdev and ((facts.get("netdevs") or {}).get(netdev) or {}).get("speed_mbps"):
            # no rate file: the netdev's speed (sys/class/net/<if>/speed, Mb/s), what the acceptance guide reads
            rate = facts["netdevs"][netdev]["speed_mbps"] / 1000.0
        shown = port.get("rate") or ("%g Gb/sec (%s speed)" % (rate, netdev) if rate is not None else "rate unknown")
        rates[shown] = rates.get(shown, 0) + 1
        if min_rate and (backend is None or nic["name"] in backend):
            if rate is None:
                no_rate.append(label)
            elif rate < float(min_rate):
                slow.append("%s (%s) %s" % (label, nic["bdf"], shown))
            else:
                judged_rate += 1
    notes = []
    if no_ports:
        notes.append("no ports/ on " + _short(no_ports))
    if min_rate and backend is not None:
        others = sorted({nic["name"] for nic, _port in ports if nic["name"] not in backend})
        if others:
            notes.append("rate not judged on %s (no GPU pairs with them: not a rail)" % _short(others))
    if no_rate:
        notes.append("no rate readable on " + _short(no_rate))
    if no_counters:
        notes.append("%s unreadable: flaps not judged there" % _short(no_counters, 3))
    findings = down + ["rate %s below %g Gb/s" % (item, min_rate) for item in slow] + flaps["fail"] + flaps["warn"]
    fix = []
    if down:
        fix.append("a port not ACTIVE/LinkUp carries no RDMA traffic (RCCL skips it): check the cable or transceiver "
                   "and the switch port (phys_state Polling: no link partner; Disabled: the port or its netdev is "
                   "administratively down: 'ip link set <netdev> up'), then 'rdma link' shows ACTIVE LINK_UP")
    if slow:
        fix.append("a rail below %g Gb/s: check the cable/transceiver and the switch port speed, then set the speed "
                   "('ethtool -s <netdev> speed %d autoneg off' on RoCE, as AMD's guide does)"
                   % (min_rate, int(float(min_rate) * 1000)))
    if flaps["fail"] or flaps["warn"]:
        fix.append("the link went down or retrained since the counters started (driver load): a marginal cable, "
                   "transceiver or switch port; check the switch's log for the port, reseat or replace the cable")
    levels = [level for level, found in ((spec.get("down_level", "fail"), down),
                                         (spec.get("below_rate_level", "fail"), slow),
                                         ("fail", flaps["fail"]), ("warn", flaps["warn"])) if found]
    if levels:
        status = max(levels, key=_RANK.get)
    elif unreadable:
        return _result("rdma_port_state", "unknown", "not readable: " + _short(unreadable) + (
            "; " + "; ".join(notes) if notes else ""), expected,
            "read 'rdma link' or 'ibv_devinfo' on the node", source, cvs)
    else:
        status = "pass"
    if status == "pass":
        observed = "%d port(s) %s/%s: %s" % (len(ports), want_state, want_phys, ", ".join(
            "%s on %d" % (k, v) for k, v in sorted(rates.items())))
        if min_rate and judged_rate:
            observed += "; %d rail port(s) at >= %g Gb/s" % (judged_rate, min_rate)
        if limits and not no_counters:
            observed += "; %s within the limits" % ", ".join(sorted(limits))
        return _result("rdma_port_state", "pass", "; ".join([observed] + notes), expected, source=source, cvs=cvs)
    if unreadable:
        notes.insert(0, "not readable: " + _short(unreadable))
    return _result("rdma_port_state", status, "; ".join(findings + notes), expected, "; ".join(fix), source, cvs)


def check_gid(facts, knowledge, options=None):
    """A RoCE v2 GID with a netdev and a routable address on every Ethernet port, at the index RCCL picks
    (``roce_v2_gid_index``) or at ``rdma_gid_index`` when the user set one."""
    spec = _spec(knowledge, "rdma_gid")
    source, cvs = spec.get("source", ""), "test_gid_consistency"
    configured = (options or {}).get("rdma_gid_index")
    if configured is not None:
        expected = ("a RoCE v2 GID with a netdev at index %d (platform_checks_rdma_gid_index) on every Ethernet RDMA "
                    "port" % configured)
    else:
        expected = ("a RoCE v2 GID with a netdev and a routable (IPv4-mapped or global) address on every Ethernet RDMA "
                    "port: the index RCCL picks when NCCL_IB_GID_INDEX is unset, and launch_templates writes")
    nics, why = _judged(facts)
    if not nics:
        return _result("rdma_gid", "unknown", why, expected,
                       "nothing to judge: a node without RDMA NICs runs single-node jobs only", source, cvs)
    missing, link_local, unreadable, infiniband = [], [], [], []
    at = {}
    for nic in nics:
        for port in nic["ports"]:
            label = _label(nic, port)
            if port["link_layer"] == "InfiniBand":
                infiniband.append(label)
                continue
            if port["link_layer"] != "Ethernet":
                unreadable.append("%s link layer %s" % (label, port["link_layer"] or "unreadable"))
                continue
            index, reason = roce_v2_gid_index(port)
            netdevs = "/".join(port.get("netdevs") or []) or "no netdev"
            if configured is None:
                if index is None:
                    missing.append("%s (%s): %s" % (label, nic["bdf"], re.sub(r"^port \d+: ", "", reason)))
                else:
                    at.setdefault(index, []).append(label)
                continue
            entry = next((g for g in port["gids"] if g["index"] == configured), None)
            address = _address((entry or {}).get("gid"))
            routable = "; the RoCE v2 GID RCCL would pick is at index %d" % index if index is not None else \
                "; " + (reason or "")
            if entry is None:
                missing.append("%s: no GID entry %d (the table has %d)%s" % (label, configured, len(port["gids"]),
                                                                             routable))
            elif entry["type"] != ROCE_V2 or not entry["ndev"] or address is None or not address.packed.strip(b"\0"):
                what = "empty" if address is None or not address.packed.strip(b"\0") else \
                    "%s %s%s" % (entry["type"] or "untyped", entry["gid"], " without a netdev" if not entry["ndev"]
                                 else "")
                missing.append("%s (%s): index %d %s%s" % (label, netdevs, configured, what, routable))
            elif not _usable(address):
                link_local.append("%s (%s): index %d is link-local %s%s" % (label, netdevs, configured, entry["gid"],
                                                                            routable))
            else:
                at.setdefault(configured, []).append(label)
    judged = sum(len(v) for v in at.values())
    notes = []
    if infiniband:
        notes.append("%d InfiniBand port(s) not applicable (RCCL sets a GID index only on RoCE ports)" % len(infiniband))
    if unreadable:
        notes.append("not judged: " + _short(unreadable))
    if missing:
        fix = ("give each port's netdev its rail address ('ip addr add <address>/<prefix> dev <netdev>', persistent in "
               "netplan/NetworkManager): the kernel then adds its RoCE v1 and v2 GIDs; check RoCE v2 is enabled on "
               "the NIC and the netdev is up")
        if configured is not None:
            fix += ("; or set platform_checks_rdma_gid_index (and NCCL_IB_GID_INDEX) to the index of the port's RoCE v2 "
                    "GID, or leave both unset so that RCCL >= 2.21 picks it")
        return _result("rdma_gid", spec.get("level", "fail"), "; ".join(missing + link_local + notes), expected, fix,
                       source, cvs)
    if link_local:
        return _result("rdma_gid", spec.get("link_local_level", "warn"), "; ".join(link_local + notes), expected,
                       "a link-local GID reaches only its own L2 segment: set platform_checks_rdma_gid_index and "
                       "NCCL_IB_GID_INDEX to the routable RoCE v2 index named, or leave them unset", source, cvs)
    if not judged:
        if infiniband and not unreadable:
            return _result("rdma_gid", "pass", "not applicable: " + "; ".join(notes), expected, source=source, cvs=cvs)
        return _result("rdma_gid", "unknown", "; ".join(notes) or "no port under ports/", expected,
                       "read 'show_gids' or sys/class/infiniband/<dev>/ports/*/gids on the node", source, cvs)
    observed = "RoCE v2 GID %s" % "; ".join("at index %d on %s" % (index, _short(labels) if len(at) > 1 else
                                                                   "%d Ethernet port(s)" % len(labels))
                                            for index, labels in sorted(at.items()))
    if configured is None and len(at) > 1:
        observed += " (the ports differ: launch_templates sets NCCL_IB_GID_INDEX only for groups whose ports agree)"
    return _result("rdma_gid", "pass", "; ".join([observed] + notes), expected, source=source, cvs=cvs)


def run_checks(facts, knowledge, options=None, affinity=None):
    """Results of the RDMA checks; ``facts`` from ``gather``, ``knowledge`` = knowledge/pcie_health.yml, ``options``
    the platform options (``rdma_gid_index``), ``affinity`` ``pcie_health.nic_affinity``'s answer."""
    if not facts:
        return []
    return [check_nic_pcie_link(facts, knowledge), check_port_state(facts, knowledge, affinity),
            check_gid(facts, knowledge, options)]


# ------------------------------------------------------------------------------------------------- rails
def rails(facts, affinity):
    """The node's rails for the cluster-wide ``rail_consistency``: one entry per physical GPU, in GPU BDF order
    (``nic_affinity``'s pairs), rail ``i`` being the i-th GPU::

        {"rail": 0, "gpu": "0000:0c:00.0", "nic": "mlx5_0", "nic_bdf": "0000:0d:00.0", "level": "switch",
         "port": 1, "link_layer": "Ethernet", "state": "ACTIVE", "phys_state": "LinkUp",
         "rate": "400 Gb/sec (4X NDR)", "rate_gbps": 400.0, "netdev": "enp13s0np0", "fw_ver": "28.39.1002",
         "ipv4_subnet": "10.0.0.0/24"}

    ``nic`` is the NIC ``nic_affinity`` pairs with the GPU (``level``: ``switch``, ``root_port``, ``numa`` or
    ``far``; None and every NIC field None when it pairs none); ``port`` its first port (None without ports);
    ``netdev`` that port's first netdev; ``ipv4_subnet`` the netdev's connected IPv4 route (``proc/net/route``; the
    lowest when it has several), None when it has none or the routes are unreadable; any value the node does not show
    is None. ``[]`` without GPUs."""
    by_name = {nic["name"]: nic for nic in (facts or {}).get("nics") or []}
    netdevs = (facts or {}).get("netdevs") or {}
    out = []
    for rail, pair in enumerate((affinity or {}).get("pairs") or []):
        nic = by_name.get(pair.get("nic")) or {}
        port = (nic.get("ports") or [None])[0] or {}
        netdev = next(iter(port.get("netdevs") or []), None)
        subnets = (netdevs.get(netdev) or {}).get("ipv4_subnets") or []
        out.append({"rail": rail, "gpu": pair["gpu"], "nic": pair.get("nic"), "nic_bdf": pair.get("nic_bdf"),
                    "level": pair.get("level"), "port": port.get("port"), "link_layer": port.get("link_layer"),
                    "state": _named_state(port.get("state")), "phys_state": _named_state(port.get("phys_state")),
                    "rate": port.get("rate"), "rate_gbps": port.get("rate_gbps"), "netdev": netdev,
                    "fw_ver": nic.get("fw_ver"), "ipv4_subnet": subnets[0] if subnets else None})
    return out


def node_rails(sysroot="/"):
    """See the module docstring."""
    return rails(gather(sysroot), nic_affinity(gather_pcie(sysroot)))


# --------------------------------------------------------------------------------------------- GID index
def _address(text):
    try:
        return ipaddress.IPv6Address(text or "")
    except ValueError:
        return None


def _usable(address):
    """RCCL's validGid (net_ib.cc): configured (``configuredGid``: not all zero, not fe80:: with nothing after it)
    and not link-local (``linkLocalGid``: fe80:0000:0000:0000/64, which reaches no other subnet)."""
    raw = address.packed
    head, trailer = raw[:4], any(raw[4:])
    configured = (any(head) or trailer) and not (head == b"\xfe\x80\x00\x00" and not trailer)
    return bool(configured) and not (head == b"\xfe\x80\x00\x00" and not any(raw[4:8]))


def roce_v2_gid_index(port):
    """``(index, None)``: the GID RCCL should use on ``port`` (``read_rdma_ports``), else ``(None, why)``.

    Rule, RCCL's own choice when NCCL_IB_GID_INDEX is unset (ROCm/rccl src/transport/net_ib.cc
    ``ncclIbGetGidIndex``, RCCL >= 2.21 / ROCm 6.3; earlier RCCL uses index 0): the first entry of type
    ``RoCE v2`` with a netdev and a usable GID, IPv4-mapped first (``NCCL_IB_ADDR_FAMILY`` defaults to AF_INET),
    else a global IPv6 one. InfiniBand ports need none (RCCL reads the GID only on Ethernet ports)."""
    where = "port %d" % port["port"]
    if port["link_layer"] == "InfiniBand":
        return None, "%s is InfiniBand: RCCL sets a GID index only on RoCE (Ethernet) ports" % where
    if port["link_layer"] != "Ethernet":
        return None, "%s: link layer %s (ports/%d/link_layer)" % (
            where, port["link_layer"] or "unreadable", port["port"])
    if not port["gids"]:
        return None, "%s: no GID table (ports/%d/gids)" % (where, port["port"])
    roce = [g for g in port["gids"] if g["type"] == ROCE_V2 and g["ndev"] and _address(g["gid"]) is not None]
    usable = [g for g in roce if _usable(_address(g["gid"]))]
    for wanted in (True, False):
        for gid in usable:
            if (_address(gid["gid"]).ipv4_mapped is not None) == wanted:
                return gid["index"], None
    if roce:
        return None, ("%s: only link-local RoCE v2 GIDs (index %s): its netdev %s has no IP address RCCL could "
                      "route to" % (where, ",".join(str(g["index"]) for g in roce), roce[0]["ndev"]))
    return None, "%s: no RoCE v2 GID with a netdev (ports/%d/gid_attrs/types)" % (where, port["port"])


def launch_rdma_options(sysroot):
    """The launch_render options of the node's ``NCCL_IB_HCA`` / ``NCCL_IB_GID_INDEX`` suggestion: ``{"rdma_nics":
    {GPU slot: NIC}, "rdma_ports": {NIC: [{port, active, gid_index, gid_reason}]}}`` when nic_affinity makes one,
    else ``{"rdma_reason": why not}`` (the launch_templates module and ``bin/topotune launch`` both use it, so they
    render the same files). A NIC whose ports cannot be read is left out of ``rdma_ports`` (ports unknown)."""
    affinity = nic_affinity(gather_pcie(sysroot))
    if not affinity["nccl_ib_hca"]:
        return {"rdma_reason": affinity["reason"]}
    nics = {pair["gpu"].rsplit(".", 1)[0]: pair["nic"] for pair in affinity["pairs"]}
    ports = {}
    for name in sorted(set(nics.values())):
        read = read_rdma_ports(sysroot, name)
        if read:
            ports[name] = [dict(zip(("gid_index", "gid_reason"), roce_v2_gid_index(port)), port=port["port"],
                                active=port["active"]) for port in read]
    return {"rdma_nics": nics, "rdma_ports": ports}
