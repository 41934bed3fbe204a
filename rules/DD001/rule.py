"""DD001's code: the analysis's layout reads are its findings; their fix is W in C's place (the default)."""

from ddcheck.rules import ScanRule


class FixedWidthVerifyLayout(ScanRule):
    kinds = ("layout",)
