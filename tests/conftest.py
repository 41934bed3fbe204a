"""Shared fixtures: real SGLang wheels, downloaded once per machine with pip (PyPI is reachable from CI)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The tests live in folders that mirror ddcheck's packages (tests/scan/ for ddcheck/scan/, ...), beside
# their shared helpers here (smoke_server.py, guard_step.py, golden/). A test module imports another's
# fixtures and constants by its module name (``from test_config import release``): every folder is on
# the path, whichever one pytest collects first.
sys.path[:0] = [str(p) for p in sorted(Path(__file__).resolve().parent.iterdir())
                if p.is_dir() and any(p.glob("test_*.py")) and str(p) not in sys.path]


def _test_cache() -> Path:
    """The suite's own cache directory (scan results, flag tables, digests), removed at exit, so tests
    never read or write the user's; only downloaded wheels are kept, under the user's cache. One for
    the whole run: pytest-xdist's workers, started by the process that made it, inherit its name and
    share what one of them made (every entry is written whole or not at all, and a reader takes a
    missing or unreadable entry as a miss: ddcheck.base.deep.write_json)."""
    import atexit
    import shutil
    import tempfile

    shared = os.environ.get("DDCHECK_SUITE_CACHE")
    if shared and os.environ.get("PYTEST_XDIST_WORKER") and Path(shared).is_dir():
        return Path(shared)
    persistent = Path(os.environ.get("DDCHECK_CACHE") or Path.home() / ".cache" / "ddcheck")
    (persistent / "wheels").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ddcheck-test-cache-"))
    (tmp / "wheels").symlink_to(persistent / "wheels", target_is_directory=True)
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    os.environ["DDCHECK_SUITE_CACHE"] = str(tmp)
    return tmp


os.environ["DDCHECK_CACHE"] = str(_test_cache())
# `ddcheck config` reads a hub id's config.json from the Hugging Face cache, or downloads it: the suite
# reads neither the user's cache nor the network (tests that need a model lay a cache out themselves).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_CACHE"] = str(Path(os.environ["DDCHECK_CACHE"]) / "hf-hub")


def _one_download_at_a_time() -> None:
    """The suite runs in two worker processes (pyproject's addopts, pytest-xdist): a wheel that is not yet
    cached is downloaded by one of them while the other waits for it, never into the same file at once
    (``pip download`` writes the wheel in place). Every in-process download goes through this lock."""
    from filelock import FileLock

    from ddcheck.tree import sources

    download = sources.download_wheel
    lock = FileLock(str(Path(os.environ["DDCHECK_CACHE"]) / "wheels" / ".download.lock"))

    def locked(version: str, dest: Path | None = None) -> Path:
        with lock:
            return download(version, dest)

    sources.download_wheel = locked


_one_download_at_a_time()


@pytest.fixture(scope="session")
def wheel():
    """``wheel("0.5.10") -> Path`` of the real sglang wheel, cached under DDCHECK_CACHE."""
    from ddcheck.tree import sources

    cache: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in cache:
            cache[version] = sources.download_wheel(version)
        return cache[version]

    return get


@pytest.fixture(scope="session")
def release_scan(wheel):
    """``release_scan("0.5.10") -> ScanResult`` of the whole wheel, computed once per session."""
    from ddcheck.scan.api import scan
    from ddcheck.scan.settings import Settings

    results = {}

    def get(version: str):
        if version not in results:
            results[version] = scan([str(wheel(version))], settings=Settings())
        return results[version]

    return get


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """``smoke(target, **kwargs) -> SmokeReport``: ``run_smoke`` (same arguments, same report), with the
    calls on one tree run one after another in one process, forked for that tree from a server that has
    imported torch and triton once (tests/smoke_server.py), instead of a fresh interpreter each; the
    tree's code still runs afresh in every call."""
    import inspect
    import json

    from smoke_server import SmokeServer

    from ddcheck.smoke.api import run_smoke

    server = SmokeServer(tmp_path_factory.mktemp("smoke-server"))
    done: dict[str, object] = {}
    defaults = {k: p.default for k, p in inspect.signature(run_smoke).parameters.items()
                if p.default is not inspect.Parameter.empty}

    def run(target: str, **kwargs):
        """A call on a release with the same arguments as an earlier one (tests of several files ask
        the same run) is that run's report, a copy; a call on a folder or a file is run each time (a
        test may change what the path holds between its calls)."""
        if not re.match(r"\s*sglang\s*==", target) or kwargs.get("backend_file"):
            return server.run(target, **kwargs)
        given = {k: v for k, v in kwargs.items() if k not in defaults or defaults[k] != v}
        try:
            key = json.dumps([target, given], sort_keys=True)
        except TypeError:  # an argument that is no plain value: run it
            return server.run(target, **kwargs)
        if key not in done:
            done[key] = server.run(target, **kwargs)
        return done[key].model_copy(deep=True)

    run.served = server.run  # every call run by the server, none remembered (tests of the server itself)
    yield run
    server.stop()


# The releases a test parametrized over releases runs on by default: the oldest ddcheck reads, the one the
# README's examples use and the newest. Any other release is part of the release matrix (marked
# ``matrix``, left out by pyproject's addopts: `pytest -m matrix` runs it; `ddcheck audit` covers
# releases as a product). Tests written for one release's code (0.5.16's, say) are not parametrized and run.
CI_RELEASES = {"0.4.10.post2", "0.5.10", "0.5.23"}
_RELEASE = re.compile(r"\d+\.\d+\.\d+(\.post\d+)?")


def _slow(item) -> bool:
    """Marked ``slow`` (left out of the quick loop, `-m "not slow and not matrix"`) by what it runs: a real
    release's wheel (``network``: downloaded once, then scanned, fixed or launched whole), the smoke
    fixture's runs of a tree's code, or a group of runs one worker shares (``xdist_group``)."""
    return (any(item.get_closest_marker(m) is not None for m in ("network", "xdist_group"))
            or bool({"smoke", "release_scan"} & set(getattr(item, "fixturenames", ()))))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(config, items):
    """Marks the release matrix (above) and the slow tests (:func:`_slow`). Tests marked ``xdist_group`` (a file's smoke runs, the audit's
    fixture) go to one worker: pytest-xdist's loadgroup, which pytest 9 silently breaks (every test its
    own group), hence ``pytest<9`` in the test extra; tests/project/test_suite.py checks a group stays together."""
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("cases") is not None:
            continue  # each parametrization is its own case (a release's own code path), not a release sample
        spec = getattr(item, "callspec", None)
        releases = [v for v in (spec.params.values() if spec else ()) if isinstance(v, str) and _RELEASE.fullmatch(v)]
        if any(r not in CI_RELEASES for r in releases):
            item.add_marker(pytest.mark.matrix)
    # the groups (minutes of smoke runs each) first, so the two workers share the single tests after them
    # evenly instead of one waiting for a group handed out last; each group keeps its own order
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)
