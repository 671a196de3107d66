"""Selector terms as EC2 ``Filters``: within a term everything is ANDed, across terms ORed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..model.nodepool import SelectorTerm


class SelectorError(ValueError):
    """A selector term that selects nothing or cannot be expressed; the message names the field."""


def tag_filters(tags: dict[str, str]) -> list[dict]:
    """A term's tags as filters. A tag value ``*`` means the tag must exist with any value."""
    return [
        {"Name": "tag-key", "Values": [key]} if value == "*" else {"Name": f"tag:{key}", "Values": [str(value)]}
        for key, value in sorted(tags.items())
    ]


def term_filters(term: SelectorTerm, id_filter: str, name_filter: str | None, where: str) -> list[dict]:
    """One term's filters: its tags (see `tag_filters`), id and name."""
    filters = tag_filters(term.tags)
    if term.id:
        filters.append({"Name": id_filter, "Values": [term.id]})
    if term.name:
        if name_filter is None:
            raise SelectorError(f"{where}: selecting by name is not supported here; use tags or id")
        filters.append({"Name": name_filter, "Values": [term.name]})
    if not filters:
        raise SelectorError(f"{where}: an empty selector term would match everything; give tags or an id")
    return filters


def select(
    terms: Sequence[SelectorTerm],
    describe: Callable[[list[dict]], Iterable[dict]],
    id_key: str,
    id_filter: str,
    name_filter: str | None,
    where: str,
) -> list[dict]:
    """Every resource any term matches, once each, in a stable order (by id)."""
    if not terms:
        raise SelectorError(f"{where}: at least one selector term is required")
    found: dict[str, dict] = {}
    for i, term in enumerate(terms):
        for item in describe(term_filters(term, id_filter, name_filter, f"{where}[{i}]")):
            found.setdefault(item[id_key], item)
    return [found[k] for k in sorted(found)]


def paginate(client: object, operation: str, result_key: str, **kwargs: object) -> Callable[[list[dict]], list]:
    """A ``describe`` callable for :func:`select` over a paginated EC2 operation."""

    def describe(filters: list[dict]) -> list:
        out: list = []
        for page in client.get_paginator(operation).paginate(Filters=filters, **kwargs):  # type: ignore[attr-defined]
            out.extend(page.get(result_key, []))
        return out

    return describe
