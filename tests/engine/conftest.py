"""Fixtures shared by the engine tests (networks and helpers: tests/engine/_nets.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Small operators: one thread avoids OpenMP spin-waiting, which made them up to 100x
    slower on the shared 2-core machine under load. Restored afterwards. Opt in per module
    with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
