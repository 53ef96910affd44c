"""The one writer of result files, used by the CLI, the GUI and the sweeps.

``exports`` (result.json, curves.csv, images, NPY arrays, run records: one schema; its parts
``curves`` (curves.csv rows), ``csv_cells`` (spreadsheet-safe CSV text) and ``images``),
``folder_swap`` (a whole results folder replaced atomically) and ``folder_lock`` (one writer
per output folder). Importing this package is cheap: it imports no submodule.
"""
