"""Bundled data files (networks, MNIST subset, icons), installed as the package ``lbi_resources``.

No code lives here: the package exists so that ``importlib.resources.files("lbi_resources")``
finds these files in every kind of install (editable, wheel, pipx). See setup.py and
lbi_engine/resource_files.py.
"""
