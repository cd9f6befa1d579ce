"""Building candidates: `broker.py` + `builder.py` (the trusted build step: a worker's builds, keyed
by the harness, made in a confined process; the only writer of the shared build cache), `link.py`
(that step handed to a worker as it starts), `prebuild.py` (candidates built ahead, in parallel).
The build cache and the candidate loader are `kernelwright.problems.candidate`, one layer below,
because the profiler loads candidates the same way.
"""
