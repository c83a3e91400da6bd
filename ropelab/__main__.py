"""``python -m ropelab`` says what the package is and where its commands are."""

import sys

import ropelab

HELP = f"""ropelab {ropelab.__version__}: Rotary Position Embedding, derived and checked
(the library behind The RoPE Book).

Use it from Python:
    import ropelab
    cos, sin = ropelab.cos_sin(positions, ropelab.inv_freq(head_dim))
    q = ropelab.apply_rotary(q, cos, sin)

Public names: {", ".join(ropelab.__all__)}

Commands:
    python -m ropelab.bench --help    time apply_rotary against the copy_ floor
"""


def main(argv: list[str] | None = None) -> int:
    """Print the help above; any argument but -h/--help is an error."""
    args = sys.argv[1:] if argv is None else argv
    print(HELP, end="")
    return 0 if all(a in ("-h", "--help") for a in args) else 2


if __name__ == "__main__":
    raise SystemExit(main())
