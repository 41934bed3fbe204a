"""``ddcheck config`` runs the target's own start-up code: the tree's ServerArgs, its handler or its
``__post_init__`` statement by statement, its own model-config reader, with stand-ins only for what
cannot run here (issue 31).

The fixture tree (fixtures/launch/startup_tree) has the shape of SGLang 0.4.10's start-up code: no
speculative handler, the speculative settings resolved inline in ``ServerArgs.__post_init__`` after a
step that probes the GPU with a vendor tool, and a ``get_config`` that hands the model to a
third-party reader that is never installed. The release tests (marked network) run the real wheels:
the oldest, one in between and the newest of 0.4.10 .. 0.5.23."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddcheck.config import check_launch
from ddcheck.config.treerun import run_handler
from ddcheck.tree.sources import open_target

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "launch" / "startup_tree"
SERVER_ARGS = "sglang/srt/server_args.py"
network = pytest.mark.network

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


def _line(text: str) -> int:
    """The fixture's line holding ``text`` (1-based), so the pins follow the fixture."""
    lines = (FIX / SERVER_ARGS).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _folder(root: Path, name: str, **config) -> str:
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.fixture(scope="module")
def tree():
    return open_target(str(FIX / "sglang"))


def _values(model: str, draft: str, **extra) -> dict:
    return {"model_path": model, "speculative_algorithm": "EAGLE", "speculative_draft_model_path": draft,
            "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 8, **extra}


def test_post_init_runs_statement_by_statement_with_the_local_config(tree, tmp_path):
    model = _folder(tmp_path, "model", **LLAMA)
    draft = _folder(tmp_path, "draft", **{**LLAMA, "architectures": ["LlamaForCausalLMEagle"]})
    r = run_handler(tree, _values(model, draft))
    assert r.ok and r.rejected is None, r.failed
    assert str(r.handler) == f"{SERVER_ARGS}:{_line('def __post_init__')}"
    # the tree's own rewrite of C, recorded at its line, and its warnings
    c = [w for w in r.writes if w.name == "speculative_num_draft_tokens"]
    assert [(w.old, w.new, str(w.where)) for w in c] == [
        (8, 4, f"{SERVER_ARGS}:{_line('self.speculative_num_draft_tokens = self.speculative_num_steps + 1')}")]
    assert r.values["speculative_num_draft_tokens"] == 4 and r.values["max_running_requests"] == 48
    assert any("adjusted to speculative_num_steps + 1" in log.message for log in r.logged)
    # the GPU probe could not run: its statement, and the one reading what it would have set, are
    # limitations of the run, not its end (and not a rejection: the raise is the probe's, not start-up's)
    probe = [x for x in r.limitations if "fixture-vendor-smi not found" in x]
    assert probe and f"{SERVER_ARGS}:{_line('gpu_mem = gpu_memory_gb()')}" in probe[0]
    assert any("gpu_mem" in x and f":{_line('if self.mem_fraction_static is None')}" in x for x in r.limitations)
    assert r.values["mem_fraction_static"] is None
    # an assert whose own test fails to evaluate (on a value the probe's statement left unset) is not
    # the tree's rejection either: only its AssertionError would be
    assert any("TypeError" in x and f":{_line('mem_fraction_static % 1 < 1')}" in x for x in r.limitations), \
        r.limitations
    # both models' config.json were read by ddcheck where the tree's third-party reader cannot run
    read = [x for x in r.limitations if "config.json" in x]
    assert any(model in x for x in read) and any(draft in x for x in read)
    assert all("fixture_absent_hub.AutoConfig.from_pretrained" in x for x in read)


def test_the_trees_reader_runs_around_the_answer(tree, tmp_path):
    """``get_config`` is the tree's: it rewrites what the file says (``Renamed`` -> Llama), so the
    model is accepted; the draft's ``eagle_steps`` from its file sets the steps the tree leaves unset."""
    model = _folder(tmp_path, "model", **{**LLAMA, "architectures": ["Renamed"]})
    draft = _folder(tmp_path, "draft", **{**LLAMA, "eagle_steps": 5})
    r = run_handler(tree, _values(model, draft, speculative_num_steps=None))
    assert r.ok and r.rejected is None, r.failed
    assert r.values["speculative_num_steps"] == 5 and r.values["speculative_num_draft_tokens"] == 6


def test_a_raise_of_the_start_up_code_is_the_trees_rejection(tree, tmp_path):
    model = _folder(tmp_path, "model", **{**LLAMA, "architectures": ["UnsupportedForCausalLM"]})
    r = run_handler(tree, _values(model, _folder(tmp_path, "draft", **LLAMA)))
    assert r.rejected == "ValueError: UnsupportedForCausalLM has no EAGLE draft support"
    assert str(r.rejected_at) == f"{SERVER_ARGS}:{_line('raise ValueError')}"


def test_a_hub_model_is_read_as_absent_by_the_trees_own_reader(tree, tmp_path):
    """No config for a hub id: the tree's ``get_config`` answers an absent config for it, and what the
    tree then reads of it is a need; a direct read (``.architectures[0]``) ends the run (tables)."""
    model = _folder(tmp_path, "model", **LLAMA)
    r = run_handler(tree, _values(model, "org/draft-on-the-hub"))
    assert r.ok, r.failed
    assert [n.what for n in r.needs] == ["the draft model's config: `eagle_steps`"]
    assert r.values["speculative_num_draft_tokens"] == 4
    r = run_handler(tree, _values("org/model-on-the-hub", "org/draft-on-the-hub"))
    assert not r.ok and "the model's config is not known to ddcheck" in r.failed
    assert r.needs[0].what == "the model's config: `architectures`" and r.needs[0].supply == "--model-config PATH"


def test_explicit_config_files_override_the_folder(tree, tmp_path):
    model = _folder(tmp_path, "model", **LLAMA)
    r = run_handler(tree, _values(model, "org/draft"), draft_config={**LLAMA, "eagle_steps": 2},
                    model_config={**LLAMA, "architectures": ["UnsupportedForCausalLM"]})
    assert r.rejected is not None and "UnsupportedForCausalLM" in r.rejected


def test_the_trees_modules_are_put_away_after_the_run(tree, tmp_path):
    import sys

    before = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "sglang"}
    run_handler(tree, _values(_folder(tmp_path, "model", **LLAMA), "org/draft"))
    after = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "sglang"}
    assert after.keys() == before.keys() and all(after[n] is before[n] for n in before)
    assert "fixture_absent_hub" not in sys.modules


