"""The hostile corpus through `lbi invert` / `lbi sweep`, in-process (main(argv)).

Each case makes a hostile input (a model file that tries to run code, a bomb, a lying
header, a record or image that is not what it claims, an absurd value) and asserts: exit
code 2, one error line naming the problem (warnings aside), no traceback, no output left,
and the sentinel file untouched (no code from a file ran).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability import hostile_files as hf
from tests.reliability.kit import Kit


@dataclass(frozen=True)
class Case:
    id: str
    argv: Callable[[Path, Kit], list[str]]  # (folder, kit) -> arguments before --out
    words: tuple[str, ...]  # the error line must contain each (case-insensitive)


def inv(network: Path | str, *extra: str) -> list[str]:
    return ["invert", "--network", str(network), "--sample", "0", "--max-iter", "3", *extra]


def good(k: Kit, *extra: str) -> list[str]:
    return inv(k.card, *extra)


def record(f: Path, k: Kit, **fields: object) -> list[str]:
    data = {"format_version": 1, "kind": "lbi-run-record", "network": str(k.card),
            "max_iter": 3, **fields}
    (f / "run.json").write_text(json.dumps(data), encoding="utf-8")
    return ["invert", "--record", str(f / "run.json")]


def image(path: Path) -> Callable[[Path, Kit], list[str]]:
    return lambda f, k: ["invert", "--network", str(k.card), "--image", str(path),
                         "--max-iter", "3"]


def img(name: str, make: Callable[[Path], Path], words: tuple[str, ...]) -> Case:
    return Case(name, lambda f, k: ["invert", "--network", str(k.card), "--image",
                                    str(make(f)), "--max-iter", "3"], words)


CODE = ("--allow-code", "safetensors", "onnx")
CASES: list[Case] = [
    # ---- model files that would run code: refused before anything is executed ----------
    Case("ts-setstate-forward", lambda f, k: inv(hf.evil_torchscript(f), "--input-shape",
                                                 "1,28,28"), ("TorchScript", *CODE)),
    Case("ts-named-onnx", lambda f, k: inv(hf.evil_torchscript(f, "evil.onnx")),
         ("TorchScript", "--allow-code")),
    Case("ts-named-json", lambda f, k: inv(hf.evil_torchscript(f, "evil.json")),
         ("TorchScript", "--allow-code")),
    Case("ts-named-safetensors", lambda f, k: inv(hf.evil_torchscript(f, "e.safetensors")),
         ("TorchScript", "--allow-code")),
    Case("ts-named-pt2", lambda f, k: inv(hf.evil_torchscript(f, "evil.pt2")),
         ("TorchScript", "--allow-code")),
    Case("pickle-exec-zip", lambda f, k: inv(hf.evil_pickle(f, "evil.pt")),
         ("evil.pt", "pickle", "--allow-code")),
    Case("pickle-exec-legacy", lambda f, k: inv(hf.evil_pickle(f, "evil.pkl", legacy=True)),
         ("evil.pkl", "--allow-code")),
    Case("pickle-exec-pth", lambda f, k: inv(hf.evil_pickle(f, "evil.pth")),
         ("evil.pth", "--allow-code")),
    Case("pickle-exec-in-state-dict",
         lambda f, k: inv(hf.evil_pickle(f, "ckpt.pt", wrap="state_dict")),
         ("ckpt.pt", "exec", "--allow-code")),
    Case("pickle-os-system", lambda f, k: inv(hf.os_system_pickle(f)),
         ("system.pkl", "os.system")),
    # ---- cards: damaged or absurd, refused before any layer is built --------------------
    Case("card-stride-0", lambda f, k: inv(hf.card(f, "s0", hf.conv(stride=0))),
         ("s0.json", "stride=0", "positive")),
    Case("card-stride-negative", lambda f, k: inv(hf.card(f, "sn", hf.conv(stride=[1, -2]))),
         ("sn.json", "stride",)),
    Case("card-negative-size", lambda f, k: inv(hf.card(f, "neg", [
        {"type": "Flatten"}, {"type": "Linear", "in_features": 784, "out_features": -8}])),
        ("neg.json", "out_features")),
    Case("card-float-kernel", lambda f, k: inv(hf.card(f, "fk", hf.conv(kernel_size=1e12))),
         ("fk.json", "kernel_size")),
    Case("card-string-padding", lambda f, k: inv(hf.card(f, "sp", hf.conv(padding="huge"))),
         ("sp.json", "padding")),
    Case("card-padding-30000", lambda f, k: inv(hf.card(f, "pad", hf.conv(padding=30000))),
         ("pad.json", "memory", "limit")),
    Case("card-tconv-stride-5000", lambda f, k: inv(hf.card(f, "tc", [
        {"type": "ConvTranspose2d", "in_channels": 1, "out_channels": 2, "kernel_size": 3,
         "stride": 5000}, {"type": "ReLU"}])), ("tc.json", "memory", "limit")),
    # the digit fits the declared input (the data is checked before lifting): the weights'
    # memory is what is refused
    Case("card-linear-stack", lambda f, k: inv(hf.card(f, "stack", [
        {"type": "Flatten", "start_dim": 1, "end_dim": -1},
        {"type": "Linear", "in_features": 784, "out_features": 12000}, {"type": "ReLU"}] + [
        {"type": "Linear", "in_features": 12000, "out_features": 12000}, {"type": "ReLU"}] * 39,
        input_shape=(1, 28, 28)), "--memory-limit", "8G"), ("stack.json", "memory", "8.0 GiB")),
    Case("card-one-giant-layer", lambda f, k: inv(hf.card(f, "giant", [
        {"type": "Flatten"}, {"type": "Linear", "in_features": 784, "out_features": 10**9}])),
        ("giant.json", "weights")),
    Case("card-code-as-type", lambda f, k: inv(hf.card(f, "imp", [{"type": "__import__"}])),
         ("imp.json", "__import__", "unknown type")),
    Case("card-layers-not-list", lambda f, k: inv(hf.card(f, "dl", {"type": "ReLU"})),
         ("dl.json", "list")),
    Case("card-kernel-too-big", lambda f, k: inv(hf.card(f, "kb", hf.conv(kernel_size=64))),
         ("kb.json", "kernel")),
    Case("card-weights-traversal", lambda f, k: inv(hf.card(
        f, "trav", [{"type": "ReLU"}], weights={"file": "../../../../etc/passwd"})),
        ("passwd",)),
    # ---- ONNX: sizes estimated before each layer's dry run --------------------------------
    Case("onnx-pads-30000", lambda f, k: inv(hf.onnx_conv(f, "pads.onnx", "Conv",
                                                          pads=[30000] * 4)),
         ("pads.onnx", "memory", "limit")),
    Case("onnx-tconv-stride-5000", lambda f, k: inv(hf.onnx_conv(
        f, "ts.onnx", "ConvTranspose", strides=[5000, 5000])), ("ts.onnx", "memory")),
    Case("onnx-sparse-external-data", lambda f, k: inv(hf.onnx_sparse_external(f)),
         ("ext.onnx", "external", "memory")),
    Case("onnx-stride-0", lambda f, k: inv(hf.onnx_conv(f, "s0.onnx", "Conv", strides=[0, 0])),
         ("s0.onnx",)),
    # ---- weights ----------------------------------------------------------------------
    Case("state-dict-meta-tensors", lambda f, k: inv(hf.meta_state(f)), ("meta.pt", "meta")),
    Case("state-dict-zip-bomb", lambda f, k: inv(hf.zip_bomb_state(f), "--memory-limit", "256M"),
         ("bomb.pt", "memory", "256.0 MiB")),
    Case("safetensors-lying-header", lambda f, k: inv(hf.lying_safetensors(f)),
         ("liar.safetensors",)),
    # ---- run records never grant consent ---------------------------------------------
    Case("record-grants-pickle", lambda f, k: record(
        f, k, network=str(hf.evil_pickle(f, "rec_evil.pt")), allow_pickle=True),
        ("rec_evil.pt", "--allow-code")),
    Case("record-grants-code-ts", lambda f, k: record(
        f, k, network=str(hf.evil_torchscript(f)), input_shape=[1, 28, 28], allow_code=True),
        ("TorchScript", "--allow-code")),
    Case("record-unknown-field", lambda f, k: record(f, k, run_this="rm -rf /"),
         ("run_this", "unknown")),
    Case("record-future-version", lambda f, k: record(f, k, format_version=99),
         ("format_version", "update")),
    Case("record-alpha-string", lambda f, k: record(f, k, alpha="1e-2; rm"), ("alpha",)),
    Case("record-n-inner-huge", lambda f, k: record(f, k, options={"n_inner": 10**12}),
         ("n_inner",)),
    Case("record-inner-max-iter-negative",
         lambda f, k: record(f, k, options={"inner_max_iter": -5}), ("inner_max_iter",)),
    Case("record-shape-negative", lambda f, k: record(f, k, input_shape=[1, -28, 28]),
         ("input_shape",)),
    Case("record-deep-json", lambda f, k: (
        (f / "deep.json").write_text("[" * 100000 + "]" * 100000),
        ["invert", "--record", str(f / "deep.json")])[1], ("deep.json", "json")),
    Case("record-is-list", lambda f, k: ((f / "l.json").write_text("[1, 2]"),
                                         ["invert", "--record", str(f / "l.json")])[1],
         ("l.json", "run record")),
    # ---- images open only as images ----------------------------------------------------
    img("image-eps-named-png", lambda f: hf.write(f, "eps.png", hf.EPS), ("eps.png", "PostScript")),
    img("image-eps", lambda f: hf.write(f, "pic.eps", hf.EPS), ("pic.eps", "PostScript")),
    img("image-pdf", lambda f: hf.write(f, "doc.png", b"%PDF-1.4\n%\xe2\xe3\n1 0 obj\n"),
        ("doc.png", "not an image format")),
    img("image-svg", lambda f: hf.write(f, "v.png", b"<svg xmlns='http://www.w3.org/2000/svg'/>"),
        ("v.png", "not an image format")),
    img("image-gif", lambda f: hf.write(f, "a.gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        ("a.gif", "PNG, JPEG")),
    img("image-8000-squared", lambda f: hf.png(f, "big.png", (8000, 8000)),
        ("big.png", "pixels", "downscale")),
    img("image-pgm-huge-header", lambda f: hf.write(f, "h.pgm", b"P5\n100000 100000\n255\n\0"),
        ("h.pgm", "pixels")),
    img("image-jpeg-truncated", lambda f: hf.write(f, "cut.jpg", b"\xff\xd8\xff\xe0\0\x10JFIF"),
        ("cut.jpg",)),
    img("image-tiff-garbage", lambda f: hf.write(f, "g.tif", b"II*\x00" + b"\xff" * 40),
        ("g.tif",)),
    img("image-npy-pickle", lambda f: hf.npy_object(f), ("obj.npy", "pickle")),
    # ---- command-line values -------------------------------------------------------------
    Case("alpha-subnormal", lambda f, k: good(k, "--alpha", "1e-320"), ("alpha", "small")),
    Case("alpha-inf", lambda f, k: good(k, "--alpha", "inf"), ("alpha", "finite")),
    Case("shape-empty-dim", lambda f, k: good(k, "--input-shape", "1,,28,28"),
         ("1,,28,28", "empty")),
    Case("shape-zero", lambda f, k: good(k, "--input-shape", "1,0,28"), ("1,0,28",)),
    Case("option-n-inner-1e12", lambda f, k: good(k, "--option", "n_inner=1e12"), ("n_inner",)),
    Case("option-n-inner-text", lambda f, k: good(k, "--option", "n_inner=abc"), ("n_inner",)),
    Case("option-inner-max-iter-negative",
         lambda f, k: good(k, "--option", "inner_max_iter=-3"), ("inner_max_iter",)),
    Case("option-unknown", lambda f, k: good(k, "--option", "__class__=1"), ("__class__",)),
    Case("option-step-scale-huge", lambda f, k: good(k, "--option", "step_scale=1e308"),
         ("step_scale",)),
    Case("seed-huge", lambda f, k: good(k, "--seed", "99999999999999999999999"), ("seed",)),
    Case("max-iter-huge", lambda f, k: good(k, "--max-iter", "99999999999"), ("max_iter",)),
    Case("max-iter-float", lambda f, k: good(k, "--max-iter", "1e12"), ("--max-iter",)),
    Case("noise-nan", lambda f, k: good(k, "--noise-std", "nan"), ("--noise-std",)),
    Case("threads-huge", lambda f, k: good(k, "--threads", "100000"), ("threads",)),
    Case("report-every-zero", lambda f, k: good(k, "--report-every", "0"), ("--report-every",)),
    Case("layer-alphas-nan", lambda f, k: good(k, "--layer-alphas", "nan"), ("--layer-alphas",)),
    Case("memory-limit-text", lambda f, k: good(k, "--memory-limit", "lots"),
         ("--memory-limit", "8G")),
    Case("memory-limit-tiny", lambda f, k: good(k, "--memory-limit", "1K"),
         ("memory", "1.0 KiB")),
    Case("sweep-list-huge", lambda f, k: ["sweep", "--network", str(k.card), "--alphas",
                                          "log:1e-4:1:100000000"], ("--alphas", "10,000")),
    Case("sweep-grid-huge", lambda f, k: ["sweep", "--network", str(k.card), "--alphas",
                                          "log:1e-4:1:5000", "--noise-stds", "lin:0:1:5000"],
         ("inversions", "fewer")),
    Case("sweep-samples-huge", lambda f, k: ["sweep", "--network", str(k.card), "--alphas",
                                             "0.01", "--samples", "0-99999999"],
         ("--samples", "10,000")),
]


def _run(case: Case, tmp: Path, kit: Kit, cli) -> tuple[int, str, Path]:
    folder = tmp / "in"
    folder.mkdir()
    hf.sentinel(folder)
    out = tmp / "out"
    code, _stdout, stderr = cli(*case.argv(folder, kit), "--out", str(out), "--quiet")
    return code, stderr, folder


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_exits_2_with_one_line_and_runs_no_code(case: Case, kit: Kit,
                                                              tmp_path: Path, cli) -> None:
    code, stderr, folder = _run(case, tmp_path, kit, cli)
    assert (folder / hf.SENTINEL).read_text() == hf.UNTOUCHED, "code from a file ran"
    assert "Traceback" not in stderr, stderr
    assert code == 2, (code, stderr)
    errors = [ln for ln in stderr.strip().splitlines() if not ln.startswith("lbi: warning:")]
    assert len(errors) == 1 and errors[0].startswith(("lbi invert: error: ",
                                                      "lbi sweep: error: ")), stderr
    low = errors[0].lower()
    missing = [w for w in case.words if w.lower() not in low]
    assert not missing, (missing, errors[0])
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir()), "a refused run left files"


def test_the_corpus_is_large() -> None:
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


def test_a_record_granting_consent_is_ignored_with_a_warning(kit: Kit, tmp_path: Path,
                                                             cli) -> None:
    case = next(c for c in CASES if c.id == "record-grants-pickle")
    code, stderr, folder = _run(case, tmp_path, kit, cli)
    assert code == 2 and (folder / hf.SENTINEL).read_text() == hf.UNTOUCHED
    assert "lbi: warning: --record" in stderr and "cannot give that consent" in stderr
    assert "--allow-code" in stderr.splitlines()[0]  # the warning says how to consent


def test_consent_for_torchscript_never_runs_its_forward(kit: Kit, tmp_path: Path,
                                                        cli) -> None:
    """With --allow-code the archive's loading code runs (that is the consent), but the
    network is rebuilt from allow-listed layers and its own forward never runs."""
    net = hf.evil_torchscript(tmp_path)
    code, _, stderr = cli(*inv(net, "--input-shape", "1,28,28", "--allow-code"),
                          "--out", str(tmp_path / "out"), "--quiet")
    assert code == 0, stderr
    text = (tmp_path / hf.SENTINEL).read_text()
    assert text.startswith(hf.LOAD_MARK), text  # __setstate__ ran: that was consented
    assert hf.FORWARD_MARK not in text  # the file's own forward never ran
    assert "--allow-code" in stderr  # the consent is repeated as a warning


def test_a_locked_output_folder_is_refused_naming_the_holder(kit: Kit, tmp_path: Path,
                                                             cli) -> None:
    from lbi_engine.results.folder_lock import lock_path

    out = tmp_path / "out"
    lock = lock_path(out)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, json.dumps({"pid": 4242, "host": "elsewhere", "started": 0,
                                 "command": "lbi invert ..."}).encode())
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, stderr = cli(*good(kit), "--out", str(out), "--quiet")
    finally:
        os.close(fd)
    assert code == 2 and "Traceback" not in stderr
    assert "being written by lbi process 4242 on elsewhere" in stderr, stderr
    assert not out.exists()


def test_unwritable_and_odd_output_paths_are_refused_before_solving(kit: Kit, tmp_path: Path,
                                                                    cli) -> None:
    (tmp_path / "file.txt").write_text("x")
    for bad, word in [(tmp_path / "file.txt" / "inner", "file"),
                      (Path("/proc/lbi-cannot-write-here"), "cannot write")]:
        code, _, stderr = cli(*good(kit), "--out", str(bad), "--quiet")
        assert code == 2 and word in stderr and "Traceback" not in stderr, stderr
    code, _, stderr = cli(*good(kit), "--out", str(tmp_path / "sub" / "inner" / ".."),
                          "--quiet")
    assert code == 0, stderr
    assert (tmp_path / "sub" / "result.json").is_file()
    assert not (tmp_path / "sub" / "inner").exists()


def test_overwrite_keeps_files_lbi_did_not_write(kit: Kit, tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    assert cli(*good(kit), "--out", str(out), "--quiet")[0] == 0
    (out / "notes.txt").write_text("mine")
    (out / "sub").mkdir()
    (out / "sub" / "data.bin").write_bytes(b"\x01")
    os.chmod(out / "sub", 0o750)
    assert cli(*good(kit), "--out", str(out), "--quiet", "--overwrite")[0] == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "sub" / "data.bin").read_bytes() == b"\x01"
    assert (os.stat(out / "sub").st_mode & 0o777) == 0o750
