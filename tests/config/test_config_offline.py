"""``ddcheck config`` runs the tree's start-up code offline unless ``--allow-downloads`` (issue 49): the
Hugging Face libraries are told so, and every socket to the network or DNS lookup in the worker is
refused at once (:mod:`ddcheck.config.offline`). What the tree logs about a refused download is its own
output, not a DD213 finding; a retry's wait after one is skipped; a value the tree cannot start without
is *could not judge*, naming the address and ``--allow-downloads``.

Each worker test records, with an audit hook in the worker (a ``sitecustomize`` on its PYTHONPATH), every
socket the worker really opens: the hook sees the C-level ``socket.connect``/``socket.getaddrinfo``, so a
refusal (which never reaches them) records nothing, and any real connection or lookup fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from ddcheck.config import check_launch, child
from ddcheck.config.offline import GUARD, NetGuard, Refused, RefusedLookup, about_a_refusal
from ddcheck.tree.sources import open_target

REPO = Path(__file__).resolve().parents[2]
FORK = REPO / "fixtures" / "trees" / "flag_fork"
MODELS = REPO / "fixtures" / "launch" / "models"
network = pytest.mark.network

RECORDER = """import os, sys
def _hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        with open({log!r}, "a") as fh:
            fh.write(f"{{os.getpid()}} {{event}} {{args!r}}\\n")
sys.addaudithook(_hook)
"""

# The fork's handler with a download in front, in the shape of a release's (0.5.10's
# ``_parse_quant_hf_config`` through ``retry()``): each failure logged and waited on, then given up on
# with a warning, or, where the launch's environment says the value is required, a raise.
FETCHING_HOOK = '''"""Fixture: the fork's handler, after a download with retries."""

import logging
import os
import socket
import time

logger = logging.getLogger(__name__)


def _fetch(address):
    for attempt in range(3):
        try:
            socket.create_connection(address, timeout=30).close()
            return True
        except OSError as exc:
            if attempt == 2:
                raise RuntimeError("fetch: retries exhausted")
            logger.warning(f"fetch failed once ({attempt}th try). Will delay 3s and retry. Error: {exc}")
            time.sleep(3)


def handle_speculative_decoding(server_args) -> None:
    start = time.monotonic()
    try:
        _fetch((os.environ["FLAGFORK_HUB"], int(os.environ["FLAGFORK_PORT"])))
    except RuntimeError as exc:
        if os.environ.get("FLAGFORK_FETCH_REQUIRED"):
            raise ValueError(f"cannot start without the hub's file: {exc}")
        logger.warning("Failed to load the quant config: %s", exc)
    with open(os.environ["FLAGFORK_PROBE"], "a") as fh:
        fh.write(f"{time.monotonic() - start}\\n")
    if server_args.speculative_algorithm is None:
        return
    if server_args.speculative_num_draft_tokens is None:
        server_args.speculative_num_draft_tokens = 16
    if server_args.max_running_requests is None:
        server_args.max_running_requests = 48
