"""Bundles liboctet.so into the package when one is at hand.

The library is taken from $OCTET_LIB (a file, or a folder holding
liboctet.so), else from ../build/liboctet.so of the octet tree.  With it, the
wheel is tagged for this platform (py3-none-<platform>: no Python extension,
only the shared library ctypes loads); without it, the package is pure Python
and finds the library at run time (octet/_lib.py).
"""

import os
import shutil
from typing import Optional

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def _library() -> Optional[str]:
    p = os.environ.get("OCTET_LIB") or os.path.join(HERE, "..", "build", "liboctet.so")
    if os.path.isdir(p):
        p = os.path.join(p, "liboctet.so")
    return p if os.path.isfile(p) else None


class BuildPy(build_py):
    """build_py that also copies the library into the built package."""

    def run(self) -> None:
        super().run()
        lib = _library()
        if lib:
            dst = os.path.join(self.build_lib, "octet", "liboctet.so")
            shutil.copyfile(lib, dst)
            os.chmod(dst, 0o755)


class BinaryDistribution(Distribution):
    """Not pure Python when it carries the library (installed to platlib)."""

    def has_ext_modules(self) -> bool:
        return _library() is not None


cmdclass = {"build_py": BuildPy}

try:
    from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        """A platform wheel when the library is bundled."""

        def get_tag(self):  # type: ignore[no-untyped-def]
            tag = super().get_tag()
            return tag if _library() is None else ("py3", "none", tag[2])

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
