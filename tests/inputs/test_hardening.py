"""Bad input never hangs ddcheck, shifts its positions or stops the run (issue "Hardening")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.scan.api import scan
from ddcheck.fix.api import fix_targets
from ddcheck.scan.settings import Settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "analysis"


def ddcheck(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True, timeout=timeout)


# Characters str.splitlines() treats as line breaks but Python's tokenizer does not.
SEPARATORS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_line_separators_in_comments_keep_positions_and_fixes_right(tmp_path, sep):
    plain = (FIXTURES / "guards.py").read_text()
    src = plain.replace('"""Ways the target-verify branch is spelled."""',
                        f'"""Ways the target-verify branch is spelled."""\n# a{sep}b{sep}c\n')
    path = tmp_path / "backend.py"
    path.write_text(src, encoding="utf-8")
    findings = scan([str(path)], settings=Settings(), use_cache=False).findings
    base = scan([str(FIXTURES / "guards.py")], settings=Settings(), use_cache=False).findings
    # Two lines were added above every finding: the comment and the blank line after it.
    assert [(f.line - 2, f.column, f.symbol) for f in findings] == [(f.line, f.column, f.symbol) for f in base]
    lines = src.split("\n")
    for f in findings:
        assert lines[f.line - 1][f.column:f.end_column] == f.symbol == "self.num_draft_tokens"
    fix_targets([str(path)])
    fixed = path.read_text(encoding="utf-8")
    assert "or ()" not in fixed and f"# a{sep}b{sep}c" in fixed
    compile(fixed, str(path), "exec")
    assert [f for f in scan([str(path)], settings=Settings(), use_cache=False).findings if f.rule == "DD001"] == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_are_reported_never_read(tmp_path):
    (tmp_path / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    os.mkfifo(tmp_path / "pipe.py")
    out = ddcheck("scan", "--no-cache", str(tmp_path), timeout=30)
    assert out.returncode == 1 and "pipe.py: cannot scan" in out.stdout and "not a regular file" in out.stdout
    assert "backend.py:" in out.stdout  # the rest of the tree was scanned
    direct = ddcheck("scan", "--no-cache", str(tmp_path / "pipe.py"), timeout=30)
    assert direct.returncode == 2 and "not a regular file" in direct.stderr  # nothing to scan: a usage error
    fix = ddcheck("fix", "--check", str(tmp_path), timeout=30)
    assert fix.returncode == 1 and "Traceback" not in fix.stderr


def test_a_file_too_deep_to_parse_is_its_own_error(tmp_path):
    (tmp_path / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    chain = " + ".join(["self.num_draft_tokens"] * 300_000)  # ast construction recurses past the limit
    (tmp_path / "deep.py").write_text(
        "class B:\n    def __init__(self, mr):\n        self.num_draft_tokens = mr.server_args.speculative_num_draft_tokens\n\n"
        "    def init_forward_metadata(self, forward_batch):\n"
        "        if forward_batch.forward_mode.is_target_verify():\n"
        f"            x = forward_batch.seq_lens + {chain}\n")
    result = scan([str(tmp_path)], settings=Settings(), use_cache=False)
    errors = {Path(e.path).name: e.message for e in result.errors}
    assert "too deeply nested" in errors["deep.py"]
    assert any(Path(f.path).name == "backend.py" for f in result.findings)
    out = ddcheck("scan", "--no-cache", str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr


def test_a_tree_file_that_is_not_python_is_said_with_check_syntax(tmp_path, monkeypatch):
    """A tree's file with no verify code is not parsed (too costly for every file); with --check-syntax
    one that does not parse is listed and counted as skipped, as an undecodable file is listed, and
    the exit code stays what the findings make it (it could hold no finding)."""
    from ddcheck.scan.api import scan_trees_with_settings
    from ddcheck.tree.sources import open_target

    (tmp_path / "backend.py").write_text((Path(__file__).resolve().parents[2] / "rules" / "DD001" / "good.py").read_text())
    (tmp_path / "broken.py").write_text("def broken(:\n    pass\n")  # no verify markers
    plain = ddcheck("scan", "--no-cache", str(tmp_path))
    assert plain.returncode == 0 and "broken.py" not in plain.stdout, plain.stdout + plain.stderr
    out = ddcheck("scan", "--no-cache", "--check-syntax", str(tmp_path))
    assert out.returncode == plain.returncode, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1].endswith(", 1 files skipped: not valid Python")
    assert any(line.startswith(f"{tmp_path / 'broken.py'}: skipped, not valid Python: does not parse") for line in lines)
    js = ddcheck("scan", "--no-cache", "--check-syntax", "--format", "json", str(tmp_path))
    assert js.returncode == 0
    import json

    doc = json.loads(js.stdout)
    assert [Path(e["path"]).name for e in doc["skipped"]] == ["broken.py"] and doc["errors"] == []
    # the forked workers' triage says it too
    monkeypatch.setattr("ddcheck.analysis.scan.PARALLEL_MIN_FILES", 1)
    pooled = scan_trees_with_settings([open_target(str(tmp_path))], Settings(check_syntax=True), jobs=2)
    assert [Path(e.path).name for e in pooled.skipped] == ["broken.py"] and not pooled.errors


@pytest.mark.parametrize("how", ["changed on disk", "write denied"])
def test_a_fix_that_is_not_written_fails_the_run(tmp_path, monkeypatch, how):
    from rich.console import Console

    from ddcheck.fix import api as fixer

    target = tmp_path / "backend.py"
    target.write_text((FIXTURES / "guards.py").read_text())
    real = fixer.write_atomic

    def interfere(path, after, before):
        if how == "write denied":
            raise PermissionError(13, "Permission denied", str(path))
        Path(path).write_text(Path(path).read_text() + "# edited by someone else\n")
        return real(path, after, before)

    from ddcheck.fix import command

    monkeypatch.setattr(command, "write_atomic", interfere)
    for non_zero_on_fix in (False, True):
        code = fixer.fix_main([str(target)], settings=Settings(), diff=False, check=False, unsafe=False,
                              out_dir=None, installed=False, exit_non_zero_on_fix=non_zero_on_fix, verify=False,
                              console=Console(file=open(os.devnull, "w")), err=Console(file=open(os.devnull, "w")))
        assert code == 1
    assert "(ddcheck fix)" not in target.read_text()  # nothing of ours was written over the file


def test_pep263_encodings_are_honoured_and_kept_by_fix(tmp_path):
    src = (FIXTURES / "guards.py").read_text().replace(
        '"""Ways the target-verify branch is spelled."""', '# -*- coding: latin-1 -*-\n"""Caf\xe9 guards."""', 1)
    path = tmp_path / "backend.py"
    path.write_bytes(src.encode("latin-1"))
    result = scan([str(path)], settings=Settings(), use_cache=False)
    assert result.errors == [] and len(result.findings) == len(
        scan([str(FIXTURES / "guards.py")], settings=Settings(), use_cache=False).findings)
    fix_targets([str(path)])
    data = path.read_bytes()
    assert b'"""Caf\xe9 guards."""' in data  # still latin-1
    compile(data, str(path), "exec")
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    errs = scan([str(bad)], settings=Settings(), use_cache=False).errors
    assert errs and "cannot be decoded" in errs[0].message


def test_a_read_error_is_not_cached(tmp_path, monkeypatch):
    from ddcheck.tree import sources

    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    real = sources.read_regular

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(sources, "read_regular", denied)
    assert "cannot be read" in scan([str(tree)], settings=Settings()).errors[0].message
    monkeypatch.setattr(sources, "read_regular", real)  # readable again; size and mtime unchanged
    again = scan([str(tree)], settings=Settings())
    assert again.errors == [] and again.findings


def test_corrupt_wheel_members_are_their_own_errors(tmp_path):
    import zipfile

    good = (FIXTURES / "guards.py").read_bytes()
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/good.py", good)
        zf.writestr("pkg/crc.py", good)
    data = bytearray(wheel.read_bytes())
    # Corrupt the CRC stored for crc.py in its local header and the central directory.
    for marker in (b"PK\x03\x04", b"PK\x01\x02"):
        start = 0
        while (i := data.find(marker, start)) != -1:
            name_at = i + (30 if marker == b"PK\x03\x04" else 46)
            if data[name_at:name_at + 10] == b"pkg/crc.py":
                crc_at = i + (14 if marker == b"PK\x03\x04" else 16)
                data[crc_at:crc_at + 4] = b"\x00\x00\x00\x00"
            start = i + 4
    wheel.write_bytes(bytes(data))
    result = scan([str(wheel)], settings=Settings(), use_cache=False)
    errors = {e.path.rsplit("!", 1)[-1]: e.message for e in result.errors}
    assert "corrupt archive member" in errors["pkg/crc.py"]
    assert any(f.path.endswith("!pkg/good.py") for f in result.findings)
    out = ddcheck("scan", "--no-cache", str(wheel))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="non-UTF-8 file names are a Linux matter")
def test_file_names_that_are_not_utf8_are_scanned_and_fixed(tmp_path):
    src = (FIXTURES / "guards.py").read_bytes()
    odd = os.path.join(os.fsencode(tmp_path), b"\xff\xfe.py")
    with open(odd, "wb") as fh:
        fh.write(src)
    for fmt in ("text", "json", "sarif", "github"):
        out = ddcheck("scan", "--no-cache", "--format", fmt, str(tmp_path))
        assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, fmt
        assert "xff" in out.stdout and "xfe.py" in out.stdout, fmt  # escaped (SARIF: percent-encoded too)
    fixed = ddcheck("fix", str(tmp_path))
    assert "internal error" not in fixed.stderr
    with open(odd, "rb") as fh:
        assert b"(ddcheck fix)" in fh.read()


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


@pytest.mark.parametrize("name,text", [
    ("laughs.yaml", LAUGHS),
    ("tag.yaml", "model-path: !!python/object/apply:os.system [echo pwned]\n"),
    ("broken.yaml", "model-path: [unclosed\n"),
])
def test_launch_yaml_is_loaded_safely(tmp_path, name, text):
    from ddcheck.config.flags import FlagTable, ParseError, merge_config_file

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ParseError, match="not valid YAML") as info:
        merge_config_file(FlagTable(release="x", flags=[]), ["--config", str(path)])
    assert "line" in str(info.value)  # where in the file


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_as_config_files_never_block(tmp_path):
    from ddcheck.config.flags import ParseError, merge_config_file

    fifo = tmp_path / "launch.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ParseError, match="not a regular file"):
        merge_config_file(None, ["--config", str(fifo)])
    pyproject = tmp_path / "pyproject.toml"
    os.mkfifo(pyproject)
    out = ddcheck("scan", "--config", str(pyproject), str(FIXTURES / "guards.py"), timeout=30)
    assert out.returncode == 2 and "cannot read configuration" in (out.stderr + out.stdout)


def test_fix_follows_a_symlink_and_keeps_the_link(tmp_path):
    real = tmp_path / "real" / "backend.py"
    real.parent.mkdir()
    real.write_text((FIXTURES / "guards.py").read_text())
    link_dir = tmp_path / "pkg"
    link_dir.mkdir()
    link = link_dir / "backend.py"
    link.symlink_to(real)
    out = ddcheck("fix", str(link))
    assert out.returncode == 0, out.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "(ddcheck fix)" in real.read_text()


def _cached_tree(tmp_path, monkeypatch):
    """A one-backend tree scanned once with a fresh cache: (cache dir, tree, backend file, its text, result)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DDCHECK_CACHE", str(cache))
    tree = tmp_path / "tree"
    tree.mkdir()
    path = tree / "backend.py"
    src = (FIXTURES / "guards.py").read_text()
    path.write_text(src)
    return cache, tree, path, src, scan([str(tree)], settings=Settings())