'''


def _launch(model: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", model, "--speculative-algorithm", "BUDGETTREE",
            "--attention-backend", "triton", "--disable-cuda-graph", "--speculative-tree-budget", "16"]


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A fresh worker whose real socket connections and DNS lookups are written to the returned file."""
    folder = tmp_path / "recorder"
    folder.mkdir()
    log = tmp_path / "sockets.log"
    (folder / "sitecustomize.py").write_text(RECORDER.format(log=str(log)))
    monkeypatch.setenv("PYTHONPATH", str(folder) + (os.pathsep + os.environ["PYTHONPATH"]
                                                    if os.environ.get("PYTHONPATH") else ""))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the suite's own: ddcheck must go offline by itself
    child.close_child()
    yield log
    child.close_child()  # the next test's worker without the recorder


@pytest.fixture
def fetching_fork(tmp_path, monkeypatch):
    root = tmp_path / "fork"
    shutil.copytree(FORK, root)
    (root / "sglang" / "srt" / "arg_groups" / "speculative_hook.py").write_text(FETCHING_HOOK)
    probe = tmp_path / "fetch-seconds"
    monkeypatch.setenv("FLAGFORK_PROBE", str(probe))
    return open_target(str(root / "sglang")), probe


def _real_sockets(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


# --------------------------------------------------------------------------- the guard itself


def test_the_guard_refuses_at_once_records_and_skips_a_retrys_wait():
    guard = NetGuard()
    guard.install()
    try:
        start = time.monotonic()
        with pytest.raises(RefusedLookup):
            socket.create_connection(("hub.example.org", 443), timeout=30)
        with pytest.raises(Refused):
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("192.0.2.1", 443))  # TEST-NET-1
        try:
            try:
                socket.getaddrinfo("hub.example.org", 443)
            except OSError as exc:
                raise RuntimeError("retries exhausted") from exc
        except RuntimeError as exc:
            assert about_a_refusal(exc)
            time.sleep(30)  # a retry's back-off while handling it: skipped
        assert guard.waits_skipped == 1
        assert time.monotonic() - start < 5
        assert [a.address for a in guard.attempts] == ["hub.example.org:443", "192.0.2.1:443", "hub.example.org:443"]
        assert all(any(f == __file__ for f, _ in a.stack) for a in guard.attempts)  # the lines that asked
        time.sleep(0.2)  # any other wait is one
        assert guard.waits_skipped == 1
        assert not about_a_refusal(ValueError("no socket involved"))
    finally:
        guard.uninstall()
    assert not guard.installed and socket.getaddrinfo.__module__ == "socket" and time.sleep.__module__ == "time"


def test_the_guard_lets_local_sockets_connect():
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no AF_UNIX here")
    guard = NetGuard()
    guard.install()
    try:
        a, b = socket.socketpair()
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        a.close(), b.close()
    finally:
        guard.uninstall()
    assert guard.attempts == [] and not GUARD.installed  # the worker's guard is never installed here


# --------------------------------------------------------------------------- the worker, on a fixture tree


def test_a_download_the_tree_can_do_without_is_neither_waited_for_nor_a_finding(recorded, fetching_fork,
                                                                                  monkeypatch):
    tree, probe = fetching_fork
    monkeypatch.setenv("FLAGFORK_HUB", "hub.example.org")
    monkeypatch.setenv("FLAGFORK_PORT", "443")
    r = check_launch(_launch(str(MODELS / "llama")), tree=tree, cache=False)
    assert r.exit_code == 0 and r.not_judged == [], (r.not_judged, r.findings)
    assert _real_sockets(recorded) == []
    assert float(probe.read_text().split()[-1]) < 3  # the retry's waits (3 s each) were skipped
    said = [f.message for f in r.findings]
    assert not any("fetch" in m or "quant config" in m for m in said), said  # its talk about the download
    refusal = [x for x in r.tree_limitations if "hub.example.org:443" in x]
    assert refusal and "--allow-downloads" in refusal[0], r.tree_limitations
    assert "sglang/srt/arg_groups/speculative_hook.py:" in refusal[0]  # the tree line that asked
    assert "HF_HUB_OFFLINE" not in (r.settings.env or {})  # ddcheck's switch, not the launch's environment


def test_a_download_the_tree_cannot_start_without_is_not_judged_naming_it(recorded, fetching_fork, monkeypatch):
    tree, _ = fetching_fork
    monkeypatch.setenv("FLAGFORK_HUB", "hub.example.org")
    monkeypatch.setenv("FLAGFORK_PORT", "443")
    monkeypatch.setenv("FLAGFORK_FETCH_REQUIRED", "1")
    r = check_launch(_launch(str(MODELS / "llama")), tree=tree, cache=False)
    assert r.exit_code == 3, (r.not_judged, r.findings)
    assert any("hub.example.org:443" in x and "--allow-downloads" in x for x in r.not_judged), r.not_judged
    assert not any(f.rule == "DD210" for f in r.findings)  # not the tree's verdict on the launch
    assert _real_sockets(recorded) == []


def test_allow_downloads_lets_the_tree_connect(recorded, fetching_fork, monkeypatch):
    """With --allow-downloads the worker is an ordinary process: the tree's connection is made (to a
    server of this test's own on 127.0.0.1), and the audit hook sees it."""
    tree, _ = fetching_fork
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    monkeypatch.setenv("FLAGFORK_HUB", "127.0.0.1")
    monkeypatch.setenv("FLAGFORK_PORT", str(server.getsockname()[1]))
    try:
        r = check_launch(_launch(str(MODELS / "llama")), tree=tree, cache=False, allow_downloads=True)
        assert r.exit_code == 0 and not any("refused" in x for x in r.tree_limitations), r.tree_limitations
        assert any("socket.connect" in x and "127.0.0.1" in x for x in _real_sockets(recorded))
        offline = check_launch(_launch(str(MODELS / "llama")), tree=tree, cache=False)  # back offline: a new worker
        assert any("127.0.0.1" in x and "refused" in x for x in offline.tree_limitations), offline.tree_limitations
    finally:
        server.close()
    assert len(accepted) == 1  # only the --allow-downloads run reached it


# --------------------------------------------------------------------------- a real release


@network
def test_a_hub_model_id_on_0_5_10_is_judged_without_a_socket(recorded, wheel, tmp_path, monkeypatch):
    """The issue's launch: the model named by hub id, its config and the draft's given. 0.5.10's start-up
    asks the hub for ``hf_quant_config.json`` through ``retry()`` (configs/model_config.py:737,
    utils/common.py:2561): offline it is not asked, nothing waits, and no retry message is a finding."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
            "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "x", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "16"]
    r = check_launch(argv, tree=open_target(str(wheel("0.5.10"))), model_config=str(MODELS / "llama"),
                     draft_config=str(MODELS / "llama_eagle"), cache=False)
    assert r.settings.resolved_by == "tree" and r.exit_code in (0, 1), (r.not_judged, r.tree_note)
    assert _real_sockets(recorded) == []
    said = json.dumps([f.message for f in r.findings])
    assert "retry" not in said and "hf_quant_config" not in said, said
