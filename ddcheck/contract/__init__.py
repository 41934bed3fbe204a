"""The target-verify metadata contract: what any attention backend's metadata must hold for a batch.

A verify batch has ``bs`` requests with prefix lengths ``seq_lens`` and W draft tokens each
(W from the verify input, never from start-up configuration). Whatever the backend, its metadata
for that batch describes the same layout; each *term* below is one fact of it. A backend declares
which of its fields stand for which term (``ddcheck.contract.backends``), and :func:`check` compares the
fields' values with the terms' for one batch. ``ddcheck smoke`` and ``ddcheck guard`` both judge
with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence


class Term(str, Enum):
    """One fact of the verify layout (values are the names used in tables and reports)."""

    QUERY_OFFSETS = "query_offsets"  # [0, W, 2W, .., bs*W]: cu_seqlens_q, qo_indptr
    KV_LENS = "kv_lens"  # seq_lens + W: cache_seqlens
    KV_OFFSETS = "kv_offsets"  # [0, cumsum(seq_lens + W)]: cu_seqlens_k
    PREFIX_KV_OFFSETS = "prefix_kv_offsets"  # [0, cumsum(seq_lens)]: triton's kv_indptr (prefix only)
    MASK_OFFSETS = "mask_offsets"  # [0, cumsum(W * (seq_lens + W))]: mask_indptr
    MAX_QUERY_LEN = "max_query_len"  # >= W: max_seq_len_q, max_extend_len
    MAX_KV_LEN = "max_kv_len"  # >= max(seq_lens) + W: max_seq_len_k
    PAGE_TABLE = "page_table"  # row r starts with req_to_token[req_r, :seq_lens[r] + W] (page size 1)
    KV_INDICES = "kv_indices"  # req_to_token[req_r, :seq_lens[r] + W] for each r, end to end: flashinfer's

    def describe(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Term.QUERY_OFFSETS: "query offsets step by W",
    Term.KV_LENS: "KV lengths are seq_lens + W",
    Term.KV_OFFSETS: "KV offsets step by seq_lens + W",
    Term.PREFIX_KV_OFFSETS: "prefix KV offsets step by seq_lens",
    Term.MASK_OFFSETS: "tree-mask offsets step by W * (seq_lens + W)",
    Term.MAX_QUERY_LEN: "the longest query is at least W",
    Term.MAX_KV_LEN: "the longest KV is at least max(seq_lens) + W",
    Term.PAGE_TABLE: "page-table rows cover seq_lens + W tokens",
    Term.KV_INDICES: "KV indices list each request's seq_lens + W tokens, end to end",
}


@dataclass(frozen=True)
class VerifyLayout:
    """The batch the metadata must describe."""

    width: int
    seq_lens: tuple[int, ...]
    req_pool_indices: tuple[int, ...] = ()
    req_to_token: Any = None  # [rows, context] tensor/array, for PAGE_TABLE rows; None: width only
    # tokens per KV page: page tables hold page ids (req_to_token[req, j * page_size] // page_size), as
    # FA3 and TRT-LLM MLA lay them out when the server runs with --page-size > 1
    page_size: int = 1
    # each request's tree, W rows of W booleans (row j: the nodes query j sees, itself included); with it, a
    # backend that lays the batch out one query per row (each query its own sequence of its prefix and the
    # tree nodes it sees, max_seq_len_q = 1: a one-pass tree verify) is judged in those terms
    visible: Any = None
    per_query: bool = False  # judged one query per row (set by :func:`check` from the query offsets)
    # what a request's KV holds: "all" (its prefix and its W tokens); a cascade splits verify in two
    # attentions, "prefix" (request-major over the prefix only) and "tree" (one query per row over the
    # tree nodes it sees)
    kv: str = "all"

    @property
    def prefix(self) -> bool:
        return self.kv in ("all", "prefix")

    @property
    def tree(self) -> int:
        """Tokens of the tree a request's KV adds (request-major): W, or none in a cascade's prefix part."""
        return self.width if self.kv in ("all", "tree") else 0

    @property
    def bs(self) -> int:
        return len(self.seq_lens)

    def row_lens(self) -> list[int]:
        """One query per row: each row's KV length, its request's prefix and the nodes it sees."""
        return [(p if self.prefix else 0) + sum(bool(x) for x in row)
                for p, rows in zip(self.seq_lens, self.visible) for row in rows]

    def expected(self, term: Term) -> list[int] | int:
        w, lens = self.width, self.seq_lens
        if self.per_query and term in (Term.QUERY_OFFSETS, Term.KV_LENS, Term.KV_OFFSETS, Term.MAX_QUERY_LEN):
            return {Term.QUERY_OFFSETS: list(range(self.bs * w + 1)), Term.KV_LENS: self.row_lens(),
                    Term.KV_OFFSETS: _offsets(self.row_lens()), Term.MAX_QUERY_LEN: 1}[term]
        if term is Term.QUERY_OFFSETS:
            return [w * i for i in range(self.bs + 1)]
        t = self.tree
        if term is Term.KV_LENS:
            return [p + t for p in lens]
        if term is Term.KV_OFFSETS:
            return _offsets(p + t for p in lens)
        if term is Term.PREFIX_KV_OFFSETS:
            return _offsets(lens)
        if term is Term.MASK_OFFSETS:
            return _offsets(w * (p + w) for p in lens)
        if term is Term.MAX_QUERY_LEN:
            return w
        if term is Term.MAX_KV_LEN:
            return max(lens, default=0) + t
        if term is Term.PAGE_TABLE:
            return self.pages(max(lens, default=0) + t)  # the columns a row needs
        if term is Term.KV_INDICES:
            if self.req_to_token is None or not self.req_pool_indices:
                return sum(self.pages(p + w) for p in lens)  # the length only
            return [x for r, p in zip(self.req_pool_indices, lens) for x in self.row(r, p + w)]
        raise ValueError(term)

    def pages(self, tokens: int) -> int:
        return -(-tokens // self.page_size)

    def row(self, req: int, tokens: int) -> list[int]:
        """The page ids (token slots at page size 1) that hold a request's first ``tokens`` tokens."""
        slots = _as_list(self.req_to_token[req])[: tokens: self.page_size]
        return [int(x) // self.page_size for x in slots]


@dataclass(frozen=True)
class Violation:
    """One field that does not describe the batch."""

    field: str
    term: Term
    expected: Any
    got: Any

    def __str__(self) -> str:
        return f"{self.field}: {self.term.describe()}: expected {_short(self.expected)}, got {_short(self.got)}"

    def to_dict(self) -> dict:
        return {"field": self.field, "term": self.term.value, "expected": self.expected, "got": self.got}


@dataclass
class Checked:
    """What :func:`check` found: the violations and which declared fields it could read."""

    violations: list[Violation]
    checked: list[str]
    absent: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations


def check(owner: Any, table: Mapping[str, Term], layout: VerifyLayout) -> Checked:
    """Compare ``owner``'s fields named in ``table`` (dotted paths, e.g. ``forward_metadata.cu_seqlens_q``;
    a metadata tuple by the names its source gives it, :func:`by_name`) with ``layout``. A field the object
    does not have (or holds None) is listed as absent, not judged: one table serves every release of a
    backend."""
    violations, checked, absent = [], [], []
    owner = by_name(owner, table)[0]
    if layout.visible is not None and layout.width > 1 and not layout.per_query:
        offsets = next((read_field(owner, f) for f, t in table.items() if t is Term.QUERY_OFFSETS), None)
        if offsets is not None and _vector(offsets, layout.bs * layout.width + 1) == list(
                range(layout.bs * layout.width + 1)):
            from dataclasses import replace

            layout = replace(layout, per_query=True)
    for path, term in table.items():
        value = read_field(owner, path)
        if value is None:
            absent.append(path)
            continue
        checked.append(path)
        bad = judge(term, value, layout)
        if bad is not None:
            violations.append(Violation(path, term, *bad))
    return Checked(violations, checked, absent)


def judge(term: Term, value: Any, layout: VerifyLayout) -> tuple[Any, Any] | None:
    """(expected, got) when ``value`` breaks ``term`` for ``layout``, else None."""
    want = layout.expected(term)
    if term in (Term.MAX_QUERY_LEN, Term.MAX_KV_LEN):
        got = _scalar(value)
        return None if got >= want else (f">= {want}", got)
    if term is Term.PAGE_TABLE:
        return _page_table(value, layout)
    if term is Term.KV_INDICES and isinstance(want, int):
        got = len(_as_list(value))
        return None if got >= want else (f">= {want} indices", f"{got} indices")
    got = _vector(value, len(want))
    return None if got == want else (want, got)


def _query_rows(value: Any, layout: VerifyLayout) -> tuple[Any, Any] | None:
    """One query per row: row (request i, node j) holds request i's prefix slots, then the slots of the
    nodes query j sees, in node order."""
    rows = _rows(value, layout.bs * layout.width)
    w = layout.width
    for r, row in enumerate(rows):
        i, j = divmod(r, w)
        p, req = layout.seq_lens[i], layout.req_pool_indices[i]
        slots = layout.row(req, p + w)
        want = (slots[:p] if layout.prefix else []) + [slots[p + k] for k, seen in enumerate(layout.visible[i][j])
                                                        if seen]
        if row[: len(want)] != want:
            return (f"row {r}: req_to_token[{req}, :{p}] and the slots of the nodes query {j} of request {i} "
                    f"sees", f"row {r} differs")
    if len(rows) < layout.bs * w:
        return (f"{layout.bs * w} rows (one per query)", f"{len(rows)} rows")
    return None


def _page_table(value: Any, layout: VerifyLayout) -> tuple[Any, Any] | None:
    if layout.per_query and layout.req_to_token is not None and layout.req_pool_indices and layout.page_size == 1:
        return _query_rows(value, layout)
    need = layout.expected(Term.PAGE_TABLE)
    tensors = _is_tensor(value) and _is_tensor(layout.req_to_token)
    rows = None if _is_tensor(value) else _rows(value, layout.bs)
    cols = int(value.shape[-1]) if _is_tensor(value) else min((len(r) for r in rows), default=0)
    if cols < need:
        return (f">= {need} columns", f"{cols} columns")
    if layout.req_to_token is None or not layout.req_pool_indices:
        return None
    size = layout.page_size
    if tensors:  # on the tensors' device, one host sync: the guard checks buffers of a running server
        import torch

        table, got = layout.req_to_token, value[: layout.bs, :need]
        ref = table[torch.tensor(layout.req_pool_indices, device=table.device)][:, : need * size: size]
        ref = (ref // size if size > 1 else ref).to(got.device, got.dtype)
        lens = torch.tensor([layout.pages(p + layout.tree) for p in layout.seq_lens], device=got.device)
        inside = torch.arange(need, device=got.device)[None, :] < lens[:, None]
        bad = ((got != ref) & inside).any(dim=1).nonzero().flatten().tolist()
        r = bad[0] if bad else None
    else:
        r = next((r for r, (row, p) in enumerate(zip(rows, layout.seq_lens))
                  if row[: layout.pages(p + layout.tree)]
                  != layout.row(layout.req_pool_indices[r], p + layout.tree)), None)
    if r is None:
        return None
    n = layout.seq_lens[r] + layout.tree
    what = f"req_to_token[{layout.req_pool_indices[r]}, :{n}]"
    if size > 1:
        what = f"the page ids of {what} (page size {size})"
    return (f"row {r}: {what}", f"row {r} differs")


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "device") and len(getattr(value, "shape", ())) == 2


def _offsets(values: Iterable[int]) -> list[int]:
    out, total = [0], 0
    for v in values:
        total += v
        out.append(total)
    return out


class _Named:
    """An object whose metadata tuples are read by name (:func:`by_name`); the rest is the object's."""

    def __init__(self, owner: Any, named: dict[str, Any]):
        self.__dict__.update(named)
        self.__dict__["_ddcheck_owner"] = owner

    def __getattr__(self, attr: str):
        return getattr(self.__dict__["_ddcheck_owner"], attr)


_TUPLE_NAMES: dict[tuple[type, str], Any] = {}


def by_name(owner: Any, fields: Iterable[str]) -> tuple[Any, dict[str, tuple[tuple[str, ...], str]]]:
    """``owner`` as the contract reads it: a plain tuple it keeps where a field path starts (0.4.3's
    ``forward_metadata``) is read by the names its class's own source gives each position
    (:func:`ddcheck.tree.classes.tuple_fields`); where the source names none, the tuple stays as it is.
    Also, per attribute so read, (the names, where the source gives them: module:line)."""
    from types import SimpleNamespace

    from ddcheck.tree.classes import tuple_fields

    named, how = {}, {}
    for top in dict.fromkeys(f.split(".", 1)[0] for f in fields):
        value = getattr(owner, top, None)
        if type(value) is not tuple:
            continue
        key = (type(owner), top)
        if key not in _TUPLE_NAMES:  # a class's source is read once (the guard checks step after step)
            _TUPLE_NAMES[key] = tuple_fields(type(owner), top)
        found = _TUPLE_NAMES[key]
        if found is not None and len(found[0]) == len(value):
            named[top], how[top] = SimpleNamespace(**dict(zip(found[0], value))), found
    return (_Named(owner, named) if named else owner), how


def read_field(owner: Any, path: str) -> Any:
    """The value at a dotted ``path`` below ``owner`` (None where a step of it is missing); a step
    that is a number indexes a list (``prefill_wrappers.0``)."""
    value = owner
    for part in path.split("."):
        if part.isdigit() and isinstance(value, (list, tuple)):
            value = value[int(part)] if int(part) < len(value) else None
        else:
            value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _as_list(value: Any) -> list:
    if hasattr(value, "tolist"):
        value = value.tolist()
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _scalar(value: Any) -> int:
    if hasattr(value, "numel") and value.numel() != 1:  # a per-request tensor: its largest entry
        return int(value.max())
    return int(value.item() if hasattr(value, "item") else value)


def _vector(value: Any, n: int) -> list[int]:
    """The first ``n`` entries: graph buffers are sized for the largest batch."""
    return [int(x) for x in _as_list(value)[:n]]


def _rows(value: Any, n: int) -> list[list[int]]:
    rows = _as_list(value)
    if rows and not isinstance(rows[0], list):
        rows = [rows]
    return [[int(x) for x in r] for r in (rows[:n] if n else rows)]


def _short(value: Any, limit: int = 12) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) > limit:
        return f"[{', '.join(map(str, value[:limit]))}, ... ({len(value)} values)]"
    return str(value)
