"""Run several experiments, in order: ``python -m analyses [NAME ...] [--stale] [--quick] [--out DIR] [--cache DIR]``.

Each runs as its own ``python -m analyses.NAME`` process, exactly as a user would run it alone,
in the order of ``EXPERIMENTS``, so that later ones load the models earlier ones trained (the
shared grammar recipe). With no NAME, all six.

``--stale`` keeps only the experiments whose write-up in the results folder is missing, or was
made under another version of anything its numbers depend on than the one installed now, as
the write-up's data file, ``NAME.json``, records it (a version it does not record counts as
another): the features (``interp.collect.config.FEATURES_VERSION``) and the classifier's
reference bank (``interp.classify.reference.REFERENCE_VERSION``) for the experiments that label
heads with the classifier, the ablate stage's default kind for those that ablate with it
(``analyses._common.depends_on``). So after a change to the features or the bank,
``python -m analyses --stale`` redoes the experiments that read heads with the classifier and
nothing else; their trained models come from the cache, so only the labelling reruns. It says
why each one is stale.

The analyses of the packaged models (``division_of_labour``, ``sinks``, ``relabelled``,
``packaged``) are not experiments in this sense: each writes its section of analyses/RESULTS.md
and runs on its own (``python analyses/NAME.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from analyses._common import EXPERIMENTS, QUICK_RESULTS, RESULTS, dependency_versions, why_stale


def stale(results: Path) -> list[str]:
    """Experiments whose write-up under ``results`` is out of date (:func:`why_stale`)."""
    now = dependency_versions()
    return [name for name in EXPERIMENTS if why_stale(results, name, now)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analyses", description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"experiments to run (default: all): {', '.join(EXPERIMENTS)}",
    )
    parser.add_argument(
        "--stale", action="store_true", help="only those whose write-up is missing or out of date"
    )
    parser.add_argument("--quick", action="store_true", help="quick mode (smoke tests)")
    parser.add_argument(
        "--out", type=Path, default=None, help="results folder (each experiment's default if unset)"
    )
    parser.add_argument("--cache", type=Path, default=None, help="trained-model cache")
    parser.add_argument("--processes", type=int, default=None, help="trainings run in parallel")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(EXPERIMENTS))
    if unknown:
        parser.error(
            f"unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}"
        )
    names = [n for n in EXPERIMENTS if n in args.names] if args.names else list(EXPERIMENTS)
    if args.stale:
        results = args.out or (QUICK_RESULTS if args.quick else RESULTS)
        reasons = {n: why_stale(results, n) for n in names}
        names = [n for n in names if reasons[n]]
        for name in names:
            print(f"{name}: stale ({'; '.join(reasons[name])})", flush=True)
    passed = ["--quick"] * args.quick
    for flag, value in (
        ("--out", args.out),
        ("--cache", args.cache),
        ("--processes", args.processes),
    ):
        passed += [flag, str(value)] if value is not None else []
    started = time.perf_counter()
    for name in names:
        began = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", f"analyses.{name}", *passed]).returncode
        print(
            f"{name}: {time.perf_counter() - began:.0f} s{'' if code == 0 else f', failed (exit {code})'}",
            flush=True,
        )
        if code != 0:
            return code
    print(
        f"{len(names)} experiment(s) in {time.perf_counter() - started:.0f} s"
        + ("" if names else " (nothing to do)"),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
