"""``--memory-limit`` reaches the memory checks as an argument, never through os.environ;
``LBI_MEMORY_LIMIT`` stays the user's fallback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lbi_engine import limits
from lbi_engine.cli import main
from lbi_engine.limits import ENV_VAR, MemoryLimitError, check_bytes, limited_to, memory_limit

INVERT = ["invert", "--network", "mnist-perceptron-ae", "--split", "val", "--sample", "0",
          "--max-iter", "2", "--quiet"]


class WatchedEnviron(dict):
    """os.environ's stand-in that records every write (but pytest's own bookkeeping)."""

    def __init__(self, base: Any) -> None:
        super().__init__(base)
        self.writes: list[str] = []

    def _note(self, what: str, key: str) -> None:
        if not key.startswith("PYTEST_"):
            self.writes.append(f"{what} {key}")

    def __setitem__(self, key: str, value: str) -> None:
        self._note("set", key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._note("del", key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._note("pop", key)
        return super().pop(key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key in dict(*args, **kwargs):
            self._note("update", key)
        super().update(*args, **kwargs)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._note("setdefault", key)
        return super().setdefault(key, default)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> WatchedEnviron:
    monkeypatch.delenv(ENV_VAR, raising=False)
    watched = WatchedEnviron(os.environ)
    monkeypatch.setattr(os, "environ", watched)
    return watched


def test_the_cli_passes_memory_limit_to_the_check_without_the_environment(
        environ: WatchedEnviron, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[int] = []
    real_limit = limits.memory_limit

    def spying_limit() -> int:
        # check_bytes reads the limit by this module-level name, wherever it was imported
        # from (footprint.py binds check_bytes itself at import, before any patch of it)
        seen.append(real_limit())  # the limit in force where the loader checks
        return seen[-1]

    monkeypatch.setattr(limits, "memory_limit", spying_limit)
    code = main([*INVERT, "--memory-limit", "1K", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "more than the limit of 1.0 KiB" in err and "--memory-limit" in err
    assert seen and set(seen) == {1024}
    assert environ.writes == [] and ENV_VAR not in environ
    assert memory_limit() != 1024  # given for that command only


def test_the_environment_variable_is_the_fallback_and_the_flag_wins(
        environ: WatchedEnviron, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    dict.__setitem__(environ, ENV_VAR, "2K")  # the user's setting, not a write by lbi
    assert main([*INVERT, "--out", str(tmp_path / "env")]) == 2
    assert "more than the limit of 2.0 KiB" in capsys.readouterr().err
    assert main([*INVERT, "--memory-limit", "1K", "--out", str(tmp_path / "flag")]) == 2
    assert "more than the limit of 1.0 KiB" in capsys.readouterr().err
    assert environ.writes == [] and environ[ENV_VAR] == "2K"


def test_limited_to_nests_and_restores(environ: WatchedEnviron) -> None:
    default = memory_limit()
    with limited_to(3 * 2**20):
        assert memory_limit() == 3 * 2**20
        with pytest.raises(MemoryLimitError, match=r"3\.0 MiB"):
            check_bytes(3 * 2**20 + 1, "an input", "use a smaller one")
        check_bytes(3 * 2**20, "an input", "use a smaller one")  # at the limit: allowed
        with limited_to(None):  # no flag: the outer limit stays
            assert memory_limit() == 3 * 2**20
        with limited_to(2**30):
            assert memory_limit() == 2**30
        assert memory_limit() == 3 * 2**20
    assert memory_limit() == default
    assert environ.writes == []


def test_local_dask_workers_get_the_limit_in_their_own_environment(
        environ: WatchedEnviron, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workers``: the limit goes to the worker processes through distributed's ``env``
    (set in the child only), not through this process's environment."""
    distributed = pytest.importorskip("distributed")
    from lbi_engine.experiments.sweep_dask import ClusterOptions, connect

    started: list[dict[str, Any]] = []

    @contextmanager
    def local_cluster(**kwargs: Any) -> Iterator[str]:
        started.append(kwargs)
        yield "cluster"

    @contextmanager
    def client(cluster: str, **kwargs: Any) -> Iterator[str]:
        yield "client"

    monkeypatch.setattr(distributed, "LocalCluster", local_cluster)
    monkeypatch.setattr(distributed, "Client", client)
    for limit, env in ((3 * 2**20, {ENV_VAR: str(3 * 2**20)}), (None, {})):
        options = ClusterOptions(workers=1, oversubscribe=True, memory_limit=limit)
        with connect(options) as connected:
            assert connected == "client"
        assert started[-1]["env"] == env and started[-1]["n_workers"] == 1
    assert environ.writes == []
