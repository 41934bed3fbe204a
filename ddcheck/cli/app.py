"""The ``ddcheck`` command line. Exit codes, the one contract of :mod:`ddcheck.base.errors` (guard excepted):
0 judged and right, 1 findings, 2 usage error (or internal error, or a target that cannot be
obtained), 3 could not judge."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import List, Optional

# scan_command first: it sets the environment pydantic (loaded by typer) reads
from ddcheck.base.errors import CONTRACT, EXIT_INTERRUPTED, EXIT_NOT_JUDGED
from ddcheck.base.findings import Severity
from ddcheck.cli.scan import UsageError, console, internal_failure, resolve_settings, scan_command, usage_failure

import typer  # noqa: E402, I001
from typer.core import TyperCommand, TyperGroup  # noqa: E402


def _flags_take_no_value(params):
    """A flag's help row shows no type: typer would label ``--diff`` ``<bool>``, as if it took a value."""
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class Command(TyperCommand):
    def get_params(self, ctx):  # noqa: D102 - --help itself is one of them
        return _flags_take_no_value(super().get_params(ctx))


class Group(TyperGroup):
    def get_params(self, ctx):  # noqa: D102
        return _flags_take_no_value(super().get_params(ctx))


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console().print(f"ddcheck {version('ddcheck')}", highlight=False)
        raise typer.Exit(0)


app = typer.Typer(
    cls=Group,
    add_completion=True,
    no_args_is_help=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Find and fix SGLang attention backends that lay out the speculative-decoding verify batch "
         "with the width fixed at start-up (C) instead of the verify input's per-step width (W).\n\n"
         + CONTRACT,
    epilog="Example: [bold]ddcheck scan sglang==0.5.10[/bold] (then [bold]ddcheck COMMAND -h[/bold] for each command)",
)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                       help="Print ddcheck's version and exit.")) -> None:
    pass


