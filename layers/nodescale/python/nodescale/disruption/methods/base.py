"""The interface every disruption method implements, after Karpenter's ``Method``.

The planner offers each method, in turn, the candidates no earlier method decided or refused:
``notice`` sees all of them (for bookkeeping such as emptiness's clock), ``should_disrupt`` picks the
ones the method applies to, and ``compute`` decides those, recording decisions and refusals in the
shared :class:`~nodescale.disruption.context.Context` so budgets taken here hold for later methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ..context import Context
from ..decisions import Decision, Reason
from ..nodes import NodeView


class Method(ABC):
    """One way nodes get disrupted: repair, expiry, drift, emptiness or consolidation."""

    name: ClassVar[str]
    reason: ClassVar[Reason]

    def notice(self, candidates: Sequence[NodeView], ctx: Context) -> None:  # noqa: B027 - optional hook
        """Bookkeeping over every candidate still undecided when this method's turn comes (none by default)."""

    @abstractmethod
    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        """Whether this method applies to ``node`` at all (guards and budgets come later, in ``compute``)."""

    @abstractmethod
    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        """Decide about ``candidates`` (those ``should_disrupt`` picked); returns the decisions taken."""
