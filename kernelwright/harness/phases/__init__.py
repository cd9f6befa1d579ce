"""The pipeline one candidate goes through, one module per phase, each readable and testable
alone: `reference.py` (once per session), `build.py` → `trials.py` → `work_share.py` →
`timing.py` (with `cross_check.py`, the baselines against the clean ones) in `candidate.py`,
and `reverify.py` around it for a suspicious speedup. `context.py` is what they share for one
problem (the reference's worker, its comparisons, the clean baselines, the per-call limit) and
how they apply the judge's decisions. Phases talk to workers only through the typed clients
(`workers/client.py`); `session.py` owns the workers' lifecycle.
"""
