"""``ddcheck config``: pre-launch validation of SGLang speculative-decoding launches.

The names are loaded on first use: importing a submodule (the report, to read a kept result) loads
none of the others."""

__all__ = ["check_launch", "Report"]


def __getattr__(name: str):
    if name == "check_launch":
        from ddcheck.config import api

        return getattr(api, name)
    if name == "Report":
        from ddcheck.config.report import Report

        return Report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
