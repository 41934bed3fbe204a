#!/usr/bin/env python3
"""Outputs of one ddcheck checkout, kept to compare with another's: a refactoring changes no output.

Records, for the checkout given (PYTHONPATH set to it, run in a scratch directory, no result cache):
  scan    `ddcheck scan --no-cache --format json TARGET` on sglang==0.5.10, 0.5.16, 0.5.23 and the three
          forks of ../shared/corpus/ddtree-forks, and the text report of each
  fix     `ddcheck fix --diff` and `ddcheck fix --diff --unsafe-fixes` of each of them
  config  `ddcheck config --format json --sglang FORK -- LAUNCH` for the forks' test launches
          (tests/forks/test_forks.py's), and EAGLE launches on the releases (RELEASE_LAUNCHES)
  smoke   `ddcheck smoke TARGET --format json` and its text (and with --launch), the verdict and exit
          code, on the releases and the forks (with --smoke; needs torch and triton, minutes on a CPU)
each to OUT/<case>.out (stdout, then the exit code). The forks are unpacked to one fixed folder
(``--forks``, default /tmp/ddcheck-same-output-forks) so the paths in the outputs agree between runs.

Usage:
  python bench/same_output.py record OUT [--checkout DIR] [--smoke [--smoke-device cuda]] [--only scan|fix|config|smoke]
         [--targets 0.5.10,hz,...]
  python bench/same_output.py compare OUT_BEFORE OUT_AFTER    (exit 1 and the differing cases if any)
         [--drop-keys rule,set_at]   (JSON keys a change added, left out of both sides before comparing)
         [--findings-said]   (config: each finding by rule, severity, consequence and message)
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("DDCHECK_FORKS", REPO.parent / "shared" / "corpus" / "ddtree-forks"))
FORKS = {"hz": "HaiyuZhou-sglang-ad7ab160.tar.gz", "dbg": "DB-Guo-sglang-ddtree-dev-514ea1f3.tar.gz",
         "rw": "Rancy-Wang-sglang-433c58ed.tar.gz"}
RELEASES = ("0.5.10", "0.5.16", "0.5.23")
SCRATCH = "<scratch>"
LAUNCH = "python -m sglang.launch_server --model-path m --speculative-draft-model-path d"
DDTREE = LAUNCH + " --speculative-algorithm DDTREE --speculative-num-draft-tokens 16"
DBG = LAUNCH + (" --speculative-algorithm DFLASH --speculative-dflash-enable-ddtree --speculative-ddtree-budget 7"
                " --speculative-num-draft-tokens 16 --attention-backend triton")
# (fork, launch): the launches tests/forks/test_forks.py checks
LAUNCHES = {
    "hz-ddtree-b3-triton-eager": ("hz", DDTREE + " --speculative-ddtree-budget 3 --attention-backend triton --disable-cuda-graph"),
    "hz-ddtree-b15-triton-graphs": ("hz", DDTREE + " --speculative-ddtree-budget 15 --attention-backend triton"),
    "hz-ddtree-b16-fa3-eager": ("hz", DDTREE + " --speculative-ddtree-budget 16 --attention-backend fa3 --disable-cuda-graph"),
    "hz-ddtree-b7-fa3-graphs": ("hz", DDTREE + " --speculative-ddtree-budget 7 --attention-backend fa3"),
    "hz-ddtree-no-c": ("hz", LAUNCH + " --speculative-algorithm DDTREE --speculative-ddtree-budget 7 --attention-backend triton"),
    "dbg-dflash-ddtree-triton": ("dbg", DBG),
    "dbg-dflash-ddtree-fa3": ("dbg", DBG.replace("triton", "fa3")),
    "dbg-dflash-without-ddtree": ("dbg", DBG.replace(" --speculative-dflash-enable-ddtree", "")),
}

MODELS = REPO / "fixtures" / "launch" / "models"  # this script's checkout's: the same paths in both records
EAGLE = ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / "llama"), "--speculative-algorithm",
         "EAGLE", "--speculative-draft-model-path", str(MODELS / "llama_eagle"), "--speculative-num-steps", "3"]
# launches on the releases (tests/config/test_config_startup.py's local model folders; bench/config_time.py's file)
RELEASE_LAUNCHES = {
    "eagle-local": ["--", *EAGLE, "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
    "eagle-local-topk4-triton": ["--", *EAGLE, "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens",
                                 "16", "--attention-backend", "triton"],
    "eagle-file": ["--file", str(REPO / "fixtures" / "launch" / "eagle_ok.yaml")],
}


def unpack(forks: Path, names: set[str] | None = None) -> dict[str, Path]:
    def keep(member, path):  # the archives hold a few symlinks out of the tree: skipped
        return None if member.issym() or member.islnk() else tarfile.data_filter(member, path)

    out = {}
    for name, archive in FORKS.items():
        if names is not None and name not in names:
            continue
        dest = forks / name
        if not (dest / "sglang").is_dir():
            with tarfile.open(CORPUS / archive) as tar:
                tar.extractall(dest, filter=keep)
        out[name] = dest / "sglang"
    return out


def cases(trees: dict[str, Path], only: str | None, smoke: bool, smoke_device: str = "cpu",
          names: set[str] | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    releases = [v for v in RELEASES if names is None or v in names]
    targets = {**{v: f"sglang=={v}" for v in releases}, **{name: str(tree) for name, tree in trees.items()}}
    if only in (None, "scan"):
        for name, target in targets.items():
            out[f"scan-{name}"] = ["scan", "--no-cache", "--format", "json", target]
            out[f"scan-{name}-text"] = ["scan", "--no-cache", target]
    if only in (None, "fix"):
        for name, target in targets.items():
            out[f"fix-{name}"] = ["fix", "--diff", target]
            out[f"fix-{name}-unsafe"] = ["fix", "--diff", "--unsafe-fixes", target]
    if only in (None, "config"):
        for case, (name, launch) in LAUNCHES.items():
            if name not in trees:
                continue
            out[f"config-{case}"] = ["config", "--format", "json", "--sglang", str(trees[name]), "--", *launch.split()]
        for v in releases:
            for case, launch in RELEASE_LAUNCHES.items():
                out[f"config-{v}-{case}"] = ["config", "--format", "json", "--sglang", f"sglang=={v}", *launch]
    if smoke and only in (None, "smoke"):
        for name, target in targets.items():
            out[f"smoke-{name}"] = ["smoke", target, "--format", "json", "--device", smoke_device]
            out[f"smoke-{name}-text"] = ["smoke", target, "--device", smoke_device]
        if "hz" in trees:
            out["smoke-hz-launch"] = ["smoke", str(trees["hz"]), "--format", "json", "--device", smoke_device,
                                      "--launch", LAUNCHES["hz-ddtree-b3-triton-eager"][1]]
    return out


def record(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    checkout = Path(args.checkout).resolve()
    names = set(args.targets.split(",")) if args.targets else None
    trees = unpack(Path(args.forks), names)
    from ddcheck.tree.sources import cache_dir

    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "cache").mkdir()
        Path(scratch, "cache", "wheels").symlink_to(cache_dir() / "wheels")  # the downloads shared, no result kept
        # the checkout first; what else was on the path (its dependencies, where they are not installed) after it
        path = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "DDCHECK_CACHE": f"{scratch}/cache", "NO_COLOR": "1",
               "COLUMNS": "200"}
        for case, argv in cases(trees, args.only, args.smoke, args.smoke_device, names).items():
            p = subprocess.run([sys.executable, "-m", "ddcheck", *argv], cwd=scratch, env=env, capture_output=True,
                               text=True)
            text = p.stdout.replace(scratch, SCRATCH)  # the wheels are fetched into the scratch cache
            (out / f"{case}.out").write_text(f"{text}\nexit {p.returncode}\n", encoding="utf-8")
            print(f"{case}: exit {p.returncode}, {len(p.stdout)} characters", flush=True)
    return 0


def _scrub(text: str) -> str:
    """A record's scratch folder as ``<scratch>`` (records made before it was written so), the private
    folder a tree's files run from (``/tmp/ddcheck-tree-XXXX``, in what the tree printed) as
    ``<tree>``, and smoke's wall times (``"seconds"``) left out: they differ from run to run."""
    text = re.sub(r"/tmp/tmp[A-Za-z0-9_]+(?=/)", SCRATCH, text)
    text = re.sub(r"/tmp/(ddcheck-config-[A-Za-z0-9_]+/)?ddcheck-tree-[A-Za-z0-9_]+(?=/)", "<tree>", text)
    return re.sub(r'"seconds": [0-9.]+', '"seconds": "_"', text)  # still JSON, for --drop-keys