def test_cache_misses_an_edit_that_keeps_size_and_mtime(tmp_path, monkeypatch):
    _, tree, path, src, first = _cached_tree(tmp_path, monkeypatch)
    st = path.stat()
    # Same size, same mtime, one finding fewer: `self.num_draft_tokenz` is not C.
    edited = src.replace("self.max_extend_len = self.num_draft_tokens", "self.max_extend_len = self.num_draft_tokenz", 1)
    assert len(edited) == len(src) and edited != src
    path.write_text(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    second = scan([str(tree)], settings=Settings())
    assert len(second.findings) == len(first.findings) - 1


def test_the_stamps_key_is_the_same_in_another_process(tmp_path, monkeypatch):
    """The key of an unchanged tree's stamps does not depend on the process that computes it: a scan in
    a new process finds the content key under it and needs no digest memo."""
    cache, tree, _, _, first = _cached_tree(tmp_path, monkeypatch)
    (memo,) = (cache / "scan" / "digests").glob("*.json")
    memo.unlink()
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "ddcheck", "scan", "--format", "json", str(tree)],
                              capture_output=True, text=True, timeout=120, check=False, env=os.environ)
        doc = json.loads(proc.stdout)
        assert proc.returncode == doc.pop("exit_code") == 1 and doc == json.loads(first.to_json()), proc.stderr
        assert not memo.exists()


