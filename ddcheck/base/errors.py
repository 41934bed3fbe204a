"""ddcheck's own errors and the one exit-code contract, shared by every command but ``guard`` (which
returns the served command's own code). The ground floor: imports nothing.

``EXIT_CLEAN`` (0) everything the verdict covers was judged and holds; ``EXIT_FINDINGS`` (1) findings
or a bug (an unreadable or unparsable file inside a target is a listed finding); ``EXIT_USAGE`` (2) a
usage error, a target the user named that cannot be obtained (missing path, no Python files, unknown
version), or an internal error; ``EXIT_NOT_JUDGED`` (3) could not judge: an asked-for check, the
tree's code, or a file it needs could not run or be read. Findings win: 1 when there are findings and
something else could not be judged. No filter (``--ignore``, ``--fail-on``, a suppression) turns a 3
into a 0. ``EXIT_INTERRUPTED`` (130) Ctrl-C. A script gates on ``== 0``.
"""

from __future__ import annotations

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_NOT_JUDGED = 3
EXIT_INTERRUPTED = 130

# The contract in words, as README.md's table and every command's --help state it.
CONTRACT = ("Exit codes: 0 everything this verdict covers was judged and holds; 1 findings (a bug); "
            "2 usage error, or a target that cannot be obtained; 3 could not judge (a check, the tree's code "
            "or a file it needs could not run or be read; findings win over 3).")


def verdict(findings: bool, not_judged: bool) -> int:
    """The contract's code for a run that was able to start: findings win over could-not-judge."""
    return EXIT_FINDINGS if findings else EXIT_NOT_JUDGED if not_judged else EXIT_CLEAN


def not_judged(what: str, why: str, to_judge: str) -> dict[str, str]:
    """One entry of a JSON report's ``not_judged`` list: what was not judged, why, and what would
    make it judgeable (what to install, pass or fix)."""
    return {"what": what, "why": why, "to_judge": to_judge}


class UsageError(Exception):
    """A bad invocation of ddcheck itself (an argument, a target, a setting): printed without a
    traceback, exit code ``EXIT_USAGE``. The one class every command raises and ``ddcheck.cli.app.main``
    and ``ddcheck.entry`` catch."""
