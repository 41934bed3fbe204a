"""`ddcheck scan` on real SGLang releases, downloaded at test time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# One worker of the suite runs this file: each release is scanned once (conftest's release_scan).
pytestmark = [pytest.mark.network, pytest.mark.xdist_group("release-scans")]
TRITON = "sglang/srt/layers/attention/triton_backend.py"


def lines_of(result, relpath, rule=None, severity=None):
    return sorted(f.line for f in result.findings if f.relpath == relpath
                  and (rule is None or f.rule == rule) and (severity is None or f.severity.value == severity))


def test_triton_0_5_10_has_exactly_the_fourteen_known_errors(release_scan):
    r = release_scan("0.5.10")
    assert lines_of(r, TRITON, severity="error") == [
        309, 310, 349, 350, 355,  # eager init_forward_metadata
        571, 572, 608, 608, 611,  # CUDA-graph capture
        724, 725, 759, 759,  # CUDA-graph replay
    ]
    assert 88 not in lines_of(r, TRITON)  # the definition is not a finding
    capture = [f for f in r.findings if f.relpath == TRITON and f.line == 611]
    assert capture[0].function == "TritonAttnBackend.init_forward_metadata_capture_cuda_graph"
    assert capture[0].symbol == "self.num_draft_tokens"
    assert "max_extend_len" in capture[0].message


def test_finding_points_at_the_c_expression_and_offers_the_per_step_width(release_scan):
    r = release_scan("0.5.10")
    f = next(f for f in r.findings if f.relpath == TRITON and f.line == 349)
    # `            seq_mask_len = self.num_draft_tokens * (` : the attribute starts at column 27
    assert (f.column, f.end_line, f.end_column) == (27, 349, 48)
    assert f.path.endswith(".whl!" + TRITON)
    assert f.replacement == '(getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens)'
    assert f.fix_safety == "safe"


@pytest.mark.parametrize("version, expected", [
    ("0.5.5", [302, 303, 342, 343, 348, 561, 562, 598, 598, 601, 714, 715, 749, 749]),
    ("0.5.12", [364, 365, 404, 405, 410, 642, 643, 685, 685, 688, 802, 803, 843, 843]),
    # 0.5.14+ moved graph metadata into `_update_target_verify_buffers` (named for verify, no guard
    # inside) and passes `max_extend_len=self.num_draft_tokens` to ForwardMetadata when capturing.
    ("0.5.14", [402, 403, 438, 438, 663, 664, 702, 703, 708, 923]),
    ("0.5.16", [455, 456, 491, 491, 786, 787, 824, 825, 830, 1074]),
])
def test_triton_buggy_releases(release_scan, version, expected):
    assert lines_of(release_scan(version), TRITON, severity="error") == expected


@pytest.mark.parametrize("version", ["0.5.17", "0.5.18"])
def test_triton_fallback_releases_are_info_not_error(release_scan, version):
    r = release_scan(version)
    assert lines_of(r, TRITON, severity="error") == []
    infos = [f for f in r.findings if f.relpath == TRITON and f.rule == "DD003"]
    assert len(infos) == 3  # eager, graph and max_extend_len fallbacks
    assert all("per-step width" in f.message or "verify input" in f.message for f in infos)


def test_triton_0_5_23_resolves_the_width_per_step(release_scan):
    """No layout or fallback left; the verify mask is still made for C tokens per request
    (triton_backend.py:1237-1246 hands C to `maybe_create_verify_mask`) and the step writes the verify
    input's mask into it (638): capacity, a warning (issue 51)."""
    r = release_scan("0.5.23")
    assert lines_of(r, TRITON, rule="DD001") == lines_of(r, TRITON, rule="DD003") == []
    assert lines_of(r, TRITON) == [1242]
    assert "triton_backend.py:638" in next(f.message for f in r.findings if f.relpath == TRITON)