def test_cache_is_keyed_by_content(tmp_path, monkeypatch):
    """The same bytes written again (new inode, times) hit; a forged digest memo cannot make an edit hit."""
    import json

    cache, tree, path, src, first = _cached_tree(tmp_path, monkeypatch)

    def entries():
        return sorted(p.name for p in (cache / "scan").glob("*.json"))

    assert len(entries()) == 1
    path.unlink()
    path.write_text(src)  # identical content, another file
    assert scan([str(tree)], settings=Settings()).to_json() == first.to_json()
    assert len(entries()) == 1  # a hit: nothing new stored
    edited = src.replace("self.max_extend_len = self.num_draft_tokens", "self.max_extend_len = 0", 1)
    path.write_text(edited)
    (memo,) = (cache / "scan" / "digests").glob("*.json")  # the tree's own digest memo
    data = json.loads(memo.read_text())
    old_digest = next(iter(data.values()))[1]
    st = path.stat()
    stamp = "/".join(map(str, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)))
    memo.write_text(json.dumps({"backend.py": [stamp, "0" * 32]}))  # a forged digest
    assert old_digest != "0" * 32
    second = scan([str(tree)], settings=Settings())
    assert len(second.findings) == len(first.findings) - 1  # not the cached result of the old content
    assert "0" * 32 in memo.read_text()  # the forged digest was the one used (its stamp matched)


