"""Fuzzed file trees and wheels (hypothesis): whatever a target holds — nested packages, garbage and
non-UTF-8 files, file and directory symlinks (dangling, looping, pointing out), FIFOs, odd names;
wheels with corrupt, oversized-looking or climbing members — `ddcheck scan` and `ddcheck fix --out`
end with a documented exit code and no traceback, never change a byte of the target, and write
nothing outside the output directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

GUARDS = (Path(__file__).resolve().parents[2] / "fixtures" / "analysis" / "guards.py").read_bytes()
CONTENTS = st.sampled_from([GUARDS, b"", b"\xff\xfe garbage \x00", b"x = (\n", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
                            GUARDS.replace(b"\n", b"\r"), b"def f(:\n"])
NAMES = st.sampled_from(["a.py", "b.py", "pkg", "sub", "__init__.py", "x y.py", "caf\u00e9.py", "n.txt", ".hidden.py"])
KINDS = st.sampled_from(["file", "file", "file", "dir", "link-file", "link-dir-up", "link-out", "dangling", "fifo",
                         "badname"])


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, timeout=120,
                          env={**os.environ, "DDCHECK_CACHE": os.environ.get("DDCHECK_FUZZ_CACHE", "/tmp/ddcheck-fuzz")})


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (not following links): what it is and, for files, its bytes' hash."""
    out = {}
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = Path(here) / name
            key = str(p.relative_to(root))  # undecodable names round-trip as surrogate escapes
            if p.is_symlink():
                out[key] = "link:" + os.readlink(p)
            elif p.is_file():
                out[key] = hashlib.blake2b(p.read_bytes(), digest_size=8).hexdigest()
            elif p.is_dir():
                out[key] = "dir"
            else:
                out[key] = "special"
    return out


@st.composite
def trees(draw):
    entries = draw(st.lists(st.tuples(st.integers(0, 3), NAMES, KINDS, CONTENTS), min_size=1, max_size=12))
    return entries


def build(root: Path, outside: Path, entries) -> None:
    dirs = [root]
    for parent, name, kind, content in entries:
        base = dirs[min(parent, len(dirs) - 1)]
        path = base / name
        if os.path.lexists(path):
            continue
        if kind == "file":
            path.write_bytes(content)
        elif kind == "dir":
            path.mkdir()
            dirs.append(path)
        elif kind == "link-file":
            path.symlink_to(outside / "target.py")
        elif kind == "link-dir-up":
            path.symlink_to(root)
        elif kind == "link-out":
            path.symlink_to(outside)
        elif kind == "dangling":
            path.symlink_to(root / "no-such-file.py")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "badname":
            (base / os.fsdecode(b"bad\xff" + name.encode())).write_bytes(content)


FUZZ_EXAMPLES = int(os.environ.get("DDCHECK_FUZZ_EXAMPLES", "12"))  # raise locally for a longer hunt


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=trees())
def test_fuzzed_trees_scan_and_fix_out(tmp_path_factory, entries):
    work = tmp_path_factory.mktemp("fuzz")
    root, outside, out = work / "src", work / "outside", work / "out"
    root.mkdir()
    outside.mkdir()
    (outside / "target.py").write_bytes(GUARDS)
    build(root, outside, entries)
    before, before_out = snapshot(root), snapshot(outside)
    scan = run("scan", str(root), "--no-cache")
    assert scan.returncode in (0, 1, 2) and b"Traceback" not in scan.stderr, scan.stderr[-500:]
    fix = run("fix", str(root), "--out", str(out))
    assert fix.returncode in (0, 1, 2) and b"Traceback" not in fix.stderr, fix.stderr[-500:]
    assert snapshot(root) == before and snapshot(outside) == before_out  # the target and beyond: untouched
    assert {p.name for p in work.iterdir()} <= {"src", "outside", "out"}  # nothing written next to them
    if out.exists():
        for here, _, files in os.walk(out, followlinks=False):
            for name in files:
                assert not (Path(here) / name).is_symlink()  # the copy holds no link to write through


MEMBERS = st.lists(st.tuples(st.sampled_from(["sglang/srt/a.py", "sglang/srt/layers/attention/b.py", "../up.py",
                                              "/abs.py", "sglang/../../climb.py", "sglang/srt/c.txt", "sglang/dir/"]),
                             CONTENTS, st.booleans()), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=MEMBERS, deflate=st.booleans())
def test_fuzzed_wheels_scan_and_fix_out(tmp_path_factory, members, deflate):
    work = tmp_path_factory.mktemp("wheel")
    wheel = work / "sglang-0.0.1-py3-none-any.whl"
    corrupt = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        for name, content, bad in members:
            if name in zf.namelist():
                continue
            zf.writestr(name, content + b"#" * 64)
            if bad:
                corrupt.append(content + b"#" * 64)
    if corrupt and not deflate:  # flip a byte of a stored member: its CRC no longer matches
        data = bytearray(wheel.read_bytes())
        at = data.find(corrupt[0])
        if at >= 0:
            data[at + len(corrupt[0]) - 1] ^= 0xFF
            wheel.write_bytes(bytes(data))
    before = wheel.read_bytes()
    out = work / "out"
    scan = run("scan", str(wheel), "--no-cache")
    assert scan.returncode in (0, 1, 2) and b"Traceback" not in scan.stderr, scan.stderr[-500:]
    fix = run("fix", str(wheel), "--out", str(out))
    assert fix.returncode in (0, 1, 2) and b"Traceback" not in fix.stderr, fix.stderr[-500:]
    assert wheel.read_bytes() == before
    assert {p.name for p in work.iterdir()} <= {wheel.name, "out"}  # no member climbed out
    assert not Path("/abs.py").exists()
    if out.exists():
        assert not list(out.rglob("*.ddcheck-copy"))
