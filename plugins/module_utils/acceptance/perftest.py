"""Parse perftest output (ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw and the _lat tests, linux-rdma/perftest)
into measurements.

Public API (standard library only, Python 3.8+):

``parse(text, source="output", command=None)``
    ``common.new_result`` with ``tool`` ``perftest`` and ``test`` the program (``ib_write_bw``, ``ib_read_bw``,
    ``ib_send_bw``, ``ib_atomic_bw``, ``ib_send_lat``, ``ib_write_lat``, ``ib_read_lat``, ``ib_atomic_lat``,
    ``raw_ethernet_bw``/``_lat`` for RawEth connections: read from the test banner, ``RDMA_Write Bidirectional BW
    Test``, else from the command; None when the log holds runs of several programs). Measurements, one per row of
    the result table (``case``: the row's ``#bytes`` as text, ``"65536"``):

    * BW tests: ``bw_peak``, ``bw_average`` (``Gb/s`` under a ``[Gb/sec]`` header (``--report_gbits``), ``MiB/s``
      under ``[MiB/sec]`` and under the ``[MB/sec]`` of perftest before March 2024, which divided by 2^20 as well:
      commit 1d202bb "Display proper unit for MiB/sec results"), ``msg_rate`` (``Mpps``), and with
      ``--report-per-port`` ``bw_port1``/``bw_port2``, ``msg_rate_port1``/``msg_rate_port2``.
    * latency tests: ``t_min``, ``t_max``, ``t_typical`` (the median), ``t_avg``, ``t_stdev``, ``t_p99``,
      ``t_p99_9`` (us; old perftest prints only min/max/typical), duration runs (``-D``) ``t_avg``.
    * per BW run that ended (its closing dashed line): ``bw_average_max`` (the highest ``bw_average`` of its rows, the
      figure AMD's network pages judge: "report average throughput of 390 Gbps or greater at some point during the
      test"), whose ``case`` names the run: ``<memory>-<direction>-<path>``, memory ``gpu`` (``Use ROCm memory :
      ON``, ``Using ROCm Device``, or a GPU buffer option in the command, ``--use_rocm``/``--use_cuda``...) or
      ``host`` (the header says OFF, or the command names none), direction ``bidir`` (the banner's
      ``Bidirectional``, ``-b``) or ``unidir``, path ``loopback`` (the command's server address is 127.0.0.1,
      localhost or ::1, or the local and remote GID / LID are the same port's) or ``remote`` (another address);
      None where one part cannot be told. With ``--report-both`` the local and remote tables' averages add up.

    ``scope``: ``device`` (the header's ``Device``), ``sl`` (QoS tables), ``side`` (``local``/``remote`` with
    ``--report-both``), ``run`` (its 1-based order) when the log holds several runs. Extra keys describe the
    (first) run: ``device``, ``port`` (the command's ``-i``/``--ib-port``, perftest's default 1 when the command
    is known), ``link_type`` (``Ethernet``/``IB``), ``transport``, ``connection`` (RC, UC, UD...), ``qps``, ``mtu``,
    ``gid_index``, ``bidirectional``, ``gpu_buffers`` (True/False/None) and ``gpu_buffers_from`` (``header``,
    ``command``), ``report_unit``, ``path``; ``runs`` (every run: those keys plus ``header`` (every ``key : value``
    of the test header), ``local``/``remote`` (its address lines, one per QP: LID, QPN, PSN, OUT, RKey, VAddr,
    GID), ``rows``, ``command``, ``complete``), ``commands``, ``failures`` (perftest's error lines).

    ``--output=bandwidth|message_rate|latency`` prints one bare number per message size and no header: read when
    the command is known (echoed in the log, ``$ ib_write_bw ...``, or given as ``command``), as ``bw_average``
    (the unit ``--report_gbits`` sets), ``msg_rate`` or ``t_avg``; sizes from ``-s`` (perftest's default 65536 for
    BW, 2 for latency, 8 for atomics) or ``-a`` (2, 4 ... 8388608). The command also gives the port, the server
    address and GPU buffers; where the header says otherwise the header wins.

    Accepted: launcher and log prefixes (``prefixes.learn``), perftest's warnings (``Conflicting CPU frequency``,
    ``Requested mtu is higher``...), rows with 6 decimals (perftest's format under 0.1 Gb/s), CPU utilization
    columns, ``--run_infinitely`` repeats, several runs in one log, cut markers (skipped, not ``complete``).
    Not ``complete``: a table without its closing dashed line, a truncated last row, an error line (``Completion
    with error``, ``Couldn't connect``...). Refused (``AcceptanceParseError``, one line): no result table, rows
    without their column header, a malformed row with rows after it, bare numbers without the command that
    explains them.
``detect(text)``
    True for perftest output: a test banner (``RDMA_Read BW Test``), a ``#bytes #iterations`` column header, or an
    echoed perftest command line.
"""

