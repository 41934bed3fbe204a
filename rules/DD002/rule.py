"""DD002's code: the analysis's capacity reads are its findings; their fix is the one planned where the
capacity is made (sized for the largest width the launch verifies), else W in C's place (the default)."""

from ddcheck.rules import ScanRule


class FixedWidthVerifyCapacity(ScanRule):
    kinds = ("capacity",)
