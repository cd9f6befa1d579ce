"""Tables that keep identifiers whole at any width.

Piped output and CI logs are 80 columns wide, and rich's default is to cut a cell that does not
fit (`level1/1_Square_matrix_m…`, `15…`): the one thing a reader needs, a name to copy or a
figure, is lost. Here each column says whether it may wrap, whether it is an identifier (never
cut: whole on one line, folded over several only when nothing else helps) and how readily it is
dropped; `fitted_table` drops the most expendable columns until the rest fit the console.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table

_TEXT_MIN_WIDTH = 16  # a wrapping column narrower than this reads as a word per line


@dataclass(frozen=True)
class Column:
    header: str
    drop: int = 0  # 0: always shown; the highest is dropped first when the console is narrow
    identifier: bool = True  # names and numbers: never cut (folded only past the console's width); False: free text
    justify: Literal["left", "right"] = "left"


def _need(column: Column, cells: list[str]) -> int:
    header = max((len(word) for word in column.header.split()), default=0)  # headers wrap at spaces
    longest = max((len(c) for c in cells), default=0)
    if column.identifier:
        return max(header, longest)
    longest_word = max((len(w) for c in cells for w in c.split()), default=0)
    return max(header, min(longest, max(_TEXT_MIN_WIDTH, min(longest_word, 30))))


def _table_width(needs: Sequence[int]) -> int:
    return 1 + sum(n + 3 for n in needs)  # rich's default box: a border and a space either side


def fitted_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, **options: object) -> Table:
    """A table of `rows` for a console `width` wide: the highest `drop` columns go first until
    the others fit (identifiers whole); columns with `drop=0` stay whatever the width."""
    cells = [[row[i] for row in rows] for i in range(len(columns))]
    needs = [_need(col, col_cells) for col, col_cells in zip(columns, cells, strict=True)]
    shown = list(range(len(columns)))
    for index in sorted(shown, key=lambda i: (-columns[i].drop, -i)):
        if _table_width([needs[i] for i in shown]) <= width or columns[index].drop == 0:
            break
        shown.remove(index)
    excess = _table_width([needs[i] for i in shown]) - width
    if excess > 0:  # still too wide: the widest column folds rather than the table being cropped
        widest = max(shown, key=lambda i: needs[i])
        needs[widest] = max(needs[widest] - excess, 8)
    table = Table(**options)  # type: ignore[arg-type]
    for i in shown:
        col = columns[i]
        if col.identifier:
            table.add_column(col.header, justify=col.justify, overflow="fold", min_width=needs[i], max_width=needs[i])
        else:
            table.add_column(col.header, justify=col.justify, overflow="fold", min_width=min(needs[i], 12))
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table
