"""`ddcheck guard`: the contract checked in the process, on real release backends (CPU) and in the
child processes a guarded command starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from ddcheck.guard import GuardViolation, check_verify_metadata
from ddcheck.guard.hook import Guard, explain
from ddcheck.guard.run import guarded_env, site_directory

torch = pytest.importorskip("torch")
HERE = Path(__file__).resolve().parents[1]  # tests/: its helpers
ROOT = HERE.parent

# A minimal backend of our own, named as SGLang's Triton backend, that lays verify out with C = 8.
FAKE_BACKEND = textwrap.dedent('''
    import torch

    class TritonAttnBackend:
        num_draft_tokens = 8

        def init_forward_metadata(self, forward_batch):
            bs, c = len(forward_batch.seq_lens), self.num_draft_tokens
            self.forward_metadata = type("M", (), {})()
            self.forward_metadata.qo_indptr = torch.arange(0, bs * c + 1, c)
            self.forward_metadata.max_extend_len = c
''')


class Mode:
    def __init__(self, verify=True):
        self.verify = verify

    def is_target_verify(self):
        return self.verify


def batch(width, lens=(3, 9)):
    return SimpleNamespace(seq_lens=torch.tensor(lens), req_pool_indices=torch.tensor([0, 1]), batch_size=len(lens),
                           forward_mode=Mode(), spec_info=SimpleNamespace(draft_token_num=width))


def fake_backend_class():
    ns: dict = {}
    exec(FAKE_BACKEND, ns)
    return ns["TritonAttnBackend"]


def test_public_check_names_field_expected_and_got():
    backend = fake_backend_class()()
    backend.init_forward_metadata(batch(17))
    (v, w) = check_verify_metadata(backend, batch(17))
    assert (v.field, v.expected, v.got) == ("forward_metadata.qo_indptr", [0, 17, 34], [0, 8, 16])
    assert w.field == "forward_metadata.max_extend_len"
    backend.init_forward_metadata(batch(8))
    assert check_verify_metadata(backend, batch(8)) == []  # W == C: right
    with pytest.raises(ValueError, match="no verify-contract table"):
        check_verify_metadata(object(), batch(8))


def test_a_server_with_bigger_pages_is_judged_in_page_ids():
    """FA3 at --page-size 4 keeps page ids in its page table (0.5.10 flashattention_backend.py:472-483):
    the guard reads the backend's page_size, so a right table is not a violation."""
    req_to_token = torch.arange(2 * 32).view(2, 32)

    class FlashAttentionBackend:
        page_size = 4

        def __init__(self):
            self.req_to_token = req_to_token

        def init_forward_metadata(self, fb):
            w = fb.spec_info.draft_token_num
            pages = (int(fb.seq_lens.max()) + w + 3) // 4
            self.forward_metadata = SimpleNamespace(
                cu_seqlens_q=torch.arange(0, len(fb.seq_lens) * w + 1, w), cache_seqlens_int32=fb.seq_lens + w,
                page_table=req_to_token[fb.req_pool_indices][:, ::4][:, :pages] // 4)

    backend = FlashAttentionBackend()
    backend.init_forward_metadata(batch(17))
    assert check_verify_metadata(backend, batch(17)) == []
    backend.forward_metadata.page_table = req_to_token[:, :30]  # token slots: what page size 1 would keep
    (v,) = check_verify_metadata(backend, batch(17))
    assert v.field == "forward_metadata.page_table" and "page size 4" in v.expected


def test_raise_mode_stops_the_step_with_what_to_do():
    cls = fake_backend_class()
    guard = Guard("raise")
    guard.wrap(cls)
    with pytest.raises(GuardViolation) as info:
        cls().init_forward_metadata(batch(17))
    text = str(info.value)
    for part in ("TritonAttnBackend", "eager", "W = 17", "C = 8", "qo_indptr", "[0, 17, 34]", "ddcheck fix",
                 "budget 7"):
        assert part in text, part
    cls().init_forward_metadata(SimpleNamespace(**{**vars(batch(17)), "forward_mode": Mode(False)}))  # not verify


def test_warn_mode_logs_once_per_field_counts_and_writes_the_first_record(tmp_path, capsys):
    cls = fake_backend_class()
    log = tmp_path / "guard.jsonl"
    guard = Guard("warn", every=1, log_path=str(log))
    guard.wrap(cls)
    for _ in range(3):
        cls().init_forward_metadata(batch(17))
    err = capsys.readouterr().err
    assert err.count("qo_indptr") == 1 and err.count("max_extend_len") == 1
    assert guard.counts[("TritonAttnBackend", "eager", "forward_metadata.qo_indptr")] == 3
    assert "6 violation(s) in 3 checked" in guard.summary()
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["W"] == 17 and record["C"] == 8 and record["violations"][0]["field"] == "forward_metadata.qo_indptr"


def test_sampling_checks_the_first_steps_then_every_nth():
    cls = fake_backend_class()
    guard = Guard("warn", every=10, first=3, stream=open(os.devnull, "w"))
    guard.wrap(cls)
    for _ in range(25):
        cls().init_forward_metadata(batch(8))
    assert guard.checked == 3 + 2  # steps 1-3, 10, 20


def test_a_subclass_calling_its_base_is_checked_once():
    base = fake_backend_class()

    class Fork(base):
        def init_forward_metadata(self, forward_batch):
            super().init_forward_metadata(forward_batch)

    guard = Guard("warn", every=1, stream=open(os.devnull, "w"))
    guard.wrap(base)
    guard.wrap(Fork)
    Fork().init_forward_metadata(batch(8))
    assert guard.checked == 1


def test_explain_without_c_still_says_what_to_do():
    assert "ddcheck fix" in explain("X", "replay", 17, None, [SimpleNamespace(__str__=lambda s: "f")] * 1)


def _tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "tree" / "sglang" / "srt" / "layers" / "attention"
    pkg.mkdir(parents=True)
    for d in (pkg, *pkg.parents[:3]):
        (d / "__init__.py").write_text("")
    (pkg / "triton_backend.py").write_text(FAKE_BACKEND)
    return tmp_path / "tree"


CHILD = textwrap.dedent('''
    import sys, types, torch
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
    print("wrapped", getattr(TritonAttnBackend.init_forward_metadata, "__ddcheck_guard__", False))
    mode = types.SimpleNamespace(is_target_verify=lambda: True)
    fb = types.SimpleNamespace(seq_lens=torch.tensor([3, 9]), req_pool_indices=torch.tensor([0, 1]), batch_size=2,
                               forward_mode=mode, spec_info=types.SimpleNamespace(draft_token_num=17))
    TritonAttnBackend().init_forward_metadata(fb)
    print("no violation")
''')


def test_guard_reaches_a_child_process_that_imports_a_backend(tmp_path):
    tree = _tree(tmp_path)
    (tmp_path / "child.py").write_text(CHILD)
    parent = (f"import subprocess, sys; r = subprocess.run([sys.executable, {str(tmp_path / 'child.py')!r}]); "
              f"sys.exit(r.returncode)")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "guard", "--log", str(tmp_path / "g.jsonl"), "--",
                           sys.executable, "-c", parent], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert "wrapped True" in proc.stdout, proc.stderr
    assert "no violation" not in proc.stdout
    assert "GuardViolation" in proc.stderr and "qo_indptr" in proc.stderr
    assert proc.returncode == 1  # the child's exit code, passed through the parent and ddcheck guard
    assert json.loads((tmp_path / "g.jsonl").read_text().splitlines()[0])["W"] == 17
    # without the guard the same child runs through: the check is the guard's
    plain = subprocess.run([sys.executable, str(tmp_path / "child.py")], capture_output=True, text=True,
                           env={**env, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}, timeout=120)
    assert "wrapped False" in plain.stdout and "no violation" in plain.stdout


