"""Python source as Python reads it: the encoding it declares, its text, its syntax tree (at Python's own
nesting limit), and the lines of its statements. The one way ddcheck parses source, for the tree model
(:mod:`ddcheck.tree.modules`) and the scan's model of the verify path alike."""

from __future__ import annotations

import ast
import itertools
import re
import tokenize

from ddcheck.base.deep import python_limit

BYTE_LINE_RE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def statement_lines(stmt: ast.stmt) -> tuple[int, int]:
    """(first, last) line of a statement, a decorated definition's decorators included."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    return first, stmt.end_lineno or stmt.lineno


def top_level_spans(text: str) -> list[tuple[int, int]]:
    """(first, last) line of each top-level statement of ``text``; SourceError where it does not parse."""
    return [statement_lines(s) for s in parse_source(text).body]


class SourceError(Exception):
    """A file that cannot be analysed (not UTF-8, does not parse, unreadable)."""


def encoding_of(data: bytes) -> str:
    """The encoding Python reads these source bytes with (PEP 263 coding line or BOM, else UTF-8).
    The coding line is looked for in the first two lines as Python counts them (``\\r`` ends a line
    too, which ``tokenize.detect_encoding`` on a byte stream does not know)."""
    first_two = (m.group() for m in itertools.islice(BYTE_LINE_RE.finditer(data, 0, 4096), 2))
    try:
        encoding = tokenize.detect_encoding(lambda: next(first_two, b""))[0]
    except SyntaxError as exc:
        if "encoding" in str(exc) and "invalid or missing" not in str(exc):  # unknown or conflicting declaration
            raise SourceError(f"cannot be decoded: {exc}") from exc
        return "utf-8"  # no declaration: the first lines are simply not UTF-8, said by decode()
    if encoding not in ("utf-8", "utf-8-sig"):
        import codecs

        # rot13, base64 and the like are codecs, not text encodings: Python refuses them as a source
        # encoding, and so does a scan, naming the declaration
        if not getattr(codecs.lookup(encoding), "_is_text_encoding", True):
            raise SourceError(f"cannot be decoded: the declared encoding {encoding!r} is not a text encoding")
    return encoding


def check_decodes(data: bytes) -> None:
    """Raise the SourceError :func:`decode` would, without building the text when the bytes are
    ASCII with no coding line near the top (any source encoding Python accepts reads ASCII as ASCII)."""
    if not (data.isascii() and data.find(b"coding", 0, 4096) < 0):
        decode(data)


def parse_source(data: bytes | str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, with what makes a file unparseable said as a SourceError."""
    try:
        with python_limit():
            return ast.parse(data, filename=filename)
    except (RecursionError, MemoryError) as exc:
        raise SourceError(f"too deeply nested or too large to parse ({type(exc).__name__})") from exc
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno}, column {exc.offset})" if isinstance(exc, SyntaxError) else ""
        raise SourceError(f"does not parse: {getattr(exc, 'msg', exc)}{where}") from exc


# source (bytes or text) -> its syntax tree, the last parsed through parse_kept, least recently used first:
# config and smoke read the same release's files run after run (a smoke run opens a tree per C, the tree's
# classes are read from their modules' text), and parse each once per process. Keyed by the source, so a
# tree that differs in a file (a fixed copy) parses that file afresh. Not the scan's road: it reads every
# file once.
_KEPT: dict[bytes | str, ast.Module] = {}
_KEPT_MAX = 512


def parse_kept(data: bytes | str, filename: str = "<unknown>") -> ast.Module:
    """:func:`parse_source`, its syntax tree kept by the source in this process and shared by every reader
    of the same source (a caller that rewrites nodes copies them first); a SourceError keeps nothing."""
    tree = _KEPT.pop(data, None)
    if tree is None:
        tree = parse_source(data, filename)
    _KEPT[data] = tree
    while len(_KEPT) > _KEPT_MAX:
        del _KEPT[next(iter(_KEPT))]
    return tree


def check_compiles(text: str, filename: str) -> None:
    """Raise SourceError where Python would refuse ``text`` as a module: the parser's errors and the
    compiler's too (a duplicate parameter, ``return`` outside a function), at Python's own nesting limit.
    The SyntaxError, RecursionError or MemoryError is the SourceError's cause."""
    try:
        with python_limit():
            compile(text, filename, "exec", dont_inherit=True)
    except (RecursionError, MemoryError) as exc:
        raise SourceError(f"too deeply nested or too large to compile ({type(exc).__name__})") from exc
    except SyntaxError as exc:
        raise SourceError(f"does not compile: {exc.msg} (line {exc.lineno})") from exc


def decode(data: bytes) -> str:
    """Source bytes as text, in the encoding Python would read them with."""
    encoding = encoding_of(data)
    try:
        return data.decode(encoding)
    except LookupError as exc:  # a codec that is found but not a text encoding, said by encoding_of
        raise SourceError(f"cannot be decoded: {exc}") from exc
    except UnicodeDecodeError as exc:
        what = "not UTF-8" if encoding in ("utf-8", "utf-8-sig") else f"not valid {encoding}"
        raise SourceError(f"{what}: {exc.reason} at byte {exc.start}") from exc
    except UnicodeError as exc:  # a codec that fails as a whole ("undefined", idna on a long label)
        raise SourceError(f"cannot be decoded as {encoding}: {exc}") from exc
