"""The harness's worker processes: `jobs.py` (the job file and the requests), `process.py`
(starting, talking to and killing a worker, with time limits), `live.py` (every live worker:
interrupts, quiet phases), `main.py` (the worker itself: `python -m kernelwright.harness.workers.main
JOB.json`), `reference.py` (the reference's worker: holds the expected outputs, compares, times the
clean baselines).
"""
