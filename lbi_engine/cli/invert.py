"""``lbi invert``: one regularised inversion written to a folder (thin layer over lbi_engine.api).

Flow: flags (and optionally a run record) -> InversionRequest -> api.prepare -> api.iterate
(a live progress line, cli._progress) -> exports.export_run. No numerics here. The request
is built in ``_invert_request`` (record <- flags).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from lbi_engine.cli import _common as c
from lbi_engine.cli._invert_request import build_request
from lbi_engine.cli._invert_request import load_record as load_record  # re-exported
from lbi_engine.results.run_metrics import RunMetrics

#: Warnings meant for developers (a library's deprecation notices), not for the person running
#: `lbi`: they are dropped from the messages shown and stored (the GUI does the same).
DEV_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ResourceWarning)

DESCRIPTION = """\
Invert a pre-trained network: find the input x whose output matches a measured code y^delta,
by minimising  sum_l B_Psi_l(x_l, W_l x_(l-1) + b_l) + alpha R(x)  (the lifted Bregman
formulation of Wang & Benning). Give the network and ONE source of data:

  --sample INDEX   a bundled ground truth (MNIST digit or synthetic cartoon); y = N(x), plus noise
  --image PATH     a ground-truth image file (PNG/JPEG/...); y = N(x), plus noise
  --truth X.npy    a ground-truth array (display range [0, 1]); y = N(x), plus noise
  --data Y.npy     a measured network output y^delta (no ground truth, no noise added)

Files written into --out DIR:
  result.json         every parameter (the run record), network name + sha256, seed, package
                      versions, final metrics (objective and its Bregman/regulariser parts,
                      iterations, stop_reason, seconds, psnr, ssim, l2_norm, tv_iso, tv_aniso,
                      discrepancy, delta, delta_squared, decoder_psnr; null where undefined)
  reconstruction.npy  float32, the network's input shape, in display range (preprocessing undone)
  reconstruction.png  the same as an image
  truth.npy/.png      the ground truth as the solver saw it (after --resize; not with --data)
  noisy_data.npy      y^delta, the noisy network output inverted (not with --data); .png too
                      where it is an image
  curves.csv          one row per reported iterate (objective, bregman_1..L, reg, psnr, ssim, ...)
  decoder.npy/.png    the network's decoder applied to y^delta (zoo autoencoders only)
  README.txt          what each file of the folder is, one line each

On a terminal a progress line shows the stage (start, alpha search point k of n, final
solve), the time so far and an estimate of the time left (-q: only errors and warnings).
"""

EPILOG = """\
examples:
  # a validation digit through the bundled CNN autoencoder (paper Sec. 5.2), at the defaults:
  # alpha chosen from the data (discrepancy principle with the noise std), method auto (joint)
  lbi invert --network mnist-cnn-ae --sample 3 --noise-std 0.05 --out runs/cnn3
  # a measured code with a known noise level: alpha by the discrepancy principle
  lbi invert --network mnist-cnn-ae --data code.npy --noise-level 0.05 --out runs/measured
  # the paper's circle experiment (TV, PDHG, paper step sizes and stopping rule)
  lbi invert --network circle-perceptron --dataset cartoon --split disc --sample 0 \\
             --noise-std 0.005 --alpha 1.5e-2 --method pdhg --steps paper --tol-mode absolute \\
             --max-iter 10000 --out runs/circle
  # your own network (torch.onnx.export or torch.export.save) and a measured code
  lbi invert --network model.onnx --data code.npy --alpha 1e-2 --out runs/mine
  # repeat a run exactly (same numbers), or with one parameter changed
  lbi invert --record runs/cnn3/result.json --out runs/cnn3-again   # the chosen alpha, frozen
  lbi invert --record runs/cnn3/result.json --alpha 3e-3 --out runs/cnn3-alpha3e-3

