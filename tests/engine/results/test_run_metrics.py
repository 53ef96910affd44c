"""result.json's lists are typed as what the solvers write: the keys of ``StageTime`` are a
``RunStage``'s, and those of ``LayerStage`` a layer-wise stage summary's plus the sample's
stop reason, in the order the file holds them."""

from __future__ import annotations

from lbi_engine.results.run_metrics import LayerStage, StageTime
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.alpha.time_split import RunStage
from tests.engine.solvers.test_solver_layerwise import _problem


def test_a_stage_time_has_the_keys_of_a_run_stage() -> None:
    written = RunStage("alpha search", 12, 0.5, 0.01, 1.0, 3).to_dict()
    assert list(written) == list(StageTime.__annotations__)
    assert written["iterations"] == 12 and written["point"] == 3


def test_a_layer_stage_has_the_keys_of_a_layerwise_stage_and_its_stop_reason() -> None:
    last = final(solve(_problem(), "layerwise", stop=StopRule(max_iter=60, tol=0),
                       options={"input_alpha": "given"}))
    summaries = last.extras["stages"]
    assert [s["stage"] for s in summaries] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    for summary in summaries:
        assert [*summary, "stop_reason"] == list(LayerStage.__annotations__)
    assert sum(s["iterations"] for s in summaries) == last.iteration
