"""Peak memory of feature collection does not grow with the corpus.

Each size runs in a fresh child process (peak RSS is a per-process high-water mark); the
corpus is scaled by 1x and 4x (prose lines, syntax sentences, repeated sequences), with the
same batch budget. Collection keeps running sums only, so the 4x peak should stay within
1.15x of the 1x peak; what does grow is the list of tokenized probes (a few MB).

    python benchmarks/collect_memory.py [--model smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from _results import write_section  # noqa: E402

CHILD = """
import json, resource, sys, time
from interp.collect.stage import collect
from interp import CollectConfig
from interp.model.load import load_model
model = load_model(sys.argv[1])
scale = int(sys.argv[2])
after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cfg = CollectConfig(n_repeated=24 * scale, n_syntax=150 * scale, max_sentences=100 * scale)
start = time.perf_counter()
result = collect(model, cfg, progress=False)
print(json.dumps({"scale": scale, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "after_load_kib": after_load, "seconds": time.perf_counter() - start,
                  "tokens": sum(c["n_tokens"] for c in result.corpora.values())}))
"""


def measure(model: str, scale: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, model, str(scale)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    small, large = measure(args.model, 1), measure(args.model, 4)
    ratio = large["peak_kib"] / small["peak_kib"]
    rows = "\n".join(
        f"| {r['scale']}x | {r['tokens']} | {r['after_load_kib'] / 1024:.0f} | {r['peak_kib'] / 1024:.0f} | {r['seconds']:.0f} |"
        for r in (small, large)
    )
    body = (
        f"Model `{args.model}`, default batch budget, one fresh process per size.\n\n"
        "| corpus | tokens | RSS after model load (MiB) | peak RSS (MiB) | collect seconds |\n|---|---|---|---|---|\n"
        + rows
        + f"\n\nPeak memory at 4x the corpus: **{ratio:.3f}x** the 1x peak (target: at most 1.15x)."
    )
    write_section(
        f"Collection peak memory vs corpus size ({args.model})",
        "benchmarks/collect_memory.py",
        body,
    )
    print(body)


if __name__ == "__main__":
    main()
