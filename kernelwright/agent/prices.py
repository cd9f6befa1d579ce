"""What one LLM reply used and what it cost, per role.

Token counts follow OpenAI's usage report, which the other OpenAI-compatible servers copy: the
prompt tokens include those read from the provider's prompt cache (`cached`, billed at a lower
rate where the provider discounts them), and the completion tokens include those a reasoning
model spent thinking (`reasoning`, billed as completion). The four are kept apart so a run's
cost can be explained, and one price table per role (a cheap planner, an expensive coder)
turns them into dollars. Nothing here talks to an endpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """USD per 1,000 tokens for one role. `cached_in_per_1k` None: cached prompt tokens cost the
    full prompt price (an overestimate rather than a budget overrun when the discount is unknown)."""

    in_per_1k: float = 0.0
    out_per_1k: float = 0.0
    cached_in_per_1k: float | None = None


@dataclass(frozen=True)
class Usage:
    """The tokens of one reply. `cached` is part of `input_tokens`, `reasoning` part of
    `output_tokens` (as the endpoint reports them); `estimated`: counted by the scripted model's
    rule of thumb, not by a tokenizer."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def cost(self, price: Price) -> float:
        cached = min(self.cached_tokens, self.input_tokens)
        cached_rate = price.in_per_1k if price.cached_in_per_1k is None else price.cached_in_per_1k
        return (
            (self.input_tokens - cached) / 1000 * price.in_per_1k
            + cached / 1000 * cached_rate
            + self.output_tokens / 1000 * price.out_per_1k
        )

    def counters(self, role: str, price: Price) -> dict[str, float]:
        """The state's usage counters for this reply: the run's totals (the keys budget.py and
        the TUI read) and the same per role (`<counter>.<role>`); `calls.<role>` is counted by
        the caller, one per request sent."""
        totals: dict[str, float] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost(price),
        }
        return {**totals, **{f"{key}.{role}": value for key, value in totals.items()}}


PRICE_TABLE_DATE = "2025-08"
"""When `KNOWN_PRICES` was read: OpenAI's list prices (USD per 1M tokens, standard tier) then.
Prices change: a price given in the settings or on the command line always wins."""
_PER_MILLION: dict[str, tuple[float, float, float | None]] = {
    # model: (input, output, cached input) USD per 1M tokens
    "gpt-5": (1.25, 10.00, 0.125),
    "gpt-5-mini": (0.25, 2.00, 0.025),
    "gpt-5-nano": (0.05, 0.40, 0.005),
    "gpt-4.1": (2.00, 8.00, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.025),
    "gpt-4o": (2.50, 10.00, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "o3": (2.00, 8.00, 0.50),
    "o4-mini": (1.10, 4.40, 0.275),
}
KNOWN_PRICES: dict[str, Price] = {
    name: Price(i / 1000, o / 1000, None if c is None else c / 1000) for name, (i, o, c) in _PER_MILLION.items()
}
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def known_price(model: str) -> Price | None:
    """The table's price for `model` (a dated snapshot, `gpt-4.1-2025-04-14`, is its model's), or None."""
    name = model.strip().lower().removeprefix("openai/")
    return KNOWN_PRICES.get(name) or KNOWN_PRICES.get(_DATED.sub("", name))