def test_an_unchanged_tree_is_answered_without_the_digest_memo(tmp_path, monkeypatch):
    """Where no file's stat stamp changed, the key is found under the stamps and the digest memo is not
    read; a file written again with the same bytes (new stamp) still hits, through the memo."""
    cache, tree, path, src, first = _cached_tree(tmp_path, monkeypatch)
    entries = sorted((cache / "scan").glob("*.json"))
    (memo,) = (cache / "scan" / "digests").glob("*.json")
    memo.unlink()
    assert scan([str(tree)], settings=Settings()).to_json() == first.to_json()
    assert not memo.exists()  # the memo was not needed, so not written again
    assert sorted((cache / "scan").glob("*.json")) == entries  # a hit: nothing new stored
    path.unlink()
    path.write_text(src)  # the same bytes, a new inode and times
    assert scan([str(tree)], settings=Settings()).to_json() == first.to_json()
    assert memo.exists() and sorted((cache / "scan").glob("*.json")) == entries
    assert len(list((cache / "scan" / "stamps").glob("*.json"))) == 2  # the new stamps lead to the same key
    path.write_text(src.replace("self.max_extend_len = self.num_draft_tokens", "self.max_extend_len = 0", 1))
    assert len(scan([str(tree)], settings=Settings()).findings) == len(first.findings) - 1


def test_a_report_without_quotes_does_not_read_the_sources(tmp_path, monkeypatch):
    """The text of the files with findings is kept apart: a JSON report's hit does without it, the text
    report's needs it (and scans again when it is gone)."""
    cache, tree, _, _, first = _cached_tree(tmp_path, monkeypatch)
    assert first.sources
    (texts,) = (cache / "scan" / "sources").glob("*.json")
    texts.unlink()
    entries = sorted((cache / "scan").glob("*.json"))
    unquoted = scan([str(tree)], settings=Settings(), quoted=False)
    assert unquoted.to_json() == first.to_json() and not unquoted.sources and not texts.exists()
    quoted = scan([str(tree)], settings=Settings())
    assert quoted.sources == first.sources and texts.exists()
    assert sorted((cache / "scan").glob("*.json")) == entries


def test_only_the_quoted_lines_are_kept_and_they_quote_as_the_file_does(tmp_path, monkeypatch):
    """Of a file with findings, the text report quotes the lines the findings (and its suppression
    comments) are on: only those are kept, as the file has them (less the line break), and a repeat
    scan quotes the same."""
    import json

    cache, tree, path, src, first = _cached_tree(tmp_path, monkeypatch)
    (display,) = first.sources
    lines = src.splitlines(keepends=True)
    assert first.sources[display] == {f.line: lines[f.line - 1].rstrip("\n") for f in first.findings}
    (kept,) = (cache / "scan" / "sources").glob("*.json")
    assert json.loads(kept.read_text()) == {display: [[n, t] for n, t in sorted(first.sources[display].items())]}
    assert len(first.sources[display]) < len(lines)
    assert scan([str(tree)], settings=Settings()).sources == first.sources
    kept.write_text(json.dumps({display: [["1", "x"]]}))  # a line number as text: a miss, scanned again
    assert scan([str(tree)], settings=Settings()).sources == first.sources


