"""Only regular files are read, within bounds; what came from a file is printed and written
harmlessly.

A card, record, image or results.csv that is a FIFO used to block in open() forever, one
symlinked to /dev/zero was read until the memory ran out; a damaged results.csv ended in a
traceback; names from a file reached the terminal with their escape sequences and
results.csv with a spreadsheet formula.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from lbi_engine.experiments.sweep import COLUMNS, read_results
from lbi_engine.results.exports import csv_text
from tests.reliability.kit import Kit

pytestmark = pytest.mark.timeout(120)  # a reader that blocks fails the test instead of hanging


def _one_line(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dev_zero(path: Path) -> Path:
    os.symlink("/dev/zero", path)
    return path


SPECIAL = {"fifo": (_fifo, "pipe (FIFO)"), "dev-zero": (_dev_zero, "a device")}


@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("reader", ["card", "record", "image", "sweep-csv", "scheduler"])
def test_a_fifo_or_device_is_refused_by_every_reader(tmp_path: Path, cli, kit: Kit,
                                                      reader: str, kind: str) -> None:
    make, words = SPECIAL[kind]
    special = make(tmp_path / ("thing.json" if reader != "image" else "thing.png"))
    out = tmp_path / "out"
    sweep = ["sweep", "--network", str(kit.card), "--noise-stds", "0.05", "--methods", "pdhg",
             "--samples", "0", "--max-iter", "2", "--alphas", "1e-2", "--out", str(out)]
    args = {
        "card": ["invert", "--network", str(special), "--sample", "0", "--out", str(out)],
        "record": ["invert", "--record", str(special), "--out", str(out)],
        "image": ["invert", "--network", str(kit.card), "--image", str(special), "--out",
                  str(out)],
        "sweep-csv": sweep,
        "scheduler": [*sweep, "--scheduler", str(special)],
    }[reader]
    if reader == "sweep-csv":
        out.mkdir()
        special.rename(out / "results.csv")
    code, _, err = cli(*args)
    _one_line(code, err, words)


def test_read_json_bounds_the_bytes_and_names_the_problem(tmp_path: Path, monkeypatch) -> None:
    from lbi_engine.errors import InputError
    from lbi_engine.limits import read_json

    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 200_000 + "0]")
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")  # 300 MiB / 32: JSON of at most ~9 MiB
    assert len(read_json(big, "card", "fix it")) == 200_001
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "1M")  # the floor: 64 KiB of JSON
    with pytest.raises(InputError, match="more than the 64.0 KiB lbi reads for it"):
        read_json(big, "card", "fix it")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"card .*bad.json is not UTF-8 text \(byte 7\); fix"):
        read_json(bad, "card", "fix it")
    monkeypatch.delenv("LBI_MEMORY_LIMIT")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="is not valid JSON"):
        read_json(deep, "card", "fix it")


def _sweep_csv(folder: Path, body: bytes) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "results.csv"
    path.write_bytes(",".join(COLUMNS).encode() + b"\n" + body)
    return path


@pytest.mark.parametrize("body, words", [
    (b"x" * 200_000 + b"\n", "not a CSV lbi wrote"),
    (b"\xff\xfe" + b",".join([b"a"] * len(COLUMNS)) + b"\n", "not UTF-8 text"),
    (b",".join([b"a"] * (len(COLUMNS) + 3)) + b"\n", "one cell per column"),
    (b"a,b\n", "one cell per column"),
])
def test_a_damaged_results_csv_is_one_line(tmp_path: Path, cli, kit: Kit, body: bytes,
                                           words: str) -> None:
    out = tmp_path / "out"
    _sweep_csv(out, body)
    code, _, err = cli("sweep", "--network", kit.card, "--noise-stds", "0.05", "--methods",
                       "pdhg", "--samples", "0", "--max-iter", "2", "--alphas", "1e-2",
                       "--out", out)
    _one_line(code, err, "results.csv", words)


@pytest.mark.parametrize("text", ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx",
                                  "\r=x", "'=x", "''@x", "plain", "-0.5", "-inf", "1e-3",
                                  "", "'quoted"])
def test_csv_cells_are_neutralised_and_restored_exactly(text: str) -> None:
    from lbi_engine.results.exports import neutralise_cell, restore_cell

    cell = neutralise_cell(text)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or float(cell) == float(text)
    assert restore_cell(cell) == text
    rows = list(csv.reader(io.StringIO(csv_text(["a"], [[text]]), newline="")))
    assert rows[1:] in ([[cell]], [[]] if cell == "" else [])


def test_a_network_named_like_a_formula_is_neutralised_and_still_resumes(
        tmp_path: Path, cli, kit: Kit, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    name = "=HYPERLINK(1)+1.json"
    shutil.copy(kit.card, tmp_path / name)
    grid = ["sweep", "--network", name, "--noise-stds", "0.05", "--methods", "pdhg",
            "--samples", "0", "--max-iter", "2", "--alphas", "1e-2", "--out", "out",
            "--threads", "1"]
    code, stdout, err = cli(*grid)
    assert code == 0, err
    text = (tmp_path / "out" / "results.csv").read_text()
    assert "\n'=HYPERLINK(1)+1.json," in text and "\n=" not in text
    assert read_results(tmp_path / "out" / "results.csv")[0]["network"] == name
    code, stdout, err = cli(*grid)
    assert code == 0 and "ran 0, skipped 1" in stdout, stdout + err


def test_control_characters_from_a_file_never_reach_the_terminal(tmp_path: Path, cli) -> None:
    """A file name (here a card's, sent in an archive) with terminal escape sequences: the
    one line quotes it, escaped (it retitled the terminal and cleared the screen)."""
    card = tmp_path / "net\x1b]0;owned\x07\x1b[2J\u202e\rfake.json"
    card.write_text('{"name": "damaged"')
    code, _, err = cli("invert", "--network", card, "--sample", "0", "--out", tmp_path / "out")
    _one_line(code, err, "not valid JSON")
    assert not any(ch in err.rstrip("\n") for ch in "\x1b\x07\r\u202e"), repr(err)
    assert "net\\x1b]0;owned\\x07\\x1b[2J\\u202e fake.json" in err, repr(err)


def _card(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "card.json"
    path.write_text(text)
    return path


_LAYERS = ('[{"type": "Flatten", "start_dim": 1, "end_dim": -1}, {"type": "Linear", '
           '"in_features": 784, "out_features": 8}, {"type": "ReLU"}]')


def _card_text(top: str = "", layers: str = _LAYERS, arch: str = "") -> str:
    weights = '"weights": {"source": "seeded-init", "seed": 0}'
    text = (f'{{"name": "m", "format_version": 1, "input_shape": [1, 28, 28], {weights}, '
            f'"architecture": {{"layers": {layers}{arch}}}{top}}}')
    return text


@pytest.mark.parametrize("text, field", [
    (_card_text().replace('"format_version": 1', '"format_version": "abc"'), "format_version"),
    (_card_text().replace('"format_version": 1', '"format_version": 1e999'), "format_version"),
    (_card_text(arch=', "encoder_layers": "x"'), "encoder_layers"),
    (_card_text().replace('"seed": 0', '"seed": 1180591620717411303424'), "weights.seed"),
    (_card_text(top=', "preprocessing": [1, 2]'), "preprocessing"),
    (_card_text(top=', "preprocessing": "x"'), "preprocessing"),
    (_card_text(top=', "preprocessing": {"scale": 0}'), "preprocessing.scale"),
    (_card_text().replace('{"source": "seeded-init", "seed": 0}', '[1, 2]'), "weights"),
    (_card_text(layers=_LAYERS.replace('{"type": "ReLU"}', '{"type": "Hardtanh", '
                                       '"min_val": 1.0, "max_val": -1.0}')), "min_val"),
    (_card_text(layers='[{"type": "AvgPool2d", "kernel_size": 2, "divisor_override": 0}, '
                       '{"type": "Flatten"}, {"type": "ReLU"}]'), "divisor_override"),
    (_card_text(layers=_LAYERS.replace('"start_dim": 1', '"start_dim": "1"')), "start_dim"),
    (_card_text(layers=_LAYERS.replace('{"type": "ReLU"}', '{"type": "Dropout", "p": 7}')),
     "p=7"),
    (_card_text().replace('"input_shape": [1, 28, 28]', '"input_shape": "big"'),
     "input_shape"),
])
def test_a_malformed_card_is_one_line_naming_the_field(tmp_path: Path, cli, text: str,
                                                       field: str) -> None:
    card = _card(tmp_path, text)
    code, _, err = cli("invert", "--network", card, "--sample", "0", "--max-iter", "1",
                       "--out", tmp_path / "out")
    _one_line(code, err, field, "card.json")


def test_the_well_formed_card_of_the_malformed_cases_loads(tmp_path: Path) -> None:
    from lbi_engine.models.zoo import load_network

    bundle = load_network(str(_card(tmp_path, _card_text())))
    assert bundle.encoder is not None


def test_reading_a_small_file_allocates_its_size_not_the_bound(tmp_path: Path) -> None:
    """read(n) allocates n bytes up front: a 1 KiB file read under a 4 GiB bound must not
    allocate 4 GiB (it did, briefly, for every results.csv)."""
    import tracemalloc

    from lbi_engine.limits import read_regular

    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1024)
    tracemalloc.start()
    try:
        assert read_regular(small, "file", 4 * 2**30) == b"x" * 1024
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak


def test_the_summary_of_a_run_escapes_the_network_name(tmp_path: Path, cli, kit: Kit) -> None:
    """A record's "network" is a file name someone else chose: the summary line on stdout
    quotes it escaped."""
    card = tmp_path / "net\x1b[2J\x1b]0;owned\x07.json"
    shutil.copy(kit.card, card)
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"kind": "lbi-run-record", "format_version": 1,
                                  **kit.base_request(network=str(card), max_iter=2)}))
    code, out, err = cli("invert", "--record", record, "--out", tmp_path / "out")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert "net\\x1b[2J\\x1b]0;owned\\x07.json:" in out, out
