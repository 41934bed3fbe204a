"""Triage: read each file once, index the method names it calls and defines, check it decodes,
collect its suppression comments and decide with a byte prefilter whether the analysis must parse
it. Runs in the scan's workers, each on its share. Only the bytes of the files the analysis parses
are kept: a file is indexed while it is at hand, and the memory of the others is used again for the
next (fresh memory costs a page fault per 4 KB)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddcheck.diagnostics import suppressions
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.names import VERIFY_MARKERS
from ddcheck.tree.parse import SourceError, check_decodes, decode, encoding_of, parse_source
from ddcheck.analysis.names import NAMES_C, Part, index_into
from ddcheck.analysis.vocabulary import Vocabulary

# A file can start a verify path only if its code tests for it or names a function for it (a
# comment does neither); helper modules reached from such a file are loaded on demand whatever they
# contain.
VERIFY_MARKER_BYTES = tuple(m.encode() for m in VERIFY_MARKERS)


def _markers(vocab: Vocabulary) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(VERIFY_MARKER_BYTES + tuple(m.encode() for m in vocab.verify_function_markers)))


def in_code(data: bytes, words: tuple[bytes, ...]) -> bool:
    """Whether one of ``words`` is on a line that is not a comment line (``#`` its first non-blank)."""
    for word in words:
        at = data.find(word)
        while at >= 0:
            start = max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at)) + 1
            if not data[start:at].lstrip().startswith(b"#"):
                return True
            ends = [e for e in (data.find(b"\n", at), data.find(b"\r", at)) if e >= 0]
            at = data.find(word, min(ends)) if ends else -1
    return False


def needs_analysis(data: bytes, vocab: Vocabulary, names_c: bool | None = None) -> bool:
    """Byte prefilter: C must be read somewhere other than the ``self.X = ...`` that stores it, in
    a file whose code talks about verification at all (comment lines count for neither).
    Over-approximates; the analysis decides. ``names_c``: whether ``data`` holds C's name, where known."""
    tokens = vocab.prefilter_tokens
    # C's name first: it is in fewer files than the verify markers, so most files cost one search
    if names_c is None:
        names_c = any(t in data for t in tokens)
    if not vocab.extra_c_attrs and not names_c:
        return False
    if not in_code(data, _markers(vocab)):
        return False
    if vocab.extra_c_attrs:
        return True
    names: set[bytes] = set()
    lines = data.splitlines()  # \r alone ends a line too
    for i, line in enumerate(lines):
        if not any(t in line for t in tokens):
            continue
        m = STORE_RE.match(line) or (i and STORE_OPEN_RE.match(lines[i - 1]))
        if m:
            names.add(m.group(1))
        elif not line.lstrip().startswith(b"#"):
            return True
    return any(re.search(rb"self\." + re.escape(n) + rb"\b(?!\s*(?::[^=\n]*)?=(?!=))", data) for n in names)


STORE_RE = re.compile(rb"\s*self\.(\w+)\s*(?::[^=]*)?=(?!=)")
STORE_OPEN_RE = re.compile(rb"\s*self\.(\w+)\s*(?::[^=]*)?=\s*\(?\s*$")


@dataclass
class Triage:
    """What triage learnt of some of a tree's files (positions index ``tree.files``)."""

    errors: dict[int, str] = field(default_factory=dict)  # position -> why the file cannot be scanned
    # position -> why a tree's file with no verify code is not valid Python (only checked on request:
    # parsing every file would cost many times the scan)
    skipped: dict[int, str] = field(default_factory=dict)
    suppressions: dict[int, list] = field(default_factory=dict)  # position -> its suppression comments
    candidates: list[tuple[int, int]] = field(default_factory=list)  # (position, size) of files to analyse
    texts: dict[int, bytes] = field(default_factory=dict)  # position -> bytes of a candidate (for the analysis)
    # the name index (:mod:`.names`) of every file read, undecodable ones too: a call there is still a
    # call the analysis must account for
    index: Part = field(default_factory=dict)

    def merge(self, other: "Triage") -> None:
        self.errors.update(other.errors)
        self.skipped.update(other.skipped)
        self.suppressions.update(other.suppressions)
        self.candidates.extend(other.candidates)


def triage(tree: SourceTree, positions: list[int], vocab: Vocabulary, check_syntax: bool = False) -> Triage:
    """Read and triage ``tree.files[pos]`` for each position. A file given on its own (pre-commit)
    is analysed whenever it tests for verify: it may pass the verify path to a helper that reads C,
    which a tree scan's prefilter skips; one that does not parse is an error. With ``check_syntax``,
    a tree's file the analysis does not need is parsed too, and skipped (not an error) when it does
    not parse: it could hold no finding either way."""
    out = Triage()
    explicit = tree.kind == "file"
    for pos in positions:
        f = tree.files[pos]
        try:
            data = f.read_bytes()
        except OSError as exc:
            out.errors[pos] = f"cannot be read: {exc.strerror or exc}"
            continue
        index_into(out.index, pos, data)
        try:
            check_decodes(data)
            probe = _as_utf8(data)
        except SourceError as exc:
            out.errors[pos] = str(exc)
            continue
        if suppressions.MARKER in probe:
            out.suppressions[pos] = suppressions.parse(decode(data))
        names_c = any(t in probe for t in vocab.prefilter_tokens)
        if names_c:
            out.index.setdefault(NAMES_C, []).append(pos)
        if needs_analysis(probe, vocab, names_c) or explicit and in_code(probe, _markers(vocab)):
            out.candidates.append((pos, len(data)))
            out.texts[pos] = data
        elif explicit:
            _syntax_check(data, pos, out.errors)
        elif check_syntax:
            _syntax_check(data, pos, out.skipped)
    return out


def _as_utf8(data: bytes) -> bytes:
    """The bytes the prefilter reads: the file itself, or, for a file declaring another encoding,
    its text as UTF-8 (in unicode_escape a whole file is one line of bytes, its newlines written
    ``\\n``, and the prefilter reads lines)."""
    if data.isascii() and data.find(b"coding", 0, 4096) < 0:
        return data
    encoding = encoding_of(data)
    return data if encoding in ("utf-8", "utf-8-sig") else decode(data).encode("utf-8", "surrogatepass")


def _syntax_check(data: bytes, pos: int, into: dict[int, str]) -> None:
    try:
        parse_source(data)
    except SourceError as exc:
        into[pos] = str(exc)
