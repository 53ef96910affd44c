"""Package list for setuptools; everything else is declared in pyproject.toml.

``resources/`` (bundled networks, the MNIST subset, icons) stays a top-level folder of the
checkout but is installed as the package ``lbi_resources``, so wheels, ``pip install .``, pipx
and cluster workers carry it and lbi finds it with ``importlib.resources``
(:mod:`lbi_engine.data.resource_files`). pyproject.toml cannot add a renamed package to the ones
``packages.find`` discovers, hence this file.

The user guide (``docs/USER_GUIDE.md``, shown by Help → User guide) is copied into that
package as ``lbi_resources/docs/USER_GUIDE.md`` when the package is built, so an installed
wheel has it too; ``docs/`` stays its one source (MANIFEST.in puts it in sdists).
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

GUIDE = Path("docs") / "USER_GUIDE.md"


class BuildPyWithGuide(build_py):
    """build_py, plus the user guide copied into lbi_resources/docs/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads docs/ of the checkout itself
        if not GUIDE.is_file():
            raise FileNotFoundError(f"{GUIDE} is missing: the user guide would not be installed")
        target = Path(self.build_lib) / "lbi_resources" / "docs" / GUIDE.name
        self.mkpath(str(target.parent))
        self.copy_file(str(GUIDE), str(target))


setup(
    packages=[*find_packages(include=["lbi_engine", "lbi_engine.*", "lbi_gui", "lbi_gui.*"]),
              "lbi_resources"],
    package_dir={"lbi_resources": "resources"},
    cmdclass={"build_py": BuildPyWithGuide},
)
