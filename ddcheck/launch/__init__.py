"""``ddcheck config``: pre-launch validation of SGLang speculative-decoding launches."""

from ddcheck.launch.api import check_launch, config_main
from ddcheck.launch.report import Report

__all__ = ["check_launch", "config_main", "Report"]
