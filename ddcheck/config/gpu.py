"""The GPU a launch is judged for: from ``--gpu`` (a vendor, an architecture or a product name), or
found on this machine (``nvidia-smi``, else the NVIDIA driver's files), or assumed.

This is GPU knowledge, not SGLang knowledge: which product has which compute capability. What the
tree does with it (which attention backend it picks on an sm90 GPU...) is the tree's own code's
business (:mod:`ddcheck.config.selection`), run with the torch probes answering for this GPU
(:class:`ddcheck.tree.runtime.Platform`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

VENDORS = ("nvidia", "amd", "npu", "xpu", "musa", "cpu")
DEFAULT_ARCH = {"nvidia": "sm90", "amd": "gfx942"}  # what a vendor alone is taken as (the Hopper default)
# Product names (upper case, spaces) -> NVIDIA architecture, longest names first where one contains another.
PRODUCTS = (
    ("RTX PRO 6000", "sm120"), ("RTX 6000 ADA", "sm89"), ("RTX A6000", "sm86"), ("RTX 5090", "sm120"),
    ("RTX 5080", "sm120"), ("RTX 5070", "sm120"), ("RTX 4090", "sm89"), ("RTX 4080", "sm89"), ("RTX 3090", "sm86"),
    ("GB300", "sm103"), ("B300", "sm103"), ("GB200", "sm100"), ("B200", "sm100"), ("B100", "sm100"),
    ("GB10", "sm121"), ("GH200", "sm90"), ("H200", "sm90"), ("H100", "sm90"), ("H800", "sm90"), ("H20", "sm90"),
    ("L40S", "sm89"), ("L40", "sm89"), ("L20", "sm89"), ("L4", "sm89"), ("A100", "sm80"), ("A800", "sm80"),
    ("A30", "sm80"), ("A40", "sm86"), ("A10G", "sm86"), ("A10", "sm86"), ("T4", "sm75"), ("V100", "sm70"),
)
NVIDIA_SMI_TIMEOUT = 5.0
PROC_GPUS = "/proc/driver/nvidia/gpus/*/information"


@dataclass(frozen=True)
class Gpu:
    """The GPU the launch is judged for, and how ddcheck knows."""

    vendor: str  # nvidia, amd, npu, xpu, musa, cpu
    arch: str | None  # sm90 (NVIDIA), gfx942 (AMD); None for machines without one
    name: str | None  # the product, where known ("NVIDIA H100 80GB HBM3")
    source: str  # "--gpu H100", "nvidia-smi", "/proc/driver/nvidia/gpus/.../information", "assumed"
    assumed: bool = False  # nothing said which GPU: the vendor's default architecture was taken

    def describe(self) -> str:
        what = " ".join(x for x in (self.name, f"({self.arch})" if self.name and self.arch else self.arch) if x)
        what = what or self.vendor
        if self.assumed:
            return f"{what}, assumed: {self.source}"
        return f"{what}, from {self.source}"


class GpuError(ValueError):
    """``--gpu`` names nothing ddcheck knows."""


def arch_of_product(name: str) -> str | None:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"sm90"``; None when no known product is named."""
    words = " " + re.sub(r"[^A-Z0-9]+", " ", name.upper()) + " "
    for product, arch in PRODUCTS:
        if f" {product} " in words or f" {product.replace(' ', '')} " in words:
            return arch
    return None


def _arch(value: str) -> str | None:
    """``sm90``, ``sm_90``, ``SM90``, ``9.0``, ``10.0`` -> ``smNN``."""
    v = value.strip().lower()
    m = re.fullmatch(r"sm_?(\d{2,3})a?", v)
    if m:
        return f"sm{m.group(1)}"
    m = re.fullmatch(r"(\d{1,2})\.(\d)", v)
    if m:
        return f"sm{m.group(1)}{m.group(2)}"
    return None


def parse_gpu(value: str) -> Gpu:
    """What ``--gpu VALUE`` says: a vendor (its default architecture, assumed), an architecture or a product."""
    v = value.strip()
    if v.lower() in VENDORS:
        vendor = v.lower()
        arch = DEFAULT_ARCH.get(vendor)
        if arch is None:
            return Gpu(vendor, None, None, f"--gpu {v}")
        return Gpu(vendor, arch, None, f"--gpu {v} (no architecture given: {arch} taken, the Hopper-era default)",
                   assumed=True)
    if v.lower().startswith("gfx"):
        return Gpu("amd", v.lower(), None, f"--gpu {v}")
    arch = _arch(v)
    if arch is not None:
        return Gpu("nvidia", arch, None, f"--gpu {v}")
    arch = arch_of_product(v)
    if arch is not None:
        return Gpu("nvidia", arch, v, f"--gpu {v}")
    known = ", ".join(sorted({p.title() if " " in p else p for p, _ in PRODUCTS})[:12])
    raise GpuError(f"--gpu {v!r}: not a vendor ({', '.join(VENDORS)}), an architecture (sm80, sm90, sm100, "
                   f"sm120...) or a product ddcheck knows ({known}...)")


def _from_nvidia_smi() -> Gpu | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=NVIDIA_SMI_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:  # an old driver without compute_cap: the name alone
        try:
            out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=NVIDIA_SMI_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode != 0:
            return None
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    if not rows:
        return None
    name = rows[0][0]
    arch = _arch(rows[0][1]) if len(rows[0]) > 1 else None
    arch = arch or arch_of_product(name)
    if arch is None:
        return None
    kinds = {tuple(r) for r in rows}
    more = f"; {len(rows)} GPUs" + ("" if len(kinds) == 1 else ", not all alike: the first one taken") \
        if len(rows) > 1 else ""
    return Gpu("nvidia", arch, name, f"nvidia-smi{more}")


def _from_driver_files(pattern: str = PROC_GPUS) -> Gpu | None:
    for path in sorted(glob.glob(pattern)):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        m = re.search(r"^Model:\s*(.+)$", text, re.M)
        if m:
            name = m.group(1).strip()
            arch = arch_of_product(name)
            if arch is not None:
                return Gpu("nvidia", arch, name, path)
    return None


def detect_gpu(proc_pattern: str = PROC_GPUS) -> Gpu:
    """The GPU of this machine (nvidia-smi, then the driver's files); where none is visible, an sm90
    NVIDIA GPU, marked assumed."""
    found = _from_nvidia_smi() or _from_driver_files(proc_pattern)
    if found is not None:
        return found
    why = "no GPU visible here (no nvidia-smi on PATH answered, no " + os.path.dirname(os.path.dirname(proc_pattern)) + \
        "): judged for an sm90 NVIDIA GPU (H100-class); pass --gpu for the GPU the launch runs on"
    return Gpu("nvidia", DEFAULT_ARCH["nvidia"], None, why, assumed=True)


def resolve_gpu(value: str | None) -> Gpu:
    """``--gpu`` as given, or (None, ``auto``) this machine's GPU."""
    if value is None or value.strip().lower() in ("", "auto"):
        return detect_gpu()
    return parse_gpu(value)
