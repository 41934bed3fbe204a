"""``ddcheck config`` against real SGLang releases (downloaded at test time with
``open_target("sglang==X")``) and a DDTree-enabled tree built from 0.5.16 the way the open DDTree PRs
do it (sgl-project/sglang#29907, "Add DDTree speculative decoding": registers ``DDTREE`` in
``SpeculativeAlgorithm``, adds ``--speculative-ddtree-budget`` (default block size - 1, set by its
start-up hook), rejects page_size != 1, hands out a DDTree worker whose verify input carries
``draft_token_num = budget + 1``, and in its CUDA-graph change captures target verify at
``ddtree_budget + 1``). W and the default budget come from that tree code, never from ddcheck's tables.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from ddcheck.base.errors import UsageError
from ddcheck.config import check_launch
from ddcheck.config.flags import flag_table
from ddcheck.tree.sources import open_target

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "launch"
network = pytest.mark.network


def argv_of(name: str) -> list[str]:
    lines = (FIX / name).read_text().splitlines()
    return [ln for ln in lines if ln and not ln.startswith("#")]


_TREES: dict[str, object] = {}


def release(ver: str):
    if ver not in _TREES:
        _TREES[ver] = open_target(f"sglang=={ver}")
    return _TREES[ver]


def run(ver_or_tree, argv, file=None):
    tree = release(ver_or_tree) if isinstance(ver_or_tree, str) else ver_or_tree
    return check_launch(argv, tree=tree, file=file)


MODELS = FIX / "models"


def base(*extra: str) -> list[str]:
    """A launch of a local Llama-shaped model folder (fixtures/launch/models/llama): the release's start-up
    code reads its config.json, so the tree's own code judges the launch."""
    return ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / "llama"), "--max-running-requests",
            "32", *extra]


# ---------------------------------------------------------------------------------------------
# the DDTree-enabled tree (built at test time; no SGLang source is kept in the repository)
# ---------------------------------------------------------------------------------------------

DDTREE_FIELD = '''    speculative_ddtree_budget: A[
        Optional[int],
        "DDTREE only. Tree node budget; the target verifies budget + 1 tokens per request. Defaults to block size - 1.",
    ] = None
'''
DDTREE_HOOK = '''

def _handle_ddtree(server_args: ServerArgs) -> None:
    if server_args.page_size != 1:
        raise ValueError(
            "DDTREE currently supports only page_size == 1. "
            f"Got page_size={server_args.page_size}."
        )
    _handle_dflash(server_args)
    if server_args.speculative_ddtree_budget is None:
        server_args.speculative_ddtree_budget = server_args.speculative_num_draft_tokens - 1
'''
DDTREE_WORKER = '''"""The DDTree worker of the PR, reduced to how it builds the verify input."""

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class DDTreeVerifyInput:
    draft_token_num: int
    tree_budget: int
    custom_mask: Optional[Any] = None


class DDTreeWorker:
    def __init__(self, server_args):
        self.tree_budget = int(server_args.speculative_ddtree_budget)

    def verify(self, batch, custom_mask):
        return DDTreeVerifyInput(draft_token_num=self.tree_budget + 1, tree_budget=self.tree_budget,
                                 custom_mask=custom_mask)
'''
DDTREE_CAPTURE = '''
        if model_runner.spec_algorithm.is_ddtree() and not model_runner.is_draft_worker:
            self.speculative_num_draft_tokens = model_runner.server_args.speculative_ddtree_budget + 1
'''


def _patch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: anchor not found"
    path.write_text(text.replace(old, new, 1))


