"""Layout vs capacity, decided by where the value lives; capacity found where it is made (issue 28).

Fixtures: fixtures/analysis/layout_capacity.py (every new shape, in a tree that states no largest verify
width) and fixtures/analysis/budget_tree (a tree whose server args state a tree drafter's budget)."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path

from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings

from test_analysis import FIXTURES, expected

SHAPES = FIXTURES / "layout_capacity.py"
BUDGET_TREE = FIXTURES / "budget_tree"


def findings(target):
    result = scan([str(target)], settings=Settings(), use_cache=False)
    assert result.errors == []
    return result.findings


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_every_shape_gets_its_expected_rule_and_nothing_else():
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(SHAPES))
    assert got == expected([SHAPES])


def test_the_step_bound_is_layout_with_a_safe_fix_to_the_verify_width():
    line = line_of(SHAPES, "metadata.max_seq_len_k = ")
    f = next(f for f in findings(SHAPES) if f.line == line)
    assert (f.rule, f.fix_safety) == ("DD001", "safe")
    assert "key bound `max_seq_len_k`" in f.message and "W - C keys" in f.message
    assert f.replacement == ('(getattr(spec_info, "draft_token_num", None) or '
                             'self.speculative_num_draft_tokens)')


def sliced_variant() -> str:
    """The fixture with the size check's total used to slice a buffer instead."""
    src = SHAPES.read_text().replace(
        'assert_buffer_fits(kv_indices_used, self.cuda_graph_kv_indices.numel(), "verify kv_indices", bs=bs)',
        "metadata.kv_indices = self.cuda_graph_kv_indices[:kv_indices_used]")
    assert src != SHAPES.read_text()
    return src


def test_a_size_check_on_a_total_computed_with_c_is_not_reported():
    fs = findings(SHAPES)
    checked = {line_of(SHAPES, "kv_indices_used = "), line_of(SHAPES, "assert forward_batch.seq_lens_sum")}
    assert not [f for f in fs if f.line in checked]


def test_the_size_check_total_becomes_a_layout_when_it_slices(tmp_path):
    path = tmp_path / "backend.py"
    path.write_text(sliced_variant())
    line = line_of(path, "kv_indices_used = ")
    assert [(f.rule, f.fix_safety) for f in findings(path) if f.line == line] == [("DD001", "safe")]


def test_capacity_is_reported_at_the_allocation_naming_the_write():
    fs = {f.line: f for f in findings(SHAPES)}
    positions = fs[line_of(SHAPES, "self.cuda_graph_positions = ")]
    write = line_of(SHAPES, "positions = self.cuda_graph_positions[")
    assert positions.rule == "DD002" and positions.function == "LayoutCapacityBackend.init_cuda_graph_state"
    assert f"layout_capacity.py:{write}" in positions.message
    assert "LayoutCapacityBackend.init_forward_metadata_replay_cuda_graph" in positions.message
    kv = fs[line_of(SHAPES, "self.cuda_graph_kv_indices = ")]
    assert "hands it to `build_kv_indices`" in kv.message
    # no largest width stated in the tree: no fix, and the hint says what the size must cover
    for f in (positions, kv):
        assert f.fix is None and f.fix_safety is None
        assert "states no largest verify width" in f.hint and "budget + 1" in f.hint
    # a buffer read one entry per request (`[:bs]`) cannot overflow: not reported
    assert line_of(SHAPES, "self.cuda_graph_seq_lens = ") not in fs


def test_a_start_up_size_grown_by_c_is_capacity():
    f = next(f for f in findings(SHAPES) if f.line == line_of(SHAPES, "max_kv_len += "))
    assert f.rule == "DD002" and f.function == "LayoutCapacityBackend.graph_max_kv_len"
    assert "start-up size `self.max_context_len`" in f.message and f.fix is None


