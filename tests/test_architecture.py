"""The architecture's rules, enforced in the default suite (docs/ARCHITECTURE.md).

Two independent checks:

- import-linter with the contracts in ``.importlinter`` (no sibling cycles, no Qt in the
  engine, the maths never imports file I/O, only ``lbi_engine.models`` reads model files);
- a static scan of every ``import`` in lbi_engine and lbi_gui, *including those inside
  functions and under TYPE_CHECKING* (import-linter sees those too, but an import hidden in
  a function is the usual way a cycle sneaks back, so it gets its own, dependency-free test).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

def _module_files(packages: list[str]) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in packages:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = f
    return mods


def import_graph(packages: list[str]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its source (AST, not runtime)."""
    mods = _module_files(packages)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            for n in names:
                while n and n not in mods:
                    n = n.rpartition(".")[0]
                if n and n != m:
                    edges[m].add(n)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    """The scanner itself: a cycle closed only by an import inside a function is found."""
    edges = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(edges) == [{"p.a", "p.b", "p.c"}]
    assert cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_no_import_cycles_in_engine_or_gui():
    edges = import_graph(["lbi_engine", "lbi_gui"])
    assert "lbi_engine.models.network" in edges  # the scan sees the package layout
    found = [sorted(c) for c in cycles(edges)]
    assert found == [], f"import cycles (incl. imports inside functions): {found}"


def test_import_linter_contracts_hold(capsys):
    importlinter_cli = pytest.importorskip("importlinter.cli")
    cwd = os.getcwd()
    os.chdir(ROOT)  # grimp finds the packages on sys.path; the tests put ROOT first
    try:
        rc = importlinter_cli.lint_imports(config_filename=str(ROOT / ".importlinter"),
                                           no_cache=True, no_logo=True)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "BROKEN" not in out and "0 broken" in out, out


#: Packages whose modules must never import these, anywhere in their source.
QT_FREE = {"lbi_gui.model": ("PySide6", "pyqtgraph", "torch"),
           "lbi_gui.engine.messages": ("PySide6", "pyqtgraph", "torch"),
           "lbi_gui.engine.backend": ("PySide6", "pyqtgraph", "torch")}


def _imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def test_gui_model_and_messages_never_import_qt_or_torch_anywhere_in_their_source():
    """Static, including imports inside functions (import-linter's torch contract for
    lbi_gui.model must allow an indirect path through lbi_engine.request; this one does not
    need to: it looks at the model's own lines)."""
    mods = _module_files(["lbi_gui"])
    checked = 0
    for prefix, banned in QT_FREE.items():
        for name, path in mods.items():
            if name != prefix and not name.startswith(prefix + "."):
                continue
            checked += 1
            bad = {n for n in _imported_names(path) if n.split(".")[0] in banned}
            assert not bad, f"{name} imports {sorted(bad)}"
    assert checked >= 7  # the model package and the two engine modules were seen


def test_importlinter_declares_the_gui_model_contract():
    text = (ROOT / ".importlinter").read_text(encoding="utf-8")
    block = text.split("[importlinter:contract:gui-model-without-qt]")[1].split("[")[0]
    assert "lbi_gui.model" in block and "PySide6" in block and "pyqtgraph" in block
    assert "allow_indirect_imports" not in block  # Qt is forbidden even indirectly
    assert "torch" in text.split("[importlinter:contract:gui-model-without-torch]")[1]


