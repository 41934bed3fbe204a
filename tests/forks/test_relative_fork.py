"""A fork that imports its DDTree worker and verify input relatively (``from .ddtree_info import ...``):
scan, config, smoke's reading of the verify input and the worker evaluation all follow those imports
(issue #33). fixtures/trees/relative_ddtree is newer_ddtree with its speculative code moved into a
package ``speculative/ddtree/`` reached only through relative imports (see fixtures/trees/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.scan.api import scan
from ddcheck.tree.sources import open_target
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.worker import capture_width, verify_inputs

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "fixtures" / "trees" / "relative_ddtree"
SPEC = "sglang/srt/speculative/"
VALUES = {"speculative_ddtree_budget": 16, "speculative_num_draft_tokens": 16, "speculative_eagle_topk": None}


def line_of(relpath: str, text: str) -> int:
    """The line of ``text`` in the fixture's file ``relpath`` (``sglang/...``)."""
    lines = (TREE / relpath).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def tree():
    return open_target(str(TREE))


def test_scan_follows_a_relatively_imported_helper():
    result = scan([str(TREE)])
    backend = "srt/layers/attention/flashattention_backend.py"
    call = line_of(f"sglang/{backend}", "verify_query_offsets(bs,")
    (f,) = [f for f in result.findings if f.path.endswith(backend) and f.line == call]
    # followed into fa3_layout.py (``from .fa3_layout import ...``): C is named as the helper's parameter
    assert "passed as `tokens_per_req` to `verify_query_offsets()`" in f.message and "fa3_layout.py" in f.message


def test_worker_evaluation_reads_the_relatively_imported_worker_and_input(tree):
    facts = verify_inputs(tree, "DDTREE", VALUES)
    assert (facts.worker, facts.worker_path) == ("DDTreeWorker", SPEC + "ddtree/ddtree_worker.py")
    (c,) = facts.choices
    assert (c.cls, c.width, c.input_type, c.cls_path) == ("DDTreeVerifyInput", 17, "DDTREE_VERIFY",
                                                          SPEC + "ddtree/ddtree_info.py")
    assert "relative_fork_marker" in c.attrs  # the fork's own field: its class, not a guess
    # ``from ..speculative.spec_utils import ...`` in model_runner: the capture width goes through it
    assert capture_width(tree, "DDTREE", VALUES)[0] == 17


def test_smoke_reads_the_forks_verify_input_class(tree):
    from ddcheck.smoke.api import _tree_inputs
    from ddcheck.smoke.report import SmokeReport

    report = SmokeReport(target=str(TREE), backend="triton", device="cpu", dtype="float32", budget=16, width=17,
                         num_draft_tokens=16)
    found = _tree_inputs(tree, report)(17, 16)
    assert (found.cls, found.module) == ("DDTreeVerifyInput", "sglang.srt.speculative.ddtree.ddtree_info")
    assert "relative_fork_marker" in found.fields and not found.probe
    built = line_of(SPEC + "ddtree/ddtree_worker.py", "return DDTreeVerifyInput")
    assert report.verify_inputs["W=17 C=16"] == f"DDTreeVerifyInput ({SPEC}ddtree/ddtree_worker.py:{built})"


def test_config_cli_sees_the_relatively_imported_input():
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "ddcheck", "config", "--sglang", str(TREE), "--format", "json",
                          "--", "python", "-m", "sglang.launch_server", "--model-path", "m",
                          "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "16",
                          "--speculative-num-draft-tokens", "16", "--attention-backend", "fa3"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1, out.stderr  # fa3 lays out verify at C: a real finding, not an error
    report = json.loads(out.stdout)
    s = report["settings"]
    built = line_of(SPEC + "ddtree/ddtree_worker.py", "return DDTreeVerifyInput")
    assert (s["verify_input"], s["verify_input_at"]) == ("DDTreeVerifyInput", f"{SPEC}ddtree/ddtree_worker.py:{built}")
    assert "relative_fork_marker" in s["verify_input_fields"] and s["verify_input_type"] == "DDTREE_VERIFY"
    # graphs captured at budget + 1 (through the relative import of spec_utils): no capture/replay crash
    assert s["capture_width"] == 17
    ids = {f["rule"] for f in report["findings"] if f["severity"] == "error"}
    assert ids == {"DD200"}  # verify-width


# ------------------------------------------------------------------------------------------ the model


def _tree_of(tmp_path: Path, files: dict[str, bytes | str]):
    for rel, data in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return open_target(str(tmp_path))


