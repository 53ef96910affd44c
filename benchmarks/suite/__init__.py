"""The sections of ``python -m benchmarks`` (benchmarks.BENCHMARKS names them in report order).

Each ``bench_*`` module has ``run(quick: bool) -> Section``; ``_baseline`` is the
straightforward torch iteration ``bench_iteration`` compares against and ``_gui_probe`` the
window ``bench_gui`` times in a subprocess.
"""
