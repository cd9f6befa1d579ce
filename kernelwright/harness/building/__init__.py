"""Building candidates: `broker.py` + `builder.py` (the trusted build step: a worker's builds, keyed
by the harness, made in a confined process; the only writer of the shared build cache),
`prebuild.py` (candidates built ahead, in parallel), `recorder.py` (the candidate's own functions
wrapped: call counts, host time, profiler regions), `symbols.py` (its CUDA kernels read from its
built libraries). The build cache and the candidate loader are `kernelwright.problems.candidate`,
one layer below, because the profiler loads candidates the same way.
"""