def _drop(text: str, keys: set[str]) -> str:
    """A record whose output is JSON, without ``keys`` at any depth (fields a change added)."""
    import json

    body, sep, tail = text.rpartition("\nexit ")
    try:
        doc = json.loads(body)
    except ValueError:
        return text

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in keys}
        return [strip(x) for x in v] if isinstance(v, list) else v
    return json.dumps(strip(doc), indent=2) + sep + tail


def _findings_said(text: str) -> str:
    """A config record with each finding as what it says (rule id, severity, consequence, message; sorted):
    the comparison across issue 48's change of the findings' JSON (``level`` became ``severity``, ``id``
    the rule's name, dropped, ``fix`` the ``hint``; order by severity then rule)."""
    import json

    body, sep, tail = text.rpartition("\nexit ")
    try:
        doc = json.loads(body)
    except ValueError:
        return text
    if isinstance(doc, dict) and isinstance(doc.get("findings"), list):
        doc["findings"] = sorted(({"rule": f.get("rule"), "severity": f.get("severity", f.get("level")),
                                   "consequence": f.get("consequence"), "message": f.get("message")}
                                  for f in doc["findings"]), key=lambda f: json.dumps(f, sort_keys=True))
    return json.dumps(doc, indent=2) + sep + tail


def compare(args) -> int:
    a, b = Path(args.before), Path(args.after)
    keys = {k for k in (args.drop_keys or "").split(",") if k}
    names = sorted({p.name for p in a.glob("*.out")} | {p.name for p in b.glob("*.out")})
    differ = 0
    for name in names:
        said = _findings_said if args.findings_said and name.startswith("config-") else (lambda text: text)
        x = said(_drop(_scrub((a / name).read_text()), keys)) if (a / name).exists() else "(missing)\n"
        y = said(_drop(_scrub((b / name).read_text()), keys)) if (b / name).exists() else "(missing)\n"
        if x != y:
            differ += 1
            print(f"{name}: differs")
            sys.stdout.writelines(list(difflib.unified_diff(x.splitlines(True), y.splitlines(True), "before", "after"))[:40])
        else:
            print(f"{name}: byte-identical")
    print(f"{len(names) - differ} of {len(names)} identical")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--checkout", default=str(REPO))
    r.add_argument("--forks", default=os.path.join(tempfile.gettempdir(), "ddcheck-same-output-forks"))
    r.add_argument("--only", choices=("scan", "fix", "config", "smoke"))
    r.add_argument("--smoke", action="store_true")
    r.add_argument("--smoke-device", default="cpu", help="smoke's --device (cuda on a GPU machine: minutes, not hours)")
    r.add_argument("--targets", help="comma-separated: which of the releases and forks to record (default: all)")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--drop-keys", help="comma-separated JSON keys to leave out of both sides (fields a change added)")
    c.add_argument("--findings-said", action="store_true",
                   help="config records: compare each finding by what it says (rule, severity, consequence, message)")
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