@pytest.mark.parametrize("version", ["0.5.5", "0.5.10", "0.5.16", "0.5.23"])
def test_flashinfer_never_flagged(release_scan, wheel, version):
    import zipfile

    assert "sglang/srt/layers/attention/flashinfer_backend.py" in zipfile.ZipFile(wheel(version)).namelist()
    r = release_scan(version)
    assert [f for f in r.findings if "flashinfer" in f.relpath] == []


def test_other_backends_of_0_5_23_still_use_the_fixed_width(release_scan):
    r = release_scan("0.5.23")
    fa3 = [f for f in r.findings if f.relpath.endswith("attention/flashattention_backend.py") and f.rule == "DD001"]
    assert len(fa3) > 10
    # FA3 sets max_seq_len_k = seq_lens.max() + C in the step: this step's key bound, a layout (the page
    # table is sliced to it), fixed safely to W.
    bounds = [f for f in r.findings if f.relpath.endswith("attention/flashattention_backend.py")
              and "key bound `max_seq_len_k`" in f.message]
    assert bounds and all((f.rule, f.fix_safety) == ("DD001", "safe") for f in bounds)
    for backend in ("wave_backend.py", "flashmla_backend.py", "trtllm_mla_backend.py", "xpu_backend.py", "aiter_backend.py"):
        assert any(f.relpath.endswith(backend) and f.rule == "DD001" for f in r.findings), backend


def test_whole_package_is_scanned_not_only_attention(release_scan):
    r = release_scan("0.5.23")
    assert r.files_scanned > 4000
    assert any(not f.relpath.startswith("sglang/srt/layers/") for f in r.findings)  # the NPU backends
    # NGRAM's worker builds its verify input at C itself (ngram_worker.py:386-394, draft_token_num=
    # self.draft_token_num): what it lays out with C (its corpus stride :398, its host tree :453) is its W
    assert not [f for f in r.findings if f.relpath.endswith("speculative/ngram_worker.py")]


def test_json_schema_on_a_real_wheel(wheel):
    out = subprocess.run([sys.executable, "-m", "ddcheck", "scan", "--format", "json", str(wheel("0.5.10"))],
                         capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"version", "files_scanned", "errors", "findings", "exit_code"} and data["exit_code"] == 1
    assert data["version"] == 1 and data["errors"] == []
    keys = {"rule", "severity", "path", "line", "column", "end_line", "end_column", "function", "symbol",
            "message", "replacement"}
    assert all(keys <= set(f) for f in data["findings"])
    tri = [f for f in data["findings"] if f["path"].endswith("!" + TRITON) and f["severity"] == "error"]
    assert len(tri) == 14


@pytest.mark.matrix  # 0.5.17: beyond the CI sample of releases
def test_sglang_version_target_downloads_and_scans(wheel):
    wheel("0.5.17")  # the cache then holds it, as after a first `ddcheck scan sglang==0.5.17`
    out = subprocess.run([sys.executable, "-m", "ddcheck", "scan", "--format", "json", "--select", "DD003",
                          "--fail-on", "info", "sglang==0.5.17"], capture_output=True, text=True)
    data = json.loads(out.stdout)
    tri = [f for f in data["findings"] if f["path"].endswith("!" + TRITON)]
    assert [f["line"] for f in tri] == [470, 812, 1112]
    assert out.returncode == 1  # --fail-on info makes the fallbacks count


def test_fa3_graph_buffers_laid_out_with_c_are_found(release_scan):
    # init_cuda_graph_state precomputes cu_seqlens_q = arange(0, max_bs*C + 1, step=C); the graph path
    # slices it as the verify query layout.
    r = release_scan("0.5.23")
    hits = [f for f in r.findings if f.relpath.endswith("attention/flashattention_backend.py")
            and "laid out with C at start-up" in f.message]
    assert {f.function for f in hits} == {"FlashAttentionBackend._bind_metadata_buffers"}
    # Both step by C from 0: refilled stepping by W where they are read (a safe fix).
    assert {f.symbol for f in hits} == {'self.target_verify_metadata["cu_seqlens_q"]',
                                        "self.target_verify_metadata_topk_normal['cu_seqlens_q']"}
    assert all(f.fix_safety == "safe" for f in hits)
    # The topk > 1 expand/SWA buffers count 0, 1, 2, ...: C sets only their length (a capacity warning).
    short = [f for f in r.findings if f.relpath.endswith("attention/flashattention_backend.py")
             and "length was set from C" in f.message]
    assert len(short) == 2 and all(f.rule == "DD002" for f in short)


