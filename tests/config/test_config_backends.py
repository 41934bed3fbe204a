"""``ddcheck config`` judges the backend the launch will really get, on the GPU it will run on (issue 30).

* ``--gpu`` takes an architecture or a product; without it the local GPU is found (nvidia-smi, the
  driver's files) or an sm90 is assumed, and the report says which and how;
* a backend the launch leaves to SGLang is picked by the tree's own start-up code for that GPU and
  model, reported with the tree line that picked it, and judged as if the launch had passed it.

The backends pinned below were read in the releases' sources (file:line in each test); the whole
release x GPU x model table is ``bench/config_backends.py`` -> docs/config-backends.md.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ddcheck.rules import get_rule
from ddcheck.base.errors import UsageError
from ddcheck.config import check_launch
from ddcheck.config.gpu import GpuError, arch_of_product, detect_gpu, parse_gpu, resolve_gpu
from ddcheck.tree.sources import open_target

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "fixtures" / "launch" / "models"
STARTUP = REPO / "fixtures" / "launch" / "startup_tree" / "sglang"
network = pytest.mark.network


# --------------------------------------------------------------------------- --gpu


@pytest.mark.parametrize("value, arch", [("H100", "sm90"), ("h200", "sm90"), ("NVIDIA H100 80GB HBM3", "sm90"),
                                         ("H20", "sm90"), ("A100", "sm80"), ("B200", "sm100"), ("GB200", "sm100"),
                                         ("RTX 5090", "sm120"), ("rtx-pro-6000", "sm120"), ("L40S", "sm89"),
                                         ("sm80", "sm80"), ("sm_100", "sm100"), ("SM120", "sm120"), ("9.0", "sm90"),
                                         ("10.0", "sm100")])
def test_gpu_takes_an_architecture_or_a_product(value, arch):
    g = parse_gpu(value)
    assert (g.vendor, g.arch, g.assumed) == ("nvidia", arch, False)
    assert g.source == f"--gpu {value}"


def test_vendors_still_work_and_say_what_they_assume():
    g = parse_gpu("nvidia")
    assert (g.vendor, g.arch, g.assumed) == ("nvidia", "sm90", True)
    assert (parse_gpu("amd").arch, parse_gpu("cpu").arch, parse_gpu("npu").vendor) == ("gfx942", None, "npu")
    assert arch_of_product("NVIDIA A10") == "sm86" and arch_of_product("NVIDIA A100-SXM4-80GB") == "sm80"
    assert arch_of_product("Tesla K80") is None


def test_an_unknown_gpu_is_a_usage_error():
    with pytest.raises(GpuError, match="not a vendor"):
        parse_gpu("Z9000")
    with pytest.raises(UsageError, match="Z9000"):
        check_launch(["--model-path", "m", "--speculative-algorithm", "EAGLE"], tree=open_target(str(STARTUP)),
                     gpu="Z9000")


# --------------------------------------------------------------------------- detection


def _fake_smi(folder: Path, body: str) -> None:
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_the_local_gpu_is_read_from_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, 'echo "NVIDIA H200, 9.0"\necho "NVIDIA H200, 9.0"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    g = resolve_gpu(None)
    assert (g.vendor, g.arch, g.name, g.assumed) == ("nvidia", "sm90", "NVIDIA H200", False)
    assert g.source == "nvidia-smi; 2 GPUs"
    _fake_smi(tmp_path, 'echo "NVIDIA B200, 10.0"\n')
    assert resolve_gpu("auto").arch == "sm100"


def test_a_driver_without_compute_cap_is_read_by_the_name(tmp_path, monkeypatch):
    _fake_smi(tmp_path, 'case "$1" in *compute_cap*) echo "Field compute_cap is not valid" >&2; exit 2;; esac\n'
                        'echo "NVIDIA A100-SXM4-80GB"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    g = resolve_gpu(None)
    assert (g.arch, g.name, g.source) == ("sm80", "NVIDIA A100-SXM4-80GB", "nvidia-smi")


def test_no_gpu_visible_is_said_and_assumed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    g = detect_gpu(proc_pattern=str(tmp_path / "gpus" / "*" / "information"))
    assert (g.vendor, g.arch, g.name, g.assumed) == ("nvidia", "sm90", None, True)
    assert "no GPU visible here" in g.source and "pass --gpu" in g.source
    info = tmp_path / "gpus" / "0000:01:00.0" / "information"
    info.parent.mkdir(parents=True)
    info.write_text("Model: \t\t NVIDIA GeForce RTX 5090\nIRQ:   42\n")
    g = detect_gpu(proc_pattern=str(tmp_path / "gpus" / "*" / "information"))
    assert (g.arch, g.name, g.source, g.assumed) == ("sm120", "NVIDIA GeForce RTX 5090", str(info), False)


def test_a_hanging_nvidia_smi_does_not_hang_config(tmp_path, monkeypatch):
    import ddcheck.config.gpu as gpu

    _fake_smi(tmp_path, "sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu, "NVIDIA_SMI_TIMEOUT", 0.5)
    g = gpu.detect_gpu(proc_pattern=str(tmp_path / "none"))
    assert g.assumed and g.arch == "sm90"


def test_the_report_says_which_gpu_and_how(tmp_path, monkeypatch):
    """End to end on the small start-up fixture: the fake nvidia-smi's GPU is the one in the report;
    without it, the assumed one, marked."""
    tree = open_target(str(STARTUP))
    argv = ["--model-path", str(MODELS / "llama"), "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    _fake_smi(tmp_path, 'echo "NVIDIA GeForce RTX 5090, 12.0"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    data = json.loads(check_launch(argv, tree=tree).model_dump_json())
    assert data["gpu"] == {"vendor": "nvidia", "arch": "sm120", "name": "NVIDIA GeForce RTX 5090",
                           "source": "nvidia-smi", "assumed": False}
    (tmp_path / "nvidia-smi").unlink()
    monkeypatch.setenv("PATH", str(tmp_path))
    data = json.loads(check_launch(argv, tree=tree).model_dump_json())
    assert data["gpu"]["assumed"] is True and data["gpu"]["arch"] == "sm90"


# --------------------------------------------------------------------------- the releases' own choice


def _eagle(model: str, draft: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / model), "--speculative-algorithm",
            "EAGLE", "--speculative-draft-model-path", str(MODELS / draft), "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


MHA, MLA = ("llama", "llama_eagle"), ("deepseek_v3", "deepseek_v3_nextn")


# (release, gpu, model) -> (backend, the line that picked it, the line that set the field), read in the
# release's source: 0.5.10 server_args.py:2243 `return "fa3"` in _get_default_attn_backend's MHA branch
# under is_hopper_with_cuda_12_3() (assigned at :2288 in _handle_attention_backend_compatibility);
# :1608 `self.attention_backend = "trtllm_mla"` under is_sm100_supported() for DeepSeek V3 in
# _handle_model_specific_adjustments. 0.5.16 server_args.py:4931 `return "flashinfer"` (MHA, not Hopper
# nor sm100, flashinfer available and no attention sinks), declared by run_post_process_pass into the
# record's stash at arg_groups/overrides.py:199 (`stash.append(entry)`). 0.5.23
# arg_groups/model_override_base.py:338 `return "fa3"` in get_default_attn_backend's MLA branch under
# get_platform().is_hopper_with_cuda_12_3, declared at arg_groups/overrides.py:106 (declare_resolution).
SAMPLES = [
    ("0.5.10", "H100", MHA, "fa3", "sglang/srt/server_args.py:2243", "sglang/srt/server_args.py:2288"),
    ("0.5.10", "sm100", MLA, "trtllm_mla", None, "sglang/srt/server_args.py:1608"),
    ("0.5.16", "A100", MHA, "flashinfer", "sglang/srt/server_args.py:4931", "sglang/srt/arg_groups/overrides.py:199"),
    ("0.5.23", "sm90", MLA, "fa3", "sglang/srt/arg_groups/model_override_base.py:338",
     "sglang/srt/arg_groups/overrides.py:106"),
    # 0.5.23 model_overrides/deepseek_v2.py:185 `overrides["attention_backend"] = "trtllm_mla"` under
    # get_platform().is_sm100, in _deepseek_family_overrides (:51), collected into the record's stash whole:
    # no return picks it, the declaring function is where it was set.
    ("0.5.23", "B200", MLA, "trtllm_mla", None, "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:51"),
]


@network
@pytest.mark.cases
@pytest.mark.parametrize("release, gpu, models, backend, picked_at, set_at", SAMPLES)
def test_an_eagle_launch_without_backend_gets_the_releases_choice(release, gpu, models, backend, picked_at, set_at):
    r = check_launch(_eagle(*models), sglang=f"sglang=={release}", gpu=gpu)
    main = next(p for p in r.backends_picked if p.field == "attention_backend")
    assert (main.value, main.picked_at, main.set_at) == (backend, picked_at, set_at)
    assert r.settings.verify_backend == backend and r.settings.attention_backend == backend
    assert not r.verdict_depends_on_gpu and r.gpu.assumed is False


# --------------------------------------------------------------------------- the fork launch

CORPUS = Path(os.environ.get("DDCHECK_FORKS", REPO.parent / "shared" / "corpus" / "ddtree-forks"))
HZ = CORPUS / "HaiyuZhou-sglang-ad7ab160.tar.gz"


@pytest.fixture(scope="module")
def hz(tmp_path_factory):
    if not HZ.is_file():
        pytest.skip(f"no DDTree fork corpus at {CORPUS}")
    import tarfile

    dest = tmp_path_factory.mktemp("hz")
    with tarfile.open(HZ) as tar:
        tar.extractall(dest, filter=lambda m, p: None if m.issym() or m.islnk() else tarfile.data_filter(m, p))
    return open_target(str(dest / "sglang"))


@pytest.fixture(scope="module")
def dflash_draft(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dflash")
    config = json.loads((MODELS / "llama" / "config.json").read_text())
    config.update(architectures=["DFlashDraftModel"], num_hidden_layers=1, block_size=16)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _ddtree(draft: str, *extra: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / "llama"), "--speculative-algorithm",
            "DDTREE", "--speculative-draft-model-path", draft, "--speculative-ddtree-budget", "16", *extra]


def _verdict(r) -> list[tuple[str, str, str]]:
    return sorted((get_rule(f.rule).name, f.severity.value, f.consequence) for f in r.findings)


def test_the_fork_ddtree_launch_on_hopper_is_judged_on_fa3_as_if_passed(hz, dflash_draft):
    """The fork picks fa3 on Hopper (its server_args.py:2774, `return "fa3"` under
    is_hopper_with_cuda_12_3() and topk one): the launch without a backend flag gets the findings,
    at the levels, of the launch with --attention-backend fa3: two errors."""
    smoked = []

    def smoke(s, tree):  # what `config --smoke` is handed: the picked backend as the verify backend
        smoked.append(s.verify_backend)
        from ddcheck.rules import LaunchRule, all_rules

        return [LaunchRule(all_rules()["DD250"]).finding("right", backend="x", C=0, W=0, inputs="", verdict="ran")]

    auto = check_launch(_ddtree(dflash_draft), tree=hz, gpu="H100", smoke=smoke)
    assert smoked == ["fa3"]
    auto.findings = [f for f in auto.findings if f.rule != "DD250"]
    given = check_launch(_ddtree(dflash_draft, "--attention-backend", "fa3"), tree=hz, gpu="H100")
    assert [(p.field, p.value, p.picked_at) for p in auto.backends_picked] == [
        ("attention_backend", "fa3", "sglang/srt/server_args.py:2774")]
    assert auto.settings.verify_backend == "fa3" and given.backends_picked == []
    assert _verdict(auto) == _verdict(given)
    assert {(get_rule(f.rule).name, f.consequence) for f in auto.errors} == {("verify-width", "CORRUPT"),
                                                                  ("verify-graph-width", "CRASH")}
    assert auto.exit_code == given.exit_code == 1


def test_the_fork_ddtree_launch_on_blackwell_follows_the_forks_choice(hz, dflash_draft):
    """On sm100 the fork's MHA branch skips trtllm_mha (topk is not set yet when it runs: DDTREE's
    handler sets it later) and takes `return "flashinfer"` (server_args.py:2791); the verdict is
    flashinfer's: its verify path is per-step here, the graph capture at C still crashes."""
    r = check_launch(_ddtree(dflash_draft), tree=hz, gpu="B200")
    assert [(p.value, p.picked_at) for p in r.backends_picked] == [("flashinfer", "sglang/srt/server_args.py:2791")]
    assert r.gpu.arch == "sm100" and r.gpu.name == "B200"
    assert {(get_rule(f.rule).name, f.consequence) for f in r.errors} == {("verify-graph-width", "CRASH")}
    assert "verify-width" not in r.names()
