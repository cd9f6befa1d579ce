"""Worker processes: `jobs.py` (the job file and the JSON-lines protocol), `sandbox.py` (starting,
talking to and killing a worker, with time limits), `worker.py` (the worker itself:
`python -m kernelwright.harness.process.worker JOB.json`).
"""