def test_workers_and_one_process_agree_on_a_release(wheel):
    """A real tree split over forked workers (each triages a share, analyses the candidates it is
    handed, and threads W through callers other workers parse too) gives what one process gives."""
    from ddcheck.scan.api import open_targets, scan_trees_with_settings
    from ddcheck.scan.settings import Settings

    def scan(jobs):
        trees, _ = open_targets([str(wheel("0.5.23"))])
        return scan_trees_with_settings(trees, Settings(), jobs=jobs)

    pooled = scan(2)
    assert pooled.findings and any(f.fix is not None and len(f.fix.edits) > 1 for f in pooled.findings)
    assert pooled.to_json() == scan(1).to_json()


FA3 = "sglang/srt/layers/attention/flashattention_backend.py"
TRTLLM_MHA = "sglang/srt/layers/attention/trtllm_mha_backend.py"
AITER = "sglang/srt/layers/attention/aiter_backend.py"


def test_the_step_bound_is_layout_with_a_safe_fix(release_scan):
    """0.5.10 flashattention_backend.py:291-294 (eager verify) and trtllm_mha_backend.py:399/502/633
    (capture, replay, eager): `max_seq_len_k = seq_lens.max() + C` is this step's key bound."""
    r = release_scan("0.5.10")
    at = {(f.relpath, f.line): f for f in r.findings}
    for where in [(FA3, 293), (FA3, 1590), (FA3, 1853), (TRTLLM_MHA, 399), (TRTLLM_MHA, 502), (TRTLLM_MHA, 633)]:
        f = at[where]
        assert (f.rule, f.fix_safety) == ("DD001", "safe"), where
        assert "key bound `max_seq_len_k`" in f.message
    assert at[(FA3, 293)].replacement == ('(getattr(forward_batch.spec_info, "draft_token_num", None) or '
                                          'self.speculative_num_draft_tokens)')


@pytest.mark.parametrize("version, line", [("0.5.14", 1674), ("0.5.23", 3155)])
def test_a_size_assertion_is_never_a_layout_error(release_scan, version, line):
    """aiter_backend.py: `kv_indices_used = seq_lens_sum + (C * bs if use_mla else 0)` only feeds
    `assert_buffer_fits(kv_indices_used, kv_indices.numel(), ...)` (0.5.23:3154-3163)."""
    r = release_scan(version)
    assert not [f for f in r.findings if f.relpath == AITER and f.line == line]
    # the layout next to it is still found: `kv_lens = seq_lens + C` (0.5.23:3145)
    if version == "0.5.23":
        assert [f.rule for f in r.findings if f.relpath == AITER and f.line == 3145] == ["DD001"]


def test_a_dcp_start_up_bound_is_capacity_and_graph_buffers_are_reported_where_made(release_scan):
    """0.5.23 aiter_backend.py:1631-1633: `max_global_kv_len = self.max_context_len; += C` is a static
    bound (capacity); flashattention_backend.py:2646-2691 allocates the topk > 1 graph buffers with
    `max_bs * C` rows that `_bind_metadata_buffers` slices to `[: bs * C]` (2861-2899)."""
    r = release_scan("0.5.23")
    dcp = [f for f in r.findings if f.relpath == AITER and f.line == 1633]
    assert [f.rule for f in dcp] == ["DD002"] and "start-up size `self.max_context_len`" in dcp[0].message
    made = [f for f in r.findings if f.relpath == FA3 and f.rule == "DD002" and f.function.endswith("init_cuda_graph_state")
            and "maybe_create_verify_mask" not in f.message]  # the verify mask: issue 51's test below
    assert len(made) == 6
    assert all("FlashAttentionBackend._bind_metadata_buffers" in f.message and "flashattention_backend.py:28" in f.message
               for f in made)
    # no tree-budget server argument in a release: no automatic fix, and the hint says what to cover
    assert all(f.fix is None and "states no largest verify width" in f.hint for f in made)


