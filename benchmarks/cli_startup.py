"""How fast the ``fcn`` command answers, and what it prints to standard error.

Each command runs ``--repeats`` times as a fresh process, ``fcn.cli.main(ARGV)`` as the ``fcn``
entry point calls it, which then says whether TensorFlow was imported; the table gives the median
wall time, that answer, and the standard error's line count (TensorFlow's start-up lines hidden: a
computing command says one line of its own). The reference row is ``python -c "import tensorflow"``:
what every command paid before the command line stopped importing TensorFlow for ``--help``.

    python benchmarks/cli_startup.py                 # --repeats 5
    python benchmarks/cli_startup.py --json benchmarks/cli_startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = [
    ["--version"], ["--help"], ["train", "--help"], ["predict", "--help"], ["models"],
    ["convert", "missing.caffemodel", "--out", "x.keras"],
]  # fmt: skip
"""What is timed; the last starts TensorFlow (a computing command), for comparison."""


def run_once(argv: list[str]) -> tuple[float, bool, int]:
    """(seconds, TensorFlow imported, stderr lines) of ``fcn ARGV`` in a fresh process."""
    code = (
        "import sys\nfrom fcn.cli import main\n"
        f"try:\n    status = main({argv!r})\nexcept SystemExit as e:\n    status = e.code\n"
        "print('TF', 'tensorflow' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "FCN_VERBOSE")}
    with tempfile.TemporaryDirectory() as cwd:
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
        )  # fmt: skip
        seconds = time.perf_counter() - began
    return seconds, done.stdout.strip().endswith("TF True"), len(done.stderr.splitlines())


def reference() -> tuple[float, bool, int]:
    """``import tensorflow`` alone, fresh process."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                          text=True)  # fmt: skip
    return time.perf_counter() - began, True, len(done.stderr.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    from fcn.device import cpu_summary

    print(cpu_summary())
    rows = []
    cells = [("python -c 'import tensorflow' (reference)", reference)]
    cells += [(f"fcn {' '.join(argv)}", lambda argv=argv: run_once(argv)) for argv in COMMANDS]
    for name, call in cells:
        runs = [call() for _ in range(args.repeats)]
        row = {"command": name, "median_s": statistics.median(r[0] for r in runs),
               "tensorflow": runs[0][1], "stderr_lines": runs[0][2]}  # fmt: skip
        rows.append(row)
        print(f"| {name} | {row['median_s']:.2f} s | {'yes' if row['tensorflow'] else 'no'} "
              f"| {row['stderr_lines']} |", flush=True)  # fmt: skip
    if args.json:
        record = {"machine": cpu_summary(), "repeats": args.repeats, "rows": rows}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
