"""What `lbi invert` shows of the warnings raised while it works."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_cli_does_not_show_library_deprecations(cli, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A deprecation notice raised while lbi works is not the user's business: `lbi invert`
    shows and stores only the warnings about their input."""
    import warnings

    from lbi_engine import api

    prepare = api.prepare

    def noisy_prepare(request: object) -> object:
        warnings.warn("torch.something is deprecated", FutureWarning, stacklevel=1)
        warnings.warn("measured data clipped into the activation's range", UserWarning,
                      stacklevel=1)
        return prepare(request)

    monkeypatch.setattr(api, "prepare", noisy_prepare)
    code, _, err = cli("invert", "--network", "mnist-perceptron-ae", "--sample", "1",
                       "--max-iter", "5", "--out", tmp_path / "run", "--quiet")
    assert code == 0
    assert "deprecated" not in err
    assert "clipped" in err
