"""Every command's ``--help`` at 80 columns: no line past the edge, prose broken only where rich had to
wrap it (never at a line break of the docstring), and every word of the source help on the screen (a
``[...]`` that rich reads as markup vanishes silently)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from rich.cells import cell_len
from rich.text import Text
from typer.main import get_command
from typer.testing import CliRunner

from ddcheck.cli.app import app

WIDTH = 80
# typer prints the description with one column of padding on each side
PROSE_WIDTH = WIDTH - 2
BOX = "│╭╮╰╯─"


def render(application: typer.Typer, args: list[str]) -> str:
    result = CliRunner().invoke(application, [*args, "--help"], env={"COLUMNS": str(WIDTH)}, color=False)
    assert result.exit_code == 0, result.output
    return Text.from_ansi(result.output).plain  # FORCE_COLOR or a CI's TTY flag would add styles


def description(screen: str) -> list[list[str]]:
    """The prose between the usage line and the first box, as paragraphs of rendered lines."""
    lines = screen.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Usage:")) + 1
    end = next((i for i, ln in enumerate(lines) if ln.startswith("╭")), len(lines))
    paragraphs: list[list[str]] = [[]]
    for ln in lines[start:end]:
        if ln.strip():
            paragraphs[-1].append(ln.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def epilog(screen: str) -> list[list[str]]:
    """The prose after the last box (the examples), as paragraphs of rendered lines."""
    lines = screen.splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.startswith("╰")), default=len(lines)) + 1
    paragraphs: list[list[str]] = [[]]
    for ln in lines[start:]:
        if ln.strip():
            paragraphs[-1].append(ln.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def stray_breaks(paragraphs: list[list[str]]) -> list[str]:
    """Line breaks rich did not have to make: the next line's first word would have fitted."""
    return [f"{a!r} / {b!r}" for p in paragraphs for a, b in zip(p, p[1:])
            if cell_len(a) + 1 + cell_len(b.split()[0]) <= PROSE_WIDTH]


def source_texts(command) -> list[str]:
    """The help a command declares (its paragraphs and each parameter's), as the words that must show."""
    texts = [p for p in (command.help or "").split("\n\n")] + (command.epilog or "").split("\n\n")
    texts += [p.help for p in command.params if getattr(p, "help", None)]
    return [" ".join(re.sub(r"\[/?bold\]", "", t).replace("\\[", "[").split()) for t in texts if t.strip()]


def flat(screen: str) -> str:
    return " ".join(screen.translate({ord(c): " " for c in BOX}).split())


GROUP = get_command(app)
COMMANDS = [[]] + [[name] for name in sorted(GROUP.commands)]
IDS = ["ddcheck"] + [f"ddcheck {name}" for name in sorted(GROUP.commands)]