exit status: 0 success, 2 bad input (one-line message on stderr), 1 internal error.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "invert",
        help="invert a network on one sample or measurement and write the results to a folder",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=c.HelpFormatter,
    )
    net = p.add_argument_group("network")
    net.add_argument("--network", metavar="NAME|PATH",
                     help="a zoo name (see `lbi list`) or a model file: ONNX, .pt2 "
                          "(torch.export), .safetensors/.pt + card JSON, or a card JSON "
                          "(required unless --record); `lbi convert` turns others into a card")
    net.add_argument("--input-shape", type=c.shape, metavar="C,H,W",
                     help="the input shape without batch, only when the file does not record it "
                          "(TorchScript, ONNX)")
    net.add_argument("--allow-code", "--allow-pickle", dest="allow_code", action="store_true",
                     default=None,
                     help="consent, for this run, to open a model format whose loading runs "
                          "code from the file: TorchScript, a whole pickled nn.Module "
                          "(torch.save(model)). Only for files you trust; a --record never "
                          "gives this consent")
    src = p.add_argument_group("data (exactly one source; optional with --record)")
    one = src.add_mutually_exclusive_group()
    one.add_argument("--sample", type=c.nonnegative_int, metavar="INDEX",
                     help="index of a bundled ground truth in --dataset/--split (the MNIST "
                          "splits are sorted by label: val 0-99 are zeros, 100-199 ones, ...)")
    one.add_argument("--image", metavar="PATH", help="ground-truth image file")
    one.add_argument("--truth", metavar="X.npy", help="ground-truth array in display range [0, 1]")
    one.add_argument("--data", metavar="Y.npy",
                     help="measured output y^delta; no ground truth, no noise added")
    src.add_argument("--dataset", choices=("mnist", "natural", "cartoon"),
                     help="bundled dataset of --sample " + c.request_default("dataset"))
    src.add_argument("--split", metavar="SPLIT",
                     help="mnist: train|val|all; cartoon: disc|squares|rectangles|mixtures "
                          + c.request_default("split"))
    src.add_argument("--resize", action="store_true", default=None,
                     help="resize --image to the network's input size")
    noise = p.add_argument_group("noise (simulated data only)")
    noise.add_argument("--noise-std", type=c.nonnegative_float, metavar="S",
                       help="std of the Gaussian added to y = N(x); y^delta is then clipped into "
                            "the last activation's range " + c.request_default("noise_std"))
    noise.add_argument("--noise-level", type=c.positive_float, metavar="S",
                       help="for measured --data: the per-entry noise std (as --noise-std), "
                            "so that --alpha auto can use the discrepancy principle")
    noise.add_argument("--seed", type=c.nonnegative_int, metavar="K",
                       help="seed of the noise " + c.request_default("seed"))
    prob = p.add_argument_group("problem and method")
    prob.add_argument("--alpha", type=c.alpha_value, metavar="A|auto",
                      help="regularisation weight alpha > 0, or auto: chosen from the data by "
                           "a few warm-started solves, by the discrepancy principle when the "
                           "noise level is known (--noise-std for simulated data, --noise-level "
                           "for --data), else by quasi-optimality on a path from large to "
                           "small alpha; "
                           "result.json records alpha, alpha_rule, alpha_path, and its request "
                           "repeats the run with that alpha frozen " + c.request_default("alpha"))
    prob.add_argument("--alpha-rule", choices=("auto", "discrepancy", "quasi-optimality"),
                      help="the rule of --alpha auto " + c.request_default("alpha_rule"))
    prob.add_argument("--regulariser", metavar="R",
                      help=c.REGULARISER_HELP + " " + c.request_default("regulariser"))
    prob.add_argument("--method", choices=c.METHOD_NAMES,
                      help=c.METHOD_HELP + " " + c.request_default("method"))
    prob.add_argument("--steps", choices=c.STEP_RULES,
                      help="step-size rule; all but paper are provably convergent: auto "
                           "(accelerated for one-layer with TV on the CPU under the default "
                           "--tol-mode objective, else balanced; safe "
                           "for the joint method's x_0 block), accelerated (FISTA with an "
                           "inexact TV prox), balanced, safe, conservative, or paper "
                           "(tau_x = 1.99/||W||^2, "
                           "tau_z = 1/(8 alpha)) " + c.request_default("steps"))
    prob.add_argument("--layer-alphas", type=c.float_list, metavar="A1,A2,..",
                      help="per-layer weights of the auxiliary priors (layerwise method)")
    prob.add_argument("--feature-prior", metavar="BASE",
                      help="learned feature prior for the layerwise method (BASE.safetensors + "
                           "BASE.json from `lbi feature-prior`; default for zoo networks: the "
                           "one shipped beside the weights)")
    prob.add_argument("--input-prior", metavar="BASE",
                      help="learned input prior for --regulariser gaussian (BASE.safetensors + "
                           "BASE.json from `lbi prior`; default for zoo networks: the one "
                           "shipped beside the weights)")
    prob.add_argument("--option", type=c.key_value, action="append", metavar="KEY=VALUE",
                      help="a solver option, repeatable: n_inner, eta, step_scale, optimizer, lr, "
                           "tv_smoothing, layer_tikhonov, inner_max_iter, input_alpha "
                           "(layerwise: discrepancy or given)")
    stop = p.add_argument_group("stopping")
    stop.add_argument("--max-iter", type=c.positive_int, metavar="N",
                      help="iteration cap " + c.request_default("max_iter"))
    stop.add_argument("--tol", type=c.nonnegative_float, metavar="T",
                      help=c.TOL_HELP + " " + c.request_default("tol"))
    stop.add_argument("--tol-mode", choices=c.TOL_MODES,
                      help="objective: the objective's change over the second half of the run; "
                           "relative: ||dx||/||x|| per iteration; absolute: the paper's ||dx|| "
                           + c.request_default("tol_mode"))
    stop.add_argument("--time-budget", type=c.positive_float, metavar="SECONDS",
                      help="stop after this much solver time")
    run = p.add_argument_group("run")
    run.add_argument("--record", metavar="FILE",
                     help="repeat a run: a result.json of `lbi invert` or a run record (run.json) "
                          "saved by the GUI; flags given here override its values")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"),
                     help="auto: CUDA when torch finds a GPU, else the CPU (result.json's "
                          "device_run says which) " + c.request_default("device"))
    run.add_argument("--dtype", choices=("float32", "float64"), help=c.request_default("dtype"))
    run.add_argument("--threads", type=c.positive_int, metavar="N", help="torch CPU threads")
    run.add_argument("--report-every", type=c.positive_int, metavar="K",
                     help="record an iterate (a row of curves.csv) every K iterations "
                          + c.request_default("report_every"))
    run.add_argument("--out", required=True, metavar="DIR",
                     help="output folder (created if needed)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace files of an earlier run in DIR (refused otherwise)")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="print only problems: errors and warnings about the input, no "
                          "progress line and no summary; without it the progress line shows "
                          "only on a terminal")
    c.add_memory_limit(p)
    p.set_defaults(handler=run_invert)
    return p


