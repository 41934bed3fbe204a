"""The one console every command prints through (rich, loaded when something is printed)."""

from __future__ import annotations

from functools import lru_cache

UNWRAPPED = 1 << 14  # columns of a console that is not a terminal: wider than any line ddcheck prints


@lru_cache(maxsize=None)
def console(stderr: bool = False):
    """A console that wraps only on a terminal: in a pipe or a CI log, lines, lists and table rows stay
    whole whatever width the environment claims (``COLUMNS``, rich's default of 80)."""
    from rich.console import Console

    out = Console(stderr=stderr, soft_wrap=True, highlight=False)
    if not out.is_terminal:
        out.width = UNWRAPPED
    return out


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)
