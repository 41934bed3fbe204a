"""The fix's text edits on the layouts real code has: each case is a helper reached from a verify
branch (W threaded in as ``verify_width``) or a verify block, and the exact lines the fix writes.
The fixed file must parse and read C nowhere on the verify path."""

from __future__ import annotations

import ast

import pytest

from ddcheck.fix import api as fixer
from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings

HELPER = '''class Backend:
    def __init__(self, server_args):
        self.num_draft_tokens = server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
{call}

{define}
        return seq_lens + self.num_draft_tokens
'''
# The caller's own `spec_info` local (bound at its top) is in scope at the call: the fix reads W from it.
W = 'verify_width=getattr(spec_info, "draft_token_num", None)'

CASES = {
    "one line": ("            self._lens(forward_batch.seq_lens)", "    def _lens(self, seq_lens):",
                 [f"            self._lens(forward_batch.seq_lens, {W})",
                  "    def _lens(self, seq_lens, verify_width=None):"]),
    "trailing commas": ("            self._lens(\n                forward_batch.seq_lens,\n            )",
                        "    def _lens(\n        self,\n        seq_lens,\n    ):",
                        [f"                forward_batch.seq_lens,\n                {W},\n            )",
                         "        seq_lens,\n        verify_width=None,\n    ):"]),
    "*args and **kwargs": ("            self._lens(forward_batch.seq_lens, 1)",
                           "    def _lens(self, seq_lens, *args, **kwargs):",
                           [f"self._lens(forward_batch.seq_lens, 1, {W})",
                            "def _lens(self, seq_lens, *args, verify_width=None, **kwargs):"]),
    "keyword-only": ("            self._lens(forward_batch.seq_lens, scale=2)",
                     "    def _lens(self, seq_lens, *, scale=1):",
                     [f"self._lens(forward_batch.seq_lens, scale=2, {W})",
                      "def _lens(self, seq_lens, *, scale=1, verify_width=None):"]),
    "*args only": ("            self._lens(forward_batch.seq_lens, *())", "    def _lens(self, seq_lens, *rest):",
                   [f"self._lens(forward_batch.seq_lens, *(), {W})",
                    "def _lens(self, seq_lens, *rest, verify_width=None):"]),
    "parenthesized": ("            self._lens((forward_batch.seq_lens))", "    def _lens(self, seq_lens: int = (0)):",
                      [f"self._lens((forward_batch.seq_lens), {W})",
                       "def _lens(self, seq_lens: int = (0), verify_width=None):"]),
    "comments": ("            self._lens(\n                forward_batch.seq_lens  # prefix lengths\n            )",
                 "    def _lens(self,\n              seq_lens):  # the helper",
                 [f"                forward_batch.seq_lens,\n                {W}  # prefix lengths",
                  "    def _lens(self,\n              seq_lens,\n              verify_width=None):  # the helper"]),
    "no arguments": ("            self._lens()", "    def _lens(self, seq_lens=()):",
                     [f"self._lens({W})", "def _lens(self, seq_lens=(), verify_width=None):"]),
}


def _fixed(tmp_path, source: str, newline: str = "\n") -> str:
    p = tmp_path / "backend.py"
    p.write_bytes(source.replace("\n", newline).encode())
    fixer.fix_targets([str(p)])
    text = p.read_bytes().decode()
    ast.parse(text)
    assert not [f for f in scan([str(p)], settings=Settings()).findings if f.rule == "DD001"]
    return text


def test_threaded_width_does_not_depend_on_what_the_caller_reads_off_the_verify_path(tmp_path):
    """The keyword a caller passes is spelled from what is in scope at the call, whether or not the
    caller also reads C elsewhere (once it did not look for the call's statement unless it had)."""
    call, define, expected = CASES["one line"]
    plain = HELPER.format(call=call, define=define)
    reads_c = plain.replace("        spec_info = forward_batch.spec_info\n",
                            "        spec_info = forward_batch.spec_info\n        self.cap = self.num_draft_tokens\n")
    assert reads_c != plain
    for source in (plain, reads_c):
        assert expected[0] in _fixed(tmp_path, source)


@pytest.mark.parametrize("case", list(CASES))
def test_width_threaded_into_a_helper_keeps_the_layout_of_its_lists(tmp_path, case):
    call, define, expected = CASES[case]
    text = _fixed(tmp_path, HELPER.format(call=call, define=define))
    for snippet in expected:
        assert snippet in text
    assert "        num_tokens_per_req = verify_width or self.num_draft_tokens\n" \
           "        return seq_lens + num_tokens_per_req\n" in text


VERIFY = '''class B:
    def __init__(self, a):
        self.num_draft_tokens = a.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_decode():
            pass
        elif forward_batch.forward_mode.is_target_verify(): self.kv = forward_batch.seq_lens + self.num_draft_tokens

    def replay(self, forward_batch):
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            # the verify layout

            x = "\u00e9"; self.n = ("\u00e9", self.num_draft_tokens)
'''
BIND = 'num_tokens_per_req = getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens'
COMMENT = "# Per-step verify width; C only if the verify input has none (ddcheck fix)."


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_width_is_bound_before_the_statement_that_holds_the_verify_block(tmp_path, newline):
    """A one-line ``elif`` body: bound before the whole ``if``; a block whose first statement has a
    comment and a blank line above it: bound above them (they stay with their statement), with the
    statement's indentation and the file's line endings; columns after non-ASCII text are right."""
    text = _fixed(tmp_path, VERIFY, newline)
    nl = newline
    assert (f"        spec_info = forward_batch.spec_info{nl}        {COMMENT}{nl}        {BIND}{nl}"
            f"        if forward_batch.forward_mode.is_decode():") in text
    assert "elif forward_batch.forward_mode.is_target_verify(): self.kv = forward_batch.seq_lens + " \
           "num_tokens_per_req" in text
    assert (f"is_target_verify():{nl}            {COMMENT}{nl}            {BIND}{nl}            # the verify layout{nl}"
            f"{nl}            x = \"\u00e9\"; self.n = (\"\u00e9\", num_tokens_per_req){nl}") in text
    assert text.count(nl) == VERIFY.count("\n") + 4


def test_a_one_line_body_gets_the_width_inline(tmp_path):
    """`def f(self): return C` has no line of its own inside the function to bind W on (before the
    `def` would be outside it): the read itself becomes the expression."""
    text = _fixed(tmp_path, HELPER.format(call="            self._lens(forward_batch.seq_lens)",
                                          define="    def _lens(self, seq_lens): return seq_lens + self.num_draft_tokens"
                                          ).replace("\n        return seq_lens + self.num_draft_tokens\n", "\n"))
    assert "    def _lens(self, seq_lens, verify_width=None): return seq_lens + (verify_width or self.num_draft_tokens)" \
        in text and "num_tokens_per_req" not in text


def test_the_fixer_asks_the_models_parser_whether_a_fixed_file_compiles():
    """A duplicate parameter (what a careless ``verify_width`` added twice would make) parses but does
    not compile: the check the fixer runs on each fixed file (target.parse.check_compiles) says so."""
    import ast

    from ddcheck.tree.parse import SourceError, check_compiles

    twice = "def f(self, verify_width=None, verify_width=None):\n    return verify_width\n"
    ast.parse(twice)  # the parser alone accepts it
    with pytest.raises(SourceError) as info:
        check_compiles(twice, "x.py")
    assert isinstance(info.value.__cause__, SyntaxError) and "duplicate argument" in info.value.__cause__.msg
    check_compiles("def f(self, verify_width=None):\n    return verify_width\n", "x.py")
