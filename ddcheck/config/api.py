"""``ddcheck config``: check an SGLang speculative-decoding launch before it runs.

``check_launch`` never imports sglang, nor runs the tree's code in this process: the tree's start-up
code runs in a worker process (:mod:`ddcheck.config.child`, :mod:`ddcheck.config.judge`), as smoke's
does, and its result is kept (:mod:`ddcheck.config.kept`): a repeat of the same launch on the same tree,
with the same environment, model configs, GPU and installed packages, is answered from the cache without
starting it. This module imports nothing heavy: a repeat loads no torch and no analysis.
"""

from __future__ import annotations

from collections.abc import Callable

from ddcheck.base.errors import UsageError
from ddcheck.config.words import jsonable as _jsonable, launch_env, server_argv  # noqa: F401 - the API's names
from ddcheck.tree.sources import SourceTree, TargetError, installed_sglang, open_target

def open_sglang(sglang: str | None) -> SourceTree:
    if sglang is None:
        path = installed_sglang()
        if path is None:
            raise UsageError("no installed sglang found; pass --sglang PATH|WHEEL|sglang==VER")
        sglang = str(path)
    try:
        return open_target(sglang)
    except TargetError as exc:
        raise UsageError(str(exc)) from exc


def check_launch(argv: list[str], sglang: str | None = None, file: str | None = None,
                 tree: SourceTree | None = None, draft_config: str | None = None,
                 model_config: str | None = None, gpu: str | None = None,
                 smoke: Callable | None = None, cache: bool = True, allow_downloads: bool = False) -> "Report":
    """Check a launch (``argv`` as the script runs it, and/or an SGLang ``--config`` YAML ``file``)
    against the target SGLang (installed by default; ``sglang`` = path, wheel or ``sglang==VER``).
    ``draft_config``/``model_config``: the models' ``config.json`` (file or directory), for the
    values the tree's start-up code reads from them; ``gpu``: the serving GPU, a vendor (nvidia, amd,
    npu, xpu, musa, cpu), an architecture (sm80, sm90, sm100, sm120) or a product (H100, B200...);
    None: this machine's, where one is visible (nvidia-smi, the driver's files), else an sm90 assumed.
    Backends the launch leaves to SGLang are picked by the tree's own start-up code for that GPU
    (:mod:`ddcheck.config.selection`) and judged as if the launch had passed them.
    The tree's code runs in a worker process; a judged result is kept and a repeat answered from it
    (``cache=False``: neither read nor kept). The tree's code runs offline: a value it would download is
    not fetched (the run goes on as the tree does without it, or says what could not be judged);
    ``allow_downloads``: it may use the network.
    ``smoke``: also run the launch's verify path from the tree at exactly its C and W, and report
    what it finds (:func:`ddcheck.config.smoke.launch_smoke`, a floor above both this package and
    ``ddcheck.smoke``: ``config --smoke``); it runs here, after the checks (smoke runs its own worker)."""
    from ddcheck.config import kept
    from ddcheck.config import child as worker
    from ddcheck.config.report import add_smoke, sort_findings
    from ddcheck.config.gpu import GpuError, resolve_gpu

    try:
        machine = resolve_gpu(gpu)
    except GpuError as exc:
        raise UsageError(str(exc)) from exc
    tree = tree or open_sglang(sglang)
    request = worker.request(tree, list(argv), file, draft_config, model_config, machine, allow_downloads)
    k = kept.key(tree, request) if cache else None
    entry = kept.load(k)
    if entry is None:
        entry = worker.judge_in_child(tree, request)
        kept.store(k, entry)
    report = entry.report_model()
    if smoke is not None and entry.checked_to_the_end:
        add_smoke(report, smoke(report.settings, tree))
        sort_findings(report)
    return report
