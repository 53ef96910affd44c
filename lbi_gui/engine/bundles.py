"""The networks the GUI's engine has loaded, shared by all run drivers of the process.

Loading the CNN takes ~1–3 s for its exact operator norms; reusing a bundle takes
milliseconds. Bundles are only read by the solvers. Keyed by the network reference and, for
files, their size and mtime, so an edited file is loaded again. No Qt: the engine child
process imports this.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

_BUNDLES: OrderedDict[tuple, Any] = OrderedDict()
_BUNDLES_LOCK = threading.Lock()
_BUNDLES_MAX = 4


def _bundle_key(request: dict[str, Any]) -> tuple:
    ref = str(request.get("network"))
    stamp: tuple = ()
    path = Path(ref).expanduser()
    if path.is_file():
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns)
    return (ref, stamp, str(request.get("input_shape")), bool(request.get("allow_pickle")),
            request.get("device"), request.get("dtype"))


def _keep_bundle(key: tuple, bundle: Any) -> None:
    with _BUNDLES_LOCK:
        _BUNDLES[key] = bundle
        _BUNDLES.move_to_end(key)
        while len(_BUNDLES) > _BUNDLES_MAX:
            _BUNDLES.popitem(last=False)
