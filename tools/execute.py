"""Store a chapter's outputs: execute notebooks in place, as nbval will run them.

    python tools/execute.py book/09_performance.ipynb [more.ipynb ...]

The kernel starts in the notebook's folder (book/, as under nbval), runs every cell
in order with the interpreter running this script, and the outputs are written back
without execution timings, so that a re-run changes only what the code changed.
``--allow-errors`` keeps going past a failing cell (to see every failure at once).
"""

import argparse
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, allow_errors: bool = False, timeout: int = 1200) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute()
    nbformat.write(nb, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--allow-errors", action="store_true")
    args = parser.parse_args()
    for path in args.notebooks:
        print(f"executing {path}", file=sys.stderr)
        execute(path, allow_errors=args.allow_errors)


if __name__ == "__main__":
    main()
