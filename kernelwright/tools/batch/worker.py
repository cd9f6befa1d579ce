"""`python -m kernelwright.tools.batch.worker`: one judge worker of a batch (see `pool.py` for the
protocol, `judging.py` for what it does per problem). Started by `batch judge`, never by hand."""

from __future__ import annotations

from kernelwright.tools.batch.judging import judge_task
from kernelwright.tools.batch.pool import serve

if __name__ == "__main__":
    serve(judge_task)
