"""Timing: `timers.py` (CUDA-event and CPU timers, the interleaved loop, timer-identity checks),
`stats.py` (medians, confidence intervals, speedups), `run.py` (the timing phase inside a worker:
baselines prepared, candidate timed against them).
"""