def test_warn_mode_prints_counts_at_exit_and_a_users_sitecustomize_still_runs(tmp_path):
    tree = _tree(tmp_path)
    (tmp_path / "child.py").write_text(CHILD)
    user = tmp_path / "usersite"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os; os.environ['USER_SITE_RAN'] = '1'\n")
    (tmp_path / "check.py").write_text("import os; print('user site', os.environ.get('USER_SITE_RAN'))\n")
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{user}"}
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "guard", "--mode", "warn", "--", sys.executable,
                           str(tmp_path / "child.py")], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "no violation" in proc.stdout
    assert "ddcheck guard (warn)" in proc.stderr and "violation(s) in 1 checked" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "guard", "--", sys.executable, str(tmp_path / "check.py")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert "user site 1" in proc.stdout


def test_guard_cli_exit_codes_and_nothing_installed(tmp_path):
    def ddcheck(*args):
        return subprocess.run([sys.executable, "-m", "ddcheck", "guard", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)

    assert ddcheck().returncode == 2 and "no command given" in ddcheck().stderr
    assert ddcheck("--mode", "loud", "--", "true").returncode == 2
    assert ddcheck("--every", "-1", "--", "true").returncode == 2
    missing = ddcheck("--", str(tmp_path / "no-such-program"))
    assert missing.returncode == 2 and "cannot run" in missing.stderr and "Traceback" not in missing.stderr
    assert ddcheck("--", sys.executable, "-c", "raise SystemExit(7)").returncode == 7
    site = Path(site_directory())
    assert sorted(p.name for p in site.iterdir() if p.name != "__pycache__") == ["sitecustomize.py"]
    env = guarded_env("warn", 5, None, base={"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(site), "/x"]
    assert env["DDCHECK_GUARD"] == "warn" and env["DDCHECK_GUARD_EVERY"] == "5"


def test_a_bad_mode_in_the_environment_says_so_and_runs_the_program():
    env = {**os.environ, "PYTHONPATH": f"{site_directory()}{os.pathsep}{ROOT}", "DDCHECK_GUARD": "loud"}
    proc = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.strip() == "ran" and "not raise or warn" in proc.stderr


# --------------------------------------------------------------------------- real releases


# The real-release runs: one guard_step.py process per release runs all of its backends (one worker of
# the suite runs these tests, so each release's process runs once). 0.5.10 holds every case (raises on
# each backend's field, quiet after the fix on Triton and FA3); 0.5.23's runs are the release matrix
# (its process takes ~3 minutes of CI's time: a larger tree, imported per run).
GUARD_RUNS = {"sglang==0.5.10": ("triton", "fa3", "trtllm_mha", "triton:fixed", "fa3:fixed"),
              "sglang==0.5.23": ("triton", "fa3", "fa3:fixed")}
MATRIX = pytest.mark.matrix  # a release beyond the CI sample's one here (tests/conftest.py CI_RELEASES)
RELEASE_RUNS = pytest.mark.xdist_group("guard-releases")


@pytest.fixture(scope="module")
def step():
    """``step(target, "BACKEND[:fixed]") -> (that run's report as printed, its release process's exit and output)``;
    a run with no report comes back empty, with the whole output to say why."""
    done: dict[str, tuple[dict[str, str], str]] = {}

    def get(target: str, run: str) -> tuple[str, str]:
        pytest.importorskip("triton")
        pytest.importorskip("msgspec")
        if target not in done:
            proc = subprocess.run([sys.executable, str(HERE / "guard_step.py"), target, "raise", *GUARD_RUNS[target]],
                                  capture_output=True, text=True, cwd=ROOT, timeout=1800,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            chunks = ("\n" + proc.stdout).split("\n== ")[1:]
            done[target] = ({c.partition("\n")[0]: c.partition("\n")[2] for c in chunks},
                            f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        reports, output = done[target]
        return reports.get(run, ""), output

    return get


def _paths(out: str) -> dict[str, str]:
    rows = [line.split(maxsplit=3) for line in out.splitlines() if line.startswith(("ddtree ", "control "))]
    return {f"{r[0]}/{r[1]}": " ".join(r[2:]) for r in rows}


@RELEASE_RUNS
@pytest.mark.network
@pytest.mark.parametrize("backend, field", [("triton", "qo_indptr"), ("fa3", "cu_seqlens_q"),
                                            ("trtllm_mha", "cu_seqlens_q")])
def test_unfixed_0_5_10_raises_with_the_field_named(backend, field, step):
    out, err = step("sglang==0.5.10", backend)
    paths = _paths(out)
    assert paths["ddtree/eager"].startswith("crash GuardViolation"), out + err
    assert field in paths["ddtree/eager"] and "W = 17 (C = 8)" in paths["ddtree/eager"]
    assert paths["control/eager"] == "ok" and paths["control/graph"] == "ok"


@RELEASE_RUNS
@pytest.mark.network
@pytest.mark.parametrize("target, run", [("sglang==0.5.10", "triton:fixed"), ("sglang==0.5.10", "fa3:fixed"),
                                         pytest.param("sglang==0.5.23", "triton", marks=MATRIX)])
def test_fixed_and_later_backends_do_not_raise(target, run, step):
    out, err = step(target, run)
    assert out.startswith("0 "), out + err
    assert "4 verify step(s) checked, no violation" in out


@RELEASE_RUNS
@pytest.mark.network
@MATRIX
def test_fa3_0_5_23_raises_and_after_fix_does_not(step):
    out, err = step("sglang==0.5.23", "fa3")
    assert _paths(out)["ddtree/eager"].startswith("crash GuardViolation"), out + err
    assert "cu_seqlens_q" in _paths(out)["ddtree/eager"]
    out, err = step("sglang==0.5.23", "fa3:fixed")
    assert out.startswith("0 "), out + err
    assert "4 verify step(s) checked, no violation" in out


def test_the_environment_variable_alone_turns_it_on_where_ddcheck_is_installed(tmp_path):
    """`pip install .` puts ddcheck-guard.pth in site-packages: DDCHECK_GUARD alone is enough, and
    without it nothing of ddcheck is imported at start-up."""
    import sysconfig

    if not (Path(sysconfig.get_paths()["purelib"]) / "ddcheck-guard.pth").is_file():
        pytest.skip("ddcheck is installed editable here (no ddcheck-guard.pth); `pip install .` ships it")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DDCHECK_GUARD")}
    probe = "import sys; print('imported', 'ddcheck' in sys.modules); import ddcheck.guard.hook as h; " \
            "print('active', h.active() is not None)"
    on = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                        env={**env, "DDCHECK_GUARD": "warn"}, timeout=60)
    assert "active True" in on.stdout, on.stderr
    off = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=60)
    assert "imported False" in off.stdout and "active False" in off.stdout