def build_ddtree_tree(dest: Path, capture_at_w: bool = False) -> Path:
    """0.5.16 (fixed-width triton verify) + the DDTree flag, algorithm name and hook."""
    wheel = release("0.5.16").wheel
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest, [m for m in zf.namelist() if m.startswith("sglang/") and m.endswith(".py")])
    srt = dest / "sglang" / "srt"
    _patch(srt / "server_args.py", "    speculative_dspark_block_size: A[", DDTREE_FIELD + "    speculative_dspark_block_size: A[")
    _patch(srt / "speculative" / "spec_info.py", "    DFLASH = auto()\n", "    DFLASH = auto()\n    DDTREE = auto()\n")
    _patch(srt / "speculative" / "spec_info.py", "        if self.is_dflash():\n            _handle_dflash(server_args)",
           "        if self.is_ddtree():\n            _handle_ddtree(server_args)\n"
           "        elif self.is_dflash():\n            _handle_dflash(server_args)")
    _patch(srt / "speculative" / "spec_info.py", "            _handle_dflash,\n", "            _handle_dflash,\n            _handle_ddtree,\n")
    _patch(srt / "speculative" / "spec_info.py", "    def is_dflash(self) -> bool:",
           "    def is_ddtree(self) -> bool:\n        return self == SpeculativeAlgorithm.DDTREE\n\n    def is_dflash(self) -> bool:")
    _patch(srt / "speculative" / "spec_info.py", "        if self.is_dflash():\n            # V2 worker",
           "        if self.is_ddtree():\n            from sglang.srt.speculative.ddtree_worker import DDTreeWorker\n\n"
           "            return DDTreeWorker\n\n        if self.is_dflash():\n            # V2 worker")
    (srt / "speculative" / "ddtree_worker.py").write_text(DDTREE_WORKER)
    hook = srt / "arg_groups" / "speculative_hook.py"
    hook.write_text(hook.read_text() + DDTREE_HOOK)
    if capture_at_w:
        runner = srt / "model_executor" / "runner" / "decode_cuda_graph_runner.py"
        text = runner.read_text()
        m = re.search(r"        self\.speculative_num_draft_tokens = \(\n.*?\n        \)\n", text, re.S)
        runner.write_text(text[: m.end()] + DDTREE_CAPTURE + text[m.end():])
    return dest / "sglang"


@pytest.fixture(scope="module")
def ddtree_tree(tmp_path_factory):
    """Built once per session (tests/config/test_config_rules.py's examples name it ``python/sglang``)."""
    if "python/sglang" not in _TREES:
        _TREES["python/sglang"] = open_target(str(build_ddtree_tree(tmp_path_factory.mktemp("ddtree"))))
    return _TREES["python/sglang"]


@pytest.fixture(scope="module")
def ddtree_capture_tree(tmp_path_factory):
    return open_target(str(build_ddtree_tree(tmp_path_factory.mktemp("ddtree_w"), capture_at_w=True)))


def ids(report, level="error"):
    return report.names(level)


# ---------------------------------------------------------------------------------------------
# parsing: flag sets per release, abbreviations, unknown names
# ---------------------------------------------------------------------------------------------

