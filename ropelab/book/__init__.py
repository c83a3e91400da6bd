"""The book's helpers: what only The RoPE Book needs, on top of the library.

Install with the extra: ``pip install "ropelab[book]"`` (matplotlib and the
notebooks' tools). The library (``ropelab``, ``ropelab.kernels``) never
imports this package; it imports the library.

* ``figures``: every figure, one module per chapter (``figures.ch01`` ...),
  each function re-exported flat: ``figures.frequency_ladder(...)``;
* ``checks``: the ✓ lines the chapters print (``check_close``, ``checks`` ...);
* ``solutions``: the exercises' reference solutions, ``solutions.ch01`` ...;
* ``reference``: Meta's LLaMA rotary code, written out once;
* ``cost``: chapter 09's traffic model; ``toy``, ``extrapolate``: chapter 11's
  model and experiment (``python -m ropelab.book.extrapolate``);
* ``gguf_llama``, ``real_model``: chapter 15's real checkpoint and its runs
  (``python -m ropelab.book.real_model``);
* ``ch01`` ... ``ch14``: each chapter's plumbing (tables it prints, set-ups
  its cells share), so that a teaching cell shows one idea;
* ``data/``: the results and weights the chapters read.

Nothing is imported here: ``import ropelab.book.checks`` needs no matplotlib.
"""

from pathlib import Path

# The book's data files (results, weights), shipped inside the package so that
# a chapter also runs in a hosted notebook.
DATA = Path(__file__).parent / "data"