def test_where_the_tree_states_the_budget_the_fix_sizes_for_budget_plus_one(tmp_path):
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(BUDGET_TREE))
    assert got == expected(sorted(BUDGET_TREE.rglob("*.py")))
    backend = BUDGET_TREE / "sglang/srt/layers/attention/budget_backend.py"
    fs = {f.line: f for f in findings(BUDGET_TREE)}
    mask, positions = fs[line_of(backend, "self.verify_mask = ")], fs[line_of(backend, "self.cuda_graph_positions = ")]
    assert mask.fix_safety == positions.fix_safety == "safe"
    assert mask.replacement == ('max(self.speculative_num_draft_tokens, (getattr(model_runner.server_args, '
                                '"speculative_ddtree_budget", None) or 0) + 1)')
    assert "self.model_runner.server_args" in positions.replacement
    # `ddcheck fix` (no unsafe fixes) applies them: the file still parses and reads the budget
    from ddcheck.fix.api import fix_targets

    tree = tmp_path / "tree"
    shutil.copytree(BUDGET_TREE, tree)
    fix_targets([str(tree)])
    fixed = (tree / "sglang/srt/layers/attention/budget_backend.py").read_text()
    ast.parse(fixed)
    assert fixed.count('"speculative_ddtree_budget", None) or 0) + 1)') == 3
    assert findings(tree) == []  # fixed for good: a second `ddcheck fix` has nothing to do


