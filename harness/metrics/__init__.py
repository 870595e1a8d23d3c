"""Per-host observation of a run: what each server costs and what the link did.

- procfs: /proc parsers and readers (TCP sockets by state, TIME_WAIT, ephemeral ports,
  retransmits of a server's namespace; the process-tree fallback for CPU and memory).
- cgroup: one cgroup per server (v2 or v1) for its CPU seconds and memory.
- sampler: the thread writing results/<run-id>/samples.jsonl.
- resources: the per-case summary of those samples (summary["resources"]).

samples.jsonl holds one JSON object per line. A server line:
    t, event ("periodic" | "transfer-start" | "transfer-end"), case, repeat (int | null),
    role, server, pid, source ("cgroup-v1" | "cgroup-v2" | "proc"),
    cpu_user_s, cpu_system_s (cumulative), cpu_resolution_s (the step they move in: 1e-6
    from a cgroup, a clock tick of 0.01 from /proc; lines from before it have none, read by
    their source), anon_bytes, charged_bytes, charged_peak_bytes
    (see harness.observe.cgroup; lines from before they were named so hold rss_bytes,
    memory_bytes and peak_rss_bytes, read as these by harness.results.resources.load_samples),
    on a transfer-end line transfer_charged_peak_bytes (the group's charged peak since the
    transfer's start mark, where the kernel let it be reset there; harness.observe.sampler),
    tcp {inuse, orphan, time_wait, alloc} and tcp_states {state: n, non-zero only} (the
    server's whole namespace's: the cliff's time series, no transfer's own figure),
    ephemeral_ports_in_use, retrans_segs, tcp_timeouts, active_opens, passive_opens
A link line: t, event, case, repeat, role "link", direction, passed, dropped (cumulative).
A reader that fails leaves its line out (see Sampler.errors); no line is half-filled.
"""
