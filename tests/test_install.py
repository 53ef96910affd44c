"""Installs that are not a source checkout, and the declared environment.

A wheel, ``pip install .``, pipx or a cluster worker has no ``resources/`` folder next to the
code: the bundled files travel as the package ``lbi_resources`` and are found through
importlib.resources. ``.ci/run`` builds and uses a real wheel; these tests check the locator's
logic and that the packaging metadata ships every bundled file.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import importlib.resources
import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

from lbi_engine.data import resource_files
from lbi_engine.errors import DataFileError

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _install_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable ``lbi_resources`` package with a models/ folder, in tmp_path."""
    pkg = tmp_path / "site" / resource_files.PACKAGE
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.delenv("LBI_RESOURCES", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, resource_files.PACKAGE, raising=False)
    importlib.invalidate_caches()
    return pkg


@pytest.fixture
def fake_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed ``lbi_resources`` package, and no source checkout to fall back on."""
    monkeypatch.setattr(resource_files, "_checkout", lambda: None)
    return _install_package(tmp_path, monkeypatch)


def test_installed_resources_are_found_through_importlib(fake_install: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    files = importlib.resources.files

    def spy(name: str) -> object:
        calls.append(name)
        return files(name)

    monkeypatch.setattr(resource_files.importlib.resources, "files", spy)
    assert resource_files.resources_dir() == fake_install
    assert calls == [resource_files.PACKAGE]


def test_checkout_wins_over_an_installed_package(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Code run from a checkout reads that checkout's files, not another install's."""
    installed = _install_package(tmp_path, monkeypatch)
    assert resource_files._installed() == installed
    assert resource_files.resources_dir() == ROOT / "resources"


def test_no_resources_anywhere_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LBI_RESOURCES", raising=False)
    monkeypatch.setattr(resource_files, "_checkout", lambda: None)
    monkeypatch.setattr(resource_files, "_installed", lambda: None)
    with pytest.raises(DataFileError, match=r"lbi_resources.*reinstall lbi.*LBI_RESOURCES"):
        resource_files.resources_dir()


def test_an_installed_package_without_data_does_not_count(fake_install: Path) -> None:
    (fake_install / "models").rmdir()
    assert resource_files._installed() is None


def test_every_bundled_file_is_package_data() -> None:
    """A file added to resources/ but not matched by package-data would be missing from
    wheels, and only a non-editable install would notice."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    setup_call = next(n for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    kwargs = {k.arg: k.value for k in setup_call.keywords}
    assert ast.literal_eval(kwargs["package_dir"]) == {resource_files.PACKAGE: "resources"}
    assert resource_files.PACKAGE in ast.unparse(kwargs["packages"])
    globs = _pyproject()["tool"]["setuptools"]["package-data"][resource_files.PACKAGE]
    folder = ROOT / "resources"
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.name != "__init__.py"]
    assert files
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, g) for g in globs)]
    assert not missing, f"not shipped in wheels (add to package-data): {missing}"
    for sub in ("models", "datasets"):
        assert any(f.startswith(f"{sub}/") for f in files)


def test_engine_and_gui_find_their_files_through_the_locator() -> None:
    """No module computes a path to resources/ by itself (that breaks outside a checkout)."""
    offenders = []
    for pkg in ("lbi_engine", "lbi_gui"):
        for path in (ROOT / pkg).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if '/ "resources"' in text and path.name != "resource_files.py":
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def _warn_from(module: str, category: type[Warning]) -> None:
    """Emit a warning attributed to ``module``, as a deprecated call in its code would."""
    code = compile("import warnings\nwarnings.warn('old API', CATEGORY, stacklevel=1)",
                   f"<{module}>", "exec")
    exec(code, {"__name__": module, "CATEGORY": category})


@pytest.mark.parametrize("category", [DeprecationWarning, FutureWarning])
def test_deprecations_in_lbi_code_fail_the_suite(category: type[Warning]) -> None:
    """pyproject's filterwarnings: lbi's own deprecated calls are errors, others' are not."""
    with pytest.raises(category, match="old API"):
        _warn_from("lbi_engine.some_module", category)
    with pytest.raises(category, match="old API"):
        _warn_from("lbi_gui.some_module", category)
    with pytest.warns(category):
        _warn_from("somebody_else", category)



# --- constraints.txt and scripts/constraints.py --------------------------------------------

