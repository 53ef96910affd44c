"""The ``lbi`` CLI in a worker process under an address-space limit, for crafted inputs.

Why a worker: a crafted file that makes lbi allocate gigabytes must be caught as it would
hurt a user (a MemoryError traceback, the kernel's OOM killer), not in the test process; one
process per input would pay torch's import (seconds) per input, too slow for fuzzing. The
worker runs ``lbi_engine.cli.main`` on each argv it is sent and answers with the exit code,
what was written to stderr and the process's peak resident memory (VmHWM) while it ran
that input (the peak is reset before each input).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Address space the worker may map: torch's libraries take ~1-2 GiB of it unused, so this
#: is not the RSS bound (the tests assert VmHWM for that); it turns a runaway allocation into
#: a MemoryError inside the worker instead of a machine that swaps.
ADDRESS_SPACE = 6 * 2**30

#: The worker's resident memory above which it is restarted before the next input: a fresh
#: worker that has run one inversion holds about 0.6-0.7 GiB (torch, lbi, the network).
FRESH_RSS = int(0.75 * 2**30)

_WORKER = r"""
import contextlib, io, json, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from lbi_engine.cli import main
import torch  # loaded before the first input: its import is every run's, not the input's
proto = sys.stdout
print(json.dumps({"ready": True}), file=proto, flush=True)
def reset_peak():
    # VmHWM restarts from the current RSS (Linux >= 4.0), so each input's peak is its own,
    # not the largest of every input this worker ran before it
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
for line in sys.stdin:
    argv = json.loads(line)
    reset_peak()
    start = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in open("/proc/self/status")
             if ln.startswith("VmRSS:")}
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            code = "raised"
            traceback.print_exc(file=err)
    status = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in open("/proc/self/status")
              if ln.startswith(("VmHWM:", "VmRSS:"))}
    print(json.dumps({"code": code, "err": err.getvalue(), "out": out.getvalue()[-2000:],
                      "peak": status.get("VmHWM", 0), "rss": status.get("VmRSS", 0),
                      "start": start.get("VmRSS", 0)}),
          file=proto, flush=True)
"""


@dataclass(frozen=True)
class Outcome:
    code: Any  # the exit code, or "raised" for an exception that escaped main
    err: str
    peak: int  # the worker's VmHWM while it ran this input (torch loaded included), bytes
    start: int = 0  # the worker's resident memory when this input began (torch loaded), bytes

    @property
    def growth(self) -> int:
        """Resident memory this input added at its peak: what the input cost, whatever the
        size of torch's libraries on this machine (0.7-0.9 GiB resident, by build)."""
        return self.peak - self.start

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]

    def is_one_line_refusal(self) -> bool:
        """Exit 2 and exactly one error line (warnings before it are allowed), no traceback."""
        errors = [ln for ln in self.error_lines if ": error:" in ln]
        return self.code == 2 and len(errors) == 1 and "Traceback" not in self.err


class BoundedCli:
    """One worker process; :meth:`run` sends it an argv. Close it with :meth:`close`."""

    def __init__(self, address_space: int = ADDRESS_SPACE) -> None:
        self.address_space = address_space
        self._start()

    def _start(self) -> None:
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(self.address_space)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=root)
        self.rss = 0
        self._reply()

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait(timeout=30)
            raise AssertionError(f"the bounded lbi worker died (exit {code}): killed for "
                                 "memory, or crashed")
        return json.loads(line)

    def run(self, *args: object) -> Outcome:
        if self.rss > FRESH_RSS:  # what earlier inputs left resident (numba's compiled
            self.close()  # kernels, torch's caches) is not this input's: a user runs one
            self._start()  # `lbi` per file, so judge it in a process as fresh as theirs
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([str(a) for a in args]) + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        self.rss = int(reply.get("rss", 0))
        return Outcome(reply["code"], reply["err"], reply["peak"], int(reply.get("start", 0)))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
