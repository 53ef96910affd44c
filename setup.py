"""Package list for setuptools; everything else is declared in pyproject.toml.

``resources/`` (bundled networks, the MNIST subset, icons) stays a top-level folder of the
checkout but is installed as the package ``lbi_resources``, so wheels, ``pip install .``, pipx
and cluster workers carry it and lbi finds it with ``importlib.resources``
(:mod:`lbi_engine.resource_files`). pyproject.toml cannot add a renamed package to the ones
``packages.find`` discovers, hence this file.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["lbi_engine", "lbi_engine.*", "lbi_gui", "lbi_gui.*"]),
              "lbi_resources"],
    package_dir={"lbi_resources": "resources"},
)