VERIFY_MASK = "`torch.zeros(tree_mask_numel(mode, max_bs, num_draft_tokens, max_context_len), dtype=dtype, device=device)` at verify_mask.py:73"
VERIFY_MASK_WRITE = "hands it to `build_chain_tree` at eagle_worker_common.py:440 (`build_eagle_verify_input`)"


@pytest.mark.parametrize("relpath, line, symbol, made, write", [
    # flashattention_backend.py:2575-2583, flashmla_backend.py:314-322, trtllm_mla_backend.py:525-533 hand C to
    # `maybe_create_verify_mask` (verify_mask.py:57-81), which allocates `tree_mask_numel(...)` =
    # C * (ctx + C) per request (verify_mask.py:21-26, 73); the buffer leaves through the `verify_mask`
    # property and `build_eagle_verify_input` packs the step's mask into it (eagle_worker_common.py:409-440)
    (FA3, 2580, "self.speculative_num_draft_tokens", VERIFY_MASK, VERIFY_MASK_WRITE),
    ("sglang/srt/layers/attention/flashmla_backend.py", 319, "self.num_draft_tokens", VERIFY_MASK,
     VERIFY_MASK_WRITE),
    ("sglang/srt/layers/attention/trtllm_mla_backend.py", 530, "self.num_draft_tokens", VERIFY_MASK,
     VERIFY_MASK_WRITE),
    # aiter_backend.py:2823-2830: `draft_slack = self.num_draft_tokens or 0` into the kv-index buffer's numel;
    # the graph replay binds it to `kv_indices` (3151) and the kernel writes seq_len + C indices a row (3164-3173)
    (AITER, 2827, "torch.zeros((buffer_numel,), dtype=torch.int32, device=self.device)", None,
     "hands it to `create_flashinfer_kv_indices_triton` at aiter_backend.py:3171"),
    # aiter_backend.py:2858-2875: `max_seqlen_qo = 1 if self.num_draft_tokens is None else self.num_draft_tokens`
    # sizes the persistent MLA decode metadata (`make_mla_decode_meta_data_buffer`, 818-862) that the verify
    # replay plans into (3226-3236)
    (AITER, 2876, "max_seqlen_qo",
     "`torch.empty(work_meta_data_size, dtype=work_meta_data_type, device='cuda')` at aiter_backend.py:844",
     "hands it to `self.make_mla_meta_data` at aiter_backend.py:3230"),
])
def test_c_reaching_a_size_one_step_further_is_capacity_on_0_5_23(release_scan, relpath, line, symbol, made, write):
    """Issue 51's five places: DD002 (at the C the call hands, for the helpers), naming the write."""
    r = release_scan("0.5.23")
    f = next(f for f in r.findings if f.relpath == relpath and f.line == line)
    assert (f.rule, f.severity.value, f.symbol) == ("DD002", "warning", symbol)
    assert write in f.message
    if made is not None:  # a helper's allocation: named, with the parameter it sizes it with
        assert made in f.message and "is passed as `" in f.message


def test_a_release_named_by_version_is_named_so_in_findings(wheel):
    """``sglang==X``'s files are ``sglang==X!path``, as smoke names them, not by ddcheck's wheel cache; a
    wheel given by path keeps its path (issue 49)."""
    from ddcheck.tree.sources import open_target

    path = wheel("0.5.10")
    assert open_target("sglang==0.5.10").find(TRITON).display == f"sglang==0.5.10!{TRITON}"
    assert open_target(str(path)).find(TRITON).display == f"{path}!{TRITON}"
