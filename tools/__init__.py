"""Programs that make the data the packages ship (run once, from the repository root, with
``python -m tools.NAME``); not installed with the packages, which only read that data.

- ``make_positions``: ``baselines/data/positions.npz``, the labelled positions of
  :mod:`connectx_baselines.perfect_play`;
- ``teacher_book``: ``baselines/data/teacher_book*.npz``, the teacher books;
- ``teacher_cache``: ``baselines/data/teacher_chunks.npz``, the shipped teacher labels;
- ``game_review``: the last value-losing move of each game, for ``benchmarks/bench_losses.py``.
"""
