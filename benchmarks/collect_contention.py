"""Benchmark: collection beside busy processes, against collection alone, in the same run.

Collects every head's features of the packaged model on a small probe set, first on the machine
as it is (the thread count the stage would choose, interp.executors.threads.choose_threads), then
beside two single-thread busy loops: with the count the stage chooses then, and at torch's default
(one thread per usable CPU). The figure is the ratio of collection beside the loops (chosen count)
to collection alone; the acceptance is at most 3x. The detect_head comparison
(benchmarks/detect_head_compare.py: detect_head's three head types against the features' one
batched pass) is timed under the same three conditions. Every time is the best of ``--repeats``.

Run it on an otherwise quiet machine: the two loops are the only contention it means to measure.
It exits 1 when the ratio exceeds the acceptance.

Usage: ``python benchmarks/collect_contention.py [--model smollm2-135m] [--sentences 40]
[--prompts 24] [--repeats 3] [--no-write]``  (minutes on a 2-core CPU)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import detect_head_compare as D  # noqa: E402
import pandas as pd
from _results import markdown, write_section  # noqa: E402

from interp import CollectConfig  # noqa: E402
from interp.collect.stage import collect  # noqa: E402
from interp.executors.threads import choose_threads, stage_threads, usable_cpus  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/collect_contention.py"
SECTION = "Collection beside busy processes"
ACCEPT = 3.0  # collection beside two busy loops may take at most this many times as long
BUSY = 2  # single-thread busy loops
SETTLE_S = 1.0  # the loops run this long before the count is chosen, so that /proc/stat sees them


def spin() -> None:
    # a forked child keeps its parent's signal handlers, and interp's defer SIGTERM to a stage's
    # end: the loop would never stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    while True:
        pass


class Busy:
    """``n`` single-thread processes spinning for the duration of the block."""

    def __init__(self, n: int) -> None:
        self.procs = [mp.Process(target=spin, daemon=True) for _ in range(n)]

    def __enter__(self) -> Busy:
        for proc in self.procs:
            proc.start()
        time.sleep(SETTLE_S)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()  # a busy loop has nothing to clean up
        for proc in self.procs:
            proc.join(timeout=10)


def best_seconds(fn: Callable[[int], object], threads: int, repeats: int) -> float:
    """The best of ``repeats`` calls of ``fn(threads)`` on ``threads`` torch threads."""
    best = float("inf")
    with stage_threads(threads):
        for _ in range(repeats):
            start = time.perf_counter()
            fn(threads)
            best = min(best, time.perf_counter() - start)
    return best


def ratio_sentence(ratio: float) -> str:
    verdict = "met" if ratio <= ACCEPT else "NOT met"
    return (
        f"Collection beside {BUSY} busy loops, at the count the stage chooses, takes "
        f"**{ratio:.2f}x** as long as collection alone (acceptance: at most {ACCEPT:.0f}x; {verdict})."
    )


def main() -> int:
    from transformer_lens.head_detector import detect_head

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--sentences", type=int, default=40, help="probe sentences per suite")
    ap.add_argument("--prompts", type=int, default=24, help="prompts of the detect_head comparison")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    model = load_model(args.model)
    config = CollectConfig(n_syntax=100, n_repeated=16, max_sentences=args.sentences)
    texts = D.prompts(args.prompts, seed=0)
    token_rows = [model.bridge.to_tokens(t)[0] for t in texts]
    work = {
        # the stage sets its own count from its config: given here, it chooses none
        "collection": lambda n: collect(model, replace(config, threads=n), progress=False),
        "detect_head, three types": lambda n: [
            detect_head(model.bridge, texts, name) for name in D.OURS
        ],
        "interp features, three types": lambda n: D.ours(model, token_rows),
    }
    default = usable_cpus()
    alone_n = choose_threads(None).n
    alone = {what: best_seconds(fn, alone_n, args.repeats) for what, fn in work.items()}
    with Busy(BUSY):
        chosen_n = choose_threads(None).n
        chosen = {what: best_seconds(fn, chosen_n, args.repeats) for what, fn in work.items()}
        at_default = {what: best_seconds(fn, default, args.repeats) for what, fn in work.items()}
    table = pd.DataFrame(
        {
            "work": list(work),
            f"alone s ({alone_n} thread(s))": [alone[w] for w in work],
            f"beside s ({chosen_n} thread(s), chosen)": [chosen[w] for w in work],
            f"beside s ({default} thread(s), torch default)": [at_default[w] for w in work],
            "chosen / alone": [chosen[w] / alone[w] for w in work],
            "default / alone": [at_default[w] / alone[w] for w in work],
        }
    )
    ratio = chosen["collection"] / alone["collection"]
    speedups = ", ".join(
        f"{label} {times['detect_head, three types'] / times['interp features, three types']:.1f}x"
        for label, times in (
            ("alone", alone),
            ("beside, chosen", chosen),
            ("beside, default", at_default),
        )
    )
    body = (
        f"Model `{args.model}`; collection with max_sentences {args.sentences}, 16 repeated and 100 "
        f"syntax sequences; the detect_head "
        f"comparison on {len(texts)} prompts; {BUSY} single-thread busy loops beside; best of "
        f"{args.repeats}.\n\n{markdown(table)}\n\n{ratio_sentence(ratio)} The features' speed-up "
        f"over detect_head: {speedups}."
    )
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)
    return 0 if ratio <= ACCEPT else 1


if __name__ == "__main__":
    sys.exit(main())