def _constraints_module():  # scripts/ is not a package
    spec = importlib.util.spec_from_file_location("lbi_constraints_script",
                                                  ROOT / "scripts" / "constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_constraints_parse_compare_and_diff() -> None:
    c = _constraints_module()
    pins = c.parse("# header\nPySide6_Essentials==6.11.3\ntorch==2.15.0 ; sys_platform == 'linux'"
                   "\n\nnumpy==2.4.6  # comment\n")
    assert pins == {"pyside6-essentials": ("PySide6_Essentials", "6.11.3"),
                    "torch": ("torch", "2.15.0"), "numpy": ("numpy", "2.4.6")}
    with pytest.raises(ValueError, match="line 1"):
        c.parse("torch>=2.6\n")
    env = {"pyside6-essentials": ("PySide6-Essentials", "6.11.3"), "torch": ("torch", "2.14.1"),
           "pip": ("pip", "99"), "lbi": ("lbi", "0.1.0"), "rich": ("rich", "15.0.0")}
    assert c.differences(pins, env) == ["numpy: pinned 2.4.6, not installed",
                                        "rich: installed 15.0.0, not in constraints",
                                        "torch: pinned 2.15.0, installed 2.14.1"]
    same = {k: v for k, v in env.items() if k != "rich"} | {"torch": ("torch", "2.15.0"),
                                                            "numpy": ("numpy", "2.4.6")}
    assert c.differences(pins, same) == []
    new = {**pins, "torch": ("torch", "2.16.0"), "zipp": ("zipp", "4.1.2")}
    del new["numpy"]
    assert c.version_changes(pins, new) == ["- numpy 2.4.6", "  torch 2.15.0 -> 2.16.0",
                                            "+ zipp 4.1.2"]


def test_constraints_file_satisfies_pyproject() -> None:
    """The pinned versions lie inside pyproject's ranges (a raised floor or a new exclusion
    must come with re-resolved constraints), and pin every direct dependency."""
    from packaging.requirements import Requirement

    c = _constraints_module()
    pins = c.parse((ROOT / "constraints.txt").read_text(encoding="utf-8"))
    project = _pyproject()["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"],
                    *project["optional-dependencies"]["cluster"]]
    for text in requirements:
        req = Requirement(text)
        key = c.canonical(req.name)
        assert key in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[key][1], prereleases=True), (text, pins[key])


def test_security_floor_and_lowest_bounds() -> None:
    """torch < 2.6 can run code from a crafted file in torch.load(weights_only=True)
    (CVE-2025-32434), which lbi uses for .pt state dicts."""
    from packaging.requirements import Requirement

    torch_req = next(Requirement(r) for r in _pyproject()["project"]["dependencies"]
                     if r.startswith("torch>"))
    assert not any(torch_req.specifier.contains(v) for v in ("2.5.1", "2.4.0", "2.2.0"))
    assert torch_req.specifier.contains("2.15.0")
    lowest = _constraints_module().lowest(ROOT / "pyproject.toml", ["test"])
    assert any(line.startswith("torch==") for line in lowest)
    assert all("==" in line for line in lowest)


def _library_function(category: type[Warning]):
    """A function that lives in site-packages and warns about itself, as torch.jit.script
    does (the warning names the library's own file, not the caller)."""
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    namespace: dict = {"__name__": "somelib.api", "CATEGORY": category}
    exec(compile("import warnings\n"
                 "def _deprecated():\n"
                 "    warnings.warn('old_api is deprecated', CATEGORY, stacklevel=2)\n"
                 "def old_api():\n"
                 "    _deprecated()\n",
                 f"{site}/somelib/api.py", "exec"), namespace)
    return namespace["old_api"]


@pytest.mark.parametrize("category", [DeprecationWarning, FutureWarning])
def test_library_deprecations_count_against_the_lbi_code_that_calls_them(category) -> None:
    old_api = _library_function(category)
    namespace = {"__name__": "lbi_engine.some_module", "old_api": old_api}
    exec(compile("def uses_old_api():\n    old_api()\n", "/src/lbi_engine/some_module.py",
                 "exec"), namespace)
    with pytest.raises(category, match="old_api is deprecated"):
        namespace["uses_old_api"]()
    with pytest.warns(category, match="old_api is deprecated"):
        old_api()  # called by a test (a fixture made with a deprecated API): only a warning


def test_one_library_using_anothers_deprecated_api_is_not_lbis_fault() -> None:
    """matplotlib 3.7 calls pyparsing's deprecated parseString while lbi draws a figure: the
    warning stays with the libraries (a floor to raise, not an lbi bug)."""
    import sysconfig

    old_api = _library_function(DeprecationWarning)
    site = sysconfig.get_paths()["purelib"]
    other = {"__name__": "otherlib.plot", "old_api": old_api}
    exec(compile("def draw():\n    old_api()\n", f"{site}/otherlib/plot.py", "exec"), other)
    ours = {"__name__": "lbi_engine.plotting_probe", "draw": other["draw"]}
    exec(compile("def figure():\n    draw()\n", "/src/lbi_engine/plotting_probe.py", "exec"),
         ours)
    with pytest.warns(DeprecationWarning, match="old_api is deprecated"):
        ours["figure"]()
