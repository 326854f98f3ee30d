"""docs/health-checks.md "Coverage: ROCm CVS and AMD's acceptance guide" (issue 24): the two coverage tables name
every CVS host-config and preflight test and every basic health check of the acceptance guide, each row says how it
is covered, and every topotune id named as covering one is a check the check tables of the same file document."""

import re

# ROCm/cvs at dddd914 (2026-08-21): the test functions of the two files the first table maps
CVS_TESTS = {
    "cvs/tests/platform/host_configs_cvs.py": {
        "test_check_os_release", "test_check_kernel_version", "test_check_bios_version", "test_check_rocm_version",
        "test_check_gpu_fw_version", "test_check_pci_realloc", "test_check_iommu_pt", "test_check_numa_balancing",
        "test_check_online_memory", "test_check_pci_accelerators", "test_check_gpu_pcie_speed_width",
        "test_check_be_nic_pcie_speed_width", "test_check_pci_acs", "test_check_dmesg_driver_errors"},
    "cvs/tests/preflight/preflight_checks.py": {
        "test_node_reachability", "test_node_health", "test_rocm_version_consistency", "test_ifoe_l2_connectivity",
        "test_ifoe_transferbench_smoke", "test_interface_name_consistency", "test_gid_consistency", "test_node_smoke",
        "test_tier3_info", "test_rdma_connectivity", "test_generate_preflight_report"},
}
# ROCm/system-acceptance-docs at 23e7312: the sections of docs/common/health-checks.md
GUIDE_BASIC_CHECKS = {
    "Check OS Distribution", "Check Kernel Boot Arguments", "Check for Driver Errors",
    "Check for Available System Memory", "Check GPU Presence", "Check GPU PCIe Bus Link Speed and Width",
    "Monitor Utilization Metrics", "Check System Kernel Logs", "Automated Health Checks with the Cluster Validation Suite"}
# the checks of issue 24 not built yet: a row may name them only as "planned (issue 24)"
PLANNED = set()  # issue 24's checks are all built; a check planned later is named here until it has its row

COLUMNS = {"CVS test": ["CVS test", "file", "what it checks", "covered today by", "coverage"],
           "guide item": ["guide item", "page", "what it checks", "covered today by", "coverage"]}
VERDICT = re.compile(r"^(covered|partial|planned \(issue 24\)|not covered|n/a)(:|$)")
PLANNED_PART = re.compile(r"planned \(issue 24\):([^;]*)")
_CELLS = re.compile(r"(?<!\\)\|")  # a cell may hold an escaped pipe (`dmesg \| grep`)


def coverage_tables(lines):
    """``{first header cell: [row, ...]}`` of the tables in ``lines``, each row a dict by header."""
    tables, header, rows = {}, None, None
    for line in lines:
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in _CELLS.split(line.strip())[1:-1]]
        if header is None:
            header, rows = cells, tables.setdefault(cells[0], [])
        elif not set(line) <= set("|-: "):
            rows.append(dict(zip(header, cells), _cells=len(cells), _header=header))
    return tables


def coverage_problems(doc):
    """Everything wrong with the coverage section of ``doc`` (a ``HealthChecksDoc``), as messages."""
    problems = []
    tables = coverage_tables(doc.coverage_lines)
    if not doc.coverage_lines:
        return ["no section %r" % doc.coverage_heading]
    for first, columns in COLUMNS.items():
        if first not in tables:
            problems.append("no table with the columns %s" % " | ".join(columns))
            continue
        for row in tables[first]:
            name = row.get(first, "?")
            if row["_header"] != columns or row["_cells"] != len(columns):
                problems.append("%s: %d cells under %s, want %s" % (name, row["_cells"], row["_header"], columns))
                continue
            verdict = VERDICT.match(row["coverage"])
            if not verdict:
                problems.append("%s: coverage %r: say covered, partial, planned (issue 24), not covered or n/a"
                                % (name, row["coverage"]))
                continue
            covering = re.findall(r"`([^`]*)`", row["covered today by"])
            leftover = re.sub(r"`[^`]*`|[,\s]", "", row["covered today by"])
            if leftover:
                problems.append("%s: 'covered today by' holds more than check ids: %r" % (name, leftover))
            for check_id in covering:
                if not doc.is_documented(check_id):
                    problems.append("%s: %r is no check id of the check tables of docs/health-checks.md"
                                    % (name, check_id))
            if verdict.group(1) in ("covered", "partial") and not covering:
                problems.append("%s: %s but no check id covers it" % (name, verdict.group(1)))
            if verdict.group(1) not in ("covered", "partial") and covering:
                problems.append("%s: %s, yet covered by %s" % (name, verdict.group(1), ", ".join(covering)))
            for part in PLANNED_PART.findall(row["coverage"]):
                for planned in re.findall(r"`([^`]*)`", part):
                    if planned not in PLANNED:
                        problems.append("%s: %r is not a planned check of issue 24" % (name, planned))
                    elif doc.is_documented(planned):
                        problems.append("%s: %r has its row in the check tables now: name it as covering"
                                        % (name, planned))
    return problems


def test_the_coverage_tables_hold_together(health_checks_doc):
    """Every row says how it is covered; every covering id is a documented check, every planned one is of issue 24
    and not built yet."""
    problems = coverage_problems(health_checks_doc())
    assert not problems, "\n".join(problems)


def test_every_cvs_test_and_basic_health_check_has_its_row(health_checks_doc):
    tables = coverage_tables(health_checks_doc().coverage_lines)
    listed = {}
    for row in tables["CVS test"]:
        listed.setdefault(row["file"].strip("`"), set()).add(row["CVS test"].strip("`"))
    assert listed == CVS_TESTS
    guide = {row["guide item"] for row in tables["guide item"]}
    assert GUIDE_BASIC_CHECKS <= guide, "missing: %s" % ", ".join(sorted(GUIDE_BASIC_CHECKS - guide))


def test_a_mistyped_covering_id_fails(health_checks_doc):
    doc = health_checks_doc()
    text, start = doc.text, doc.text.index(doc.coverage_heading)
    row = "| no `lspci -vv` line `ACSCtl: SrcValid+` on any device | `pci_acs` |"
    assert text.count(row) == 1
    problems = coverage_problems(health_checks_doc(text[:start] + text[start:].replace(row, row.replace(
        "`pci_acs`", "`pci_acss`"))))
    assert problems == ["`test_check_pci_acs`: 'pci_acss' is no check id of the check tables of docs/health-checks.md"]


def test_an_empty_coverage_cell_fails(health_checks_doc):
    text = health_checks_doc().text
    row = "| `numa_balancing` | covered |"
    assert text.count(row) == 1
    problems = coverage_problems(health_checks_doc(text.replace(row, "| `numa_balancing` |  |")))
    assert len(problems) == 1 and problems[0].startswith("`test_check_numa_balancing`: coverage ''")
