"""The words of a launch command: the server's own arguments, the environment in front of the launcher,
and which values cross a process boundary as JSON."""

from __future__ import annotations

import re

_LAUNCHERS = re.compile(r"(^|[./])launch_server(\.py)?$|^serve$")


def server_argv(argv: list[str]) -> list[str]:
    """The server's own arguments: drops ``ENV=x``, ``python -m sglang.launch_server``,
    ``sglang serve`` and the like in front of them."""
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    for i, tok in enumerate(argv):
        if tok.startswith("-") and tok != "-m":
            break
        if _LAUNCHERS.search(tok):
            return argv[i + 1:]
    return argv


def launch_env(argv: list[str]) -> dict[str, str]:
    """``NAME=value`` assignments in front of the launcher (``SGLANG_ENABLE_SPEC_V2=True python ...``,
    ``env A=1 B=2 python ...``), as the shell hands them to the server."""
    env = {}
    words = argv[1:] if argv[:1] == ["--"] else argv
    if words[:1] == ["env"]:
        words = words[1:]
    for tok in words:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", tok)
        if not m:
            break
        env[m.group(1)] = m.group(2)
    return env


def jsonable(v) -> bool:
    import json

    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False
