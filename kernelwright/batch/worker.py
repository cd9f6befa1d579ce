"""`python -m kernelwright.batch.worker`: one judge worker of a batch (see `pool.py` for the
protocol, `ahead.py` for what it prepares ahead, `judging.py` for what it does per problem).
Started by `batch judge`, never by hand."""

from __future__ import annotations

from kernelwright.batch.ahead import JudgeWorker
from kernelwright.batch.pool import Backlog, serve

if __name__ == "__main__":
    backlog = Backlog()
    judge = JudgeWorker(backlog)
    try:
        serve(judge, lookahead=backlog)
    finally:
        judge.close()
