"""The currency prices are in: the region's (CNY in the China regions, USD elsewhere), and how a price is shown.

The catalog's and the Pricing API's prices are in the region's currency, and so are the stack's price
metric and its alarm threshold: nothing converts, so a price is shown with the currency it is in.

The pure core does not know the region, so a message that names a price is a :class:`Priced`: its text
pieces and its amounts as numbers, rendered with the currency's symbol only where it is shown (the CLI,
Kubernetes events, logs, the JSON report). Text is never rewritten after the fact, so a ``$`` that is
part of a name in the message stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

USD = "USD"
CNY = "CNY"
_SYMBOLS = {USD: "$", CNY: "¥"}


def currency_of(region: str | None) -> str:
    """The currency the region's prices are in: CNY for ``cn-*`` (the aws-cn partition), USD elsewhere."""
    return CNY if (region or "").startswith("cn-") else USD


def symbol(currency: str) -> str:
    return _SYMBOLS.get(currency, currency + " ")


def money(amount: float, currency: str = USD, digits: int = 4) -> str:
    """``$0.1920`` / ``¥1.6868``."""
    return f"{symbol(currency)}{amount:.{digits}f}"


def per_hour_header(currency: str = USD) -> str:
    """A price column's header: ``$/HOUR`` / ``¥/HOUR``."""
    return f"{symbol(currency).strip()}/HOUR"


@dataclass(frozen=True, slots=True)
class Money:
    """An amount in the region's currency, its symbol chosen when the message is rendered."""

    amount: float
    digits: int = 4


@dataclass(frozen=True, slots=True)
class Priced:
    """A message with prices in it: text pieces and :class:`Money` amounts, in order."""

    parts: tuple[str | Money, ...]

    @classmethod
    def of(cls, *parts: str | Money | Priced) -> Priced:
        return cls(tuple(_flatten(parts)))

    def __add__(self, other: str | Priced) -> Priced:
        return Priced.of(self, other)

    def __radd__(self, other: str) -> Priced:
        return Priced.of(other, self)

    def render(self, currency: str) -> str:
        return "".join(money(p.amount, currency, p.digits) if isinstance(p, Money) else p for p in self.parts)


def _flatten(parts: Iterable[str | Money | Priced]) -> Iterable[str | Money]:
    for p in parts:
        if isinstance(p, Priced):
            yield from p.parts
        else:
            yield p


Message = str | Priced  # a message; Priced when it names a price


def render(message: Message, currency: str) -> str:
    """The message as shown in a region whose prices are in ``currency``."""
    return message if isinstance(message, str) else message.render(currency)
