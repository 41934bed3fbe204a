"""Property tests: whatever whitespace, comments, line endings and encodings a backend file has,
scan and fix keep their promises (no crash, positions on the C read, only the intended edits)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from ddcheck.scan.api import scan
from ddcheck.fix.api import fix_targets
from ddcheck.scan.settings import Settings

GUARDS = (Path(__file__).resolve().parents[2] / "fixtures" / "analysis" / "guards.py").read_text()
LINES = GUARDS.split("\n")
# What Python allows inside a comment or a blank line without changing the code.
NOISE = st.text(alphabet=st.sampled_from(list(" \t\x0c\x0b\x1c\x85\u2028\u2029é€#x")), max_size=12)
EOLS = st.sampled_from(["\n", "\r\n", "\r"])
ENCODINGS = st.sampled_from([None, "utf-8", "latin-1"])


@st.composite
def sources(draw):
    """guards.py with comment lines of noise between some lines, one line ending, one encoding."""
    eol, encoding = draw(EOLS), draw(ENCODINGS)
    out = []
    if encoding is not None:
        out.append(f"# -*- coding: {encoding} -*-")
    for line in LINES:
        out.append(line)
        if draw(st.booleans()) and line.strip() and not line.rstrip().endswith(("(", ",")):
            indent = line[: len(line) - len(line.lstrip())]
            noise = draw(NOISE)
            if encoding == "latin-1":
                noise = noise.encode("latin-1", "ignore").decode("latin-1")
            out.append(f"{indent}# {noise}")
    text = eol.join(out)
    return text, eol, (encoding or "utf-8")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sources())
def test_scan_and_fix_keep_their_promises(tmp_path_factory, case):
    text, eol, encoding = case
    path = tmp_path_factory.mktemp("prop") / "backend.py"
    path.write_bytes(text.encode(encoding))
    result = scan([str(path)], settings=Settings(), use_cache=False)
    assert result.errors == []
    physical = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert result.findings
    for f in result.findings:  # every finding points exactly at the C read
        assert physical[f.line - 1][f.column:f.end_column] == f.symbol == "self.num_draft_tokens"
    fix_targets([str(path)])
    fixed = path.read_bytes()
    compile(fixed, str(path), "exec")
    decoded = fixed.decode(encoding)
    # Only the intended edits: drop the inserted binding (comment + line) and put C back where W went.
    kept = []
    lines = decoded.split(eol)
    i = 0
    while i < len(lines):
        if lines[i].strip().startswith("# Per-step verify width") and "(ddcheck fix)" in lines[i]:
            i += 2
            continue
        kept.append(lines[i])
        i += 1
    restored = eol.join(kept)
    for local in ("verify_num_tokens_per_req", "num_tokens_per_req"):
        restored = restored.replace(f"({local})", "self.num_draft_tokens").replace(local, "self.num_draft_tokens")
    restored = restored.replace('(getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens)',
                                "self.num_draft_tokens")
    assert restored == text
    again = scan([str(path)], settings=Settings(), use_cache=False)
    assert [f for f in again.findings if f.rule == "DD001"] == []
    assert fix_targets([str(path)]) == []  # idempotent
