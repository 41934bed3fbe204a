"""The tree's one evaluator: values known in part (a verify input's fields, a per-step width, a class's
constant) and the tests read through them, as scan (analysis/inputs.Reach), config (launch/paths) and the
step model (tree/step) all read them."""

import ast

from ddcheck.analysis.inputs import Built, Reach
from ddcheck.config.inputs import input_value, reading_input
from ddcheck.tree.evaluate import UNKNOWN, Evaluator, Span, Sym, truth


def expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def ev_for(obj) -> Evaluator:
    return reading_input(Evaluator({}), obj, {})


DDTREE = input_value("DDTreeVerifyInput", {"draft_token_num", "tree_budget", "custom_mask"}, "DDTREE_VERIFY",
                     {"DDTreeVerifyInput", "EagleVerifyInput"})
EAGLE = input_value("EagleVerifyInput", {"draft_token_num", "custom_mask"}, "EAGLE_VERIFY", {"EagleVerifyInput"})


def test_the_input_answers_only_the_fields_it_carries():
    assert ev_for(DDTREE).test(expr("hasattr(spec_info, 'tree_budget')")) is True
    assert ev_for(EAGLE).test(expr("hasattr(forward_batch.spec_info, 'tree_budget')")) is False
    # getattr's default is taken only where the real object would lack the field
    assert ev_for(EAGLE)(expr("getattr(spec_info, 'tree_budget', 7)")) == 7
    assert ev_for(DDTREE)(expr("getattr(spec_info, 'tree_budget', 7)")) is UNKNOWN
    # an open object (no field list) never answers "absent"
    assert Evaluator({}).test(expr("hasattr(x, 'tree_budget')")) is UNKNOWN


def test_isinstance_reads_the_class_and_its_bases():
    assert ev_for(DDTREE).test(expr("isinstance(spec_info, EagleVerifyInput)")) is True
    assert ev_for(EAGLE).test(expr("isinstance(spec_info, (mod.DDTreeVerifyInput,))")) is False
    bare = input_value("X", set(), None)  # bases not known: not decided
    assert ev_for(bare).test(expr("isinstance(spec_info, EagleVerifyInput)")) is UNKNOWN


def test_class_constants_compare_by_member_and_never_equal_a_plain_value():
    ev = ev_for(DDTREE)
    assert ev.test(expr("spec_info.spec_input_type == SpecInputType.DDTREE_VERIFY")) is True
    assert ev.test(expr("spec_info.spec_input_type != SpecInputType.EAGLE_VERIFY")) is True
    assert ev.test(expr("spec_info.spec_input_type in (SpecInputType.EAGLE_VERIFY, SpecInputType.DFLASH)")) is False
    assert ev.test(expr("spec_info.spec_input_type == 3")) is UNKNOWN  # an IntEnum member may be 3
    assert ev.test(expr("spec_info.spec_input_type == Other.DDTREE_VERIFY")) is UNKNOWN
    assert ev.test(expr("SpecInputType.X is None")) is False


def test_a_per_step_width_is_a_positive_number_of_unknown_size():
    ev = ev_for(EAGLE)
    assert ev.test(expr("spec_info.draft_token_num > 0")) is True
    assert ev.test(expr("spec_info.draft_token_num is None")) is False
    assert ev.test(expr("spec_info.draft_token_num > 4")) is UNKNOWN
    assert ev(expr("int(spec_info.draft_token_num)")) == Span(lo=1)
    assert truth(Span(lo=0)) is None and truth(Span(lo=0, hi=0)) is False and truth(Span(hi=-1)) is True
    assert ev.test(expr("4 < min(w, 3)")) is UNKNOWN  # min of an unknown without spans: unknown


def test_tests_are_decided_by_any_operand_that_decides_them():
    ev = ev_for(EAGLE)
    assert ev.test(expr("unknown_flag and hasattr(spec_info, 'tree_budget')")) is False
    assert ev.test(expr("unknown_flag or spec_info is not None")) is True
    assert ev.test(expr("not (unknown_flag and hasattr(spec_info, 'tree_budget'))")) is True
    # as a value, `a or b` with `a` unknown is not known (it may be `a`)
    assert ev(expr("unknown_flag or 8")) is UNKNOWN


def test_a_backend_helper_is_run_for_the_input():
    src = ("class B:\n"
           "    def _is_tree(self, info):\n"
           "        kind = getattr(info, 'spec_input_type', None)\n"
           "        if kind is None:\n"
           "            return False\n"
           "        return kind == SpecInputType.DDTREE_VERIFY\n")
    helpers = {f.name: f for f in ast.walk(ast.parse(src)) if isinstance(f, ast.FunctionDef)}
    test = expr("self._is_tree(spec_info)")
    assert reading_input(Evaluator({}), DDTREE, helpers).test(test) is True
    assert reading_input(Evaluator({}), EAGLE, helpers).test(test) is False


def test_scan_reads_a_built_input_through_the_same_evaluator():
    b = Built("DDTreeVerifyInput", frozenset({"DDTreeVerifyInput"}), "w.py:3",
              frozenset({"draft_token_num", "tree_budget"}), {"spec_input_type": Sym("SpecInputType.DDTREE_VERIFY")})
    fn = ast.parse("def f(self, forward_batch):\n"
                   "    info = forward_batch.spec_info\n"
                   "    if mode.is_decode():\n"
                   "        return 1\n"
                   "    if not hasattr(info, 'tree_budget'):\n"
                   "        return C\n"
                   "    return info.draft_token_num\n").body[0]
    binding = {"info": fn.body[0].value}
    r = Reach(b, lambda name, at: binding.get(name), lambda m: None)
    returns = sorted((s for s in ast.walk(fn) if isinstance(s, ast.Return)), key=lambda s: s.lineno)
    # a test that does not read the input is "free" (some launch takes either way); one that does is decided
    assert r.test(fn.body[1].test) == "free"
    assert r.test(fn.body[2].test) is False
    assert r.reaches(fn.body, returns[1]) is False and r.reaches(fn.body, returns[2]) is True