import math
import re

from . import prefixes
from .common import AcceptanceParseError, clean_lines, is_cut, last_meaningful, measurement, new_result, options, shorten, split_command
from .common import refuse as _refuse

PROGRAMS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat",
            "ib_send_lat", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat", "raw_ethernet_burst_lat",
            "raw_ethernet_fs_rate")
_VERBS = {"Send": "send", "Send_imm": "send", "RDMA_Write": "write", "RDMA_Write_imm": "write", "RDMA_Read": "read",
          "Atomic": "atomic"}
_BANNER = re.compile(r"\b(Send_imm|Send|RDMA_Write_imm|RDMA_Write|RDMA_Read|Atomic)\s+(?:(CMP_AND_SWAP|FETCH_AND_ADD)"
                     r"\s+)?(Bidirectional\s+)?(?:Post List\s+)?(BW|Latency)\s+(?:forwarding\s+)?(?:Multicast\s+)?"
                     r"Test\b")
_DASHES = re.compile(r"-{40,}")
_TABLE = re.compile(r"#bytes\s")
_COLUMN = re.compile(r"#\w+|\d+(?:\.\d+)?%\s*percentile\[[^\]]*\]|BW\s+(?:peak|average)\[[^\]]*\]|"
                     r"(?:BW|MsgRate)\s+Port\d\[[^\]]*\]|tps\s+average|fps\[[^\]]*\]|[A-Za-z_]+\[[^\]]*\]")
_ADDRESS = re.compile(r"^\s*(local|remote)\s+address\s*:\s*(.*)$")
_ADDRESS_FIELD = re.compile(r"\b(LID|QPN|PSN|RKey|VAddr|OUT|GID)\s*[: ]\s*(\S+)")
_GID = re.compile(r"^\s*GID\s*:\s*(\S+)\s*$")
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_.*/ -]*?)\s*:\s*(\S+)")
_SIDE = re.compile(r"^\s*(Local|Remote)\s+results\s*:\s*$")
_ROCM_DEVICE = re.compile(r"\bUsing ROCm Device with ID\b|\bof GPU buffer at\b|\bUsing (?:CUDA|MUSA|Neuron|Gaudi) "
                          r"Device\b|\bcuMemAlloc\b")
_FAILURE = re.compile(r"\bCompletion with error\b|\bFailed status \d+|\bCouldn't\b|\bUnable to\b|\bFailed to\b|"
                      r"\bSegmentation fault\b|\bcore dumped\b|^\s*Aborted\b|\bProblems with warm up\b|"
                      r"\bError(?: in|:)|\bERROR\b|\bInvalid (?:value|size|number)\b|\bnot supported\b",
                      re.IGNORECASE)
_FAILURE_EXCEPT = re.compile(r"^\s*WARNING:|\bConflicting CPU frequency\b|\bRequested mtu\b", re.IGNORECASE)
_COMMAND = re.compile(r"(?:^|[\s/$+>#;&|(])((?:ib_(?:write|read|send|atomic)_(?:bw|lat))|raw_ethernet_(?:bw|lat|"
                      r"burst_lat|fs_rate))(?:[ \t]+(.*))?$")
