"""What the dialogs that run one long engine job share (Import network, Fit a feature
prior): the job runs in a QThread that lives only while it runs, so an idle dialog holds no
thread and the window keeps painting; the worker reports through queued signals."""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets


def failure_text(exc: BaseException, what: str) -> str:
    """One line for the dialog: the engine's message, or, for a bug, what failed and how."""
    from lbi_engine.errors import LbiError

    if isinstance(exc, (LbiError, OSError)):
        return " ".join(str(exc).split())
    return f"{what} failed unexpectedly ({type(exc).__name__}: {exc})"


class JobDialog(QtWidgets.QDialog):
    """A dialog with one background job: ``attach`` its worker (a QObject with a ``run(job)``
    slot), ``launch(job)`` to run it, ``stop_thread`` when it has reported."""

    _start = QtCore.Signal(object)
    #: Where the dialog says what is going on (made by the subclass).
    status: QtWidgets.QLabel

    def attach(self, worker: QtCore.QObject, done: Any) -> None:
        """Run ``worker`` (signals ``done(result)`` and ``failed(text)``) in the job's thread;
        ``done`` gets its result, :meth:`fail` its failure, both in the GUI thread (queued)."""
        self.result_path: str | None = None
        self._thread = QtCore.QThread(self)
        self._worker = worker
        worker.moveToThread(self._thread)
        self._start.connect(worker.run)  # type: ignore[attr-defined]
        worker.done.connect(done)  # type: ignore[attr-defined]
        worker.failed.connect(self.fail)  # type: ignore[attr-defined]

    @property
    def running(self) -> bool:
        return self._thread.isRunning()

    def job(self) -> dict[str, Any]:
        """The job's arguments from the fields; ValueError says which field to fix."""
        raise NotImplementedError

    def job_started(self, job: dict[str, Any]) -> None:
        """The job is about to run: subclasses take their buttons away and say what runs."""

    def start(self) -> None:
        """Run the job the fields describe, or say what is missing."""
        try:
            job = self.job()
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        self.job_started(job)
        self._thread.start()  # runs only while the job does: an idle dialog holds no thread
        self._start.emit(job)

    def stop_thread(self) -> None:
        self._thread.quit()
        self._thread.wait()

    def job_ended(self) -> None:
        """The job has reported: its thread ends (subclasses give their buttons back)."""
        self.stop_thread()

    def succeed(self, path: str, text: str, signal: Any) -> None:
        """Say ``text``, emit ``signal(path)`` and close."""
        self.job_ended()
        self.result_path = path
        self.status.setText(text)
        signal.emit(path)
        self.accept()

    def fail(self, message: str) -> None:
        """Say ``message`` and stay open, so the user can change a field and try again."""
        self.job_ended()
        self.status.setText(message)