def test_relative_imports_resolve_as_python_does(tmp_path):
    tree = _tree_of(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/a/__init__.py": "from .b import Worker\nfrom .. import top\n",  # package: '.' is sglang.a
        "sglang/a/b.py": "from .c import Input\nfrom ..d import helper\nclass Worker: pass\n",  # module: '.' is sglang.a
        "sglang/a/c.py": "class Input:\n    x: int\n",
        "sglang/d.py": "def helper():\n    return 1\n",
    })
    mods = TreeModules.of(tree)
    assert mods.imports_of("sglang.a") == {"Worker": "sglang.a.b", "top": "sglang"}
    assert mods.imports_of("sglang.a.b") == {"Input": "sglang.a.c", "helper": "sglang.d"}
    assert mods.find_class("Worker", "sglang.a")[0] == "sglang/a/b.py"
    assert mods.find_class("Input", "sglang.a.b")[2] == "sglang.a.c"
    assert mods.find_function("helper", "sglang.a.b")[1] == "sglang.d"


def test_each_file_is_parsed_once_and_a_bad_one_is_none(tmp_path, monkeypatch):
    tree = _tree_of(tmp_path, {
        "sglang/ok.py": "X = 1\n",
        "sglang/syntax.py": "def (\n",
        "sglang/nul.py": b"x = 1\0\n",
        "sglang/undecodable.py": b"x = '\xff\xfe'\n",
        "sglang/deep.py": "x = " + "(" * 5000 + ")" * 5000 + "\n",
    })
    assert TreeModules.of(tree) is TreeModules.of(tree)  # one model per tree
    mods = TreeModules.of(tree)
    for name in ("syntax", "nul", "undecodable", "deep"):
        assert mods.module(f"sglang.{name}") is None and f"sglang/{name}.py" in mods.errors
    first = mods.module("sglang.ok")[1]
    reads = []
    f = tree.file_at("sglang/ok.py")
    monkeypatch.setattr(type(f), "read_bytes", lambda self: reads.append(self.relpath) or self._read())
    assert mods.module("sglang.ok")[1] is first and mods.parsed("sglang/ok.py") is first
    assert reads == []  # parsed once: never read again


def test_a_class_chain_follows_bases_across_modules_through_a_same_named_subclass(tmp_path):
    """A fork's ``class EagleVerifyInput(EagleVerifyInput)`` over the release's: one chain, both
    classes, and a method only the base defines is the base's (config's evaluator, the worker reader)."""
    tree = _tree_of(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/spec/__init__.py": "",
        "sglang/spec/base.py": "class VerifyInput:\n    draft_token_num: int\n    def width(self):\n        return 1\n",
        "sglang/spec/fork.py": "from .base import VerifyInput\nclass VerifyInput(VerifyInput):\n    budget: int\n",
    })
    mods = TreeModules.of(tree)
    chain = mods.class_chain("VerifyInput", "sglang.spec.fork")
    assert [(rel, mod) for rel, _, mod in chain] == [("sglang/spec/fork.py", "sglang.spec.fork"),
                                                     ("sglang/spec/base.py", "sglang.spec.base")]
    fn, module = mods.method("VerifyInput", "sglang.spec.fork", "width")
    assert fn.name == "width" and module == "sglang.spec.base"
    assert mods.method("VerifyInput", "sglang.spec.fork", "absent") is None


def test_config_follows_an_entry_point_inherited_from_another_module(tmp_path):
    """A backend whose metadata entry point is its base's, in another module (as TRT-LLM MHA takes
    FlashInfer's): the helper that entry point calls on ``self`` is on the launch's path. Before the
    chain of bases came from the tree model, config walked same-module bases only, and called the
    helper "never" reached ("no entry point this launch uses calls it")."""
    from ddcheck.config.paths import Launch, finding_reach

    att = tmp_path / "sglang" / "srt" / "layers" / "attention"
    att.mkdir(parents=True)
    for d in (tmp_path / "sglang", tmp_path / "sglang" / "srt", tmp_path / "sglang" / "srt" / "layers", att):
        (d / "__init__.py").write_text("")
    (att / "base_backend.py").write_text(
        "class BaseBackend:\n"
        "    def init_forward_metadata(self, forward_batch):\n"
        "        self._verify_layout(forward_batch)\n")
    (att / "sub_backend.py").write_text(
        "import torch\n"
        "from .base_backend import BaseBackend\n\n\n"
        "class SubBackend(BaseBackend):\n"
        "    def __init__(self, model_runner):\n"
        "        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens\n\n"
        "    def _verify_layout(self, forward_batch):\n"
        "        if forward_batch.forward_mode.is_target_verify():\n"
        "            bs = forward_batch.batch_size\n"
        "            self.qo_indptr = torch.arange(0, bs * self.num_draft_tokens + 1, step=self.num_draft_tokens)\n")
    tree = open_target(str(tmp_path))
    found = [f for f in scan([str(tmp_path)]).findings if f.function == "SubBackend._verify_layout"]
    assert found, "the fixture's verify layout is a scan finding"
    launch = Launch(values={"speculative_num_draft_tokens": 8}, algorithm="EAGLE", input_cls=None,
                    input_fields=set(), graphs=False)
    assert {finding_reach(tree, f, launch).status for f in found} == {"reached"}
