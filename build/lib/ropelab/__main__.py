"""``python -m ropelab`` runs the benchmark (same as ``python -m ropelab.bench``)."""

from .bench import main

raise SystemExit(main())