# ---------------------------------------------------------------------------------------------
# running


def _light(record: Any) -> dict[str, Any]:
    """What curves.csv needs of a record, without the (large) iterates."""
    return {
        name: getattr(record, name)
        for name in ("iteration", "elapsed", "objective", "bregman_terms", "reg_term", "psnr",
                     "ssim", "discrepancy", "primal_residual", "dual_residual", "stage")
    }


def run_invert(args: argparse.Namespace) -> int:
    from lbi_engine.results.folder_lock import output_folder_lock, prepare_output_folder

    # Refuse before the (possibly long) run, not after it: a path that cannot be written,
    # a folder another run is writing to, results that would be replaced without --overwrite.
    out = prepare_output_folder(args.out)
    request = build_request(args)
    with output_folder_lock(out):
        return _run_locked(args, request, out)


def _run_locked(args: argparse.Namespace, request: Any, out: Path) -> int:
    from lbi_engine import api
    from lbi_engine.cli._progress import alpha_points, live_line
    from lbi_engine.results import exports
    from lbi_engine.results.progress import ProgressTracker

    exports.check_outputs_free(out, exports.RUN_FILES, args.overwrite)
    if request.allow_code:
        c.warn("--allow-code: the model file may be loaded by running code stored in it "
               "(TorchScript, pickle), which can do anything you can; use it only for files "
               "you trust")
    from lbi_engine.experiments.batch import torch_threads

    messages: list[str] = []
    tracker = ProgressTracker(max_iter=request.max_iter, tol=request.tol,
                              tol_mode=request.tol_mode, time_budget=request.time_budget,
                              alpha_points=alpha_points(request))
    # torch_threads restores the caller's thread count (api.iterate sets the request's)
    with torch_threads(request.threads), warnings.catch_warnings(record=True) as caught, \
            live_line(lambda: tracker.now().text(), args.quiet) as redraw:
        warnings.simplefilter("always")
        tracker.starting("loading the network and the data")
        redraw()  # each step of the start is drawn, however fast it passes
        prepared = api.prepare(request)
        tracker.starting("first solve" if request.alpha != "auto" else "first alpha")
        redraw()
        records: list[dict[str, Any]] = []
        final = None
        stage = None
        for record in api.iterate(prepared):
            event = tracker.update(record)
            if event.stage_text() != stage and not event.final:
                stage = event.stage_text()
                redraw()
            records.append(_light(record))
            final = record
    messages.extend(str(w.message) for w in caught if not issubclass(w.category, DEV_WARNINGS))
    assert final is not None and final.final
    if final.extras.get("warning"):
        messages.append(str(final.extras["warning"]))
    messages = list(dict.fromkeys(messages))
    for message in messages:
        c.warn(message)
    written = exports.export_run(prepared, final, records, out, overwrite=args.overwrite,
                                 extra={"warnings": messages})
    if not args.quiet:
        _summary(prepared, final, written, out)
    return c.EXIT_OK


