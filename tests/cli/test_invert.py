"""`lbi invert` end to end: files, numbers against direct engine calls, records, bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lbi_engine.api import InversionRequest, final_metrics, run_to_end

NET = "mnist-perceptron-ae"  # the smallest bundled network with a decoder (784 -> 100)
RUN_FILES = {"result.json", "reconstruction.npy", "reconstruction.png", "curves.csv",
             "decoder.npy", "decoder.png", "truth.npy", "truth.png", "noisy_data.npy",
             "README.txt"}  # this network's output is a vector: no noisy_data.png
BASE = ["invert", "--network", NET, "--split", "val", "--sample", "2", "--noise-std", "0.05",
        "--seed", "3", "--alpha", "5e-3", "--method", "pdhg", "--max-iter", "20",
        "--report-every", "5", "--threads", "1"]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lbi_engine.cli import main

    out = tmp_path_factory.mktemp("invert") / "run"
    assert main([*BASE, "--out", str(out), "--quiet"]) == 0
    return out


def _result(folder: Path) -> dict:
    return json.loads((folder / "result.json").read_text())


def test_writes_every_file_and_matches_a_direct_engine_call(first_run: Path) -> None:
    assert {p.name for p in first_run.iterdir()} == RUN_FILES
    result = _result(first_run)
    request = InversionRequest.from_dict(result["request"])
    assert (request.network, request.index, request.seed, request.alpha) == (NET, 2, 3, 5e-3)
    prepared, final, records = run_to_end(request)
    direct = final_metrics(prepared, final).to_dict()
    metrics = result["metrics"]
    for key in ("objective", "reg_term", "psnr", "ssim", "l2_norm", "tv_iso", "tv_aniso",
                "discrepancy", "delta", "delta_squared", "decoder_psnr"):
        assert metrics[key] == pytest.approx(direct[key], rel=1e-6, abs=1e-9), key
    assert metrics["iterations"] == direct["iterations"] == 20
    assert metrics["stop_reason"] == "max_iterations"
    assert metrics["delta_squared"] > 0 and metrics["psnr"] > 5
    assert result["network"]["sha256"] == prepared.bundle.sha256
    assert result["seed"] == 3
    assert set(result["versions"]) == {"lbi", "torch", "numpy", "python"}
    # the reconstruction: float32, the network's input shape, preprocessing undone
    recon = np.load(first_run / "reconstruction.npy", allow_pickle=False)
    assert recon.dtype == np.float32 and recon.shape == tuple(prepared.problem.input_shape)
    expected = prepared.bundle.preprocessing.undo(final.x[0].numpy())
    np.testing.assert_allclose(recon.reshape(-1), np.asarray(expected).reshape(-1), atol=1e-6)
    png = np.asarray(Image.open(first_run / "reconstruction.png"))
    assert png.shape == (28, 28)
    np.testing.assert_array_equal(
        png, np.round(np.clip(recon.reshape(28, 28), 0, 1) * 255).astype(np.uint8))
    decoder = np.load(first_run / "decoder.npy")
    np.testing.assert_allclose(decoder.reshape(28, 28), prepared.decoder_image.reshape(28, 28),
                               atol=1e-6)


def test_curves_have_one_row_per_reported_iterate(first_run: Path) -> None:
    with open(first_run / "curves.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["iteration"]) for r in rows] == [0, 5, 10, 15, 20]
    assert "bregman_1" in rows[0] and "bregman_2" not in rows[0]  # one layer
    last = rows[-1]
    metrics = _result(first_run)["metrics"]
    assert float(last["objective"]) == pytest.approx(metrics["objective"], rel=1e-12)
    assert float(last["psnr"]) == pytest.approx(metrics["psnr"], rel=1e-6)
    # objective = bregman + reg on every row
    for row in rows:
        assert float(row["objective"]) == pytest.approx(
            float(row["bregman_1"]) + float(row["reg"]), rel=1e-5)


def test_record_repeats_the_run_exactly_and_flags_override(first_run: Path, cli,
                                                           tmp_path: Path) -> None:
    code, _, err = cli("invert", "--record", first_run / "result.json", "--out", tmp_path / "a",
                       "--quiet")
    assert code == 0, err
    again, first = _result(tmp_path / "a"), _result(first_run)
    for key in ("objective", "psnr", "ssim", "iterations", "delta_squared", "bregman_terms"):
        assert again["metrics"][key] == first["metrics"][key], key
    assert (tmp_path / "a" / "reconstruction.npy").read_bytes() == \
        (first_run / "reconstruction.npy").read_bytes()
    assert again["request"] == first["request"]
    code, _, err = cli("invert", "--record", first_run / "result.json", "--alpha", "5e-2",
                       "--out", tmp_path / "b", "--quiet")
    assert code == 0, err
    changed = _result(tmp_path / "b")
    assert changed["request"]["alpha"] == 5e-2
    assert {k: v for k, v in changed["request"].items() if k != "alpha"} == \
        {k: v for k, v in first["request"].items() if k != "alpha"}
    assert changed["metrics"]["objective"] != first["metrics"]["objective"]


def test_a_bare_run_record_from_the_gui_is_accepted(first_run: Path, cli,
                                                   tmp_path: Path) -> None:
    request = InversionRequest.from_dict(_result(first_run)["request"])
    (tmp_path / "run.json").write_text(json.dumps(request.to_dict()))  # what the GUI saves
    code, _, err = cli("invert", "--record", tmp_path / "run.json", "--out", tmp_path / "g",
                       "--quiet")
    assert code == 0, err
    assert _result(tmp_path / "g")["metrics"]["objective"] == \
        _result(first_run)["metrics"]["objective"]


def test_existing_results_are_kept_unless_overwrite(first_run: Path, cli) -> None:
    before = (first_run / "result.json").read_bytes()
    code, out, err = cli(*BASE, "--out", first_run)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--overwrite" in err
    assert (first_run / "result.json").read_bytes() == before


def test_overwrite_replaces_and_summary_is_printed(tmp_path: Path, cli) -> None:
    out = tmp_path / "o"
    assert cli(*BASE, "--max-iter", "2", "--out", out)[0] == 0
    code, stdout, err = cli(*BASE, "--max-iter", "3", "--out", out, "--overwrite")
    assert code == 0, err
    assert _result(out)["metrics"]["iterations"] == 3
    assert "psnr" in stdout and "decoder psnr" in stdout and str(out) in stdout


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_user_torchscript_network_with_measured_data(tmp_path: Path, cli) -> None:
    """A network file the zoo does not know, and y^delta given directly (no ground truth)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU())
    torch.jit.script(model).save(str(tmp_path / "model.pt"))
    x = torch.zeros(1, 16)
    x[0, 5:7] = 1.0
    x[0, 9:11] = 1.0
    y = model(x).detach().double().numpy()[0]
    np.save(tmp_path / "y.npy", y)
    code, _, err = cli("invert", "--network", tmp_path / "model.pt", "--allow-code",
                       "--input-shape", "16", "--data", tmp_path / "y.npy", "--alpha", "1e-3",
                       "--method", "pdhg",
                       "--dtype", "float64", "--max-iter", "300", "--out", tmp_path / "r",
                       "--quiet")
    assert code == 0, err
    assert {p.name for p in (tmp_path / "r").iterdir()} == RUN_FILES - {
        "decoder.npy", "decoder.png", "truth.npy", "truth.png", "noisy_data.npy"}
    result = _result(tmp_path / "r")
    m = result["metrics"]
    for key in ("psnr", "ssim", "delta", "delta_squared", "decoder_psnr"):
        assert m[key] is None, key
    recon = np.load(tmp_path / "r" / "reconstruction.npy")
    assert recon.shape == (16,)
    # the objective, recomputed independently: B_ReLU(y, z) = ½||y - z+||² + <y, z->, TV iso
    w = model[0].weight.detach().double().numpy()
    b = model[0].bias.detach().double().numpy()
    z = w @ recon.astype(np.float64) + b
    bregman = 0.5 * np.sum((y - np.maximum(z, 0)) ** 2) + np.sum(y * np.maximum(-z, 0))
    img = recon.astype(np.float64).reshape(4, 4)
    gx = np.zeros_like(img)
    gy = np.zeros_like(img)
    gx[:-1] = img[1:] - img[:-1]
    gy[:, :-1] = img[:, 1:] - img[:, :-1]
    tv = np.sqrt(gx**2 + gy**2).sum()
    assert m["tv_iso"] == pytest.approx(tv, rel=1e-5)
    assert m["objective"] == pytest.approx(bregman + 1e-3 * tv, rel=1e-5)
    assert m["discrepancy"] == pytest.approx(np.linalg.norm(np.maximum(z, 0) - y), rel=1e-5)
    assert m["discrepancy"] < 0.5 * np.linalg.norm(y - np.maximum(b, 0))  # it did fit the data


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--network", "no-such-network", "--sample", "0"], "no-such-network"),
        (["--network", NET, "--truth", "missing.npy"], "missing.npy"),
        (["--network", NET, "--truth", "{small}"], "shape"),
        (["--network", NET, "--sample", "0", "--alpha", "0"], "alpha"),
        (["--network", NET, "--sample", "0", "--alpha", "-1e-3"], "alpha"),
        (["--network", NET, "--sample", "99999"], "99999"),
        (["--network", NET, "--sample", "0", "--image", "x.png"], "not allowed with"),
        (["--network", NET], "--sample"),
        (["--sample", "0"], "--network"),
        (["--network", NET, "--sample", "0", "--max-iter", "0"], "--max-iter"),
        (["--network", NET, "--sample", "0", "--regulariser", "tvv"], "tvv"),
        (["--network", NET, "--sample", "0", "--bogus"], "--bogus"),
        (["--record", "missing.json"], "missing.json"),
        (["--network", NET, "--sample", "0", "--input-shape", "1,x"], "shape"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str, tmp_path: Path,
                                         cli) -> None:
    np.save(tmp_path / "small.npy", np.zeros((5, 5), np.float32))
    args = [a.replace("{small}", str(tmp_path / "small.npy")) for a in args]
    code, out, err = cli("invert", *args, "--out", tmp_path / "out")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lbi"), err
    assert needle in err
    assert not (tmp_path / "out" / "result.json").exists()


