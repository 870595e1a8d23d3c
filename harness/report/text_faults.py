"""The faults table `xfrbench report` (and the end of `xfrbench run`) prints: per fault and
transfer, what each kind of secondary did (harness/report/faultview.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.core.ui import folding_table, print_table
from harness.report.data import ReportData
from harness.report.faultview import cell_text


def print_faults(data: ReportData, console: Console) -> None:
    faults = data.faults
    if faults is None:
        return
    table = folding_table(
        "Faults: how each server healed (seconds from the fault's end until it served the new "
        "serial; stuck: not within the timeout, in its own words)",
        ["fault", "transport", "xfr", *faults.kinds],
        left=3,
    )
    for row in faults.rows:
        cells = []
        for kind in faults.kinds:
            cell = row.cells.get(kind)
            if cell is None:
                cells.append("-")
                continue
            words = f"\n{cell.words}" if cell.words and cell.outcome != "healed" else ""
            cells.append(escape(cell_text(cell) + words))
        table.add_row(escape(row.fault), row.transport, row.xfr, *cells)
    print_table(console, table)
