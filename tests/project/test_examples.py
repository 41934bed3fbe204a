"""The examples of the README and docs/ run as shown. Each ```console block is a shell session: its
``$ `` lines run in order, in one fresh working directory, through ``python -m ddcheck`` (the
``ddcheck`` script's module), and each exits with the code its comment states (``# ... exit N ...``).
A block that docs/ copies from the README runs once. An example that cannot run here says why in
NOT_RUN, and is reported as skipped with that reason. An example that runs a release's own code
(smoke's kernels on the CPU, config's start-up code, a copy of a whole wheel) takes 15-60 s on a
2-core machine: those (COSTLY) run, block by block, when DDCHECK_EXAMPLES_ALL=1 is set, and are skipped
with that reason otherwise (tests/smoke/test_smoke.py, test_config.py and test_fix.py run the same
commands on the same releases).

The stand-ins are made real in the working directory: ``path/to/sglang`` is a copy of the bundled demo
(fixtures/demo), ``path/to/backend.py`` a copy of its toy backend, ``python/sglang`` a DDTree fork's
package (fixtures/trees/newer_ddtree), ``launch.yaml`` an SGLang --config file, and ``/models/draft`` a
model folder; ``/tmp/...`` is a folder of the test's own. ``sglang==VER`` is the release wheel,
downloaded once into the wheel cache (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
EXIT = re.compile(r"\bexits? (\d)\b")

NOT_RUN = {
    "ddcheck fix --installed":
        "patches the installed sglang in site-packages; there is none to patch in a test",
    "ddcheck config -- python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
    "--speculative-algorithm DDTREE --speculative-dflash-block-size 8 --speculative-ddtree-budget 16 "
    "--attention-backend triton":
        "reads the installed sglang, which must be a DDTree fork (no release has DDTREE); the fork "
        "example in the last block runs a launch against a fork's tree",
    "ddcheck config --smoke --sglang python/sglang -- ...":
        "schematic: `...` stands for a launch's arguments",
    "ddcheck config --gpu H100 -- ...":
        "schematic: `...` stands for a launch's arguments",
    "ddcheck guard -- python -m sglang.launch_server --model-path M --speculative-algorithm DDTREE ...":
        "starts an SGLang server: needs a GPU, a model and an installed sglang",
    "ddcheck guard --mode warn --log /var/log/ddcheck-guard.jsonl -- python -m sglang.launch_server ...":
        "starts an SGLang server: needs a GPU, a model and an installed sglang",
    "DDCHECK_GUARD=raise python -m sglang.launch_server ...":
        "starts an SGLang server: needs a GPU, a model and an installed sglang",
    "git clone -b <branch> https://github.com/<owner>/sglang && cd sglang":
        "clones a fork's branch (network, a placeholder URL); python/sglang stands for it below",
    'ddcheck smoke python/sglang --launch "python -m sglang.launch_server ..."':
        "schematic: `...` stands for a launch's arguments",
    "ddcheck smoke python/sglang":
        "runs a fork's own Triton kernels; the stand-in fork (fixtures/trees/newer_ddtree) has none",
}

ALL = os.environ.get("DDCHECK_EXAMPLES_ALL") == "1"
COSTLY = ("ddcheck smoke sglang==", "ddcheck config --sglang sglang==", "ddcheck fix sglang==",
          "ddcheck audit")  # an audit runs smoke per cell: minutes (tests/audit/test_audit.py runs a small one)


@dataclass(frozen=True)
class Example:
    page: str      # README.md, docs/smoke.md, ...
    line: int      # of the `$ ` line, 1-based
    block: int     # the console block's number in its page, from 0
    command: str   # as shown, continuation lines joined
    comment: str   # after ` #`, without it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def exit_code(self) -> int | None:
        m = EXIT.search(self.comment)
        return int(m.group(1)) if m else None


def split_comment(line: str) -> tuple[str, str]:
    """``command  # comment`` -> (command, comment): the first ``#`` after a blank, outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i and line[i - 1].isspace():
            return line[:i].strip(), line[i + 1:].strip()
    return line.strip(), ""


def examples(text: str, page: str = "README.md") -> list[Example]:
    out: list[Example] = []
    lines = text.splitlines()
    block, inside, i = -1, False, 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("```"):
            inside = not inside and stripped == "```console"
            block += inside
        elif inside and stripped.startswith("$ "):
            start, parts = i, [stripped[2:]]
            while parts[-1].split(" #")[0].rstrip().endswith("\\"):  # a continued command
                command, comment = split_comment(parts[-1])
                parts[-1] = command.rstrip("\\").rstrip() + ("  # " + comment if comment else "")
                i += 1
                parts.append(lines[i].strip())
            pieces = [split_comment(p) for p in parts]
            out.append(Example(page, start + 1, block, " ".join(c for c, _ in pieces if c),
                               " ".join(k for _, k in pieces if k)))
        i += 1
    return out


def unique_blocks(found: list[Example]) -> list[list[Example]]:
    """The console blocks, each once: a copy (same commands, same comments) is left out."""
    blocks: dict[tuple[str, int], list[Example]] = {}
    for e in found:
        blocks.setdefault((e.page, e.block), []).append(e)
    seen, out = set(), []
    for block in blocks.values():
        key = tuple((e.command, e.comment) for e in block)
        if key not in seen:
            seen.add(key)
            out.append(block)
    return out


EXAMPLES = [e for p in PAGES for e in examples(p.read_text(encoding="utf-8"), str(p.relative_to(REPO)))]
BLOCKS = unique_blocks(EXAMPLES)
RUN = [[e for e in b if e.command not in NOT_RUN and not e.command.startswith(COSTLY)] for b in BLOCKS]
RUN = [b for b in RUN if b]
SLOW = [[e for e in b if e.command not in NOT_RUN and e.command.startswith(COSTLY)] for b in BLOCKS]
SLOW = [b for b in SLOW if b]
SKIPPED = [e for b in BLOCKS for e in b if e.command in NOT_RUN]


