"""Options of the agent's search that `optimize` and `batch optimize` both take, written once."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kernelwright.vocabulary import TemperatureSchedule

ScheduleOpt = Annotated[
    Optional[TemperatureSchedule],
    typer.Option(
        "--temperature-schedule",
        help="The temperatures of an idea's --width samples: flat (default), every sample at --temperature; or "
        "spread, the first at --temperature and the others evenly up to 1.0 (width 3 at 0.2: 0.2, 0.6, 1.0). "
        "benchmarks/search/README.md: spread did not beat flat.",
    ),
]
