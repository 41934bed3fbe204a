"""What ``ddcheck smoke`` needs installed, checked before it runs (``ddcheck smoke``, ``config --smoke``):
one line that says what is wrong and what to install. Versions are read from the installed
distributions' metadata, so nothing is imported. The ranges are the ``[smoke]`` extra's
(pyproject.toml); docs/smoke.md says where each bound comes from."""

from __future__ import annotations

import re
from importlib import metadata

# (lowest, first unsupported) release of each, as pyproject.toml's [smoke] extra states them
SUPPORTED = {"torch": ((2, 8), (2, 15)), "triton": ((3, 4), (3, 9))}
# numpy from which Triton's interpreter (smoke on the CPU) fails on scalar loads: "only 0-dimensional
# arrays can be converted to Python scalars" (triton 3.6.0 with numpy 2.4.x), and the triton whose
# interpreter runs with it (3.8.0 with numpy 2.4.6: sglang 0.5.10's verdict unchanged, docs/smoke.md)
NUMPY_INTERPRETER_BREAK = (2, 4)
TRITON_TAKES_NUMPY_2_4 = (3, 8)
EXTRA = "pip install 'ddcheck[smoke]'"


def installed_version(module: str) -> str | None:
    """The version of the distribution that provides the top-level ``module`` (torch, triton, numpy):
    its own name, else whichever distribution ships that package (pytorch-triton, a vendor's torch)."""
    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        pass
    for name in metadata.packages_distributions().get(module, []):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string (``2.13.0+cpu`` -> (2, 13)); (0, 0) when it has none."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m[1]), int(m[2])) if m else (0, 0)


def _range(low: tuple[int, int], high: tuple[int, int]) -> str:
    return f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"


def problem(device: str = "cpu") -> str | None:
    """What is wrong with this environment for a smoke run on ``device``, in one line with what to install;
    None when torch, triton and (on the CPU) numpy are in the supported ranges."""
    for module, (low, high) in SUPPORTED.items():
        found = installed_version(module)
        if found is None:
            return (f"{module} is not installed: ddcheck smoke runs the tree's code with torch and triton; "
                    f"{EXTRA} (a CPU build: --index-url https://download.pytorch.org/whl/cpu)")
        if not low <= release(found) < high:
            return (f"{module} {found} is not a version ddcheck smoke supports ({module}{_range(low, high)}); "
                    f"{EXTRA}")
    numpy, triton = installed_version("numpy"), installed_version("triton") or ""
    if device == "cpu" and numpy is not None and release(numpy) >= NUMPY_INTERPRETER_BREAK \
            and release(triton) < TRITON_TAKES_NUMPY_2_4:
        b, t = NUMPY_INTERPRETER_BREAK, TRITON_TAKES_NUMPY_2_4
        return (f"numpy {numpy} breaks the interpreter of triton {triton}, which smoke runs on the CPU (scalar "
                f"loads fail); pip install 'numpy<{b[0]}.{b[1]}' (or triton>={t[0]}.{t[1]}), or run on a GPU with "
                f"--device cuda")
    return None
