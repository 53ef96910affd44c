"""Exceptions a script can catch; each message names the input, the problem and the fix."""

from __future__ import annotations


class LbiError(ValueError):
    """Base class of every error lbi raises on bad input.

    Subclasses ``ValueError`` so generic callers can catch it too. The CLI turns it into
    exit code 2 with a one-line message; the GUI shows it in a dialog.
    """


class InputError(LbiError):
    """A parameter or data array is unusable (wrong shape, NaN, alpha <= 0, ...)."""


class ShapeMismatchError(InputError):
    """Data and network disagree on shapes."""


class InputShapeNeededError(InputError):
    """The network file does not fix one sample's shape, and none was given."""


class UnsupportedLayerError(LbiError):
    """A network layer is not affine and not a proximal map, so it cannot be lifted."""


class ModelFileError(LbiError):
    """A model file is missing, empty, truncated, of an unknown format or inconsistent."""


class UnsafeFileError(ModelFileError):
    """Loading the file would execute code (a pickled module) and the user has not opted in."""


class DataFileError(LbiError):
    """A data file (image, npy, IDX, dataset folder) is missing or unreadable."""


class FormatVersionError(LbiError):
    """A session file or run record has an unknown or newer format version."""
