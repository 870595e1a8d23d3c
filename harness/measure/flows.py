"""One case alone, its repeats in a row (tests and tools): the flows of measure/protocol.py
and measure/cold_start_flow.py, each repeat followed by its client pulls."""

from __future__ import annotations

from harness.measure.cold_start_flow import cold_start_repeat
from harness.measure.first_copies import prepare_updates
from harness.measure.protocol import Bench, Emit, client_pulls, update_repeat
from harness.measure.records import RecordContext


def run_flows(bench: Bench, ctx: RecordContext, emit: Emit) -> None:
    """One case alone, its repeats in a row: its trigger's flow, each repeat followed by
    the client pulls it asks for (the schedule of harness/run/campaign.py interleaves
    cases the same way, one repeat at a time)."""
    plan = ctx.plan
    prepared = None if plan.cold_start else prepare_updates(bench)
    for repeat in range(1, plan.repeats + 1):
        if prepared is None:
            cold_start_repeat(bench, ctx, repeat, emit, {})
        else:  # each repeat publishes the next serial after the warm-up's
            serial = prepared.serial + repeat
            update_repeat(bench, ctx, repeat, serial, emit, {}, prepared.missing)
        client_pulls(bench, ctx, repeat, emit)
