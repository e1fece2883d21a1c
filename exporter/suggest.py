"""Which known word a misspelt one meant: flags, settings, variables, subcommands ("did you mean")."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def normalized(word: str) -> str:
    """``word`` for matching: lower case, without ``-``, ``_``, ``.`` (``poll-interval`` = ``poll_interval``)."""
    return re.sub(r"[-_.]", "", word.lower())


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely meant, or None when none is close.

    A candidate that differs only in case, dashes, underscores or dots wins; otherwise the closest by
    :func:`difflib.get_close_matches` (ratio at least 0.75 on the normalized forms).
    """
    by_norm: dict[str, str] = {}
    for c in candidates:
        by_norm.setdefault(normalized(c), c)
    key = normalized(word)
    if key in by_norm:
        return by_norm[key]
    match = difflib.get_close_matches(key, list(by_norm), n=1, cutoff=0.75)
    return by_norm[match[0]] if match else None
