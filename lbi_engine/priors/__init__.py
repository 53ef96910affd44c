"""Priors learned from data: the Gaussian input prior (:mod:`.input`) and the Gaussian
feature prior of layer-wise inversion (:mod:`.feature`), their fitting and their files.

Importing this package is cheap: it imports no submodule.
"""
