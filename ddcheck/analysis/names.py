"""Which files of a tree may call or define a method, by name: an index built once per tree.

Threading W into a helper needs every module that calls ``.<name>(`` or defines ``def <name>``.
Searching all the tree's bytes for each such name costs ~12 ms a name on a 68 MB tree; one pass
of two regular expressions per file answers every name after it (and parallel workers each build
their share of it while they read the tree anyway).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Supersets of the patterns the callers/definers search uses on a hit (``.name(``, ``def name(``):
# identifier bytes include UTF-8's (>= 0x80) so non-ASCII names are indexed too. No ``\b`` before
# ``def``: it would cost the regex engine its literal-prefix search (5x slower); a superset is fine.
# Possessive ``*+``: after ``.name`` not followed by ``(`` (an attribute read, most dots) the engine
# gives up at once instead of retrying every shorter prefix of the name (~30 % of the index's time).
CALLED_RE = re.compile(rb"\.([A-Za-z_\x80-\xff][\w\x80-\xff]*+)\(")
DEFINED_RE = re.compile(rb"def\s+([A-Za-z_\x80-\xff][\w\x80-\xff]*+)")

Part = dict[bytes, list[int]]
# The key under which triage lists the files that name C (no identifier is spelled so): where the tree's
# code may write, for the verify step, into a buffer a class hands out (:meth:`NameIndex.naming_c`).
NAMES_C = b"<C>"


def index_part(texts: list[tuple[int, bytes]], c_tokens: tuple[bytes, ...] = ()) -> Part:
    """name -> the positions (in the tree's file list) of the files that call or define it; with
    ``c_tokens`` (C's names), :data:`NAMES_C` -> those that name C, as triage lists them."""
    part: Part = {}
    for pos, data in texts:
        index_into(part, pos, data)
        if any(t in data for t in c_tokens):
            part.setdefault(NAMES_C, []).append(pos)
    return part


def index_into(part: Part, pos: int, data: bytes) -> None:
    """Add the names file ``pos`` (its bytes ``data``) calls or defines to ``part``."""
    for name in set(CALLED_RE.findall(data)).union(DEFINED_RE.findall(data)):
        hit = part.get(name)
        if hit is None:
            part[name] = [pos]
        else:
            hit.append(pos)


class NameIndex:
    """The union of index parts, plus files not indexed yet (read and indexed on the first query)."""

    def __init__(self, parts: list[Part], pending: list[int], read: Callable[[int], bytes | None],
                 c_tokens: tuple[bytes, ...] = ()) -> None:
        self.parts = parts
        self.pending = pending
        self.read = read  # position -> bytes, None when the file cannot be read (it is skipped)
        self.c_tokens = c_tokens  # C's names: the pending files that name C are listed as triage lists them

    def files(self, name: str) -> list[int]:
        """Positions, in tree order, of the files that may call or define ``name`` (a superset)."""
        return self._positions(name.encode())

    def naming_c(self) -> list[int]:
        """Positions, in tree order, of the files triage found naming C (files indexed on demand aside)."""
        return self._positions(NAMES_C)

    def naming(self, word: str) -> set[int]:
        """Positions of the files that may call or define a name holding ``word`` (a superset)."""
        self._positions(NAMES_C)  # indexes what is pending
        w = word.encode()
        return set().union(*(hit for part in self.parts for key, hit in part.items() if w in key and key != NAMES_C))

    def _positions(self, key: bytes) -> list[int]:
        if self.pending:
            texts = [(pos, data) for pos in self.pending if (data := self.read(pos)) is not None]
            self.parts.append(index_part(texts, self.c_tokens))
            self.pending = []
        return sorted(set().union(*(part[key] for part in self.parts if key in part)))