def test_gui_model_runs_without_qt_or_torch_loaded():
    """At run time: the model's objects work in a process that never loaded Qt or torch."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lbi_engine.results.run_metrics import RunMetrics\n"
        "from lbi_gui.model import AppModel, RunList, RunResult\n"
        "import numpy as np\n"
        "runs = RunList([RunResult(1, {'method': 'joint', 'alpha': 0.1}, 'max_iterations', 3,"
        " 0.1, RunMetrics(psnr=20.0), np.zeros(2), np.zeros((2, 2)), notes='#a')])\n"
        "assert runs.with_tag('a') and runs.csv().startswith('run,')\n"
        "AppModel(runs=runs).session_state()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'torch')]\n"
        "assert not bad, bad\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_engine_tests_mirror_the_engine_packages() -> None:
    """tests/engine/<name>/ holds the tests of lbi_engine/<name>/ (issue #15): a test folder
    without its package is a misplaced test, a package without a folder an untested room."""
    root = Path(__file__).resolve().parent.parent
    tests = {p.name for p in (root / "tests" / "engine").iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    packages = {p.name for p in (root / "lbi_engine").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    assert tests <= packages, sorted(tests - packages)
    # tested elsewhere: cli/ in tests/cli, experiments/ and results/ through the CLI and GUI
    assert packages - tests <= {"cli", "experiments", "results"}, sorted(packages - tests)


def test_engine_top_level_holds_at_most_ten_modules() -> None:
    """Everything but a few shared modules lives in a package named for its concept."""
    modules = sorted(p.name for p in (ROOT / "lbi_engine").glob("*.py"))
    assert len(modules) <= 10, modules


def test_api_files_share_only_public_names() -> None:
    """What one file of lbi_engine/api needs from another is public there: no file imports
    a ``_name`` from another api file, and nothing outside imports one from the api."""
    private = []
    for f in sorted(ROOT.rglob("*.py")):
        if ".venv" in f.parts or not {"lbi_engine", "lbi_gui", "tests", "benchmarks"} & {
                f.relative_to(ROOT).parts[0]}:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "lbi_engine.api"):
                private += [f"{f.relative_to(ROOT)}: {node.module}.{a.name}"
                            for a in node.names if a.name.startswith("_")]
    assert not private, private


def test_gui_tests_mirror_the_gui_packages() -> None:
    """tests/gui/<name>/ holds the tests of lbi_gui/<name>/; tests/gui/ itself the tests of
    lbi_gui's top-level modules and the end-to-end runs of the application."""
    root = Path(__file__).resolve().parent.parent
    tests = {p.name for p in (root / "tests" / "gui").iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    packages = {p.name for p in (root / "lbi_gui").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    assert tests == packages, (sorted(tests - packages), sorted(packages - tests))


def test_the_engine_reads_no_private_attribute_of_another_object() -> None:
    """Anywhere in lbi_engine a ``_name`` is read only on ``self``, ``cls``, ``type(self)`` or
    ``super()``: what one class needs of another is public there (a typed field, a property
    or a protocol), so a reader can follow it and a rename cannot break a distant module.
    The exceptions: torch's tensor version counter ``_version`` (the caches' staleness key);
    torch's own private names reached through its modules (``nn.modules.batchnorm._BatchNorm``:
    the base class of every batch norm, which torch names nowhere else; ``torch._C._nn``: the
    avg_pool2d a traced graph calls); a class reading its own members through another
    instance or its name (a RunMonitor copying itself, a class method warming up the
    instance it made, the regulariser base comparing a subclass's ``_prox_g`` with its
    own)."""
    allowed = {"_version"}
    libraries = {"torch", "nn"}  # module names: their private names are the library's
    same_class = {("solvers/_monitor.py", "other"), ("solvers/kernels/gathered_conv.py",
                                                     "products"),
                  ("regularisers/_base.py", "Regulariser")}
    found = []
    for f in sorted((ROOT / "lbi_engine").rglob("*.py")):
        where = str(f.relative_to(ROOT / "lbi_engine"))
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")) or node.attr in allowed:
                continue
            base = node.value
            if isinstance(base, ast.Call) and ast.unparse(base) in ("type(self)", "super()"):
                continue
            if isinstance(base, ast.Name) and (base.id in ("self", "cls")
                                               or (where, base.id) in same_class):
                continue
            root = base
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in libraries:
                continue
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


def test_window_collaborators_are_not_handed_the_window() -> None:
    """Each collaborator of the main window is constructed from the view state, the widgets it
    drives and the few commands it needs, never the window: no ``self.w.``, no attribute
    named for the window, no parameter typed as it, no import of ``main_window``; the window
    itself (layout and wiring) stays within 250 lines."""
    window = ROOT / "lbi_gui" / "window"
    found = []
    for f in sorted(window.glob("*.py")):
        if f.name == "main_window.py":
            continue
        text = f.read_text(encoding="utf-8")
        found += [f"{f.name}: self.w." for _ in range(text.count("self.w."))]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "self" and node.attr in ("w", "window", "host", "win"):
                found.append(f"{f.name}:{node.lineno}: self.{node.attr}")
            if isinstance(node, ast.arg) and node.annotation is not None and any(
                    name in ast.unparse(node.annotation) for name in ("MainWindow", "WindowHost")
                    if not ast.unparse(node.annotation).startswith("QtWidgets.")):
                found.append(f"{f.name}:{node.lineno}: {node.arg}: {ast.unparse(node.annotation)}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    ("lbi_gui.window.main_window", "lbi_gui.window.host")):
                found.append(f"{f.name}:{node.lineno}: imports {node.module}")
    assert not found, found
    lines = len((window / "main_window.py").read_text(encoding="utf-8").splitlines())
    assert lines <= 250, f"main_window.py has {lines} lines"


#: What still crosses the api boundary as a string-keyed dict, each for a reason; the test
#: fails on any other, and on an entry here that no longer crosses (so the list only shrinks).
UNTYPED_AT_THE_API = {
    # the GUI hands back a record's to_numpy() arrays to continue a run
    "iterate(warm_start_from)",
    # settings a solver stage passes on with the problem (the alpha search's hidden weight)
    "InversionProblem.extras",
    # a method's own record notes: step sizes and warnings (tau_x, tau_z, steps, lipschitz,
    # warning), momentum restarts, the layer-wise stage summaries and input-stage search
    # (stages, weight_rule, alpha_search) and each sample's stop iteration (stop_iterations);
    # the alpha choice and the run's stage are typed (IterateRecord.choice, .position)
    "IterateRecord.extras",
}


def test_no_untyped_dict_crosses_the_api_boundary() -> None:
    """The api's public functions take and return typed objects: no ``dict[str, Any]`` (or a
    bare ``dict``) in their parameters or return annotation, nor in a public field of a
    dataclass they take or return (followed through the fields), but for the listed ones.
    ``to_dict`` methods are the on-disk form and are not fields."""
    import dataclasses
    import inspect
    import re
    import sys

    import lbi_engine.api as api

    untyped = re.compile(r"\bdict\[str, Any\]|\bdict\b(?!\[)")

    def annotations(obj: object) -> dict[str, str]:
        if isinstance(obj, type):
            fields = {f.name for f in dataclasses.fields(obj)}
            merged: dict[str, str] = {}
            for klass in reversed(obj.__mro__):
                merged.update(getattr(klass, "__annotations__", {}))
            return {k: str(v) for k, v in merged.items() if k in fields and not k.startswith("_")}
        return {k: str(v) for k, v in getattr(obj, "__annotations__", {}).items()}

    seen: set[type] = set()

    def reach(owner: object, text: str) -> None:
        names = sys.modules[getattr(owner, "__module__", "builtins")].__dict__
        for word in re.findall(r"[A-Za-z_]\w*", text):
            cls = names.get(word)
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls not in seen:
                seen.add(cls)
                for hint in annotations(cls).values():
                    reach(cls, hint)

    found = set()
    for name in api.__all__:
        obj = getattr(api, name)
        if inspect.isfunction(obj):
            for arg, hint in annotations(obj).items():
                if untyped.search(hint):
                    found.add(f"{name}({arg})")
                reach(obj, hint)
        elif isinstance(obj, type) and dataclasses.is_dataclass(obj):
            reach(api, obj.__name__)
    assert {"IterateRecord", "RunMetrics", "PreparedRun"} <= {c.__name__ for c in seen}
    for cls in seen:
        found |= {f"{cls.__name__}.{field}" for field, hint in annotations(cls).items()
                  if untyped.search(hint)}
    assert found == UNTYPED_AT_THE_API, (sorted(found - UNTYPED_AT_THE_API),
                                         sorted(UNTYPED_AT_THE_API - found))


#: What the alpha search used to write into a record's extras; now IterateRecord.choice
#: (solvers/choice.AlphaChoice) and IterateRecord.position (solvers/choice.RunPosition).
TYPED_RECORD_NOTES = (
    "alpha", "alpha_rule", "alpha_path", "alpha_target", "alpha_path_forward", "alpha_seconds",
    "solver_steps", "time_split", "hidden_weight_rule", "alpha_path_unweighted", "run_stage",
    "alpha_point", "alpha_points_at_most")


def test_the_alpha_choice_and_the_run_stage_are_typed_record_fields(tmp_path) -> None:
    """No engine, GUI or benchmark source writes or reads the alpha choice or a record's
    stage as an ``extras`` key (``extras["alpha"]``, ``extras.get("run_stage")``,
    ``extras.update(alpha=...)``, ``{"run_stage": ...}``): they are typed fields of the
    record, and a key written beside them would be read by nobody."""
    import re

    names = "|".join(TYPED_RECORD_NOTES)
    pattern = re.compile(
        rf'extras\s*(?:\.get\(|\[|\.update\(\{{?)\s*"(?:{names})"'
        rf'|extras\.update\([^)]*\b(?:{names})='
        r'|"(?:run_stage|alpha_point|alpha_points_at_most)"\s*:')
    bad = tmp_path / "bad.py"
    bad.write_text('record.extras.update(alpha=1.0, tau_x=2)\n')
    assert pattern.search(bad.read_text())  # the pattern does find a keyword write

    root = Path(__file__).resolve().parent.parent
    found = [f"{path.relative_to(root)}:{n}"
             for folder in ("lbi_engine", "lbi_gui", "benchmarks")
             for path in sorted((root / folder).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, found
