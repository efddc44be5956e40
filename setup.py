"""The package's metadata is in pyproject.toml; this only adds c10d_observer.pth to the wheel's root.

That one line (c10d_observer/_autostart.py, PTH_LINE) lets ``C10D_OBSERVER=1`` observe every process that
joins a process group with no code change, as pytest-cov's .pth measures subprocesses.  Unset, it reads
one variable.  The line is read from the source, without importing the package.
"""
import ast
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _pth_line():
    with open(os.path.join(HERE, "c10d_observer", "_autostart.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PTH_LINE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("c10d_observer/_autostart.py has no PTH_LINE")


class BuildPyWithPth(build_py):
    def run(self):
        build_py.run(self)
        path = os.path.join(self.build_lib, "c10d_observer.pth")
        with open(path, "w") as f:
            f.write(_pth_line())


setup(cmdclass={"build_py": BuildPyWithPth})