# where one shell command ends: ; && || | a background & or a redirection (not the '>' of a '<NIC 0>' placeholder)
_SHELL_SEPARATOR = re.compile(r";|&&|\|\||\|(?!\|)|(?<=\s)&(?=\s|$|\))|(?:(?<=\s)|^)\d?>>?|\)\s*;")
_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]*>")
_NUMBER_ONLY = re.compile(r"^\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|-?nan|-?inf)\s*$", re.IGNORECASE)
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "localhost.localdomain", "ip6-localhost")
_LONG_WITH_VALUE = (
    "port ib-dev ib-port mtu size iters tx-depth qp-timeout sl gid-index connection qp vector inline_size outs tos "
    "hop_limit MGID rx-depth cq-mod atomic_type post_list duration margin source_mac dest_mac dest_ip source_ip "
    "dest_port source_port ethertype limit_bw limit_msgrate report-counters force-link remote_mac local_mac "
    "remote_ip local_ip remote_port local_port pkey_index burst_size typical_pkt_size rate_limit rate_limit_type "
    "rate_units output out_json_file latency_gap flow_label retry_count payload_file_path use_cuda use_cuda_bus_id "
    "cuda_mem_type use_musa use_musa_bus_id use_rocm use_neuron use_hl use_mlu use_opencl opencl_platform_id "
    "use_ib_dm_dmabuf gpu_touch mmap mmap-offset dlid tclass wait_destroy flows flows_burst reply_every vlan_pcp "
    "recv_post_list aes_block_size kek_path credentials_path data_enc_keys_number data_enc_key_app_path "
    "log_dci_streams log_active_dci_streams congest_type bind_source_ip cqe_poll tph_mem cpu_id ph pin_cores "
    "numa_node").split()
# perftest_parameters.c getopt_long: "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"
_SHORT_WITH_VALUE = "wypdimsntuSxcqIoMrQAlDfBTLEJjKkXW"
_SHORT_FLAGS = "aFegzRvhbNVCHUOZP"
_GPU_MEMORY = ("use_rocm", "use_cuda", "use_cuda_bus_id", "use_musa", "use_musa_bus_id", "use_neuron", "use_hl",
               "use_mlu", "use_opencl", "use_rocm_dmabuf", "use_cuda_dmabuf")
_COMMAND_SPEC = dict(
    [(name, ((name,), True)) for name in _LONG_WITH_VALUE if name not in ("port", "ib-dev", "ib-port", "size")]
    + [(letter, ((letter,), True)) for letter in _SHORT_WITH_VALUE if letter not in "dis"]
    + [(letter, ((letter,), False)) for letter in _SHORT_FLAGS if letter not in "abC"]
    + [("device", (("d", "ib-dev"), True)), ("port", (("i", "ib-port"), True)), ("size", (("s", "size"), True)),
       ("all", (("a", "all"), False)), ("bidirectional", (("b", "bidirectional"), False)),
       ("report_gbits", (("report_gbits",), False)), ("report_cycles", (("C", "report-cycles"), False)),
       ("tcp_port", (("p",), True)), ("use_rocm_dmabuf", (("use_rocm_dmabuf",), False)),
       ("use_cuda_dmabuf", (("use_cuda_dmabuf",), False)), ("report_both", (("report-both",), False)),
       ("run_infinitely", (("run_infinitely",), False))])
_METRICS = {"BW peak": "bw_peak", "BW average": "bw_average", "MsgRate": "msg_rate", "BW Port1": "bw_port1",
            "BW Port2": "bw_port2", "MsgRate Port1": "msg_rate_port1", "MsgRate Port2": "msg_rate_port2",
            "t_min": "t_min", "t_max": "t_max", "t_typical": "t_typical", "t_avg": "t_avg", "t_stdev": "t_stdev",
            "99% percentile": "t_p99", "99.9% percentile": "t_p99_9"}
_UNITS = {"Gb/sec": "Gb/s", "MiB/sec": "MiB/s", "MB/sec": "MiB/s", "Mpps": "Mpps", "usec": "us"}
_DEFAULT_SIZE = {"bw": 65536, "lat": 2, "atomic": 8}


def _anchor(line):
    for pattern in (_BANNER, _TABLE, _DASHES):
        match = pattern.search(line)
        if match is not None:
            return match.start()
    for marker in ("Dual-port", "Number of qps", "Connection type", "Link type", "local address:",
                   "remote address:"):
        position = line.find(marker)
        if position >= 0:
            return position
    return None


def _columns(line):
    """The column names of a result table header, or None when the line is not one."""
    body = line.strip()
    names, position = [], 0
    for match in _COLUMN.finditer(body):
        if body[position:match.start()].strip():
            return None
        names.append(" ".join(match.group(0).split()))
        position = match.end()
    if body[position:].strip() or not names or names[0] != "#bytes":
        return None
    return names


def _column_kind(name):
    """(metric, unit) of a column, ('bytes'|'iterations'|'sl', None), or (None, None) for one not measured."""
    if name in ("#bytes", "#iterations", "#sl", "#flows"):
        return name[1:], None
    match = re.match(r"^(.*?)\[(.*)\]$", name)
    if match is None:
        return None, None
    label, unit = match.group(1).strip(), match.group(2)
    label = re.sub(r"^(\d+(?:\.\d+)?)%\s*percentile$", r"\1% percentile", label)
    return _METRICS.get(label), _UNITS.get(unit)