def test_cache_holds_data_not_code_and_survives_corruption(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DDCHECK_CACHE", str(cache))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    first = scan([str(tree)], settings=Settings())
    entries = [p for p in (cache / "scan").rglob("*") if p.is_file()]  # results and the digest memo
    assert entries and all(p.suffix == ".json" for p in entries)
    for p in entries:
        p.write_bytes(b"\x80\x04\x95 not json, not a pickle either")
    again = scan([str(tree)], settings=Settings())
    assert again.to_json() == first.to_json()
    assert [f.fix for f in again.findings] == [f.fix for f in first.findings]  # internal fields survive
    assert again.sources == first.sources and again.sources  # the reporter's quoted lines too
    import json

    assert all(json.loads(p.read_text()) for p in (cache / "scan").rglob("*.json"))  # rewritten


@pytest.mark.parametrize("tamper", [
    lambda f: f.update(line=str(f["line"])),                       # a number as text
    lambda f: f.update(severity="fatal"),                          # not a severity
    lambda f: f.update(resolver=1),                                # an int where a bool belongs
    lambda f: f.update(extra="x"),                                 # a field findings do not have
    lambda f: f["fix"]["edits"][0].update(kind="exec"),            # not an edit kind
    lambda f: f["fix"]["edits"][0].update(column=None),            # a missing position
], ids=["line-text", "severity", "bool", "extra-field", "edit-kind", "edit-column"])
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path, monkeypatch, tamper):
    """Valid JSON is not trusted either: each field is type-checked back into a finding, and an entry
    that fails is scanned again (and rewritten), never handed to the fixer or a reporter."""
    import json

    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    first = scan([str(tree)], settings=Settings())
    entry = next(p for p in (tmp_path / "cache" / "scan").glob("*.json"))
    data = json.loads(entry.read_text())
    tamper(next(f for f in data["findings"] if f["fix"]))
    entry.write_text(json.dumps(data))
    again = scan([str(tree)], settings=Settings())
    assert again.to_json() == first.to_json() and [f.fix for f in again.findings] == [f.fix for f in first.findings]
    assert json.loads(entry.read_text()) != data  # rewritten by the new scan


@pytest.mark.parametrize("eol", ["\r", "\r\n"], ids=["CR", "CRLF"])
def test_fix_keeps_every_kind_of_line_ending(tmp_path, eol):
    src = (FIXTURES / "guards.py").read_text()
    lf, other = tmp_path / "lf.py", tmp_path / "other.py"
    lf.write_bytes(src.encode())
    other.write_bytes(src.replace("\n", eol).encode())
    fix_targets([str(lf), str(other)])
    fixed_lf, fixed_other = lf.read_bytes(), other.read_bytes()
    assert b"(ddcheck fix)" in fixed_other
    assert fixed_other == fixed_lf.replace(b"\n", eol.encode())  # the same edits, the file's own endings


def test_fix_out_refuses_to_overwrite_or_copy_into_itself(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    inside = ddcheck("fix", str(src), "--out", str(src / "copy"))
    assert inside.returncode == 2 and "inside the target" in inside.stderr and not (src / "copy").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.py").write_text("mine\n")
    refused = ddcheck("fix", str(src), "--out", str(busy))
    assert refused.returncode == 2 and "not empty" in refused.stderr
    assert sorted(p.name for p in busy.iterdir()) == ["keep.py"]
    forced = ddcheck("fix", str(src), "--out", str(busy), "--force")
    assert forced.returncode == 0 and (busy / "keep.py").read_text() == "mine\n"
    assert "(ddcheck fix)" in (busy / "backend.py").read_text()
    assert "(ddcheck fix)" not in (src / "backend.py").read_text()


def test_fix_keeps_a_byte_order_mark(tmp_path):
    path = tmp_path / "backend.py"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "guards.py").read_bytes())
    fix_targets([str(path)])
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and not data.startswith(b"\xef\xbb\xbf\xef\xbb\xbf")
    assert b"(ddcheck fix)" in data


