"""The harness's side of building candidate extensions: `recorder.py` records what a candidate
built and counts (and, while profiling, marks) every call of its extensions' functions.

The build cache and the loading of a candidate file are `kernelwright.problems.candidate`, in the layer
below, because the profiler loads candidates the same way and may not import the harness.
"""
