"""Run settings that the window reads before torch loads: the solver's stop rule and
settings (:mod:`.solver`) and the defaults a request starts from (:mod:`.defaults`).

Torch-free (checked by .importlinter); importing this package imports no submodule.
"""
