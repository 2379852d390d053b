"""Where interp.model.memory's coefficients come from: per-batch peaks of the collection pass.

For each model, batches of random tokens (1,024 to 4,096 tokens, widths 16 to 512) run through
the real collection pass (patterns + every feature) in one process; each batch's peak is the
kernel's high-water mark above the resident size before it (glibc's mmap threshold fixed so
that the resident size follows live tensors: run with MALLOC_MMAP_THRESHOLD_=65536, as this
script does for its children). Then ``peak = max(A * b*h*T^2*4 + C * b*T*d_model*4,
M * b*T*(d_model + d_mlp)*4)``, with A per causal/encoder and M per gated/plain MLP, is fitted
in log space; the fitted values and the worst ratio are written to RESULTS.md.

The same for attribution's backward pass (the ablate stage's estimator): each eval set's widest
real evaluation batch at 512 and 2,048 tokens per pass, one forward with gradients and one
backward of its metrics; ``peak = W * layers*T*(d_model + d_mlp)*4 + P * layers*b*h*width^2*4
+ L * rows*d_vocab*4`` (L: causal LMs' scored rows' logits), W per gated/plain MLP, is fitted in
log space on the peaks of at least 64 MiB: where memory decides a pass size (below, the stage's
fixed 15 MiB dominates), and the tiny models' few MiB would otherwise weigh as much.

    python benchmarks/memory_fit.py [--no-smollm2] [--only collect|backward]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _results import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(64, 16), (32, 32), (16, 64), (8, 128), (4, 256), (2, 512), (16, 128), (64, 64)]
CHILD = """
import json, sys, torch
from memory_probe import load
from interp.model import memory
from interp.collect.accumulator import FeatureAccumulator
from interp.model.lens import run_patterns
from interp.collect.features import context
from interp.probes.base import ProbeSequence
from interp.probes.batch import make_batch
torch.set_num_threads(1)
model = load(sys.argv[1])
shape = memory.Shape.of(model)
acc = FeatureAccumulator(model.n_layers, model.n_heads, (), 200, 0)
points = []
for b, width in json.loads(sys.argv[2]):
    if width > model.n_ctx:
        continue
    g = torch.Generator().manual_seed(0)
    seqs = [ProbeSequence(torch.randint(5, min(shape.d_vocab, 1000), (width,), generator=g), "x", "natural",
                          torch.zeros(width, dtype=torch.bool), torch.zeros(width, dtype=torch.bool)) for _ in range(b)]
    batch = make_batch(seqs, list(range(b)), model.causal, 0)
    ctx = context(batch, (), 3)
    def one():
        acc.start_batch(ctx)
        run_patterns(model, batch.tokens, batch.attention_mask, lambda layer, p: acc.add_layer(layer, p, ctx))
    one()
    points.append((b, width, memory.measure_peak(one)))
print(json.dumps({"shape": shape.__dict__, "points": points}))
"""


BACKWARD_CHILD = """
import functools, json, operator, sys, torch
from memory_probe import load
from interp.model import memory
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import batch_metrics
torch.set_num_threads(1)
model = load(sys.argv[1])
ablator = Ablator(model)
def grad_pass(batch):
    readout, zs = ablator.run_with_grad(batch)
    total = functools.reduce(operator.add, [p.num.sum() for p in batch_metrics(readout, batch).values()])
    torch.autograd.grad(total, zs)
points = []
for budget in (512, 2048):
    corpus = build_corpus(model, 120, 24, (16, 32), 40, 0, budget)
    widest = {}
    for batch in corpus.batches:
        if batch.tokens.numel() > widest.get(batch.eval_set, (0, None))[0]:
            widest[batch.eval_set] = (batch.tokens.numel(), batch)
    for _, batch in widest.values():
        grad_pass(batch)
        peak = memory.measure_peak(lambda: grad_pass(batch))
        points.append((batch.eval_set, len(batch), batch.tokens.shape[1], len(batch.row_batch), peak))