def test_every_command_is_covered():
    assert {"scan", "fix", "smoke", "config", "guard", "rules", "explain"} <= set(GROUP.commands)


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_help_fits_in_80_columns(args):
    long = [ln for ln in render(app, args).splitlines() if cell_len(ln) > WIDTH]
    assert long == []


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_help_prose_breaks_only_where_a_word_does_not_fit(args):
    screen = render(app, args)
    paragraphs = description(screen)
    assert paragraphs, "no description rendered"
    assert stray_breaks(paragraphs + epilog(screen)) == []


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_help_shows_every_word_it_declares(args):
    command = GROUP.commands[args[0]] if args else GROUP
    screen = flat(render(app, args))
    missing = [t for t in source_texts(command) if t not in screen]
    assert missing == []


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_help_ends_with_an_example(args):
    """The README's promise: the last thing on the screen, after the options, is an example."""
    screen = render(app, args)
    last = [ln.strip() for ln in screen.splitlines() if ln.strip()]
    ends = epilog(screen)
    assert ends and all(p[0].startswith("Example") for p in ends)
    assert last[-1] == ends[-1][-1]


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_flags_show_no_value(args):
    """A boolean flag takes no value, so its row names no type (typer would write ``<bool>``)."""
    screen = render(app, args)
    assert "<bool>" not in screen
    command = GROUP.commands[args[0]] if args else GROUP
    flags = ["--help"] + [o for p in command.params if getattr(p, "is_flag", False) for o in p.opts
                          if o.startswith("--")]
    for flag in flags:
        row = next(ln for ln in screen.splitlines() if re.match(rf"│ {re.escape(flag)}\s", ln))
        words = [w for w in row[len("│ " + flag):].split() if not re.fullmatch(r"-\w", w)]  # short forms
        assert not words[0].startswith("<"), row


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_list_options_name_what_they_take(args):
    """A repeatable option's row names what one value is (``RULE``, ``ID:REASON``), as Ruff's
    ``--select RULE_CODE`` does, never typer's ``<list[str]>`` (issue 49)."""
    screen = render(app, args)
    for flag, metavar in (("--select", "RULE"), ("--ignore", "RULE"), ("--suppress", "ID:REASON")):
        row = next((ln for ln in screen.splitlines() if re.match(rf"│ {re.escape(flag)}\s", ln)), None)
        if row is not None:
            assert row[len("│ " + flag):].split()[0] == metavar, row


@pytest.mark.parametrize("args", COMMANDS, ids=IDS)
def test_dash_h_is_help(args):
    result = CliRunner().invoke(app, [*args, "-h"], env={"COLUMNS": str(WIDTH)}, color=False)
    assert result.exit_code == 0
    assert Text.from_ansi(result.output).plain == render(app, args)


@pytest.mark.parametrize("name,usage", [("config", "ddcheck config [OPTIONS] [-- COMMAND...]"),
                                        ("guard", "ddcheck guard [OPTIONS] -- COMMAND...")])
def test_usage_shows_the_command_it_runs(name, usage):
    assert usage.removeprefix("ddcheck ") in render(app, [name])  # the runner calls the program "root"


def test_version():
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        result = CliRunner().invoke(app, [flag])
        assert result.exit_code == 0 and result.output == f"ddcheck {version('ddcheck')}\n"


# ------------------------------------------------------------------------------- the checks can fail


def _toy(doc: str, option_help: str = "An option.") -> typer.Typer:
    toy = typer.Typer(rich_markup_mode="rich")

    @toy.command()
    def run(x: int = typer.Option(0, help=option_help)) -> None:
        pass

    @toy.command()
    def other() -> None:
        pass

    run.__doc__ = doc  # typer reads the docstring when it builds the command, after this
    return toy


def test_the_check_finds_a_docstring_line_break():
    doc = "Title.\n\nTriton's attention output is also\ncompared with a reference, which is long enough."
    assert stray_breaks(description(render(_toy(doc), ["run"])))


def test_the_check_passes_a_paragraph_rich_wrapped():
    doc = "Title.\n\n" + " ".join(["Triton's attention output is also compared with a reference."] * 4)
    paragraphs = description(render(_toy(doc), ["run"]))
    assert len(paragraphs[-1]) > 1 and stray_breaks(paragraphs) == []


def test_the_check_finds_help_that_rich_took_for_markup():
    toy = _toy("Title.", option_help="pyproject.toml to read [tool.ddcheck] from.")
    command = get_command(toy).commands["run"]
    assert source_texts(command)[-1] not in flat(render(toy, ["run"]))


@pytest.mark.parametrize("argv", [["scan", "-h"], ["-h"], ["--version"]])
def test_the_console_script_answers_h_and_version(argv):
    """Through ddcheck.entry, whose fast path reads `ddcheck scan` without typer: -h is left to typer."""
    import subprocess
    import sysconfig

    script = str(Path(sysconfig.get_path("scripts")) / "ddcheck")
    proc = subprocess.run([script, *argv], capture_output=True, text=True,
                          env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""
    assert ("Usage: ddcheck" in proc.stdout) if "-h" in argv else proc.stdout.startswith("ddcheck ")