def test_usage_errors_come_before_the_engine_is_imported() -> None:
    """A missing data source is a usage error at once: torch (seconds on a cold start) is not
    imported for it."""
    import subprocess
    import sys

    code = ("import sys\nfrom lbi_engine.cli import main\n"
            "rc = main(['invert', '--network', 'circle-perceptron', '--out', 'never'])\n"
            "print(rc, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["2", "False"], out.stdout + out.stderr
    assert "give one data source" in out.stderr


def test_sample_without_dataset_takes_the_dataset_the_network_fits(cli, tmp_path) -> None:
    """`--network circle-perceptron --sample 0` used to fail on MNIST's 28x28 shape: the
    64x64 cartoon set is chosen (and said), an explicit --dataset is kept as given."""
    import json

    code, _, err = cli("invert", "--network", "circle-perceptron", "--sample", "0",
                       "--max-iter", "3", "--alpha", "0.01", "--out", tmp_path / "a", "--quiet")
    assert code == 0, err
    assert "using --dataset cartoon --split disc" in err
    request = json.loads((tmp_path / "a" / "result.json").read_text())["request"]
    assert (request["dataset"], request["split"], request["index"]) == ("cartoon", "disc", 0)
    code, _, err = cli("invert", "--network", "circle-perceptron", "--sample", "0",
                       "--dataset", "mnist", "--max-iter", "3", "--alpha", "0.01",
                       "--out", tmp_path / "b", "--quiet")
    assert code == 2 and "expects (1, 64, 64)" in err, err


def test_a_vanishing_noise_std_chooses_alpha_without_crashing(cli, tmp_path) -> None:
    """--noise-std 1E-200 (found by the hostile-properties test) ended in a traceback: the
    expected clipped residual was NaN. The discrepancy rule now walks to the smallest alpha."""
    import json

    code, _, err = cli("invert", "--network", "circle-perceptron", "--sample", "0",
                       "--noise-std", "1E-200", "--max-iter", "20", "--out", tmp_path / "o",
                       "--quiet")
    assert code == 0, err
    metrics = json.loads((tmp_path / "o" / "result.json").read_text())["metrics"]
    assert metrics["alpha_rule"] == "discrepancy" and metrics["alpha"] > 0


def test_layerwise_runs_the_typed_alpha_and_says_what_ran(tmp_path: Path, capsys) -> None:
    """`--method layerwise --alpha 0.01` runs 0.01 (it ran its own search's 0.0577); on a
    one-layer network layer-wise is the one-layer method and says so."""
    from lbi_engine.cli import main

    out = tmp_path / "lw"
    assert main(["invert", "--network", "mnist-cnn-ae", "--sample", "7", "--noise-std", "0.05",
                 "--method", "layerwise", "--alpha", "0.01", "--max-iter", "60",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "alpha=0.01 (given)" in text and "layer 1/3" in text and "alpha 0.01 (given)" in text
    metrics = _result(out)["metrics"]
    assert metrics["alpha"] == pytest.approx(0.01)
    assert [s["weight_rule"] for s in metrics["stages"]][-1] == "given"
    one = tmp_path / "one"
    assert main(["invert", "--network", "circle-perceptron", "--sample", "0", "--noise-std",
                 "0.05", "--method", "layerwise", "--max-iter", "250", "--out", str(one)]) == 0
    text = capsys.readouterr().out
    assert "ran as the one-layer method" in text and "(discrepancy)" in text


def test_natural_colour_network_inverts_a_validation_patch_at_the_defaults(tmp_path):
    """The bundled colour network, as the README shows it: its own dataset, the learned input
    prior chosen by `auto`, stopped by tolerance, and better than TV would be."""
    import json

    from lbi_engine.cli import main

    out = tmp_path / "nat"
    rc = main(["invert", "--network", "natural-cnn-ae", "--dataset", "natural", "--split", "val",
               "--sample", "500", "--noise-std", "0.1", "--out", str(out), "--quiet"])
    assert rc == 0
    m = json.loads((out / "result.json").read_text())["metrics"]
    assert "gaussian" in m["regulariser_run"] and m["stop_reason"] == "tolerance"
    assert m["psnr"] > 19.0 and m["decoder_psnr"] > 19.0
    from PIL import Image

    with Image.open(out / "reconstruction.png") as im:
        assert im.mode == "RGB" and im.size == (32, 32)
