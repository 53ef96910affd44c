"""The defaults of a run (``InversionRequest``), importable without torch.

One table read by the run record (``request.py``), the command line's help texts (which
must show the real defaults without importing torch) and the GUI's first window. Change a
default here and every one of them follows.
"""

from __future__ import annotations

from typing import Any

#: Field name -> default of ``InversionRequest`` (mutable defaults are copied by the users).
REQUEST_DEFAULTS: dict[str, Any] = {
    "network": "mnist-cnn-ae",
    "input_shape": None,
    "dataset": "mnist",
    "split": "val",
    "index": 0,
    "image": None,
    "truth": None,
    "data": None,
    "resize": False,
    "noise_std": 0.05,
    "seed": 0,
    # "auto": chosen from the data on a warm-started path (lbi_engine/solvers/alpha.py)
    "alpha": "auto",
    # the rule for alpha "auto": "auto" = discrepancy when the noise level is known, else
    # quasi-optimality
    "alpha_rule": "auto",
    # per-entry noise std of measured data (--data), for the discrepancy rule
    "noise_level": None,
    # "auto": the learned Gaussian prior + box where a zoo network ships one measured better
    # than TV (lbi_engine/priors/input.py AUTO_GAUSSIAN), else TV; result.json says which ran
    "regulariser": "auto",
    "method": "auto",
    "steps": "auto",
    # the stop rule decides; the cap only guards against a run that never settles
    "max_iter": 10_000,
    "tol": 1e-4,
    "tol_mode": "objective",
    "time_budget": None,
    "device": "auto",
    "dtype": "float32",
    "report_every": 10,
    "threads": None,
    "layer_alphas": None,
    "allow_pickle": False,
    "options": {},
    # layer-wise: BASE of a feature prior (lbi_engine/priors/feature.py)
    "feature_prior": None,
    # regulariser gaussian: BASE of an input prior (lbi_engine/priors/input.py); None: the
    # one shipped beside a zoo network
    "input_prior": None,
}


def default(name: str) -> Any:
    """The default of one request field (a copy for lists and dicts)."""
    value = REQUEST_DEFAULTS[name]
    return type(value)(value) if isinstance(value, (list, dict)) else value
