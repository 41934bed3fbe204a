"""Only what pyproject.toml cannot say: ship ``ddcheck-guard.pth`` at the top of site-packages, so
``DDCHECK_GUARD=raise|warn`` turns the guard on in any Python process of the environment (the line
costs one environment lookup when the variable is unset). Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "ddcheck-guard.pth"


class BuildWithPth(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent / "ddcheck" / "guard" / PTH
        self.copy_file(str(src), str(Path(self.build_lib) / PTH), preserve_mode=0)


setup(cmdclass={"build_py": BuildWithPth})
