"""Batched preparation: B ground truths of one network solved together in one problem.

``lbi_engine.api.prepare`` builds a problem for one sample; experiments and sweeps want many
samples per solve (a batch of B costs far less than B runs, see ENVIRONMENT.md). This room
assembles the same pieces as ``api.prepare`` (zoo, data, noise, problem) for a batch, so
that sample i of a batch gets exactly the data of

    lbi invert --network NET --dataset D --split S --sample INDEX_i --seed SEED_i ...

(each sample's noise comes from its own generator seeded with SEED_i); the per-sample
metrics are those of ``api.final_metrics``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lbi_engine.errors import InputError


@dataclass
class BatchRun:
    """A batched, prepared problem and what the per-sample reports need."""

    prepared: Any  # lbi_engine.api.PreparedRun holding the batched problem (sample 0's scalars)
    truths: np.ndarray  # (B, *display shape) ground truths in [0, 1]
    decoder_images: np.ndarray | None  # (B, *display shape) or None
    decoder_psnr: list[float | None]
    delta: list[float]
    delta_squared: list[float]
    noise_norm: list[float]
    seeds: list[int]

    @property
    def problem(self) -> Any:
        return self.prepared.problem

    @property
    def batch(self) -> int:
        return int(self.problem.batch)

    def sample_view(self, i: int) -> Any:
        """A PreparedRun whose scalars (delta, decoder PSNR, ...) are sample i's."""
        return dataclasses.replace(
            self.prepared,
            delta=self.delta[i],
            delta_squared=self.delta_squared[i],
            noise_norm=self.noise_norm[i],
            decoder_psnr=self.decoder_psnr[i],
            decoder_image=None if self.decoder_images is None else self.decoder_images[i],
            truth_image=self.truths[i],
        )

    def with_method(self, method: str) -> BatchRun:
        """The same batch run by another method (the request's field)."""
        if method == self.prepared.request.method:
            return self
        request = dataclasses.replace(self.prepared.request, method=method)
        return dataclasses.replace(self, prepared=self.prepared.with_request(request))

    def with_alpha(self, alpha: float) -> BatchRun:
        """The same data with another regularisation weight (data and noise are reused)."""
        from lbi_engine.problem import InversionProblem

        p = self.problem
        problem = InversionProblem(
            network=p.network, y_delta=p.y_delta, regulariser=p.regulariser, alpha=float(alpha),
            x_true=p.x_true, data_range=p.data_range, display_offset=p.display_offset,
            delta=p.delta, layer_alphas=p.layer_alphas, image_shape=p.image_shape,
        )
        request = dataclasses.replace(self.prepared.request, alpha=float(alpha))
        prepared = dataclasses.replace(self.prepared, request=request, problem=problem)
        return dataclasses.replace(self, prepared=prepared)


