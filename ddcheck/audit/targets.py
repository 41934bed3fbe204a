"""Targets of an audit: scan's targets (a checkout, an installed package, a wheel, ``sglang==X``) and
version ranges (``'sglang>=0.5.10,<0.5.24'``), expanded to the releases the package index has (PEP 440,
:mod:`packaging.specifiers`; pre-releases only where the range names one)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ddcheck.base.errors import UsageError
from ddcheck.tree.sources import PACKAGE_VERSION_RE, cache_dir, installed_sglang

# a requirement on sglang that is not an exact pin: `sglang>=0.5.10,<0.5.24`, `sglang~=0.5.10`
RANGE_RE = re.compile(r"^\s*sglang\s*(?P<spec>(?:[<>!~=]=?|===)\s*[^\s,]+(?:\s*,\s*(?:[<>!~=]=?|===)\s*[^\s,]+)*)\s*$")


@dataclass(frozen=True)
class Target:
    """One tree of the audit: what ``open_target`` opens, and the short name tables show."""

    spec: str  # sglang==X, a path (directory, wheel)
    label: str  # 0.5.10, the folder's or wheel's name


def index_versions(package: str = "sglang") -> list[str]:
    """The versions the package index lists for ``package`` (``pip index versions``), oldest first."""
    from packaging.version import InvalidVersion, Version

    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True,
                          text=True)
    found = re.search(r"Available versions: (.*)", proc.stdout)
    if proc.returncode != 0 or found is None:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"the package index's versions of {package} could not be listed: {last[0]}")
    out = []
    for v in found.group(1).split(","):
        try:
            out.append(Version(v.strip()))
        except InvalidVersion:
            continue
    return [str(v) for v in sorted(out)]


def last_post_releases(versions: list[str]) -> list[str]:
    """Of each release, its last post-release (0.5.3, 0.5.3.post1, 0.5.3.post3 -> 0.5.3.post3)."""
    from packaging.version import Version

    last: dict[tuple, Version] = {}
    for v in map(Version, versions):
        if v.release not in last or v > last[v.release]:
            last[v.release] = v
    return [str(last[k]) for k in sorted(last)]


def in_range(spec: str, versions: list[str]) -> list[str]:
    """The ``versions`` a range (``>=0.5.10,<0.5.24``) admits, oldest first (PEP 440)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        wanted = SpecifierSet(spec)
    except InvalidSpecifier as exc:
        raise UsageError(f"sglang{spec}: not a version range ({exc})") from None
    return [str(v) for v in sorted(wanted.filter(map(Version, versions)))]


def cached_versions() -> list[str]:
    """The releases whose wheels are in ddcheck's wheel cache (what ``sglang==X`` downloaded), oldest first."""
    from packaging.version import InvalidVersion, Version

    found = set()
    for whl in (cache_dir() / "wheels").glob("sglang-*.whl"):
        try:
            found.add(Version(whl.name.split("-")[1]))
        except (InvalidVersion, IndexError):
            continue
    return [str(v) for v in sorted(found)]


def expand(targets: list[str], versions=index_versions, notes: list[str] | None = None) -> list[Target]:
    """Each target as a :class:`Target`; a range becomes one per release the index has (``versions``:
    the index's list, asked once and only for a range; where it cannot be listed, offline, the releases
    in ddcheck's wheel cache, said in ``notes``). A range that admits none is a usage error."""
    out: list[Target] = []
    listed: list[str] | None = None
    for t in targets:
        m = RANGE_RE.match(t)
        if m and not PACKAGE_VERSION_RE.match(t.strip()):
            if listed is None:
                try:
                    listed = versions()
                except UsageError as exc:
                    listed = cached_versions()
                    if not listed:
                        raise
                    if notes is not None:
                        notes.append(f"{exc}: the range is taken over the {len(listed)} releases in ddcheck's "
                                     f"wheel cache instead")
            found = in_range(m.group("spec").replace(" ", ""), listed)
            if not found:
                raise UsageError(f"{t}: no release on the package index is in this range")
            out += [Target(f"sglang=={v}", v) for v in found]
        elif (pin := PACKAGE_VERSION_RE.match(t.strip())) is not None:
            out.append(Target(t.strip(), pin.group("version")))
        elif t == "installed":
            found = installed_sglang()
            if found is None:
                raise UsageError("installed: no installed sglang found")
            out.append(Target(str(found), "installed"))
        else:
            path = Path(t)
            if not path.exists():
                raise UsageError(f"{t}: no such file or directory")
            out.append(Target(t, _label(path)))
    return list(dict.fromkeys(out))


def _label(path: Path) -> str:
    """A checkout's name (``forks/HaiyuZhou/sglang`` -> ``HaiyuZhou/sglang``), a wheel's version."""
    path = path.resolve()
    if path.suffix == ".whl":
        return path.name.split("-")[1] if path.name.count("-") >= 2 else path.stem
    parts = path.parts
    return "/".join(parts[-2:]) if path.name in ("sglang", "python") and len(parts) >= 2 else path.name
