"""ddcheck's own errors and exit codes, shared by every command (the ground floor: imports nothing).

Exit codes, as the README states them: ``EXIT_CLEAN`` (0) nothing at or above the failing level;
``EXIT_FINDINGS`` (1) findings at or above it (or files that could not be scanned, a launch with errors,
a smoke run that found the bug); ``EXIT_USAGE`` (2) a usage error, a target that cannot be obtained,
or an internal error; ``EXIT_NOT_JUDGED`` (3) could not judge: an asked-for check, the tree's code or a
file it needs could not be read or run (findings win: 1 when there are findings as well);
``EXIT_INTERRUPTED`` (130) Ctrl-C.
"""

from __future__ import annotations

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_NOT_JUDGED = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A bad invocation of ddcheck itself (an argument, a target, a setting): printed without a
    traceback, exit code ``EXIT_USAGE``. The one class every command raises and ``ddcheck.cli.main``
    and ``ddcheck.entry`` catch."""