print(json.dumps({"shape": memory.Shape.of(model).__dict__, "points": points}))
"""


def measure(model: str, child: str = CHILD) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tests" / "unit"))),
        "OMP_NUM_THREADS": "1",
        "MALLOC_MMAP_THRESHOLD_": "65536",
    }
    out = subprocess.run(
        [sys.executable, "-c", child, model, json.dumps(SHAPES)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def predict(x, s: dict, b: int, width: int) -> float:
    a_causal, a_encoder, c, m_gated, m_plain = x
    tokens = b * width
    attention = (a_causal if s["causal"] else a_encoder) * b * s[
        "n_heads"
    ] * width**2 * 4 + c * tokens * s["d_model"] * 4
    return max(
        attention,
        (m_gated if s["gated_mlp"] else m_plain) * tokens * (s["d_model"] + s["d_mlp"]) * 4,
    )


def backward_terms(s: dict, b: int, width: int, rows: int) -> list[float]:
    """The terms of the backward estimate before their coefficients (W gated, W plain, P, L)."""
    tokens = b * width
    activations = s["n_layers"] * tokens * (s["d_model"] + s["d_mlp"]) * 4
    return [
        activations if s["gated_mlp"] else 0.0,
        0.0 if s["gated_mlp"] else activations,
        s["n_layers"] * b * s["n_heads"] * width**2 * 4,
        rows * s["d_vocab"] * 4 if s["causal"] else 0.0,
    ]


FIT_FROM = 64 * 2**20  # bytes: the backward fit reads the peaks from this size on


def fit_backward(models: list[str]) -> None:
    import numpy as np
    from scipy.optimize import least_squares

    data = {m: measure(m, BACKWARD_CHILD) for m in models}
    rows = [(m, d["shape"], *p) for m, d in data.items() for p in d["points"]]

    def predict(x, s, b, w, r):
        return float(np.dot(x, backward_terms(s, b, w, r)))

    big = [row for row in rows if row[-1] >= FIT_FROM]
    fit = least_squares(
        lambda x: [np.log(predict(x, s, b, w, r) / y) for _, s, _, b, w, r, y in big],
        [3, 3, 2, 4],
        bounds=(0, 50),
    ).x
    ratios = [predict(fit, s, b, w, r) / y for _, s, _, b, w, r, y in big]
    small = [predict(fit, s, b, w, r) / y for _, s, _, b, w, r, y in rows if y < FIT_FROM]
    lines = [
        f"| `{m}` | {f} | {b} x {w} | {r} | {y / 2**20:.1f} | {predict(fit, s, b, w, r) / 2**20:.1f} |"
        for m, s, f, b, w, r, y in rows
    ]
    body = (
        "Per-batch peaks of attribution's forward with gradients and its backward (each eval set's widest "
        "batch at 512 and 2,048 tokens per pass, one thread, live tensors) and the fitted estimate.\n\n"
        f"Fitted: {fit[0]:.1f} (gated MLP) / {fit[1]:.1f} (plain) `[layer, token, d_model + d_mlp]`, "
        f"{fit[2]:.1f} `[layer, batch, head, q, k]` and {fit[3]:.1f} `[scored row, d_vocab]` float32 tensors "
        "(`interp.model.memory`: BACKWARD_GATED, BACKWARD_PLAIN, BACKWARD_ATTENTION, BACKWARD_LOGITS), "
        f"fitted on the {len(big)} peaks of at least {FIT_FROM / 2**20:.0f} MiB. Estimate / measured there: "
        f"{min(ratios):.2f}x to {max(ratios):.2f}x; on the smaller ones {min(small, default=1):.2f}x to "
        f"{max(small, default=1):.2f}x (the stage adds a fixed 15 MiB).\n\n"
        "| model | eval set | batch x width | scored rows | measured (MiB) | estimate (MiB) |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(lines)
    )
    write_section(
        "Memory coefficients of attribution's backward pass", "benchmarks/memory_fit.py", body
    )
    print(body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-smollm2", action="store_true")
    ap.add_argument("--only", choices=("collect", "backward"))
    args = ap.parse_args()
    models = ["tiny-llama", "tiny-gpt2", "tiny-bert", "minilm-l6"] + (
        [] if args.no_smollm2 else ["smollm2-135m"]
    )
    if args.only != "collect":
        fit_backward(models)
    if args.only != "backward":
        fit_collect(models)


def fit_collect(models: list[str]) -> None:
    import numpy as np
    from scipy.optimize import least_squares

    data = {m: measure(m) for m in models}
    rows = [(m, d["shape"], b, w, y) for m, d in data.items() for b, w, y in d["points"]]
    fit = least_squares(
        lambda x: [np.log(predict(x, s, b, w) / y) for _, s, b, w, y in rows],
        [7, 7, 4, 3, 3],
        bounds=(0, 50),
    ).x
    worst = max(abs(np.log(predict(fit, s, b, w) / y)) for _, s, b, w, y in rows)
    lines = [
        f"| `{m}` | {b} x {w} | {y / 2**20:.1f} | {predict(fit, s, b, w) / 2**20:.1f} |"
        for m, s, b, w, y in rows
    ]
    body = (
        "Per-batch peaks of the collection pass (random tokens, one thread, live tensors) and the fitted estimate.\n\n"
        f"Fitted: attention {fit[0]:.1f} (causal) / {fit[1]:.1f} (encoder) `[batch, head, q, k]` float32 tensors, "
        f"{fit[2]:.1f} `[token, d_model]`; MLP phase {fit[3]:.1f} (gated) / {fit[4]:.1f} (plain) `[token, d_model + d_mlp]`. "
        f"Worst estimate / measured: {np.exp(worst):.2f}x.\n\n"
        "| model | batch x width | measured (MiB) | estimate (MiB) |\n|---|---|---|---|\n"
        + "\n".join(lines)
    )
    write_section("Memory coefficients of the collection pass", "benchmarks/memory_fit.py", body)
    print(body)


if __name__ == "__main__":
    main()
