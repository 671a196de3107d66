"""The currency prices are in: the region's (CNY in the China regions, USD elsewhere), and how a price is shown.

The catalog's and the Pricing API's prices are in the region's currency, and so are the stack's price
metric and its alarm threshold: nothing converts, so a price is shown with the currency it is in.
"""

from __future__ import annotations

import re

USD = "USD"
CNY = "CNY"
_SYMBOLS = {USD: "$", CNY: "¥"}
# "$0.1234" as the core writes prices in its messages (decisions, refusals), before the region is known.
_DOLLAR_AMOUNT = re.compile(r"\$(?=\d)")


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


def localize(text: str, currency: str = USD) -> str:
    """A message with its ``$<amount>`` prices shown in ``currency`` (the amounts are already in it)."""
    if currency == USD:
        return text
    return _DOLLAR_AMOUNT.sub(symbol(currency), text)
