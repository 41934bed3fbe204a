"""The verify contract (ddcheck.contract) on hand-made metadata: each term fires when broken, a
correct layout passes, and every backend table names real terms."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ddcheck.contract import backends
from ddcheck.contract import Term, VerifyLayout, check

torch = pytest.importorskip("torch")

W, LENS, REQ = 5, (3, 7), (1, 0)
REQ_TO_TOKEN = torch.arange(2 * 16).view(2, 16)


def layout(req_to_token=REQ_TO_TOKEN) -> VerifyLayout:
    return VerifyLayout(W, LENS, REQ, req_to_token)


def right() -> SimpleNamespace:
    """FA3-style metadata for two requests of W = 5 tokens after prefixes 3 and 7."""
    kv = torch.tensor([3 + W, 7 + W], dtype=torch.int32)
    return SimpleNamespace(forward_metadata=SimpleNamespace(
        cu_seqlens_q=torch.arange(0, 2 * W + 1, W, dtype=torch.int32),
        cache_seqlens_int32=kv,
        cu_seqlens_k=torch.tensor([0, 8, 20], dtype=torch.int32),
        max_seq_len_q=W, max_seq_len_k=12,
        page_table=REQ_TO_TOKEN[list(REQ), :12],
        qo_indptr=torch.tensor([0, 5, 10, 99]),  # a graph buffer: only the first bs + 1 count
        kv_indptr=torch.tensor([0, 3, 10]),
        mask_indptr=torch.tensor([0, W * (3 + W), W * (3 + W) + W * (7 + W)]),
        max_extend_len=W,
        # flashinfer: what its wrapper was planned with (the request rows' tokens, end to end)
        prefill_wrappers=[SimpleNamespace(planned=SimpleNamespace(
            qo_indptr=torch.arange(0, 2 * W + 1, W), paged_kv_indptr=torch.tensor([0, 8, 20]),
            paged_kv_indices=torch.cat([REQ_TO_TOKEN[1, :8], REQ_TO_TOKEN[0, :12]])))]))


# every term, with FA3's, Triton's and FlashInfer's names
ALL = {**backends.get("fa3").fields, **backends.get("triton").fields, **backends.get("flashinfer").fields}


def test_the_tables_cover_every_term():
    assert set(ALL.values()) == set(Term)


def test_a_correct_layout_passes():
    verdict = check(right(), ALL, layout())
    assert verdict.ok, [str(v) for v in verdict.violations]
    assert sorted(verdict.checked) == sorted(ALL) and verdict.absent == []


C = 3  # what a backend built for C = 3 would lay out instead


@pytest.mark.parametrize("field, value, expected, got", [
    ("cu_seqlens_q", torch.arange(0, 2 * C + 1, C), [0, 5, 10], [0, 3, 6]),
    ("cache_seqlens_int32", torch.tensor([3 + C, 7 + C]), [8, 12], [6, 10]),
    ("cu_seqlens_k", torch.tensor([0, 6, 16]), [0, 8, 20], [0, 6, 16]),
    ("kv_indptr", torch.tensor([0, 3, 11]), [0, 3, 10], [0, 3, 11]),
    ("mask_indptr", torch.tensor([0, C * (3 + C), C * (3 + C) + C * (7 + C)]), [0, 40, 100], [0, 18, 48]),
    ("max_seq_len_q", C, ">= 5", 3),
    ("max_extend_len", torch.tensor(C), ">= 5", 3),
    ("max_seq_len_k", 7 + C, ">= 12", 10),
    ("page_table", REQ_TO_TOKEN[list(REQ), :10], ">= 12 columns", "10 columns"),
])
def test_each_term_fires_with_field_expected_and_got(field, value, expected, got):
    md = right()
    setattr(md.forward_metadata, field, value)
    verdict = check(md, ALL, layout())
    assert [(v.field, v.expected, v.got) for v in verdict.violations] == \
        [(f"forward_metadata.{field}", expected, got)]
    assert field in str(verdict.violations[0]) and str(expected) in str(verdict.violations[0])


def test_page_table_rows_must_be_the_requests_rows():
    md = right()
    md.forward_metadata.page_table = REQ_TO_TOKEN[[0, 1], :12]  # rows swapped: another request's KV
    (v,) = check(md, ALL, layout()).violations
    assert v.term is Term.PAGE_TABLE and "row 0" in v.expected
    # without req_to_token only the width is judged
    assert check(md, ALL, layout(req_to_token=None)).ok


def test_page_tables_of_bigger_pages_hold_page_ids():
    """With --page-size 4, FA3 keeps page_table[:, ::4] // 4 (0.5.10 flashattention_backend.py:472-483) and
    TRT-LLM MLA the same block ids: rows of page ids over ceil((seq_lens + W) / 4) pages."""
    table = torch.arange(2 * 32).view(2, 32)
    paged = VerifyLayout(W, LENS, REQ, table, page_size=4)
    ids = table[list(REQ)][:, ::4] // 4
    md = SimpleNamespace(forward_metadata=SimpleNamespace(page_table=ids[:, :3]))
    field = {"forward_metadata.page_table": Term.PAGE_TABLE}
    assert check(md, field, paged).ok  # 3 pages cover the longest request: 7 + 5 tokens
    md.forward_metadata.page_table = ids[:, :2]
    (v,) = check(md, field, paged).violations
    assert (v.expected, v.got) == (">= 3 columns", "2 columns")
    md.forward_metadata.page_table = table[list(REQ), :12]  # token slots, not page ids
    (v,) = check(md, field, paged).violations
    assert "page size 4" in v.expected


def test_flat_kv_indices_must_list_each_requests_tokens():
    md = right()
    planned = md.forward_metadata.prefill_wrappers[0].planned
    planned.paged_kv_indices = torch.cat([REQ_TO_TOKEN[1, :6], REQ_TO_TOKEN[0, :10]])  # laid out with C = 3
    (v,) = check(md, ALL, layout()).violations
    assert v.field == "forward_metadata.prefill_wrappers.0.planned.paged_kv_indices" and v.term is Term.KV_INDICES
    # without req_to_token only the count is judged
    (v,) = check(md, ALL, layout(req_to_token=None)).violations
    assert (v.expected, v.got) == (">= 20 indices", "16 indices")


def test_absent_fields_are_listed_not_judged():
    md = SimpleNamespace(forward_metadata=SimpleNamespace(qo_indptr=torch.tensor([0, 5, 10])))
    verdict = check(md, ALL, layout())
    assert verdict.ok and verdict.checked == ["forward_metadata.qo_indptr"]
    assert "forward_metadata.cu_seqlens_q" in verdict.absent


def test_backend_tables_use_contract_terms_and_say_why_when_they_cannot_run():
    assert {"triton", "fa3", "trtllm_mha"} <= set(backends.BACKENDS)
    for b in backends.BACKENDS.values():
        assert all(isinstance(t, Term) for t in b.fields.values()), b.name
        assert b.module.startswith("sglang.srt.layers.attention.")
        assert b.runs or (b.why_not and ".py:" in b.why_not), b.name  # the code path that says so
        assert set(b.graph_host_only) <= set(b.fields), b.name
    assert backends.get("triton").kernels == "triton"
    with pytest.raises(KeyError, match="known: triton"):
        backends.get("nope")


def test_of_object_finds_the_nearest_known_base():
    class FlashAttentionBackend:
        pass

    class MyForkBackend(FlashAttentionBackend):
        pass

    assert backends.of_object(MyForkBackend()).name == "fa3"
    assert backends.of_object(object()) is None


def test_plain_lists_are_judged_like_tensors():
    rows = REQ_TO_TOKEN.tolist()
    good = SimpleNamespace(forward_metadata=SimpleNamespace(page_table=[rows[1][:12], rows[0][:12]],
                                                            cu_seqlens_q=[0, 5, 10]))
    table = {"forward_metadata.page_table": Term.PAGE_TABLE, "forward_metadata.cu_seqlens_q": Term.QUERY_OFFSETS}
    assert check(good, table, layout(req_to_token=rows)).ok
    bad = SimpleNamespace(forward_metadata=SimpleNamespace(page_table=[rows[0][:12], rows[1][:12]],
                                                           cu_seqlens_q=[0, 3, 6]))
    got = {v.field: v.expected for v in check(bad, table, layout(req_to_token=rows)).violations}
    assert got == {"forward_metadata.page_table": "row 0: req_to_token[1, :8]",
                   "forward_metadata.cu_seqlens_q": [0, 5, 10]}


def _one_query_per_row(width: int) -> SimpleNamespace:
    """FA3-style metadata laid out one query per row, as a one-pass tree verify does (each query its own
    sequence: its request's prefix, then the tree nodes it sees), for two chains of W = 5 nodes; rows
    are laid out ``width`` per request (W: right; C: a start-up width)."""
    visible = [[[k <= j for k in range(W)] for j in range(W)] for _ in LENS]
    rows, lens = [], []
    for i, (p, req) in enumerate(zip(LENS, REQ)):
        for j in range(width):
            seen = [REQ_TO_TOKEN[req, p + k].item() for k in range(W) if j < W and visible[i][j][k]]
            row = REQ_TO_TOKEN[req, :p].tolist() + seen
            rows.append(row + [0] * (12 - len(row)))
            lens.append(len(row))
    kv = torch.tensor(lens, dtype=torch.int32)
    return SimpleNamespace(forward_metadata=SimpleNamespace(
        cu_seqlens_q=torch.arange(0, len(lens) + 1, dtype=torch.int32), cache_seqlens_int32=kv,
        cu_seqlens_k=torch.cat([torch.zeros(1, dtype=torch.int32), kv.cumsum(0).int()]), max_seq_len_q=1,
        max_seq_len_k=12, page_table=torch.tensor(rows, dtype=torch.int32))), visible


def test_one_query_per_row_is_judged_in_its_own_terms():
    """A one-pass tree verify (Rancy-Wang ddtree-v2 @ 433c58ed, flashattention_backend.py:422-520: rows =
    bs * q_len, max_seq_len_q = 1, each row's KV the prefix and the visible nodes) is right by its own
    layout; laid out with C = 8 rows per request, its rows shift and the KV lengths say so."""
    meta, visible = _one_query_per_row(W)
    tree = VerifyLayout(W, LENS, REQ, REQ_TO_TOKEN, visible=visible)
    assert check(meta, backends.get("fa3").fields, tree).ok
    assert not check(meta, backends.get("fa3").fields, layout()).ok  # without the tree: request-major terms
    shifted, _ = _one_query_per_row(8)
    bad = check(shifted, backends.get("fa3").fields, tree)
    assert {v.field for v in bad.violations} >= {"forward_metadata.cache_seqlens_int32",
                                                  "forward_metadata.page_table"}


TUPLE_BACKEND = '''
class TupleMetadataBackend:
    """0.4.3's TritonAttnBackend keeps its verify metadata as a plain tuple."""

    def init_forward_metadata(self, qo_indptr, mask_indptr, max_extend_len):
        self.forward_metadata = (None, max_extend_len, None, None, qo_indptr, None, mask_indptr)

    def forward_extend(self):
        (attn_logits, max_extend_len, kv_indptr, kv_indices, qo_indptr, custom_mask, mask_indptr) = self.forward_metadata
'''


def test_a_metadata_tuple_is_read_by_the_names_its_source_gives_it(tmp_path, monkeypatch):
    """Smoke and the guard alike (both through ``check``): the tuple's positions by the backend's own unpacking."""
    import importlib
    import sys

    from ddcheck.contract import Term, by_name, check

    (tmp_path / "ddcheck_tuple_backend.py").write_text(TUPLE_BACKEND)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        backend = importlib.import_module("ddcheck_tuple_backend").TupleMetadataBackend()
        backend.init_forward_metadata([0, 8, 16], None, 8)  # laid out with C = 8 for a batch of W = 17
        table = {"forward_metadata.qo_indptr": Term.QUERY_OFFSETS, "forward_metadata.max_extend_len": Term.MAX_QUERY_LEN}
        got = check(backend, table, VerifyLayout(17, (5, 9)))
        assert sorted(v.field for v in got.violations) == sorted(table) and got.checked == list(table)
        view, how = by_name(backend, table)
        assert view.forward_metadata.max_extend_len == 8 and view.init_forward_metadata  # the rest is the backend's
        assert how["forward_metadata"][0][4] == "qo_indptr" and how["forward_metadata"][1] == "ddcheck_tuple_backend:6"
    finally:
        sys.modules.pop("ddcheck_tuple_backend", None)