def _summary(prepared: Any, final: Any, written: dict[str, Path], out: Path) -> None:
    from lbi_engine.api import final_metrics

    m = final_metrics(prepared, final)
    r = prepared.request
    how = "" if m.alpha_rule == "fixed" else f" ({m.alpha_rule})"
    regulariser = m.regulariser_run or r.regulariser
    print(f"{c.one_line(r.network)}: {m.method_run} on {m.device_run}, {regulariser}, "
          f"alpha={m.alpha:.4g}{how}: "
          f"{m.iterations} iterations ({m.stop_reason}), {m.seconds:.2f} s")
    note = getattr(prepared.bundle.encoder, "rewrite_note", lambda: None)()
    if note:
        print(f"  {c.shown(note)}")
    if m.hidden_weight is not None and m.hidden_weight != 1.0:
        why = f": {m.hidden_weight_rule}" if m.hidden_weight_rule else ""
        print(f"  hidden layers' Bregman terms weighted {m.hidden_weight:g}x the last one's "
              f"(hidden_weight, MATH.md §5.7){why}")
    if r.method == "layerwise" and len(m.stages or []) == 1:
        print("  note: a one-layer network has no stages: layer-wise ran as the one-layer "
              "method (alpha chosen as there)")
    for stage in m.stages or []:
        weight = stage["weight"][0] if stage.get("weight") else None
        rule = f" ({stage['weight_rule']})" if stage.get("weight_rule") else ""
        shown = "" if weight is None else \
            f", {'alpha' if stage['stage'].startswith('layer 1/') else 'weight'} {weight:.4g}{rule}"
        print(f"  {stage['stage']}: {stage['iterations']} iterations ({stage['stop_reason']})"
              f"{shown}")
    print(f"  objective {c.fmt(m.objective, 6)}  psnr {c.fmt(m.psnr)} dB  "
          f"ssim {c.fmt(m.ssim)}  discrepancy {c.fmt(m.discrepancy)}  "
          f"delta^2 {c.fmt(m.delta_squared)}")
    if m.decoder_psnr is not None:
        print(f"  decoder psnr {c.fmt(m.decoder_psnr)} dB")
    print(f"  wrote {c.shown(out)}/: {', '.join(sorted(written))}")
    for advice in _advice(prepared, final, m):
        print(f"  note: {advice}")
    sys.stdout.flush()


def _advice(prepared: Any, final: Any, m: RunMetrics) -> list[str]:
    """The summary's words on a run that needs attention (results.advice.run_advice)."""
    from lbi_engine.results.advice import run_advice

    shown = prepared.to_display(final.x[0])  # the image a person looks at
    truth = prepared.truth_image  # display space, like `shown`; None for measured data
    return run_advice(m, prepared.request.max_iter, x=shown, truth=truth,
                      data_range=prepared.problem.data_range)
