"""One sweep cell (a noise std, a method and an alpha over the sweep's samples), solved the same
way by the local loop (:mod:`lbi_engine.experiments.sweep`) and by Dask workers
(:mod:`lbi_engine.experiments.sweep_dask`); its own room so neither imports the other."""

from __future__ import annotations

from typing import Any


def solve_cell(spec: Any, bundle: Any, truths: Any, cell: tuple[float, str, float | str],
               prepared: dict[float, Any]) -> list[dict[str, Any]]:
    """The per-sample metrics of one cell; the local loop and Dask workers both call this.

    ``prepared`` caches the noisy data of one noise std (cells are ordered by std, so one
    draw serves a whole row of alphas and methods); it is cleared when the std changes.
    """
    from lbi_engine.experiments.batch import (
        noise_scaled_alpha,
        prepare_batch,
        sample_metrics,
        solve_each,
        torch_threads,
    )

    std, method, alpha = cell
    with torch_threads(spec.threads):
        if std not in prepared:
            prepared.clear()
            prepared[std] = prepare_batch(spec.request(std, method, alpha), truths,
                                          [spec.seed + i for i in spec.indices], bundle)
        rule = None
        if alpha == "auto":  # chosen per sample from the data; the row records it
            scaled = noise_scaled_alpha(prepared[std].with_method(method), method)
            if scaled is None:  # a search per sample
                return _auto_alpha_metrics(spec, std, method, bundle)
            alpha, rule = scaled
        batch = prepared[std].with_alpha(float(alpha)).with_method(method)
        record = solve_each(batch)
    with torch_threads(1):  # one sample's metrics at a time: tensors too small to share
        rows = sample_metrics(batch, record)
    if rule is not None:  # as api's alpha "auto" with a noise-scaled weight reports it
        for row in rows:
            row.update(alpha=float(alpha), alpha_rule=rule, alpha_chosen=float(alpha))
    return rows


def _auto_alpha_metrics(spec: Any, std: float, method: str, bundle: Any) -> list[dict]:
    """alpha "auto" is chosen per sample (lbi_engine/solvers/alpha/whole.py): one run per sample,
    with the noise draw of the numeric cells (seed SEED + INDEX); the row records the
    chosen alpha in ``alpha_chosen``."""
    import dataclasses

    from lbi_engine import api
    from lbi_engine.solvers import final

    rows = []
    for index in spec.indices:
        request = dataclasses.replace(spec.request(std, method, "auto"), index=index,
                                      seed=spec.seed + index)
        prepared = api.prepare(request, bundle)
        last = final(api.iterate(prepared))
        metrics = api.final_metrics(prepared, last).to_dict()
        rows.append({**metrics, "alpha_chosen": metrics["alpha"]})
    return rows