def test_without_the_budget_flag_the_same_tree_gets_no_fix(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(BUDGET_TREE, tree)
    args = tree / "sglang/srt/server_args.py"
    args.write_text(args.read_text().replace("speculative_ddtree_budget", "speculative_other_setting"))
    fs = [f for f in findings(tree) if f.rule == "DD002"]
    assert len(fs) == 3 and all(f.fix is None and "states no largest verify width" in f.hint for f in fs)


CAPACITY_TREE = FIXTURES / "capacity_tree"


def test_capacity_shapes_of_issue_40_are_reported_where_made_naming_the_write_and_fixed(tmp_path):
    """fixtures/analysis/capacity_tree: a verify mask sized through a helper handed C, kv-index slack of
    `C * bs`, a page-table width `+ C` in graph state, MLA decode metadata made for `max_seqlen_qo = C`,
    an expansion buffer allocated in another method; the tree states a budget, so each is fixed to
    max(C, budget + 1), and the fixed tree scans clean."""
    backend = CAPACITY_TREE / "sglang/srt/layers/attention/capacity_backend.py"
    fs = findings(CAPACITY_TREE)
    got = Counter((Path(f.path).name, f.line, f.rule) for f in fs)
    assert got == expected(sorted(CAPACITY_TREE.rglob("*.py")))
    by_line = {f.line: f for f in fs}
    writes = {"self.verify_mask = ": "writes `spec_info.custom_mask`",
              "max_bs * self.max_context_len + self.speculative_num_draft_tokens * max_bs": "hands it to `build_kv_indices`",
              "self.cuda_graph_page_table = ": "slices it to `self.cuda_graph_page_table[:bs, :cols]`",
              "self.cuda_graph_decode_metadata = ": "hands it to `fill_decode_metadata`",
              "self.expand_cu_seqlens_q = ": "slices it to `self.expand_cu_seqlens_q[: bs * w + 1]`"}
    for text, write in writes.items():
        f = by_line[line_of(backend, text)]
        assert write in f.message and f.fix_safety == "safe", (text, f.message)
        assert '"speculative_ddtree_budget", None) or 0) + 1)' in f.replacement
    from ddcheck.fix.api import fix_targets

    tree = tmp_path / "tree"
    shutil.copytree(CAPACITY_TREE, tree)
    fix_targets([str(tree)])
    fixed = (tree / "sglang/srt/layers/attention/capacity_backend.py").read_text()
    ast.parse(fixed)
    assert fixed.count('"speculative_ddtree_budget", None) or 0) + 1)') == 5
    assert findings(tree) == []


PROVENANCE_TREE = FIXTURES / "provenance_tree"
PROVENANCE = PROVENANCE_TREE / "sglang/srt/layers/attention/provenance_backend.py"


def test_c_reaching_a_size_one_step_further_is_capacity_named_by_its_write():
    """fixtures/analysis/provenance_tree (issue 51): C handed as a keyword argument to a helper of another
    module (reported at the C the call hands, naming the helper's allocation and the write: in the class's
    verify path, or in a worker through the accessor the class hands the buffer out by), `C or 0` and
    `1 if C is None else C` into a size through locals and a helper's tuple."""
    fs = findings(PROVENANCE_TREE)
    assert Counter((Path(f.path).name, f.line, f.rule) for f in fs) == expected(sorted(PROVENANCE_TREE.rglob("*.py")))
    by_line = {f.line: f for f in fs}
    own, shared = by_line[line_of(PROVENANCE, "num_draft_tokens=self.speculative_num_draft_tokens,  # expect")], \
        by_line[line_of(PROVENANCE, "num_draft_tokens=self.speculative_num_draft_tokens,  # expect") + 6]
    for f in (own, shared):
        assert f.symbol == "self.speculative_num_draft_tokens" and f.function == "ProvenanceBackend.init_cuda_graph_state"
        assert "is passed as `num_draft_tokens` to `make_mask`" in f.message and "verify_buffers.py:24" in f.message
    assert "`self.own_mask.buffer`" in own.message
    assert f"writes `spec_info.custom_mask` (the verify input's data) into it at provenance_backend.py:" \
           f"{line_of(PROVENANCE, 'custom_mask[: spec_info')}" in own.message
    assert "`self._shared_mask.buffer`" in shared.message
    assert "hands it to `build_tree_mask` at tree_worker.py:20 (`TreeWorker.build_verify_input`)" in shared.message
    slack = by_line[line_of(PROVENANCE, "self.cuda_graph_kv_indices = ")]
    assert f"hands it to `fill_kv_indices` at provenance_backend.py:{line_of(PROVENANCE, 'fill_kv_indices[(bs,)]')}" \
        in slack.message  # through the local `kv_indices`, to a kernel launched on a grid
    qo = by_line[line_of(PROVENANCE, "make_metadata(max_seqlen_qo, max_bs)")]
    assert qo.symbol == "max_seqlen_qo" and "to `make_metadata`, which sizes `self.work`" in qo.message
    assert "verify_buffers.py:41" in qo.message and "hands it to `plan_metadata`" in qo.message
    # warnings: no tree-budget server argument here, so no automatic fix; the hint says what to cover
    assert all(f.rule == "DD002" and f.fix is None and "states no largest verify width" in f.hint for f in fs)


def test_a_size_that_only_decides_whether_a_buffer_exists_is_no_capacity(tmp_path):
    """`make_flags` tests the width's truthiness and sizes one flag per request; `rows` is C only in a
    test. Neither is reported; sized with the width instead, both are."""
    assert not [f for f in findings(PROVENANCE_TREE)
                if f.line in (line_of(PROVENANCE, "self.flags = "), line_of(PROVENANCE, "self.rows_buf = "))]
    tree = tmp_path / "tree"
    shutil.copytree(PROVENANCE_TREE, tree)
    helpers = tree / "sglang/srt/layers/attention/verify_buffers.py"
    helpers.write_text(helpers.read_text().replace("torch.zeros(max_bs, dtype", "torch.zeros(max_bs * num_draft_tokens, dtype"))
    backend = tree / "sglang/srt/layers/attention/provenance_backend.py"
    backend.write_text(backend.read_text().replace("rows = 2 if self.speculative_num_draft_tokens is None else 4",
                                                   "rows = 2 if self.speculative_num_draft_tokens is None else "
                                                   "self.speculative_num_draft_tokens"))
    lines = {f.line for f in findings(tree) if f.rule == "DD002"}
    assert line_of(backend, "self.flags = ") in lines and line_of(backend, "self.rows_buf = ") in lines


def test_a_buffer_handed_out_is_reported_only_where_the_tree_writes_it(tmp_path):
    """Without the worker that writes the shared mask through `verify_mask`, nothing writes it on the
    verify path: not reported (the mask the class writes itself still is)."""
    tree = tmp_path / "tree"
    shutil.copytree(PROVENANCE_TREE, tree)
    (tree / "sglang/srt/speculative/tree_worker.py").unlink()
    backend = tree / "sglang/srt/layers/attention/provenance_backend.py"
    lines = [f.line for f in findings(tree) if f.rule == "DD002"]
    own = line_of(backend, "num_draft_tokens=self.speculative_num_draft_tokens,  # expect")
    assert own in lines and own + 6 not in lines
