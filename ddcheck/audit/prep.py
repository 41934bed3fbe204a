"""One target's static columns: ``scan`` (error findings in each backend's file) and ``fix`` (the default
fix's edits there), and the fixed backend files the ``fixed`` and ``capture`` smoke runs are handed.

It runs in its own process (``python -m ddcheck.audit.prep OUT.json < request.json``), as smoke's runs
do: a scan of a release is CPU work that would otherwise hold the audit's one interpreter, and a crash
ends the worker, not the audit (its cells are then not judged, with why).
"""

from __future__ import annotations

from pathlib import Path


def prepare(target: str, backends: list[str], fixed_dir: str) -> dict:
    """backend -> ``{"relpath"}`` and its ``scan`` and ``fix`` facts, or ``{"absent": True}`` where the tree
    has no file for it. A fix is written under ``fixed_dir``: the fixed backend file, or a fixed copy of
    the whole tree where the fix also changes other files."""
    from ddcheck.contract import backends as known
    from ddcheck.fix.runner import fix_tree, plan, verify_fixes
    from ddcheck.config.evidence import tree_settings
    from ddcheck.tree.sources import content_hash, open_target

    tree = open_target(target)
    settings = tree_settings(tree)
    files = {}
    for name in backends:
        f = tree.find(known.get(name).relpath)
        files[name] = f.relpath if f is not None else None
    wanted = {r for r in files.values() if r}
    fixes, result = plan([tree], settings, unsafe=False, only=wanted) if wanted else ([], None)
    rejected = {fx.display: why for fx, why in verify_fixes(fixes, [tree], settings, result)} if fixes else {}
    out: dict[str, dict] = {}
    whole_tree: str | None = None
    for name, relpath in files.items():
        if relpath is None:
            out[name] = {"absent": True}
            continue
        errors = [f for f in result.findings if f.relpath == relpath and f.severity.value == "error"]
        scan = [{"rule": f.rule, "line": f.line, "symbol": f.symbol, "message": f.message,
                 "function": f.function or "", "fixable": f.fix is not None and f.fix.safety.value == "safe"}
                for f in errors]
        fix: dict = {"edits": [], "status": "nothing to fix"}
        fx = next((x for x in fixes if x.relpath == relpath and x.changed), None)
        if fx is not None:
            fix["edits"] = [{"path": e.path or relpath, "line": e.line, "kind": e.kind, "text": e.text,
                             "rule": f.rule} for f in fx.fixed for e in f.fix.edits]
            linked = [x for x in fixes if x.display in fx.linked]
            if fx.display in rejected:
                fix.update(status="fix rolled back", why=rejected[fx.display])
            elif linked:  # a helper's new parameter and its callers' keyword: the whole tree, fixed
                if whole_tree is None:
                    dest = Path(fixed_dir) / f"tree-{content_hash(target.encode())[:12]}"
                    if not dest.is_dir():
                        fix_tree(target, dest)
                    whole_tree = str(dest)
                fix.update(status="pending fix", fixed_tree=whole_tree,
                           also=sorted(x.relpath for x in linked))
            else:
                after = fx.after
                path = Path(fixed_dir) / content_hash(after) / Path(relpath).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(after)
                fix.update(status="pending fix", fixed_file=str(path))
        elif any(not s["fixable"] for s in scan):
            fix["status"] = "no safe fix"
        out[name] = {"relpath": relpath, "scan": scan, "fix": fix}
    for fe in (result.errors if result is not None else []):  # a file the scan could not read
        for name, relpath in files.items():
            if relpath and fe.path.endswith(relpath) and name in out:
                out[name].setdefault("errors", []).append(fe.message)
    return out


def main() -> None:
    from ddcheck.base.children import serve

    serve(lambda request: prepare(request["target"], request["backends"], request["fixed_dir"]))


if __name__ == "__main__":
    main()