DOCS = sorted(p.name for p in FIX.glob("docs_*.argv"))


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
QWEN = {**LLAMA, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
# The docs' models, as config.json shapes (written for these tests, not the models' own files).
DOCS_MODELS = {
    "meta-llama/Llama-2-7b-chat-hf": LLAMA, "meta-llama/Meta-Llama-3.1-8B-Instruct": LLAMA,
    "meta-llama/Meta-Llama-3-8B-Instruct": LLAMA,
    "lmsys/sglang-EAGLE-llama2-chat-7B": {**LLAMA, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1},
    "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B": {**LLAMA, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1},
    "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B": {**LLAMA, "architectures": ["LlamaForCausalLMEagle3"],
                                                      "num_hidden_layers": 1, "draft_vocab_size": 32000},
    "XiaomiMiMo/MiMo-7B-RL": {**QWEN, "architectures": ["MiMoForCausalLM"], "model_type": "mimo",
                              "num_nextn_predict_layers": 1},
    "Qwen/Qwen2.5-7B-Instruct": QWEN, "Qwen/Qwen2.5-1.5B-Instruct": QWEN, "meta-llama/Llama-3.1-8B-Instruct": LLAMA,
}


@pytest.fixture
def docs_hub(tmp_path, monkeypatch):
    """The docs' hub ids in an on-disk Hugging Face cache, read offline, as SGLang reads them."""
    rev = "0" * 40
    for repo, config in DOCS_MODELS.items():
        base = tmp_path / ("models--" + repo.replace("/", "--"))
        (base / "snapshots" / rev).mkdir(parents=True)
        (base / "snapshots" / rev / "config.json").write_text(json.dumps(config))
        (base / "refs").mkdir()
        (base / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@network
@pytest.mark.parametrize("name", DOCS)
def test_docs_commands_pass_on_their_release(name, docs_hub):
    r = run("0.5.10", argv_of(name))
    if name == "docs_specv2.argv":
        # SGLANG_ENABLE_SPEC_V2=True in front of the command is the tree's environment: its create_worker
        # hands out StandaloneWorkerV2, whose draft part builds the verify input (W from there)
        assert r.settings.env == {"SGLANG_ENABLE_SPEC_V2": "True"}
        assert r.settings.verify_width is not None and r.settings.verify_input is not None
    assert r.exit_code == 0, (r.findings, r.not_judged)
    assert r.settings.algorithm in ("EAGLE", "EAGLE3", "STANDALONE")


@network
def test_docs_command_with_hub_ids_out_of_reach_could_not_be_judged(tmp_path, monkeypatch):
    """Not in the cache and offline: the tree reads the model's config, which ddcheck does not have."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = check_launch(argv_of("docs_eagle2.argv"), sglang="sglang==0.5.10")  # a fresh tree: nothing kept from a run
    assert r.exit_code == 3 and any("--model-config" in x for x in r.not_judged)


@network
def test_a_launch_not_judged_is_an_unsuccessful_sarif_run_that_says_why(tmp_path, monkeypatch, capsys):
    """SARIF carries what a text report says under "not judged": a CI reader sees why it is 3 (GitHub's
    annotation of it: tests/rules/test_one_road.py, through the same road)."""
    from ddcheck.cli.config import config_command

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert config_command(argv_of("docs_eagle2.argv"), fmt="sarif", sglang="sglang==0.5.10", cache=False) == 3
    invocation = json.loads(capsys.readouterr().out)["runs"][0]["invocations"][0]
    assert invocation["exitCode"] == 3 and invocation["executionSuccessful"] is False
    said = [n["message"]["text"] for n in invocation["toolExecutionNotifications"]]
    assert said and all(x.startswith("not judged: ") for x in said) and any("--model-config" in x for x in said)


@network
@pytest.mark.parametrize("name", DOCS)
def test_docs_commands_fail_where_cuda_graph_max_bs_is_ambiguous(name):
    argv = argv_of(name)
    r = run("0.5.23", argv)
    if "--cuda-graph-max-bs" in argv:
        assert ids(r) == {"parse-ambiguous-flag"}
        assert "0.5.23" in r.findings[0].message and "--cuda-graph-max-bs-decode" in r.findings[0].message
    else:
        assert "parse-ambiguous-flag" not in ids(r)


@network
def test_cuda_graph_max_bs_is_a_deprecated_alias_on_0_5_16():
    r = run("0.5.16", base("--speculative-algorithm", "EAGLE", "--cuda-graph-max-bs", "8"))
    assert not ids(r) and r.settings.cuda_graph_max_bs == 8


@network
def test_unknown_flag_names_the_release():
    argv = base("--speculative-algorithm", "EAGLE", "--speculative-dflash-block-size", "8")
    r = run("0.5.10", argv)
    assert ids(r) == {"parse-unknown-flag"} and "0.5.10" in r.findings[0].message
    assert "parse-unknown-flag" not in ids(run("0.5.16", argv))


@network
def test_a_typo_d_flag_gets_the_closest_of_the_releases_own_flags():
    """Issue 49: a mistyped flag is named with the closest option strings of the release's parser, and the
    finding says SGLang stops at start-up, not argparse's exit status (ddcheck's own is 1)."""
    r = run("0.5.10", base("--speculative-algorithm", "EAGLE", "--speculative-num-stpes", "3", "--no-such-flag", "3"))
    assert ids(r) == {"parse-unknown-flag"} and r.exit_code == 1
    f = r.findings[0]
    assert "--speculative-num-stpes: did you mean --speculative-num-steps" in f.message, f.message
    assert "--no-such-flag:" not in f.message  # nothing of the release's is close to it
    assert "SGLang would stop at start-up" in f.message and "exit 2" not in f.message
    assert f.hint.startswith("use the flag you meant")
    amb = run("0.5.10", base("--speculative-algorithm", "EAGLE", "--speculative-d", "x"))
    assert ids(amb) == {"parse-ambiguous-flag"} and "--speculative-d: did you mean --speculative-draft-" in \
        amb.findings[0].message


@network
def test_ddtree_budget_flag_unknown_on_releases():
    for ver in ("0.5.16", "0.5.23"):
        r = run(ver, base("--speculative-algorithm", "DFLASH", "--speculative-ddtree-budget", "16"))
        assert ids(r) == {"parse-unknown-flag"} and ver in r.findings[0].message


@network
def test_ddtree_algorithm_unknown_on_releases(ddtree_tree):
    r = run("0.5.10", base("--speculative-algorithm", "DDTREE"))  # argparse choices: exit 2
    assert ids(r) == {"unknown-algorithm"} and r.findings[0].consequence == "PARSE" and "0.5.10" in r.findings[0].message
    r = run("0.5.23", base("--speculative-algorithm", "DDTREE"))  # registry lookup at start-up
    assert ids(r) == {"unknown-algorithm"} and r.findings[0].consequence == "REJECT" and "0.5.23" in r.findings[0].message
    assert "unknown-algorithm" not in ids(run(ddtree_tree, base("--speculative-algorithm", "DDTREE")))


@network
def test_prefix_abbreviations_follow_argparse():
    r = run("0.5.10", base("--speculative-algo", "EAGLE", "--speculative-num-st", "3", "--speculative-eagle", "1",
                           "--speculative-num-draft", "4"))
    assert not ids(r) and (r.settings.num_steps, r.settings.eagle_topk, r.settings.num_draft_tokens) == (3, 1, 4)
    r = run("0.5.10", base("--speculative-algorithm", "EAGLE", "--speculative-d", "x"))
    assert ids(r) == {"parse-ambiguous-flag"}


@network
def test_invalid_value_and_missing_model():
    assert ids(run("0.5.10", base("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "x"))) == \
        {"parse-invalid-value"}
    assert ids(run("0.5.10", ["--speculative-algorithm", "EAGLE"])) == {"parse-invalid-value"}  # --model-path required


@network
def test_config_file_merges_like_sglang(ddtree_tree, docs_hub):
    r = run(ddtree_tree, [], file=str(FIX / "origin_ddtree.yaml"))
    assert ids(r) == {"verify-width"} and not r.settings.cuda_graph
    r = run(ddtree_tree, ["--speculative-ddtree-budget", "7"], file=str(FIX / "origin_ddtree.yaml"))  # CLI wins
    assert not ids(r) and r.settings.verify_width == 8
    assert run("0.5.10", [], file=str(FIX / "eagle_ok.yaml")).exit_code == 0


# ---------------------------------------------------------------------------------------------
# the origin case, exact
# ---------------------------------------------------------------------------------------------

@network
def test_origin_ddtree_budget_16_is_corrupt(ddtree_tree):
    r = run(ddtree_tree, argv_of("origin_ddtree.argv") + ["--disable-cuda-graph"])
    assert ids(r) == {"verify-width"} and r.exit_code == 1
    f = r.findings[0]
    assert f.consequence == "CORRUPT" and f.backend == "triton"
    assert (r.settings.verify_width, r.settings.num_draft_tokens) == (17, 8)
    assert f.evidence and all(e.path.endswith("layers/attention/triton_backend.py") and e.line > 0 for e in f.evidence)
    assert "--speculative-ddtree-budget 7" in f.hint and "ddcheck fix" in f.hint


@network
def test_origin_budget_7_is_clean(ddtree_tree):
    r = run(ddtree_tree, argv_of("origin_ddtree.argv") + ["--speculative-ddtree-budget", "7"])
    # infos only: the tree's handler sets C from --speculative-dflash-block-size and reads the draft config
    assert r.exit_code == 0 and not ids(r, None) - {"sglang-max-running-requests", "sglang-num-draft-tokens",
                                                    "tree-needs"}
    assert r.settings.resolved_by == "tree" and ids(r, "warning") == set()
    r = run(ddtree_tree, [a for a in argv_of("origin_ddtree.argv") if a not in ("--speculative-ddtree-budget", "16")])
    assert r.settings.ddtree_budget == 7 and r.exit_code == 0  # default budget = block size - 1


@network
def test_origin_after_ddcheck_fix_is_clean(ddtree_tree, tmp_path):
    from ddcheck.fix.api import fix_tree

    out = tmp_path / "sglang"  # named like the package whether fix writes it flat or nested
    fix_tree(str(ddtree_tree.root), out)
    fixed = open_target(str(next(p for p in (out / "sglang", out) if (p / "srt").is_dir())))
    r = run(fixed, argv_of("origin_ddtree.argv") + ["--disable-cuda-graph"])
    assert "verify-width" not in ids(r), r.findings


@network
def test_origin_with_cuda_graphs_crashes_without_capture_at_w(ddtree_tree, ddtree_capture_tree):
    r = run(ddtree_tree, argv_of("origin_ddtree.argv"))
    assert ids(r) == {"verify-width", "verify-graph-width"}
    g = next(f for f in r.findings if f.rule == "DD201")
    assert g.consequence == "CRASH" and "cuda_graph_runner" in g.evidence[0].path
    r = run(ddtree_capture_tree, argv_of("origin_ddtree.argv"))
    assert "verify-graph-width" not in ids(r)
    assert run(ddtree_tree, argv_of("origin_ddtree.argv") + ["--speculative-ddtree-budget", "7"]).exit_code == 0


# DDTREE with page size 16 rejected by the PR hook: rules/DD231 (its examples run in tests/config/test_config_rules.py)


# ---------------------------------------------------------------------------------------------
# tree verify vs the custom mask
# ---------------------------------------------------------------------------------------------

@network
def test_tree_verify_on_backend_ignoring_custom_mask(ddtree_tree):
    argv = [a if a != "triton" else "trtllm_mha" for a in argv_of("origin_ddtree.argv")] + \
        ["--speculative-ddtree-budget", "7"]
    r = run(ddtree_tree, argv)
    assert "tree-mask" in ids(r) and "trtllm_mha_backend.py" in r.findings[0].evidence[0].path
    eagle = base("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
    assert "tree-mask" not in ids(run("0.5.10", eagle + ["--speculative-eagle-topk", "1", "--attention-backend", "torch_native"]))


# ---------------------------------------------------------------------------------------------
# EAGLE shapes (and below: what SGLang rejects or rewrites). Each rule's bad and good launch are its
# examples (rules/DD2xx/*.launch, run by tests/config/test_config_rules.py); these tests pin what the
# examples do not: levels, evidence, the settings, other releases.
# ---------------------------------------------------------------------------------------------

def eagle(steps, topk, draft, *extra, algo="EAGLE"):
    return base("--speculative-algorithm", algo, "--speculative-num-steps", str(steps), "--speculative-eagle-topk",
                str(topk), "--speculative-num-draft-tokens", str(draft), *extra)


# an EAGLE tree too small for the draft tokens: rules/DD204 (its examples run in tests/config/test_config_rules.py)


@network
def test_topk_on_mla_backend_that_only_supports_topk_1():
    r = run("0.5.23", eagle(3, 2, 4, "--attention-backend", "flashmla"))
    f = next(f for f in r.findings if f.rule == "DD205")
    assert f.severity.value == "error" and f.consequence == "CRASH" and "flashmla_backend.py" in f.evidence[0].path


def _topk4_on_flashinfer(model: str) -> list[str]:
    """Issue 49's launch: EAGLE topk 4, flashinfer (whose MLA module alone refuses topk > 1: 0.5.10
    flashinfer_mla_backend.py:912-914), the model named by hub id, its config given to ddcheck."""
    return ["python", "-m", "sglang.launch_server", "--model-path", model, "--max-running-requests", "32",
            "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "x", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "16", "--attention-backend",
            "flashinfer"]


@network
def test_mla_topk_is_decided_by_the_trees_model_config(tmp_path, monkeypatch):
    """DD205 from facts: 0.5.10's ModelConfig makes DeepseekV3ForCausalLMNextN an MLA model
    (configs/model_config.py:436-453), so its flashinfer draft runs the MLA module and the server dies: an
    error citing that line; a Llama EAGLE draft is MHA there (:560): no DD205 and no hedge; no draft
    config for a hub id: not judged, naming --draft-config."""
    pytest.importorskip("torch")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    tree = release("0.5.10")
    dsv3 = check_launch(_topk4_on_flashinfer("deepseek-ai/DeepSeek-V3"), tree=tree,
                        model_config=str(MODELS / "deepseek_v3"), draft_config=str(MODELS / "deepseek_v3_nextn"))
    f = next(f for f in dsv3.findings if f.rule == "DD205")
    assert f.severity.value == "error" and f.consequence == "CRASH" and "uses MLA" in f.message and "if " not in f.message
    assert [(e.path, e.line) for e in f.evidence][0][0] == "sglang/srt/layers/attention/flashinfer_mla_backend.py"
    assert ("sglang/srt/configs/model_config.py", 453) in [(e.path, e.line) for e in f.evidence]
    assert dsv3.settings.draft_mla is True and dsv3.exit_code == 1

    llama = check_launch(_topk4_on_flashinfer("meta-llama/Llama-3.1-8B-Instruct"), tree=tree,
                         model_config=str(MODELS / "llama"), draft_config=str(MODELS / "llama_eagle"))
    assert not [f for f in llama.findings if f.rule == "DD205"], llama.findings
    assert not any("MLA" in f.message for f in llama.findings)
    assert llama.settings.draft_mla is False and llama.not_judged == [] and llama.exit_code == 0, llama.not_judged

    unknown = check_launch(_topk4_on_flashinfer("meta-llama/Llama-3.1-8B-Instruct"), tree=tree,
                           model_config=str(MODELS / "llama"))
    assert not [f for f in unknown.findings if f.rule == "DD205"] and unknown.exit_code == 3
    assert any(x.startswith("mla-topk:") and "--draft-config" in x for x in unknown.not_judged), unknown.not_judged


@network
def test_multi_layer_eagle_draft_tokens():
    r = run("0.5.16", eagle(3, 2, 6, "--enable-multi-layer-eagle"))
    f = next(f for f in r.findings if f.rule == "DD206")
    assert f.consequence == "CRASH" and "multi_layer_eagle" in f.evidence[0].path


@network
def test_eagle_shape_flags_all_or_none():
    r = run("0.5.10", base("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"))
    # the release's own start-up code dies on the half-given shape (comparing None with an int): not a
    # raise of its own, so the launch is not judged by it; the tree's guard for the shape (eagle-params)
    # is still an error, and errors win
    assert r.exit_code == 1 and "eagle-params" in ids(r, "error"), r.findings
    assert any("server_args.py" in x for x in r.not_judged), r.not_judged
    r = run("0.5.10", base("--speculative-algorithm", "EAGLE"))
    assert r.exit_code == 0 and r.settings.auto_params


# ---------------------------------------------------------------------------------------------
# what SGLang itself rejects or rewrites at start-up, per release
# ---------------------------------------------------------------------------------------------

# trtllm_mha with topk > 1: rules/DD220 (its examples run in tests/config/test_config_rules.py)


@network
def test_topk_page_size_allow_list_differs_by_release():
    argv = eagle(3, 4, 8, "--attention-backend", "triton", "--page-size", "16")
    r = run("0.5.10", argv)  # 0.5.10 allows flashinfer, fa3 only
    f = next(f for f in r.findings if f.rule == "DD221")
    assert "flashinfer, fa3" in f.message and f.evidence[0].path.endswith("server_args.py")
    assert "sglang-topk-page-size" not in ids(run("0.5.16", argv))  # triton added to the allow-list


@network
def test_spec_v2_env_with_topk():
    argv = ["SGLANG_ENABLE_SPEC_V2=True"] + eagle(3, 4, 8)
    assert "sglang-spec-v2-topk" not in ids(run("0.5.16", argv))  # 0.5.16 removed the env var and the rule


@network
def test_topk_1_rewrites_draft_tokens():
    r = run("0.5.23", eagle(3, 1, 8))
    assert "sglang-eagle-topk1-draft" in ids(r, "warning") and r.settings.num_draft_tokens == 4
    # W from 0.5.23's own worker: EAGLEWorkerV2's draft worker (eagle_worker_v2.py:1335) builds the
    # verify input through eagle_worker_common.py:472, draft_token_num=num_draft_tokens (its :717 call)
    assert r.exit_code == 0 and r.settings.verify_width == 4 and r.settings.verify_input == "EagleVerifyInput"
    assert "sglang-eagle-topk1-draft" not in ids(run("0.5.23", eagle(3, 1, 4)), None)


@network
def test_dflash_block_size_vs_draft_tokens():
    dflash = base("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                  "--speculative-dflash-block-size", "8", "--attention-backend", "triton")
    assert "sglang-dflash-block-size" in ids(run("0.5.16", dflash + ["--speculative-num-draft-tokens", "16"]))
    assert run("0.5.16", dflash + ["--speculative-num-draft-tokens", "8"]).exit_code == 0


@network
def test_dflash_verifies_a_chain_on_fa3():
    """0.5.16's DFLASH worker builds its verify input with ``custom_mask = None`` (dflash_worker_v2.py:1636-1645,
    "standard causal masking"; dflash_info.py:34-36: "DFLASH verify is linear"): a keyword passed as None
    sets no mask, so FA3 attending the block as a chain is right, not a tree-mask error."""
    dflash = base("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", str(MODELS / "llama_eagle"),
                  "--speculative-num-draft-tokens", "8", "--attention-backend", "fa3")
    r = run("0.5.16", dflash)
    assert r.settings.verify_input == "DFlashVerifyInput" and "custom_mask" not in r.settings.verify_input_sets
    assert "tree-mask" not in ids(r, None) and r.exit_code == 0, (r.findings, r.not_judged)


@network
def test_dp_attention_rejections():
    dp = ["--enable-dp-attention", "--tp-size", "2", "--dp-size", "2"]
    assert run("0.5.10", eagle(3, 1, 4, *dp)).exit_code == 0
    dflash = base("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                  "--speculative-dflash-block-size", "8", *dp)
    assert "sglang-dflash-dp-attention" not in ids(run("0.5.23", dflash))  # 0.5.23 supports it (conditionally)


# ---------------------------------------------------------------------------------------------
# outputs, exit codes, cache, speed
# ---------------------------------------------------------------------------------------------

@network
def test_config_command_json_and_exit_codes(capsys, ddtree_tree):
    from ddcheck.cli.config import config_command

    tree = ddtree_tree
    assert config_command(argv_of("origin_ddtree.argv") + ["--disable-cuda-graph"], tree=tree, fmt="json") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["release"] == "0.5.16" and data["findings"][0]["rule"] == "DD200"
    assert data["findings"][0]["consequence"] == "CORRUPT" and data["settings"]["verify_width"] == 17
    assert data["findings"][0]["severity"] == "error" and data["exit_code"] == 1
    assert config_command(argv_of("origin_ddtree.argv") + ["--speculative-ddtree-budget", "7"], tree=tree) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "no findings" or last.startswith("0 errors, "), last
    for argv, kwargs in (([], {"tree": tree}), (["--model-path", "m"], {"sglang": "/nonexistent/sglang"}),
                         (["--model-path", "m"], {"tree": tree, "fmt": "xml"})):
        with pytest.raises(UsageError):
            config_command(argv, **kwargs)


@network
def test_flag_table_cached(tmp_path, monkeypatch):
    """The flag table is read once per tree content and then served from the cache (no timing here:
    speed is measured by bench/ scripts, not asserted in unit tests)."""
    import ddcheck.config.flags as flags

    tree = release("0.5.23")
    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path))
    first = flag_table(tree)
    assert list((tmp_path / "flags").glob("*.json"))
    def extract_again(tree):
        raise AssertionError("the flag table was extracted again instead of read from the cache")

    monkeypatch.setattr(flags, "extract", extract_again)
    assert flag_table(tree) == first