def test_fix_out_copies_a_tree_with_loops_fifos_and_links_safely(tmp_path):
    """A directory symlink loop is not followed, a FIFO is not opened, a file symlink is copied as
    a file (so the fix never writes through it to the original), and the skips make the exit 1."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    backend = src / "pkg" / "backend.py"
    backend.write_text((FIXTURES / "guards.py").read_text())
    outside = tmp_path / "outside.py"
    outside.write_text((FIXTURES / "guards.py").read_text())
    (src / "pkg" / "linked.py").symlink_to(outside)
    (src / "pkg" / "loop").symlink_to(src)  # a directory symlink back up: a loop
    os.mkfifo(src / "pkg" / "pipe")
    before = outside.read_bytes()
    out = tmp_path / "out"
    r = ddcheck("fix", str(src), "--out", str(out), timeout=120)
    assert r.returncode == 1, r.stderr  # fixed what it could; the skips are reported
    assert "loop" in r.stderr and "directory symlink" in r.stderr and "pipe" in r.stderr
    assert "Traceback" not in r.stderr
    copied = out / "pkg" / "linked.py"
    assert copied.is_file() and not copied.is_symlink() and "(ddcheck fix)" in copied.read_text()
    assert outside.read_bytes() == before  # the link's target, outside the copy, untouched
    assert not (out / "pkg" / "loop").exists() and not (out / "pkg" / "pipe").exists()
    assert "(ddcheck fix)" in (out / "pkg" / "backend.py").read_text()


def test_fix_out_of_a_wheel_checks_every_member(tmp_path):
    """A corrupt (CRC-mismatched) member and a member named to climb out are skipped and reported;
    nothing is written outside the copy, no partial file is left."""
    import zipfile

    good = (FIXTURES / "guards.py").read_bytes()
    wheel = tmp_path / "sglang-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("sglang/__init__.py", b"")
        zf.writestr("sglang/srt/layers/attention/backend.py", good)
        zf.writestr("sglang/srt/broken.py", b"x = 1\n" * 50)
        zf.writestr("../escape.py", b"print('out')\n")
    data = bytearray(wheel.read_bytes())
    at = data.find(b"x = 1\n" * 50)
    data[at] = ord("y")  # the member's bytes no longer match its CRC
    wheel.write_bytes(bytes(data))
    out = tmp_path / "out"
    r = ddcheck("fix", str(wheel), "--out", str(out), timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "broken.py" in r.stderr and "corrupt" in r.stderr and "escape.py" in r.stderr
    assert not (tmp_path / "escape.py").exists() and not (out.parent / "escape.py").exists()
    assert not (out / "sglang" / "srt" / "broken.py").exists()
    assert not list(out.rglob("*.ddcheck-copy"))  # no partial file left behind
    assert "(ddcheck fix)" in (out / "sglang" / "srt" / "layers" / "attention" / "backend.py").read_text()


def test_the_code_digest_follows_each_file_stamp_not_bytecode_or_docs(tmp_path):
    """The code part of every cache key: a rewrite of a code or rule file changes it (even with the same
    bytes: a reinstall), bytecode caches and other files do not."""
    from ddcheck.scan.cache import stamps_digest

    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "rule.toml").write_text('id = "DD001"\n')
    first = stamps_digest([pkg])
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "README.md").write_text("docs")
    assert stamps_digest([pkg]) == first
    for name in ("a.py", "rule.toml"):
        before = stamps_digest([pkg])
        # as an install writes it: a new file put in place (a new inode, whatever the clock's grain)
        (pkg / "new").write_bytes((pkg / name).read_bytes())
        os.replace(pkg / "new", pkg / name)
        assert stamps_digest([pkg]) != before, name
    assert stamps_digest([pkg, tmp_path / "gone"]) != stamps_digest([pkg])  # roots are part of it
    one = pkg / "a.py"  # a root that is a file: its own stamp
    before = stamps_digest([one])
    (pkg / "new").write_bytes(one.read_bytes())
    os.replace(pkg / "new", one)
    assert stamps_digest([one]) != before


def test_the_code_digest_covers_every_package_of_ddcheck(tmp_path):
    """An edit anywhere in ddcheck's code (the analysis, not only the scan's own package) is a new code
    digest: a copy of the package, one analysis file put in place again, asked in two fresh processes."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "ddcheck", tmp_path / "ddcheck", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "rules", tmp_path / "rules", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text("")

    def digest() -> str:
        out = subprocess.run([sys.executable, "-c", "from ddcheck.scan.cache import code_digest; print(code_digest())"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    before = digest()
    engine = tmp_path / "ddcheck" / "analysis" / "engine.py"
    (tmp_path / "new").write_bytes(engine.read_bytes())
    os.replace(tmp_path / "new", engine)
    assert digest() != before


def test_kept_rule_definitions_are_keyed_by_their_sources_alone(tmp_path, monkeypatch):
    """The rule definitions kept as JSON are found under the stamps of the rule folders and of
    ``rules.py``, which reads them: a one-file scan does not stat the rest of ddcheck's code for them."""
    from ddcheck import rules
    from ddcheck.scan import cache

    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    first = rules.all_rules.__wrapped__()

    def whole_code():
        raise AssertionError("the whole code digest was asked for the rule definitions")

    monkeypatch.setattr(cache, "code_digest", whole_code)
    monkeypatch.setattr(rules, "_definitions", lambda: pytest.fail("read from TOML again"))
    assert rules.all_rules.__wrapped__() == first
    (kept,) = (tmp_path / "cache" / "scan" / "code").glob("rules-*.json")
    assert kept.name == f"rules-{cache.stamps_digest([rules.rules_dir(), Path(rules.__file__)])}.json"


@pytest.mark.parametrize("tamper, used", [
    (lambda d: d[0].update(summary="kept"), True),      # fits the definition: it is what is read
    (lambda d: d[0].update(severity="fatal"), False),   # not a severity
    (lambda d: d[0].update(extra="x"), False),          # a key the definition does not have
    (lambda d: d[0].pop("name"), False),                # a key it lacks
    (lambda d: d[0].update(name=1), False),             # not text
    (lambda d: d.clear() or d.append("DD001"), False),  # not a definition at all
], ids=["fits", "severity", "extra-key", "missing-key", "int", "not-a-dict"])
def test_kept_rule_definitions_are_data_checked_before_use(tmp_path, monkeypatch, tamper, used):
    """Rule definitions are read from TOML once per code and kept as JSON: what is kept must fit the
    definition, or the TOML is read again."""
    import json

    from ddcheck import rules

    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    toml = rules._by_id(rules._definitions())
    assert rules.all_rules.__wrapped__() == toml
    (kept,) = (tmp_path / "cache" / "scan" / "code").glob("rules-*.json")
    data = json.loads(kept.read_text())
    tamper(data)
    kept.write_text(json.dumps(data))
    again = rules.all_rules.__wrapped__()
    assert (again != toml) is used
    assert used == (next(iter(again.values())).summary == "kept")


def test_a_listing_for_the_cache_stats_as_it_lists_and_one_without_stats_nothing(tmp_path, monkeypatch):
    """The result cache asks every file's stat stamp: a stamped listing takes them as it lists (what a
    later ``os.stat`` would say); a listing for a scan without the cache stats no file."""
    from ddcheck.tree import sources

    (tmp_path / "pkg").mkdir()
    for name in ("a.py", "pkg/b.py"):
        (tmp_path / name).write_text("x = 1\n")
    stamped = sources.open_target(str(tmp_path), stamped=True)
    disks = {f.disk for f in stamped.files}
    calls = []
    real_stat = os.stat
    monkeypatch.setattr(sources.os, "stat", lambda p, *a, **k: calls.append(p) or real_stat(p, *a, **k))

    def file_stats() -> int:
        return sum(str(p) in disks for p in calls)

    assert [f.stamp for f in stamped.files] == [sources._stamp(real_stat(f.disk)) for f in stamped.files]
    assert file_stats() == 0  # the stamps were taken while listing
    plain = sources.open_target(str(tmp_path))
    assert not any("_stamp" in f.__dict__ for f in plain.files) and file_stats() == 0
    assert [f.stamp for f in plain.files] == [f.stamp for f in stamped.files] and file_stats() == 2


@pytest.mark.parametrize("text", ["a = 1\nb = 2\n", "a = 1\nb = 2", "a = 1\r\nb = 2\r\n", "a = 1\rb = 2\n", "",
                                  "\n\n", "s = '\u2028'\x0c\nt = 1\n"])
def test_a_modules_line_is_the_physical_line_as_python_counts_them(text):
    """The quoted lines come from the line table, one at a time: each is the line ``split_lines`` gives
    (line ends \\n, \\r\\n or \\r only), and past the last there is none."""
    from ddcheck.analysis.module import ModuleModel
    from ddcheck.tree.sources import SourceFile, split_lines

    m = ModuleModel.parse(SourceFile(display="t.py", relpath="t.py", _read=lambda: text.encode()), text.encode())
    lines = split_lines(text)
    assert [m.line(n) for n in range(len(lines) + 2)] == [None, *lines, None]


def _fuzzed(tmp_path: Path, kind: str) -> tuple[Path, bool]:
    """The bad inputs of this file, one target each: (target, whether the run also lists an error, so
    that even a clean fix exits 1)."""
    guards = (FIXTURES / "guards.py").read_text()
    tree = tmp_path / "tree"
    tree.mkdir()
    backend = tree / "backend.py"
    if kind.startswith("sep-"):
        sep = chr(int(kind[4:], 16))
        backend.write_text(guards.replace('"""Ways the target-verify branch is spelled."""',
                                          f'"""Ways the target-verify branch is spelled."""\n# a{sep}b{sep}c\n'))
    elif kind in ("CR", "CRLF"):
        backend.write_bytes(guards.replace("\n", "\r" if kind == "CR" else "\r\n").encode())
    elif kind == "latin-1":
        backend.write_bytes(guards.replace('"""Ways the target-verify branch is spelled."""',
                                           '# -*- coding: latin-1 -*-\n"""Caf\xe9 guards."""', 1).encode("latin-1"))
    elif kind == "bom":
        backend.write_bytes(b"\xef\xbb\xbf" + guards.encode())
    elif kind == "non-utf8-name":
        with open(os.path.join(os.fsencode(tree), b"\xff\xfe.py"), "wb") as fh:
            fh.write(guards.encode())
    elif kind == "fifo":
        backend.write_text(guards)
        os.mkfifo(tree / "pipe.py")
        return tree, True
    elif kind == "symlink":
        outside = tmp_path / "outside.py"
        outside.write_text(guards)
        backend.symlink_to(outside)
    elif kind == "too-deep":
        backend.write_text(guards)
        chain = " + ".join(["self.num_draft_tokens"] * 300_000)
        (tree / "deep.py").write_text(
            "class B:\n    def __init__(self, mr):\n        self.num_draft_tokens = mr.server_args.speculative_num_draft_tokens\n\n"
            "    def init_forward_metadata(self, forward_batch):\n"
            "        if forward_batch.forward_mode.is_target_verify():\n"
            f"            x = forward_batch.seq_lens + {chain}\n")
        return tree, True
    elif kind == "corrupt-wheel":
        import zipfile

        wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("pkg/backend.py", guards)
            zf.writestr("pkg/broken.py", b"x = 1\n" * 50)
        data = bytearray(wheel.read_bytes())
        data[data.find(b"x = 1\n" * 50)] = ord("y")  # the member no longer matches its CRC
        wheel.write_bytes(bytes(data))
        return wheel, True
    return tree, False


FUZZED = [f"sep-{ord(c):04X}" for c in SEPARATORS] + [
    "CR", "CRLF", "latin-1", "bom", "non-utf8-name", "fifo", "symlink", "too-deep", "corrupt-wheel"]


@pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and non-UTF-8 names are Linux matters")
@pytest.mark.parametrize("kind", FUZZED)
def test_fuzzed_inputs_under_diff_check_and_in_place(tmp_path, kind):
    """Each bad input above through `fix --diff`, `fix --check` and the fix itself (a wheel: `--out`):
    never an internal error; the dry runs write nothing and agree with what the fix then writes."""
    target, listed = _fuzzed(tmp_path, kind)

    def snapshot() -> dict:
        return {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_fifo()}

    before = snapshot()
    diff = ddcheck("fix", "--diff", str(target), timeout=120)
    check = ddcheck("fix", "--check", str(target), timeout=120)
    for r in (diff, check):
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert snapshot() == before  # the dry runs wrote nothing
    assert diff.returncode == (1 if listed else 0) and "(ddcheck fix)" in diff.stdout, diff.stderr
    assert check.returncode == 1 and "would fix" in check.stdout, check.stderr
    out = tmp_path / "out"
    fixed = ddcheck("fix", str(target), *(["--out", str(out)] if kind == "corrupt-wheel" else []), timeout=120)
    assert "internal error" not in fixed.stderr and "Traceback" not in fixed.stderr, fixed.stderr
    assert fixed.returncode == (1 if listed else 0), fixed.stderr
    written = [p for p in (out if kind == "corrupt-wheel" else tmp_path).rglob("*.py")
               if p.is_file() and not p.is_fifo() and b"(ddcheck fix)" in p.read_bytes()]
    assert written and ddcheck("fix", "--check", str(out / "pkg" if kind == "corrupt-wheel" else target),
                               timeout=120).returncode == (1 if listed and kind != "corrupt-wheel" else 0)
