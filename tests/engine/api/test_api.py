"""lbi_engine.api: the one engine call the CLI, the GUI worker and the sweeps share."""

from __future__ import annotations

import pytest

from lbi_engine import api
from lbi_engine.request import InversionRequest
from lbi_engine.settings.solver import StopRule


def _prepared(**overrides: object) -> api.PreparedRun:
    request = InversionRequest.from_dict({**InversionRequest().to_dict(), **{
        "network": "mnist-perceptron-ae", "dataset": "mnist", "split": "val", "index": 0,
        "noise_std": 0.05, "seed": 0, "alpha": 0.02, "max_iter": 400, **overrides}})
    return api.prepare(request)


def test_iterate_with_a_changed_alpha_solves_at_that_alpha() -> None:
    """The GUI's hot alpha change: ``iterate(prepared, alpha=a)`` used to raise TypeError
    (the problem was rebuilt from its __dict__, derived ``reg`` included)."""
    prepared = _prepared()
    base = prepared.problem
    last_given = list(api.iterate(prepared))[-1]
    last_changed = list(api.iterate(prepared, alpha=0.2))[-1]
    assert prepared.problem is base and base.alpha == pytest.approx(0.02)  # not mutated
    # a ten times stronger TV weight gives a smoother, different reconstruction: a smaller TV
    tv = base.reg
    assert float(tv.value(last_changed.x).sum()) < 0.8 * float(tv.value(last_given.x).sum())


def test_layerwise_runs_a_typed_alpha_and_searches_only_for_auto() -> None:
    """A typed alpha is the alpha the layer-wise input stage runs (it used to search its own,
    0.0577 for a typed 0.01); "auto" still searches, by the rule asked for."""
    assert InversionRequest(method="layerwise", alpha=0.01).solver_options().input_alpha \
        == "given"
    assert InversionRequest(method="layerwise", alpha="auto").solver_options().input_alpha \
        == "quasi-optimality"
    assert InversionRequest(method="layerwise", alpha="auto", alpha_rule="discrepancy") \
        .solver_options().input_alpha == "discrepancy"
    explicit = InversionRequest(method="layerwise", alpha=0.01,
                                options={"input_alpha": "discrepancy"})
    assert explicit.solver_options().input_alpha == "discrepancy"  # the expert's option wins
    request = InversionRequest(network="mnist-cnn-ae", dataset="mnist", split="val", index=0,
                               noise_std=0.05, seed=0, method="layerwise", alpha=0.01,
                               max_iter=60)
    prepared, last, _ = api.run_to_end(request)
    metrics = api.final_metrics(prepared, last)
    assert metrics.alpha == pytest.approx(0.01) and metrics.alpha_used == pytest.approx(0.01)
    stages = metrics.stages
    assert stages is not None
    assert [s["stage"] for s in stages] == ["layer 3/3", "layer 2/3", "layer 1/3"]
    assert stages[-1]["weight"] == [pytest.approx(0.01)] and stages[-1]["weight_rule"] == "given"
    assert stages[0]["weight_rule"].startswith("sigma^2")


def test_layerwise_on_one_layer_chooses_auto_alpha_as_the_one_layer_method() -> None:
    """A one-layer network has no stages, so layer-wise is the one-layer method: alpha "auto"
    must be chosen there too (it ran at the fallback alpha and gave an almost black image)."""
    def run(method: str) -> api.RunMetrics:
        request = InversionRequest(network="circle-perceptron", dataset="cartoon", split="disc",
                                   index=0, noise_std=0.05, seed=0, method=method, max_iter=250)
        prepared, last, _ = api.run_to_end(request)
        return api.final_metrics(prepared, last)

    layerwise, one_layer = run("layerwise"), run("one-layer")
    assert layerwise.alpha_rule == one_layer.alpha_rule != "fixed"
    assert layerwise.alpha == pytest.approx(one_layer.alpha, rel=1e-6)
    assert layerwise.psnr == pytest.approx(one_layer.psnr, abs=0.05)


def test_prepare_resolves_the_method_once_and_iterate_runs_that_one() -> None:
    """``auto`` and the alias ``pdhg`` are resolved in prepare (one lifted layer: the
    one-layer method); the records and result.json's method_run name the same method."""
    for asked in ("auto", "pdhg", "one-layer"):
        prepared = _prepared(method=asked, max_iter=3)
        assert prepared.request.method == asked and prepared.method == "one-layer"
        last = list(api.iterate(prepared))[-1]
        assert last.method == "one-layer"
        assert api.final_metrics(prepared, last).method_run == "one-layer"


def test_prepared_run_is_keyword_only() -> None:
    prepared = _prepared(max_iter=1)
    with pytest.raises(TypeError):
        api.PreparedRun(prepared.request, prepared.problem, "one-layer")  # type: ignore[misc]
    bare = api.PreparedRun(request=prepared.request, problem=prepared.problem,
                           method="one-layer")
    assert bare.bundle is None and bare.truth_image is None and bare.y_clean is None


def test_a_method_for_chains_is_refused_on_a_graph_in_the_words_asked() -> None:
    """The method is resolved once, before the run, and the refusal names the method the
    caller asked for (the alias "pdhg", not what it resolves to)."""
    from lbi_engine.errors import InputError
    from tests.engine.models.test_graph_networks import _problem, _small

    graph = _problem(_small("residual"))
    for asked in ("pdhg", "one-layer", "landweber"):
        with pytest.raises(InputError, match=f"method '{asked}' runs on chains of layers"):
            api.solve(graph, method=asked, stop=StopRule(max_iter=1))
    assert api.solve(graph, method="auto", stop=StopRule(max_iter=2)).method_run == "joint"
