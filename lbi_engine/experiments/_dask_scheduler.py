"""Reaching a Dask scheduler lbi did not start: the address (typed, or read from a scheduler
file the user owns) and a bounded probe before Dask's client connects. A scheduler is trusted
code, so the reasons for each refusal are in the docstrings (docs/CLUSTER.md). Used by
:func:`lbi_engine.experiments.sweep_dask.connect` and the CLI; imported only with Dask asked for.
"""

from __future__ import annotations

import json
import os
import socket

from lbi_engine.errors import InputError

#: Said on stderr whenever lbi connects to a scheduler it did not start (docs/CLUSTER.md).
TRUST_NOTE = ("a scheduler is trusted code: it can run any code in this process and on the "
              "workers, so connect only to one you (or your cluster's administrator) started")
#: Seconds for the TCP connection and Dask's handshake together (--connect-timeout).
DEFAULT_CONNECT_TIMEOUT = 10.0
_SCHEMES = ("tcp", "tls", "ucx", "inproc")
_START_HINT = ("start a scheduler with `dask scheduler` and pass the address it prints "
               "(tcp://HOST:8786, or tls://... across machines) or its --scheduler-file")


def scheduler_address(text: str) -> str:
    """The address to connect to: one the user typed (``tcp://HOST:PORT``, ``tls://...``),
    or the ``address`` in a scheduler file the user owns.

    Why so strict about the file: it decides which server this process trusts with its
    code. A file someone else can write (another user's, or a world-writable one) could send
    lbi to their server, so it is refused; it is read once, here (never again by Dask), as a
    regular file of at most 64 KiB, so a FIFO or ``/dev/zero`` cannot hang or exhaust lbi.
    """
    text = text.strip()
    if not text:
        raise InputError(f"--scheduler is empty; {_START_HINT}")
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        if scheme not in _SCHEMES:
            raise InputError(f"--scheduler {text}: {scheme}:// is not a Dask address; "
                             f"{_START_HINT}")
        return text
    from lbi_engine.limits import open_regular

    what = "--scheduler file"
    with open_regular(text, what, 64 * 1024) as fh:
        st = os.fstat(fh.fileno())
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise InputError(f"{what} {text} belongs to another user (uid {st.st_uid}); it "
                             "names the server lbi trusts with its code, so lbi reads only "
                             "scheduler files you own: copy it if you trust it")
        if st.st_mode & 0o002:
            raise InputError(f"{what} {text} can be written by every user; anyone could send "
                             f"lbi to their server: chmod o-w {text}")
        raw = fh.read()
    if not raw.strip():
        raise InputError(f"{what} {text} is empty; `dask scheduler --scheduler-file FILE` "
                         "writes it once the scheduler is up: wait for it, or pass the address")
    try:
        address = json.loads(raw.decode("utf-8"))["address"]
    except (ValueError, KeyError, TypeError):
        address = None
    if not isinstance(address, str) or "://" not in address:
        raise InputError(f"{what} {text} is not a Dask scheduler file (JSON with an "
                         f"\"address\"); {_START_HINT}")
    return scheduler_address(address)


def probe_scheduler(address: str, timeout: float) -> None:
    """One line (InputError) unless a Dask scheduler answers at ``address`` within
    ``timeout`` seconds, handshake included.

    Why: Dask bounds the TCP connection but not the handshake, so a server that accepts and
    never answers hung the sweep forever, and nothing listening meant retrying for the whole
    connect timeout and then a traceback. The probe fails at once when the connection is
    refused, bounds the handshake, and unpickles nothing (``deserialize=False``).
    """
    import asyncio
    import threading

    from distributed.comm import connect as dask_connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        try:
            host, port = parse_host_port(location)
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except (OSError, ValueError, TypeError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else \
                (getattr(exc, "strerror", None) or str(exc))
            raise InputError(f"--scheduler {address}: cannot connect ({reason}); "
                             f"{_START_HINT}") from None
    failure: list[str] = []

    async def handshake() -> None:
        args = Security().get_connection_args("client")
        comm = await asyncio.wait_for(
            dask_connect(address, timeout=timeout, deserialize=False, **args), timeout)
        await comm.close()

    def run() -> None:
        try:
            asyncio.run(handshake())
        except TimeoutError:
            failure.append(f"no Dask handshake within {timeout:g} s")
        except Exception as exc:  # any failure of the probe means the same to the user
            failure.append(f"{type(exc).__name__}: {exc}".splitlines()[0][:200])

    thread = threading.Thread(target=run, name="lbi-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout + 2.0)
    if thread.is_alive():
        failure.append(f"no Dask handshake within {timeout:g} s")
    if failure:
        raise InputError(f"--scheduler {address}: the server does not answer as a Dask "
                         f"scheduler ({failure[0]}); {_START_HINT}, or raise "
                         "--connect-timeout if it is just slow")