@app.command()
def scan(
    targets: List[str] = typer.Argument(None, help="Files, directories, wheels or sglang==VERSION. "
                                                   "Default: the installed sglang, else the bundled demo."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | sarif | github"),
    fail_on: Optional[Severity] = typer.Option(None, "--fail-on", help="Lowest severity that makes the exit code 1 (default: error)."),
    select: List[str] = typer.Option(None, "--select", metavar="RULE", help="Only these rule ids (repeatable)."),
    ignore: List[str] = typer.Option(None, "--ignore", metavar="RULE", help="Never these rule ids (repeatable)."),
    config: Optional[Path] = typer.Option(None, "--config", help="pyproject.toml to read \\[tool.ddcheck] from."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Report only findings not in this baseline."),
    write_baseline: Optional[Path] = typer.Option(None, "--write-baseline", help="Record today's findings and exit 0."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore and do not write the result cache."),
    check_syntax: bool = typer.Option(False, "--check-syntax", help="Parse every file; list those that are not "
                                                                    "valid Python as skipped (slower)."),
) -> None:
    """Find verify-path uses of the start-up width C.

    Exit codes: 0 no finding at or above --fail-on; 1 such findings, or files that could not be scanned
    (listed); 2 usage error, or a target that cannot be obtained (a missing path, no Python files, an
    unknown version). A scan judges every file it reads, so it never exits 3 (could not judge).

    Example: [bold]ddcheck scan sglang==0.5.10 --format json[/bold]
    """
    raise typer.Exit(scan_command(targets, fmt, fail_on, select, ignore, config, baseline, write_baseline, no_cache,
                                  check_syntax))


@app.command()
def fix(
    targets: List[str] = typer.Argument(None, help="Files or directories to fix in place; with --out, a wheel or sglang==VERSION too."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff; write nothing."),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when fixes are pending."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply unsafe fixes (buffer sizes, bounds)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write a patched copy of the whole tree here (wheels are never modified)."),
    installed: bool = typer.Option(False, "--installed", help="Patch the installed sglang in place, after writing backups."),
    exit_non_zero_on_fix: bool = typer.Option(False, "--exit-non-zero-on-fix", help="Exit 1 when files were changed (pre-commit)."),
    verify: bool = typer.Option(False, "--verify", help="Run `ddcheck smoke` on the fixed tree; fail unless it passes."),
    config: Optional[Path] = typer.Option(None, "--config", help="pyproject.toml to read \\[tool.ddcheck] from."),
    force: bool = typer.Option(False, "--force", help="With --out: write into a directory that is not empty."),
) -> None:
    """Rewrite verify-path uses of C to the verify input's per-step width, format-preserving.

    --diff and --check write nothing, so they take any target (a wheel, sglang==VERSION) and --out is
    not written.

    Exit codes: 0 fixed, or nothing to fix (with --verify: and the fixed tree passes the smoke test); 1
    fixes pending (--check), a fix not made or not written, a finding left unfixed, or the fixed tree
    fails the smoke test; 2 usage error, or a target that cannot be obtained; 3 --verify could not run
    the smoke test (findings win over 3).

    Example: [bold]ddcheck fix sglang==0.5.10 --out /tmp/sglang-fixed[/bold]
    """
    from ddcheck.fix.command import fix_main

    if sum(bool(x) for x in (diff, check)) > 1:
        raise UsageError("--diff and --check exclude each other")
    if installed and targets:
        raise UsageError("--installed takes no targets")
    if not installed and not targets:
        raise UsageError("give files/directories to fix, a wheel/sglang==VERSION with --out, or --installed")
    for t in targets or []:  # as `ddcheck scan` names a missing target: once
        if "==" not in t and not Path(t).exists():
            raise UsageError(f"{t}: no such file or directory")
    settings = resolve_settings((targets or [None])[0], config, None, None, None)
    code = fix_main(list(targets or []), settings=settings, diff=diff, check=check, unsafe=unsafe_fixes,
                    out_dir=out_dir, installed=installed, exit_non_zero_on_fix=exit_non_zero_on_fix,
                    verify=verify, console=console(), err=console(stderr=True), force=force)
    raise typer.Exit(code)


@app.command()
def smoke(
    target: Optional[str] = typer.Argument(None, help="An sglang tree: directory, wheel, sglang==VERSION, or 'installed'."),
    backend: str = typer.Option("triton", "--backend", help="The attention backend to run, in any case (see --list-backends)."),
    list_backends: bool = typer.Option(False, "--list-backends", help="List the backends smoke knows, and why those it cannot run do not run here."),
    backend_file: Optional[Path] = typer.Option(None, "--backend-file", help="Run this (fixed) copy of the backend's file instead of the tree's."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | sarif | github (sarif and github: the smoke rules' findings, DD300)"),
    budget: int = typer.Option(16, "--budget", help="DDTree budget: the verify width is W = budget + 1 (on a tree without a DDTree drafter, a probe of the backend at that width; the report says so)."),
    num_draft_tokens: int = typer.Option(8, "--num-draft-tokens", help="C, speculative_num_draft_tokens."),
    device: str = typer.Option("cpu", "--device", help="cpu (Triton interpreter), cuda or cuda:N."),
    graph_capture_width: Optional[str] = typer.Option(None, "--graph-capture-width", help="Override the width the graph path captures target-verify graphs at: C or W. Default: the width the tree's CUDA-graph runner captures at for the launch (C where ddcheck reads none); the report says where it comes from."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the batch and the trees."),
    launch: Optional[str] = typer.Option(None, "--launch", help="A launch command: run at its C and W (resolved as `ddcheck config` does) with its worker's verify input."),
) -> None:
    """Run the tree's real verify path of one attention backend at W != C and judge it.

    Every path's metadata is checked against the verify contract; Triton's attention output is also
    compared with a reference. Every W runs, W < C in padded buffers, and rows written past the verify
    batch are reported.

    By default it runs the launch's step: the verify input the tree's worker builds, and graphs captured
    where the tree's graph runner captures them (on a tree without a DDTree drafter, --budget is a probe).

    Exit codes: 0 every path is correct; 1 the controls pass but W != C is wrong (the bug, or the graph
    capture width: the verdict says which); 2 usage error, or a target that cannot be obtained; 3 could
    not judge: the harness could not run the verify path (torch missing, a crash, a control wrong), or
    the tree has no class for the verify input the backend gets.

    Example: [bold]ddcheck smoke sglang==0.5.10[/bold] (the bug: exit 1).

    Example: [bold]ddcheck smoke sglang==0.5.23 --backend fa3[/bold] (FA3's metadata).

    Example: [bold]ddcheck smoke python/sglang --launch "python -m sglang.launch_server
    --speculative-algorithm DDTREE --speculative-ddtree-budget 16 ..."[/bold] (at one launch's C and W).
    """
    from ddcheck.smoke import requirements, smoke_main

    if list_backends:
        _print_backends(requirements.problem(device))
        raise typer.Exit(0)
    # every mistake in the arguments is one line, before anything else is printed
    if target is None:
        raise UsageError("a target is required (an sglang tree, wheel, sglang==VERSION or 'installed')")
    from ddcheck.diagnostics.formats import FORMATS

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if graph_capture_width not in (None, "C", "W"):
        raise UsageError("--graph-capture-width must be C or W")
    backend, device = _smoke_choices(backend, device)
    _smoke_target_exists(target)  # cheap checks before the one that imports torch (seconds)
    _smoke_installed(device)
    values = capture = None
    if launch is not None:
        budget, num_draft_tokens, capture, values = _launch_widths(target, launch)
    raise typer.Exit(smoke_main(target, backend_file=str(backend_file) if backend_file else None, fmt=fmt,
                                budget=budget, num_draft_tokens=num_draft_tokens, device=device,
                                seed=seed, launch=values, backend=backend,
                                graph_capture_width=graph_capture_width or "tree", capture=capture))


def _smoke_choices(backend: str, device: str) -> tuple[str, str]:
    """--backend (any case) and --device as smoke knows them; a UsageError names the choices."""
    from ddcheck.smoke.api import backend_name, check_device

    try:
        check_device(device)
    except ValueError as exc:
        raise UsageError(f"--device: {exc}") from None
    try:
        return backend_name(backend), device
    except ValueError as exc:
        raise UsageError(f"--backend: {exc}") from None


def _smoke_target_exists(target: str) -> None:
    """A target path that is not there is a usage error at once, as the tree's opening would say later."""
    from ddcheck.tree.sources import PACKAGE_VERSION_RE

    if target != "installed" and not PACKAGE_VERSION_RE.match(target.strip()) and not Path(target).exists():
        raise UsageError(f"{target}: no such file or directory")


def _smoke_installed(device: str) -> None:
    """torch, triton and numpy as smoke needs them on ``device``, else one line and exit 3 (not judged)."""
    from rich.markup import escape

    from ddcheck.smoke.requirements import problem

    missing = problem(device)
    if missing:
        console(stderr=True).print(f"[bold red]ddcheck:[/bold red] {escape(missing)}", highlight=False)
        raise typer.Exit(EXIT_NOT_JUDGED)


def _print_backends(missing: str | None) -> None:
    from ddcheck.contract import backends

    for b in backends.BACKENDS.values():
        how = ("runs: metadata judged by the verify contract" + (f", attention numbers by {b.kernels}"
                                                                 if b.kernels else "")) if b.runs else \
            f"does not run here: {b.why_not}"
        if missing and b.runs:
            how = f"does not run here: {missing}"
        console().print(f"[bold]{b.name}[/] ({b.module}.{b.cls}): {how}", highlight=False)


def _launch_widths(target: str, launch: str):
    """(budget, C, its graph runner's capture facts, server_args values) of a launch command against ``target``,
    as ``ddcheck config`` resolves it (the tree's start-up, run once)."""
    import shlex

    from ddcheck.config.smoke import launch_capture
    from ddcheck.config.api import _jsonable, check_launch

    try:
        report = check_launch(shlex.split(launch), sglang=target)
    except (UsageError, ValueError) as exc:
        raise UsageError(f"--launch: {exc}") from exc
    s = report.settings
    if s is None or s.verify_width is None or s.num_draft_tokens is None:
        raise UsageError("--launch: W or C of this launch is not known (see `ddcheck config` for why)")
    values = {k: v for k, v in s.values.items() if _jsonable(v)} or None
    return s.verify_width - 1, s.num_draft_tokens, launch_capture(s), values


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             options_metavar="[OPTIONS] [-- COMMAND...]")
def config(
    ctx: typer.Context,
    file: Optional[Path] = typer.Option(None, "--file", help="SGLang --config YAML file."),
    sglang: Optional[str] = typer.Option(None, "--sglang", help="PATH | WHEEL | sglang==VERSION (default: the installed one, not imported)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | sarif | github"),
    fail_on: Optional[Severity] = typer.Option(None, "--fail-on", help="Lowest severity that makes the exit code 1 (default: error)."),
    select: List[str] = typer.Option(None, "--select", metavar="RULE", help="Only these rules, by id or name (repeatable)."),
    ignore: List[str] = typer.Option(None, "--ignore", metavar="RULE", help="Never these rules, by id or name (repeatable)."),
    suppress: List[str] = typer.Option(None, "--suppress", metavar="ID:REASON", help="Suppress a rule for this launch, saying why (repeatable; a launch file can say `# ddcheck: ignore[ID] reason`)."),
    draft_config: Optional[Path] = typer.Option(
        None, "--draft-config", help="The draft model's config.json (file or directory), for values the tree's start-up code reads from it."),
    model_config: Optional[Path] = typer.Option(
        None, "--model-config", help="The target model's config.json (file or directory)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="The serving GPU, for the tree's platform probes and its choice of attention backend: an architecture (sm80, sm90, sm100, sm120), a product (A100, H100, H200, B200, RTX 5090...) or a vendor (nvidia | amd | npu | xpu | musa | cpu). Default: this machine's GPU (nvidia-smi), else an sm90 assumed."),
    smoke: bool = typer.Option(False, "--smoke", help="Also run the launch's verify path from the tree at its C and W, on its backend (passed or picked by the tree for --gpu; needs the smoke extra)."),
    device: str = typer.Option("cpu", "--device", help="With --smoke: cpu (Triton interpreter), cuda or cuda:N."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore and do not write the result cache (a repeat of a judged launch is answered from it)."),
    allow_downloads: bool = typer.Option(False, "--allow-downloads", help="Let the tree's start-up code use the network (the Hugging Face hub). Default: it runs offline; what it would download is not fetched, and a check that needs it is not judged, saying what to pass."),
) -> None:
    """Check an SGLang speculative-decoding launch before it runs.

    Exit codes: 0 the launch was judged and is right; 1 error findings; 2 usage error, or a target that
    cannot be obtained; 3 could not judge (with --smoke: the smoke could not run here), unless there are
    errors.

    Example: [bold]ddcheck config --sglang sglang==0.5.16 -- python -m sglang.launch_server --model-path M
    --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16[/bold]
    """
    from functools import partial

    from ddcheck.cli.config import config_command

    run = None
    if smoke:  # the launch, run: composed here, above both `config` and `smoke`
        from ddcheck.config.smoke import launch_smoke

        _, device = _smoke_choices("triton", device)
        _smoke_installed(device)

        run = partial(launch_smoke, device=device)
    raise typer.Exit(config_command(list(ctx.args), file=str(file) if file else None, sglang=sglang, fmt=fmt,
                                    draft_config=str(draft_config) if draft_config else None,
                                    model_config=str(model_config) if model_config else None, gpu=gpu,
                                    smoke=run, select=select, ignore=ignore, fail_on=fail_on, suppress=suppress,
                                    cache=not no_cache, allow_downloads=allow_downloads))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             options_metavar="[OPTIONS] -- COMMAND...")
def guard(
    ctx: typer.Context,
    mode: str = typer.Option("raise", "--mode", help="raise: stop the step at the first violation; warn: log once per field, count, print the counts at exit."),
    every: int = typer.Option(0, "--every", show_default=False,
                              help="Check the first 16 verify steps of each backend path, then every N-th (default 16)."),
    log: Optional[Path] = typer.Option(None, "--log", help="Append a JSON record of each process's first violation here (DDCHECK_GUARD_LOG)."),
    site_dir: bool = typer.Option(False, "--site-dir", help="Print the directory to put on PYTHONPATH (with DDCHECK_GUARD=raise|warn) for a process started some other way."),
) -> None:
    """Run a command with the verify contract checked inside it and every Python process it starts.

    Exit code: the command's own.

    Example: [bold]ddcheck guard --mode warn -- python -m sglang.launch_server --model-path M
    --speculative-algorithm DDTREE ...[/bold]
    """
    from ddcheck.guard.run import run_guarded, site_directory

    if site_dir:
        console().print(site_directory())
        raise typer.Exit(0)
    if mode not in ("raise", "warn"):
        raise UsageError("--mode must be raise or warn")
    if every < 0:
        raise UsageError("--every must be a positive number of steps")
    if not ctx.args:
        raise UsageError("no command given: ddcheck guard [OPTIONS] -- COMMAND ...")
    raise typer.Exit(run_guarded(list(ctx.args), mode, every or None, str(log) if log else None))


@app.command()
def audit(
    targets: List[str] = typer.Argument(None, help="Checkouts, wheels, sglang==VERSION, 'installed', or a range "
                                                   "'sglang>=0.5.10,<0.5.24' (the releases the package index has)."),
    backend: List[str] = typer.Option(None, "--backend", help="An attention backend (repeatable). Default: every backend smoke runs."),
    budget: List[int] = typer.Option(None, "--budget", help="A DDTree budget, W = budget + 1 (repeatable). Default: 16 and 4 (W > C and W < C)."),
    num_draft_tokens: int = typer.Option(8, "--num-draft-tokens", help="C, speculative_num_draft_tokens, of the --budget widths."),
    launch_file: Optional[Path] = typer.Option(None, "--launch-file", help="Launch commands, one a line: each a width, judged by `ddcheck config` and run at its C and W on its backend."),
    device: str = typer.Option("cpu", "--device", help="cpu (Triton interpreter), cuda or cuda:N: where smoke runs."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes at a time (default: the cores)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | markdown | html"),
    out: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    recorded: Optional[Path] = typer.Option(None, "--from", help="Render a recorded audit (its --format json) instead of running one."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore and do not write the audit's cache."),
) -> None:
    """Judge every backend of every target at every width: scan, smoke as shipped, the default fix, smoke after it, and the runner's capture width.

    Each cell carries its evidence (path:line in the tree) and is kept in ddcheck's cache as soon as it is judged, keyed by ddcheck's code, the tree's content and the options: a re-run computes only what changed, and Ctrl-C keeps what finished.

    Exit codes: 0 every cell judged and right; 1 a bug or a pending fix in any cell; 2 usage error, or a target that cannot be obtained; 3 a cell could not be judged (listed), and no bug.

    Example: [bold]ddcheck audit 'sglang>=0.5.10,<=0.5.23' --backend fa3 --format html -o audit.html[/bold]
    """
    from ddcheck.audit.command import audit_command

    raise typer.Exit(audit_command(list(targets or []), list(backend or []), list(budget or []), num_draft_tokens,
                                   launch_file, device, jobs, fmt, out, recorded, not no_cache, console(),
                                   console(stderr=True)))


@app.command("rules")
def list_rules() -> None:
    """List the rules with their severity and fixability.

    Exit code: 0.

    Example: [bold]ddcheck rules[/bold]
    """
    from rich.table import Table

    from ddcheck.rules import all_rules

    table = Table("id", "name", "severity", "fix")
    for r in all_rules().values():
        table.add_row(r.id, r.name, r.severities(), r.fix)
    console().print(table)


@app.command()
def explain(rule_id: str = typer.Argument(..., help="A rule id (DD001) or name.")) -> None:
    """Print a rule's documentation: what it finds, why it is wrong, bad/good example, fix.

    Exit codes: 0; 2 an unknown rule.

    Example: [bold]ddcheck explain DD001[/bold]
    """
    from rich.markdown import Markdown

    from ddcheck.rules import all_rules, get_rule

    rule = get_rule(rule_id)
    if rule is None:
        raise UsageError(f"unknown rule {rule_id!r}; known: {', '.join(all_rules())}")
    if console().is_terminal:
        console().print(Markdown(rule.explanation()))
    else:
        console().file.write(rule.explanation())


def _paragraphs(doc: str) -> tuple[str, str]:
    """A docstring as (help text, epilog): its examples go last, after the options; each paragraph on one
    line, since typer (0.2x, rich markup) keeps the single line breaks of every paragraph after the first,
    so a source line break would reach the terminal."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n")]
    return ("\n\n".join(p for p in paragraphs if not p.startswith("Example")),
            "\n\n".join(p for p in paragraphs if p.startswith("Example")))


for _info in app.registered_commands:  # after the last @app.command; tests/cli/test_help.py holds every --help to it
    _info.cls = Command
    if _info.help is None and _info.callback is not None:
        _info.help, _info.epilog = _paragraphs(_info.callback.__doc__ or "")


def main() -> None:
    """Entry point: usage errors and unexpected failures exit 2 with a message, never a traceback."""
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except UsageError as exc:
        sys.exit(usage_failure(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for scripts
        # A click usage error (an unknown option or command, a bad value), known by its public face:
        # newer typers vendor click under a private name, older ones use click itself.
        if callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int):
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.info_name}: " if ctx is not None and ctx.parent is not None else ""
            sys.exit(usage_failure(UsageError(where + exc.format_message())))
        sys.exit(internal_failure(exc))


if __name__ == "__main__":
    main()