def _program(verb, kind, connection):
    if connection == "RawEth":
        return "raw_ethernet_bw" if kind == "BW" else "raw_ethernet_lat"
    return "ib_%s_%s" % (_VERBS[verb], "bw" if kind == "BW" else "lat")


def _command(text):
    """(program, facts, server) of a perftest command line, or None."""
    match = _COMMAND.search(text)
    if match is None:
        return None
    args = split_command(match.group(2) or "")
    cut = next((i for i, a in enumerate(args) if a in (";", "&&", "||", "|", "&", ">", ">>", "2>&1", "<")
                or a.startswith((">", "2>", ")")) or (a.startswith("<") and not a.endswith(">"))), None)
    args = args[:cut] if cut is not None else args
    args = [a.rstrip(");") for a in args]
    facts, rest = options(args, _COMMAND_SPEC)
    return match.group(1), facts, (rest[0] if rest else None)


def _commands(line):
    """Every perftest invocation on a (shell) line: [(program, facts, server, text)]."""
    # a documentation placeholder ('<GPU Adjacent to NIC 0>', '<host_ip for NIC 0 on node 0>') is one argument,
    # and its '>' no redirection
    line = _PLACEHOLDER.sub(lambda m: re.sub(r"\s+", "_", m.group(0)), line)
    found = []
    for match in re.finditer(r"((?:ib_(?:write|read|send|atomic)_(?:bw|lat))|raw_ethernet_\w+)\b", line):
        if match.start() and not re.match(r"[\s/$+>#;&|(]", line[match.start() - 1]):
            continue
        separator = _SHELL_SEPARATOR.search(line, match.end())
        text = line[match.start():separator.start() if separator else len(line)]
        command = _command(text)
        if command is not None:
            found.append(command + (text.strip(),))
    return found


def detect(text):
    """See the module docstring."""
    if not isinstance(text, str):
        return False
    for _number, line in clean_lines(text):
        if _BANNER.search(line) or (_TABLE.search(line) and _columns(line[_TABLE.search(line).start():])):
            return True
        if _commands(line):
            return True
    return False


def _new_run(banner=None):
    run = {"test": None, "bidirectional": None, "banner": banner, "header": {}, "local": [], "remote": [],
           "tables": [], "rows": [], "closed": False, "gpu_seen": False, "command": None, "complete": True,
           "line": None}
    return run


