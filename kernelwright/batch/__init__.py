"""Batch work over whole problem sets: judge existing candidates (`batch judge`), the results
file that makes a batch resumable, the worker pool (one worker per GPU, pinned; a configurable
number on the CPU; Ray beyond one host), the work a local judge worker does ahead (builds for the
whole batch, the next problem's session: `ahead.py`) and the fast_p report.

The optimise mode's per-problem driver is `agent/batch.py` (it runs the agent); the commands and
their progress display are `cli/batch_cmd.py`. Layer 4: imports harness/, problems/, config and
errors; never agent/, memory/ or cli/. Nothing here imports torch at module level.
"""