def spread_indices(dataset: str, split: str, count: int) -> list[int]:
    """``count`` indices spread evenly over a split.

    Why: the bundled MNIST splits are sorted by label, so indices 0..4 are five zeros;
    evenly spaced indices give different digits (val, 5: the classes 0, 2, 4, 6, 8).
    """
    from lbi_engine import data

    size = data.dataset_size(dataset, split) or count
    return [i * size // count for i in range(count)]


def dataset_truths(dataset: str, split: str, indices: Sequence[int]) -> np.ndarray:
    """Bundled ground truths (B, C, H, W) in [0, 1]."""
    from lbi_engine import data

    if not indices:
        raise InputError("no samples given; choose at least one index (e.g. 0-4).")
    images = [data.sample_array(dataset, split, int(i))[0] for i in indices]
    return np.stack(images)


def prepare_batch(
    request: Any,
    truths: np.ndarray,
    seeds: Sequence[int],
    bundle: Any = None,
) -> BatchRun:
    """Builds one problem for B ground truths ``truths`` (display range, any shape with the
    network's number of inputs per sample) with the request's network, noise std, regulariser,
    alpha, device and dtype; sample i's noise is drawn with ``seeds[i]``."""
    from lbi_engine import noise
    from lbi_engine.api import DTYPES, PreparedRun
    from lbi_engine.api.prepared import method_for
    from lbi_engine.models.zoo import load_network
    from lbi_engine.priors.input import run_regulariser
    from lbi_engine.problem import InversionProblem
    request.validate()
    if len(seeds) != len(truths):
        raise InputError(f"{len(truths)} samples but {len(seeds)} seeds; give one seed per sample.")
    device, dtype = torch.device(request.resolved_device()), DTYPES[request.dtype]
    if bundle is None:
        bundle = load_network(request.network, input_shape=request.input_shape,
                              allow_pickle=request.allow_pickle)
    encoder = bundle.encoder.to(device=device, dtype=dtype)
    input_shape = tuple(encoder.input_shape)
    batch = len(truths)
    shaped = np.asarray(truths, dtype=np.float32).reshape(batch, *input_shape)
    x_true = torch.as_tensor(np.asarray(bundle.preprocessing.apply(shaped)), dtype=dtype,
                             device=device)
    # one forward pass for the batch, each sample's noise from its own seed
    data = noise.make_noisy_data(encoder, x_true, request.noise_std,
                                 sample_seeds=[int(s) for s in seeds])
    y_delta, noise_norm = data.y_delta, data.noise_norm
    preprocessing = bundle.preprocessing
    regulariser, regulariser_rule = run_regulariser(
        request.regulariser, request.network, getattr(bundle, "sha256", None), input_shape,
        request.input_prior, request.noise_std_known())
    problem = InversionProblem(
        network=encoder,
        y_delta=y_delta,
        regulariser=regulariser,
        alpha=request.fixed_alpha(),
        x_true=x_true,
        data_range=float(getattr(preprocessing, "data_range", 1.0)),
        display_offset=float(getattr(preprocessing, "display_offset", 0.0)),
        delta=noise_norm,
        layer_alphas=request.layer_alphas,
        extras={"regulariser_rule": regulariser_rule,
                "regulariser_run": regulariser.describe()},
    )
    image_shape = problem.image_shape or input_shape
    display = _squeeze_channels(shaped.reshape(batch, *image_shape))
    decoder_images, decoder_psnr = _decode(bundle, y_delta, display)
    delta, delta_squared = data.delta.tolist(), data.delta_squared.tolist()
    prepared = PreparedRun(request=request, problem=problem,
                           method=method_for(request.method, problem), bundle=bundle,
                           truth_image=display[0],
                           decoder_image=None if decoder_images is None else decoder_images[0],
                           decoder_psnr=decoder_psnr[0], delta=float(delta[0]),
                           delta_squared=float(delta_squared[0]),
                           noise_norm=float(noise_norm[0]), y_clean=data.y)
    return BatchRun(
        prepared=prepared,
        truths=display,
        decoder_images=decoder_images,
        decoder_psnr=decoder_psnr,
        delta=[float(v) for v in delta],
        delta_squared=[float(v) for v in delta_squared],
        noise_norm=[float(v) for v in noise_norm.tolist()],
        seeds=[int(s) for s in seeds],
    )


def _squeeze_channels(array: np.ndarray) -> np.ndarray:
    """(B, 1, H, W) -> (B, H, W): one grey channel is shown as a plain image."""
    return array[:, 0] if array.ndim == 4 and array.shape[1] == 1 else array


def _decode(bundle: Any, y_delta: Tensor, display: np.ndarray
            ) -> tuple[np.ndarray | None, list[float | None]]:
    from lbi_engine import metrics

    batch = display.shape[0]
    if getattr(bundle, "decoder", None) is None:
        return None, [None] * batch
    decoded = np.asarray(bundle.decode(y_delta.to("cpu", torch.float32)), dtype=np.float32)
    decoded = decoded.reshape(display.shape)
    psnr = metrics.psnr(torch.as_tensor(decoded), torch.as_tensor(display), data_range=1.0)
    return decoded, [float(v) for v in psnr]


def solve_batch(
    run: BatchRun,
    *,
    method: str | None = None,
    on_record: Callable[[Any], None] | None = None,
) -> Any:
    """Runs the request's method (or ``method``) on the batch; returns the final record."""
    from lbi_engine.api import iterate

    prepared = run.with_method(method).prepared if method is not None else run.prepared
    final = None
    for record in iterate(prepared):
        if on_record is not None:
            on_record(record)
        final = record
    assert final is not None and final.final
    return final


def solve_each(run: BatchRun, method: str | None = None) -> Any:
    """The final record of the request's method (or ``method``) on the batch, each sample
    stopped by its own rule and leaving the batch then (``solvers.shrinking``): the same
    steps and stop as ``lbi invert`` of that sample with the request's settings, within
    rounding; ``extras["stop_iterations"]`` holds each sample's iteration count."""
    from lbi_engine.solvers.shrinking import solve_shrinking_split

    request = run.prepared.request
    # --threads N: N shares of the batch solved at once, one torch thread each
    parts = max(1, int(request.threads or 1)) if run.batch >= SPLIT_MIN_BATCH else 1
    with torch_threads(1 if parts > 1 else None):
        return solve_shrinking_split(run.problem, method or request.method, parts,
                                     stop=request.stop_rule(),
                                     options=request.solver_options(),
                                     report_every=request.report_every)


#: Fewer samples than this are solved as one share whatever the thread count: a share's
#: per-step Python work would outweigh its arithmetic.
SPLIT_MIN_BATCH = 32


def noise_scaled_alpha(run: BatchRun, method: str | None = None) -> tuple[float, str] | None:
    """alpha "auto" of the batch's request when it needs no search: the regulariser's own
    weight for the noise level (the learned Gaussian prior's c(s) s^2, ``alpha_for_noise``),
    which ``api.iterate`` takes for every sample alike when no rule is named and the noise
    level is known; as (alpha, rule name), else None (a per-sample search)."""
    from lbi_engine.solvers.alpha import ALPHA_MAX

    request = run.prepared.request
    inner = getattr(run.problem.reg, "inner", run.problem.reg)
    scaled = getattr(inner, "alpha_for_noise", None)
    std = request.noise_std_known()
    if scaled is None or request.alpha_rule != "auto" or not (std is not None and std > 0) \
            or (method or request.method) in ("landweber", "layerwise"):
        return None
    alpha = min(max(float(scaled(std)), 1e-12), ALPHA_MAX)
    return alpha, str(getattr(inner, "noise_alpha_rule", "noise-scaled"))


def sample_metrics(run: BatchRun, record: Any) -> list[dict[str, Any]]:
    """``api.final_metrics`` of every sample of a finished batch, as result.json's rows
    (each sample's own iteration count where the record holds them: ``solve_each``)."""
    from lbi_engine.api import final_metrics

    rows = [final_metrics(run.sample_view(i), record, i).to_dict() for i in range(run.batch)]
    for row, count in zip(rows, record.extras.get("stop_iterations") or (), strict=False):
        row["iterations"] = int(count)
    return rows


def display_images(run: BatchRun, record: Any) -> list[np.ndarray]:
    """The reconstructions of a record as display images (preprocessing undone)."""
    x = record.x.detach().to("cpu", torch.float32).numpy()
    return [run.prepared.to_display(x[i]) for i in range(x.shape[0])]


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Temporarily run torch's CPU kernels on ``count`` threads (None: leave as is).

    Why: for small matrices the OpenMP hand-off costs more than the arithmetic, and on a
    busy machine spinning threads slow each other (docs/developer/calibration.md).
    """
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(count))
    try:
        yield
    finally:
        torch.set_num_threads(before)
