"""``lbi invert``'s request: a run record (``--record``, a result.json or the GUI's run.json)
overridden by the flags, file paths made absolute, the dataset fitted to a zoo network."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from lbi_engine.cli import _common as c

#: CLI flag destination -> InversionRequest field.
_FIELDS = {
    "network": "network",
    "input_shape": "input_shape",
    "dataset": "dataset",
    "split": "split",
    "noise_std": "noise_std",
    "seed": "seed",
    "alpha": "alpha",
    "alpha_rule": "alpha_rule",
    "noise_level": "noise_level",
    "regulariser": "regulariser",
    "method": "method",
    "steps": "steps",
    "max_iter": "max_iter",
    "tol": "tol",
    "tol_mode": "tol_mode",
    "time_budget": "time_budget",
    "device": "device",
    "dtype": "dtype",
    "report_every": "report_every",
    "threads": "threads",
    "layer_alphas": "layer_alphas",
    "feature_prior": "feature_prior",
    "input_prior": "input_prior",
}
_SOURCES = ("image", "truth", "data")


def load_record(path: str) -> tuple[dict[str, Any], Path]:
    """The run-record dict in ``path`` (a result.json's "request", or a bare run record)."""
    from lbi_engine.errors import DataFileError, FormatVersionError
    from lbi_engine.limits import read_json

    file = Path(path)
    if not os.path.lexists(file):
        raise DataFileError(f"--record {path}: no such file; give a result.json or run.json")
    data = read_json(file, "--record", "give a result.json written by `lbi invert` or a "
                     "run.json saved by the GUI", DataFileError)
    if isinstance(data, dict) and isinstance(data.get("request"), dict):
        data = data["request"]
    if not isinstance(data, dict) or data.get("kind", "lbi-run-record") != "lbi-run-record":
        raise FormatVersionError(f"--record {path}: not an lbi run record (no 'request' and "
                                 "kind != 'lbi-run-record')")
    from lbi_engine.request import strip_file_consent

    clean, warning = strip_file_consent(dict(data), f"--record {path}")
    if warning:
        c.warn(warning)
    return clean, file.resolve().parent


def _resolve_path(value: str | None, record_dir: Path | None) -> str | None:
    """Absolute path of an existing file (so result.json works from any folder); a path
    from a record is also looked up next to the record. Non-files (zoo names) pass through."""
    if not value:
        return value
    candidate = Path(value).expanduser()
    if candidate.exists():
        return str(candidate.resolve())
    if record_dir is not None and not candidate.is_absolute() and (record_dir / candidate).exists():
        return str((record_dir / candidate).resolve())
    return value


def build_request(args: argparse.Namespace) -> Any:
    """The InversionRequest of the command line: record (if any) <- flags."""
    # usage errors first: they need no engine import (several seconds on a cold start)
    if not args.record:
        if not args.network:
            raise c.UsageError("--network is required (or give --record FILE)", "lbi invert")
        if args.sample is None and not any(getattr(args, s) for s in _SOURCES):
            raise c.UsageError("give one data source: --sample, --image, --truth or --data "
                               "(or --record FILE)", "lbi invert")
    from lbi_engine.api import InversionRequest

    record_dir = None
    if args.record:
        data, record_dir = load_record(args.record)
    else:
        data = InversionRequest().to_dict()
    for flag, name in _FIELDS.items():
        value = getattr(args, flag)
        if value is not None:
            data[name] = list(value) if isinstance(value, tuple) else value
    if args.allow_code:  # the person's consent, from this command line only
        data["allow_pickle"] = True
    if args.resize:
        data["resize"] = True
    if args.option:
        data["options"] = {**(data.get("options") or {}), **dict(args.option)}
    if args.sample is not None or any(getattr(args, s) for s in _SOURCES):
        for name in _SOURCES:
            data[name] = getattr(args, name)
        if args.sample is not None:
            data["index"] = args.sample
            if args.dataset is None:
                _fit_dataset(data, args.split is None)
    for name in ("network", *_SOURCES):
        data[name] = _resolve_path(data.get(name), record_dir)
    if data.get("feature_prior"):  # a BASE name: resolved through its card
        from lbi_engine.priors.feature import prior_paths

        card = _resolve_path(str(prior_paths(data["feature_prior"])[1]), record_dir)
        data["feature_prior"] = card
    if data.get("input_prior"):
        from lbi_engine.priors.feature import prior_paths

        data["input_prior"] = _resolve_path(str(prior_paths(data["input_prior"])[1]), record_dir)
    return InversionRequest.from_dict(data)


def _fit_dataset(data: dict[str, Any], choose_split: bool) -> None:
    """--sample without --dataset: the bundled dataset whose images the zoo network takes
    (the circle perceptron takes 64x64 cartoons, not 28x28 digits), said on stderr."""
    from lbi_engine.models import zoo_data

    dataset = zoo_data.dataset_for(zoo_data.zoo_input_shape(str(data["network"])),
                                   str(data["dataset"]))
    if dataset is None or dataset == data["dataset"]:
        return
    data["dataset"] = dataset
    if choose_split:
        data["split"] = zoo_data.FIRST_SPLIT.get(dataset, data["split"])
    c.warn(f"{data['network']} takes {dataset} images: using --dataset {dataset} "
           f"--split {data['split']}")