# --------------------------------------------------------------------------- real releases

MODEL_FOLDERS = {"target": LLAMA, "EAGLE": {**LLAMA, "architectures": ["LlamaForCausalLMEagle"], "num_hidden_layers": 1},
                 "EAGLE3": {**LLAMA, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
                            "draft_vocab_size": 32000}}


@network
@pytest.mark.parametrize("release", ["0.4.10.post2", "0.5.7", "0.5.10", "0.5.23"])
def test_eagle_with_a_local_model_folder_is_resolved_by_the_tree(release, tmp_path):
    """The issue's case: on the oldest, middle and newest releases, an EAGLE launch whose
    --model-path is a local folder is resolved by the tree's own start-up code, not the tables. The
    worker is found three ways: built under the algorithm's test in the scheduler (0.4.10), a factory
    registered under the algorithm's name (0.5.7: spec_info.py's register_speculative_algorithm("EAGLE",
    worker_cls=_create_eagle_worker), whose plain return is EAGLEWorker(**kwargs)), the algorithm's own
    method (0.5.10, 0.5.23)."""
    model = _folder(tmp_path, "model", **MODEL_FOLDERS["target"])
    draft = _folder(tmp_path, "draft", **MODEL_FOLDERS["EAGLE"])
    launch = ["python", "-m", "sglang.launch_server", "--model-path", model, "--speculative-algorithm", "EAGLE",
              "--speculative-draft-model-path", draft, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4"]
    r = check_launch(launch, sglang=f"sglang=={release}")
    assert r.settings.resolved_by == "tree" and r.tree_note is None, r.tree_note
    if release.startswith("0.4."):
        # 0.4.10 builds its EAGLE worker in the scheduler, under the algorithm's own test
        # (managers/scheduler.py:324-328: `if self.spec_algorithm.is_eagle(): ... EAGLEWorker(...)`), whose
        # verify input is built at eagle_worker.py:568: W = 4 from the tree. Its attention backend is picked
        # in the model runner, not at start-up: not judged (exit 3) until the launch names one.
        assert (r.settings.num_draft_tokens, r.settings.verify_width) == (4, 4) and r.exit_code == 3
        assert r.settings.verify_input_at.startswith("sglang/srt/speculative/eagle_worker.py:")
        assert r.not_judged and all("--attention-backend" in x for x in r.not_judged), r.not_judged
        named = check_launch(launch + ["--attention-backend", "fa3"], sglang=f"sglang=={release}")
        assert named.exit_code == 0 and named.settings.verify_width == 4, (named.not_judged, named.findings)
    else:
        assert (r.settings.num_draft_tokens, r.settings.verify_width) == (4, 4) and r.exit_code == 0
    path, line = r.handler.rsplit(":", 1)
    assert path.endswith(".py") and int(line) > 0
    assert any("config.json" in x for x in r.tree_limitations)  # the model's config came from the folder
    assert json.loads(r.model_dump_json())["settings"]["resolved_by"] == "tree"


# --------------------------------------------------------------------------- declared decisions (0.5.21+)

DECLARING = FIX.parent / "declaring_tree" / "sglang"
HOOK = "sglang/srt/arg_groups/speculative_hook.py"


def _hook_line(text: str) -> int:
    lines = (DECLARING.parent / HOOK).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_decisions_declared_on_the_record_are_writes():
    """The handler never assigns a field: it hands its decisions to a tree function with the record
    (``declare(server_args, source, field=value)``). Those are the run's writes, at the handler's
    line, and the values after it; the record's own __post_init__ does not run (the handler does)."""
    tree = open_target(str(DECLARING))
    r = run_handler(tree, {"model_path": "m", "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                           "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 8})
    assert r.ok and r.rejected is None, r.failed
    assert str(r.handler) == f"{HOOK}:{_hook_line('def handle_speculative_decoding')}"
    assert [(w.name, w.old, w.new, str(w.where)) for w in r.writes] == [
        ("speculative_algorithm", "NEXTN", "EAGLE", f"{HOOK}:{_hook_line('alias')}"),
        ("speculative_num_draft_tokens", 8, 4, f"{HOOK}:{_hook_line('topk1')}")]
    assert (r.values["speculative_algorithm"], r.values["speculative_num_draft_tokens"]) == ("EAGLE", 4)
    r = run_handler(tree, {"model_path": "m", "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                           "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8, "page_size": 16})
    assert r.rejected == "ValueError: topk > 1 needs page_size 1 here" and r.writes == []


def test_modules_the_start_up_imports_run_without_its_profile_hooks(tmp_path, monkeypatch):
    """The profile hooks that watch the start-up's calls (returns picked, decisions declared) are off
    while a module it imports runs its import-time code (the tree's and torch's: most of a run), and
    on again for the start-up's own calls after the import."""
    import sys

    from ddcheck.tree.runtime import UnprofiledImports

    (tmp_path / "ddcheck_probe_imported.py").write_text("def body_call():\n    return 1\n\nVALUE = body_call()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def hook(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    def start_up():
        import ddcheck_probe_imported

        return ddcheck_probe_imported.body_call()

    previous = sys.getprofile()
    with UnprofiledImports():
        sys.setprofile(hook)
        try:
            assert start_up() == 1
        finally:
            sys.setprofile(previous)
    sys.modules.pop("ddcheck_probe_imported", None)
    assert "<module>" not in seen and seen.count("body_call") == 1  # the call after the import only
    assert seen[0] == "start_up"