class _Parser:
    def __init__(self, source, command):
        self.source = source
        self.runs = []
        self.run = None
        self.table = None
        self.side = None
        self.cut = False
        self.failures = []
        self.warnings = []
        self.commands = []
        self.command = None
        self.given = None
        self.bare = []
        self.orphans = []
        self.last_address = "local"
        if command is not None:
            text = command if isinstance(command, str) else " ".join(split_command(command))
            found = _commands(text)
            if found:
                self.given = found[-1]
            else:       # options without the program's name
                facts, rest = options(split_command(_PLACEHOLDER.sub(
                    lambda m: re.sub(r"\s+", "_", m.group(0)), text)), _COMMAND_SPEC)
                self.given = (None, facts, rest[0] if rest else None, text.strip())
            self.commands.append(self.given[3])

    def parse(self, text):
        lines = clean_lines(text)
        lines = prefixes.strip_all(lines, prefixes.learn(lines, _anchor))
        last = last_meaningful(lines)
        for number, line in lines:
            self._line(number, line, number == last)
        return self._finish(lines)

    def _start_run(self, number, banner=None):
        self.run = _new_run(banner)
        self.run["line"] = number
        self.run["command"] = self.command
        self.runs.append(self.run)
        self.table = None
        self.side = None

    def _line(self, number, line, is_last):
        stripped = line.strip()
        if not stripped:
            return
        if is_cut(line):
            self.cut = True
            if self.run is not None:
                self.run["complete"] = False
            return
        found = _commands(stripped) if not _BANNER.search(stripped) else []
        if found:
            self.command = found
            self.commands.extend(f[3] for f in found)
            return
        banner = _BANNER.search(stripped)
        if banner is not None:
            self._start_run(number, stripped)
            verb, _atomic, bidirectional, kind = banner.group(1), banner.group(2), banner.group(3), banner.group(4)
            self.run.update(verb=verb, kind=kind, bidirectional=bool(bidirectional))
            return
        if _DASHES.fullmatch(stripped):
            if self.table is not None and self.table["rows"]:
                self.table["closed"] = True
                self.run["closed"] = True
                self.table = None
            return
        columns = _columns(stripped) if _TABLE.match(stripped) else None
        if columns is not None:
            if self.run is None:
                self._start_run(number)
            self.table = {"line": number, "columns": columns, "rows": [], "closed": False, "side": self.side}
            self.run["tables"].append(self.table)
            return
        match = _SIDE.match(stripped)
        if match is not None:
            self.side = match.group(1).lower()
            return
        tokens = stripped.split()
        if self.table is not None and tokens and tokens[0].isdigit():
            self._row(number, line, tokens, is_last)
            return
        if self.table is not None:
            self.table = None
        if tokens and tokens[0].isdigit() and len(tokens) >= 3:
            self.orphans.append((number, line))
            return
        if _NUMBER_ONLY.match(stripped):
            self.bare.append((number, stripped))
            return
        if _FAILURE.search(stripped) and not _FAILURE_EXCEPT.search(stripped):
            self.failures.append({"line": number, "text": shorten(stripped, 160)})
            if self.run is not None:
                self.run["complete"] = False
            return
        self._header_line(stripped)

    def _header_line(self, stripped):
        """A line of a run's test header: GPU memory, the local and remote addresses, ``key : value`` pairs."""
        if self.run is None:
            return
        if _ROCM_DEVICE.search(stripped):
            self.run["gpu_seen"] = True
            return
        match = _ADDRESS.match(stripped)
        if match is not None:
            self.run[match.group(1)].append(dict(_ADDRESS_FIELD.findall(match.group(2))))
            self.last_address = match.group(1)
            return
        match = _GID.match(stripped)
        if match is not None:
            if self.run[self.last_address]:
                self.run[self.last_address][-1]["GID"] = match.group(1)
            return
        if not self.run["tables"]:
            for key, value in _PAIR.findall(stripped):
                self.run["header"][" ".join(key.split())] = value

    def _row(self, number, line, tokens, is_last):
        columns = self.table["columns"]
        values = []
        problem = None
        if len(tokens) != len(columns):
            problem = "%d fields, the column header on line %d has %d" % (len(tokens), self.table["line"], len(columns))
        else:
            for name, token in zip(columns, tokens):
                try:
                    value = int(token) if name in ("#bytes", "#iterations", "#sl", "#flows") else float(token)
                except ValueError:
                    problem = "%s %r is not a number" % (name, token)
                    break
                if isinstance(value, float) and value < 0 and math.isfinite(value):
                    problem = "%s %r is negative" % (name, token)
                    break
                values.append(value)
        if problem is not None:
            if is_last:
                self.warnings.append("line %d: the last row is cut (%s)" % (number, problem))
                self.cut = True
                self.run["complete"] = False
                return
            _refuse(self.source, number, line, problem)
        self.table["rows"].append({"line": number, "values": dict(zip(columns, values))})

    def _describe(self, run, index, many):
        """The run's facts from its header, its command and the log."""
        header = run["header"]
        command = run["command"] or ([self.given] if self.given else None)
        chosen = None
        if command:
            device = header.get("Device")
            chosen = next((c for c in command if c[1].get("device") == device), None) if device else None
            chosen = chosen or command[-1]
        facts = chosen[1] if chosen else {}
        connection = header.get("Connection type")
        if run.get("verb"):
            run["test"] = _program(run["verb"], run["kind"], connection)
        elif chosen and chosen[0] in PROGRAMS:
            run["test"] = chosen[0]
        run["device"] = header.get("Device") or facts.get("device")
        run["port"] = int(facts["port"]) if str(facts.get("port", "")).isdigit() else (1 if chosen else None)
        run["link_type"] = header.get("Link type")
        run["transport"] = header.get("Transport type")
        run["connection"] = connection
        run["qps"] = int(header["Number of qps"]) if str(header.get("Number of qps", "")).isdigit() else None
        mtu = re.match(r"^(\d+)", header.get("Mtu", ""))
        run["mtu"] = int(mtu.group(1)) if mtu else None
        run["gid_index"] = int(header["GID index"]) if str(header.get("GID index", "")).isdigit() else None
        if run["bidirectional"] is None and chosen:
            run["bidirectional"] = bool(facts.get("bidirectional"))
        memory = {k: v for k, v in header.items() if re.match(r"^Use \w+ memory$", k)}
        if any(v.upper() == "ON" for v in memory.values()) or run["gpu_seen"]:
            run["gpu_buffers"], run["gpu_buffers_from"] = True, "header"
        elif memory:
            run["gpu_buffers"], run["gpu_buffers_from"] = False, "header"
        elif chosen:
            run["gpu_buffers"], run["gpu_buffers_from"] = any(name in facts for name in _GPU_MEMORY), "command"
        else:
            run["gpu_buffers"], run["gpu_buffers_from"] = None, None
        run["path"] = None
        server = chosen[2] if chosen else None
        if server is not None:
            run["path"] = "loopback" if server.lower().strip("[]") in _LOOPBACK else "remote"
        elif run["local"] and run["remote"]:
            local, remote = run["local"][0], run["remote"][0]
            same_gid = local.get("GID") and local.get("GID") == remote.get("GID") and re.search(
                r"[1-9a-fA-F]", local.get("GID"))
            same_lid = local.get("LID") == remote.get("LID") and re.search(r"[1-9a-fA-F]", local.get("LID") or "")
            if same_gid or same_lid:
                run["path"] = "loopback"
        run["command_text"] = chosen[3] if chosen else None
        run["report_cycles"] = bool(facts.get("report_cycles"))
        run["report_unit"] = None
        run["run"] = index if many else None

    def _measure(self, run, result):
        base = {}
        if run["device"]:
            base["device"] = run["device"]
        if run["run"] is not None:
            base["run"] = run["run"]
        per_size = {}
        for table in run["tables"]:
            kinds = [(name,) + _column_kind(name) for name in table["columns"]]
            for row in table["rows"]:
                values = row["values"]
                scope = dict(base)
                if "#sl" in values:
                    scope["sl"] = values["#sl"]
                if table["side"]:
                    scope["side"] = table["side"]
                case = str(values["#bytes"])
                run["rows"].append(dict(values, line=row["line"], side=table["side"]))
                for name, metric, unit in kinds:
                    if metric in (None, "bytes", "iterations", "sl", "flows") or unit is None:
                        continue
                    if unit == "us" and run["report_cycles"]:
                        continue
                    value = values[name]
                    if not math.isfinite(value):
                        self.warnings.append("line %d: %s %s is not a finite number: not measured" % (
                            row["line"], name, value))
                        continue
                    result["measurements"].append(measurement(metric, unit, value, case, **scope))
                    if metric == "bw_average":
                        run["report_unit"] = unit
                        per_size.setdefault((values["#bytes"], values.get("#sl")), {}).setdefault(
                            table["side"], []).append(value)
        open_tables = [t for t in run["tables"] if t["rows"] and not t["closed"]]
        if open_tables:
            run["complete"] = False
            self.warnings.append("line %d: the result table has no closing line: the run was cut or did not finish"
                                 % open_tables[-1]["rows"][-1]["line"])
        if per_size and run["complete"] and run["report_unit"]:
            totals = []
            for sides in per_size.values():
                if None in sides:
                    totals.extend(sides[None])
                elif "local" in sides and "remote" in sides:
                    totals.append(max(sides["local"]) + max(sides["remote"]))
            if totals:
                memory = {True: "gpu", False: "host"}.get(run["gpu_buffers"])
                direction = "bidir" if run["bidirectional"] else "unidir"
                case = "%s-%s-%s" % (memory, direction, run["path"]) if memory and run["path"] else None
                result["measurements"].append(measurement("bw_average_max", run["report_unit"], max(totals), case,
                                                          **base))

    def _bare(self, result):
        """``--output=...`` numbers, read through the command."""
        command = self.command or ([self.given] if self.given else None)
        if not self.bare:
            return
        number, text = self.bare[0]
        if not command:
            _refuse(self.source, number, text, "a bare number without a result table: perftest's --output=bandwidth "
                                               "(or message_rate, latency) output, which needs its command (echoed "
                                               "in the log or given as command=)")
        program, facts, _server, command_text = command[-1]
        if program is None:
            _refuse(self.source, number, text, "a bare number, and the command (%s) names no perftest program" % shorten(
                command_text, 60))
        output = facts.get("output")
        if output not in ("bandwidth", "message_rate", "latency"):
            _refuse(self.source, number, text, "a bare number, and the command (%s) sets no --output" % shorten(
                command_text, 60))
        kind = "atomic" if "atomic" in program else ("lat" if program.endswith("_lat") else "bw")
        metric, unit = {"bandwidth": ("bw_average", "Gb/s" if facts.get("report_gbits") else "MiB/s"),
                        "message_rate": ("msg_rate", "Mpps"), "latency": ("t_avg", "us")}[output]
        if facts.get("all"):
            sizes = [2 ** i for i in range(1, 24)]
        else:
            size = facts.get("size")
            sizes = [int(size)] if str(size or "").isdigit() else [_DEFAULT_SIZE[kind]]
        server = _server
        result.update(test=result["test"] or program, output=output, device=facts.get("device"),
                      port=int(facts["port"]) if str(facts.get("port", "")).isdigit() else 1,
                      bidirectional=bool(facts.get("bidirectional")),
                      gpu_buffers=any(name in facts for name in _GPU_MEMORY), gpu_buffers_from="command",
                      report_unit=unit, path=None if server is None else (
                          "loopback" if server.lower().strip("[]") in _LOOPBACK else "remote"))
        scope = {"device": facts["device"]} if facts.get("device") else {}
        for position, (line_number, value_text) in enumerate(self.bare):
            value = float(value_text)
            case = str(sizes[position]) if position < len(sizes) else None
            if position >= len(sizes):
                self.warnings.append("line %d: more numbers than the command's message sizes" % line_number)
            if not math.isfinite(value) or value < 0:
                self.warnings.append("line %d: %s is not a finite number: not measured" % (line_number, value_text))
                continue
            result["measurements"].append(measurement(metric, unit, value, case, **scope))

    def _finish(self, lines):
        source = self.source
        runs = [r for r in self.runs if any(t["rows"] for t in r["tables"])]
        if not runs and not self.bare:
            if self.orphans:
                number, line = self.orphans[0]
                _refuse(source, number, line, "result rows without their column header (#bytes #iterations ...): the "
                                              "output was filtered or cut")
            if self.failures:
                first = self.failures[0]
                _refuse(source, first["line"], first["text"], "the run failed before printing a result table")
            number, line = next(((n, t) for n, t in lines if t.strip()), (1, ""))
            table = next((t for r in self.runs for t in r["tables"]), None)
            why = ("the result table (line %d) has no row" % table["line"] if table else
                   "no perftest result table (a '#bytes #iterations ...' column header and its rows)")
            _refuse(source, number, line, why)
        if runs and self.bare:
            number, text = self.bare[0]
            self.warnings.append("line %d: a bare number beside the result tables: not read" % number)
            self.bare = []
        result = new_result("perftest", None, source)
        many = len(runs) > 1
        for index, run in enumerate(runs, 1):
            self._describe(run, index, many)
            self._measure(run, result)
        tests = []
        for run in runs:
            if run["test"] not in tests:
                tests.append(run["test"])
        result["test"] = tests[0] if len(tests) == 1 else None
        if len(tests) > 1:
            self.warnings.append("the log holds runs of %s: no single test" % ", ".join(str(t) for t in tests))
        first = runs[0] if runs else {}
        for key in ("device", "port", "link_type", "transport", "connection", "qps", "mtu", "gid_index",
                    "bidirectional", "gpu_buffers", "gpu_buffers_from", "report_unit", "path"):
            result[key] = first.get(key)
        self._bare(result)
        if self.failures:
            self.warnings.append("line %d: perftest reported an error: %s" % (self.failures[0]["line"],
                                                                              self.failures[0]["text"]))
        result["runs"] = [{k: v for k, v in run.items() if k not in ("tables", "verb", "kind", "closed", "gpu_seen")}
                          for run in runs]
        for public, run in zip(result["runs"], runs):
            public["command"] = run.get("command_text")
            public.pop("command_text", None)
        result["complete"] = not (self.cut or self.failures or any(not r["complete"] for r in runs))
        result.update(commands=self.commands, failures=self.failures, warnings=self.warnings)
        return result


def parse(text, source="output", command=None):
    """See the module docstring."""
    if not isinstance(text, str):
        raise AcceptanceParseError("%s line 0: %r: expected text, got %s" % (source, "", type(text).__name__))
    return _Parser(source, command).parse(text)
