"""Reference solutions to the book's exercises, one module per chapter (``ch01``, ...).

Each exercise gives the learner a stub that raises ``NotImplementedError``.
The check cell after it calls :func:`ropelab.book.checks.learner_or_reference`,
which tests the learner's function once it is implemented and the function
of the same name here otherwise; the solution dropdown shows the same code.
Import a chapter's module as ``from ropelab.book.solutions import ch01``.
"""