def stage(cwd: Path, tmp: Path) -> dict[str, str]:
    """Make the stand-ins real under ``cwd``; returns the absolute ones to replace."""
    shutil.copytree(REPO / "fixtures" / "demo", cwd / "path" / "to" / "sglang")
    shutil.copy(REPO / "fixtures" / "demo" / "toy_triton_backend.py", cwd / "path" / "to" / "backend.py")
    shutil.copytree(REPO / "fixtures" / "trees" / "newer_ddtree" / "sglang", cwd / "python" / "sglang")
    shutil.copy(REPO / "fixtures" / "launch" / "eagle_ok.yaml", cwd / "launch.yaml")
    (tmp / "models" / "draft").mkdir(parents=True)
    (tmp / "models" / "draft" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (tmp / "out").mkdir()
    return {"/models/": f"{tmp / 'models'}/", "/tmp/": f"{tmp / 'out'}/"}


def argv(example: Example, absolute: dict[str, str]) -> list[str]:
    words = shlex.split(example.command)
    assert words[0] == "ddcheck", f"{example.where}: not a ddcheck command; say why in NOT_RUN"
    for i, w in enumerate(words):
        old = next((o for o in absolute if w.startswith(o)), None)  # one stand-in per word, once
        words[i] = absolute[old] + w[len(old):] if old else w
    return [sys.executable, "-m", "ddcheck", *words[1:]]


def test_every_example_states_its_exit_code_or_why_it_does_not_run():
    unstated = [f"{e.where}: {e.command}" for e in EXAMPLES
                if e.exit_code is None and e.command not in NOT_RUN]
    assert unstated == []
    assert sorted(set(NOT_RUN) - {e.command for e in EXAMPLES}) == []  # no reason outlives its example


def test_the_examples_are_found():
    assert {e.page for e in EXAMPLES} >= {"README.md", "docs/scan.md", "docs/fix.md", "docs/smoke.md",
                                          "docs/config.md", "docs/guard.md", "docs/forks.md"}
    assert sum(map(len, RUN)) > 10 and sum(map(len, SLOW)) >= 5
    first = EXAMPLES[0]
    assert (first.page, first.command, first.exit_code) == ("README.md", "ddcheck scan sglang==0.5.10", 1)


def run(examples: list[Example], tmp_path: Path) -> list[str]:
    """Run ``examples`` in order in one fresh working directory; what exited otherwise than stated."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    absolute = stage(cwd, tmp_path)
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    wrong = []
    for e in examples:
        proc = subprocess.run(argv(e, absolute), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        if proc.returncode != e.exit_code:
            wrong.append(f"{e.where}: {e.command}: exit {proc.returncode}, the page says {e.exit_code}\n"
                         f"{(proc.stdout + proc.stderr)[-1500:]}")
    return wrong


def test_the_first_command_scans_the_demo_where_no_sglang_is_installed(tmp_path):
    """The README's *Run it*: ``ddcheck scan`` with no target and no sglang says so and scans the demo."""
    from importlib.util import find_spec

    if find_spec("sglang") is not None:
        pytest.skip("an sglang is installed here, and `ddcheck scan` reads it")
    run_it = README.read_text(encoding="utf-8").split("```", 1)[0]
    stated = re.search(r"exit code (\d)", run_it)
    assert stated, "the README's Run it states no exit code"
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "scan"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == int(stated.group(1)), proc.stdout + proc.stderr
    assert "demo" in proc.stdout + proc.stderr


@pytest.mark.parametrize("block", RUN, ids=[b[0].where for b in RUN])
def test_a_console_block_runs_as_shown(block, tmp_path):
    assert run(block, tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("block", SLOW, ids=[b[0].where for b in SLOW])
def test_the_examples_that_run_a_release_run_as_shown(block, tmp_path):
    """A block's examples that run a release's code, in order (a fixed copy, then the smoke of it)."""
    if not ALL:
        pytest.skip(f"{len(block)} example(s) that run a release's own code, 15-60 s each on 2 cores: "
                    "set DDCHECK_EXAMPLES_ALL=1")
    assert run(block, tmp_path) == []


@pytest.mark.parametrize("example", SKIPPED, ids=lambda e: e.where)
def test_an_example_that_cannot_run_here_says_why(example):
    pytest.skip(NOT_RUN[example.command])


# ------------------------------------------------------------------------------- the reading can fail


def test_the_reading_joins_continued_lines_and_splits_comments():
    text = ("```console\n$ ddcheck config -- python -m x \\\n    --flag '#not a comment'   # exit 2: why\n"
            "$ ddcheck rules\n```\n```bash\n$ ddcheck scan   # exit 0\n```\n")
    got = examples(text)
    assert [(e.line, e.block, e.command, e.comment, e.exit_code) for e in got] == [
        (2, 0, "ddcheck config -- python -m x --flag '#not a comment'", "exit 2: why", 2),
        (4, 0, "ddcheck rules", "", None)]


def test_a_copied_block_runs_once():
    a = examples("```console\n$ ddcheck rules   # exit 0\n```\n", "README.md")
    b = examples("```console\n$ ddcheck rules   # exit 0\n```\n", "docs/x.md")
    c = examples("```console\n$ ddcheck rules   # exit 0: listed\n```\n", "docs/y.md")
    assert [[e.page for e in block] for block in unique_blocks(a + b + c)] == [["README.md"], ["docs/y.md"]]
