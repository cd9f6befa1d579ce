"""The harness's worker processes: `jobs.py` (the job file, the environment and the requests),
`messages.py` (the typed report each phase sends back), `client.py` (the harness's side: one typed
client per worker kind, so no phase writes a command string), `process.py` (starting, talking to
and killing a worker, with time limits; the build step it is handed), `live.py` (every live
worker: interrupts, quiet phases), `main.py` (the worker itself: `python -m
kernelwright.harness.workers.main JOB.json`), `candidate.py` (a candidate's worker, phase by
phase), `reference.py` (the reference's worker: holds the expected outputs, compares, times the
clean baselines).
"""
