"""`xfrbench capacity`: the load at which a scenario stops meeting its SLA, and what binds.

- search: the search itself, pure (step up geometrically, then bisect), against any
  `run_step(load, attempt) -> StepOutcome`.
- sla: the SLA as the user writes it ("p95 load time 30s", "all served 60s", "no
  failures") or the scenario's own, and a step's verdict from its repeats' figures.
- evidence: the candidate limits read from each step's run folder, and the one that binds.
- command: the command, each step a real run of the scenario with the key set to a load.
"""
