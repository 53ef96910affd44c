"""One facade for every caller (CLI, GUI, scripts): a plain request in, records out.

``InversionRequest`` is the run record: JSON-serialisable, versioned, and enough to repeat a
run with ``lbi invert --record FILE``. :func:`prepare` (``loading``) turns it into a
:class:`PreparedRun` (``prepared``: the problem and the references a run is judged
against, and :func:`final_metrics`: its numbers as a :class:`RunMetrics`, result.json's
``metrics``); :func:`iterate` (``running``) streams the solver's records.
:func:`solve` (``script``) is the script's call: a request or a problem in, a typed
:class:`SolveResult` out. Beside them:
``inputs`` (the truth and feature prior a request names, checked before lifting) and
``warm_up`` (a run's one-time work).
"""

from __future__ import annotations

from lbi_engine.api.loading import prepare
from lbi_engine.api.prepared import PreparedRun, final_metrics, tile_feature_maps
from lbi_engine.api.running import iterate, run_to_end
from lbi_engine.api.script import SolveResult, solve
from lbi_engine.request import DTYPES, FORMAT_VERSION, InversionRequest
from lbi_engine.results.run_metrics import RunMetrics

__all__ = [
    "DTYPES",
    "FORMAT_VERSION",
    "InversionRequest",
    "PreparedRun",
    "RunMetrics",
    "SolveResult",
    "final_metrics",
    "iterate",
    "prepare",
    "run_to_end",
    "solve",
    "tile_feature_maps",
]
