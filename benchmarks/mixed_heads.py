"""Mixed heads: the blend detectors measured on planted heads they never saw.

    python benchmarks/mixed_heads.py

Refits the detectors of interp.classify.mixture from scratch (interp.classify.reference.
mixture_fit.refit_mixture, into a temporary directory: the development blends of seed 0 and the
shipped reference bank), checks that the fit equals the shipped ``mixture.json``, and writes the
development and held-out figures (blends and a reference bank of seed 1) to the "Mixed heads"
section of benchmarks/RESULTS.md. Nothing is chosen here: the detectors' settings are fixed in
interp.classify.mixture and interp.classify.reference.mixture_fit.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown, write_section  # noqa: E402

from interp.classify.mixture import CLEAR, MIN_PROBABILITY, MIXTURE_FILE  # noqa: E402
from interp.classify.reference.fit import reference_dir  # noqa: E402
from interp.classify.reference.mixture_fit import LOOSE, refit_mixture  # noqa: E402

SPLITS = {"development": "development (fitted on)", "held_out": "held out (seed 1)"}


def figures_table(content: dict) -> pd.DataFrame:
    rows = []
    for split, label in SPLITS.items():
        for heads, f in content[split].items():
            rows.append({"split": label, "heads": heads, **f})
    return pd.DataFrame(rows)


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        content = refit_mixture(Path(tmp))
    seconds = time.perf_counter() - started
    shipped = json.loads((reference_dir() / MIXTURE_FILE).read_text())
    same = all(
        np.allclose(content["detectors"][k], shipped["detectors"][k], atol=1e-3)
        for k in ("coef", "intercept", "share_coef", "share_intercept", "mean", "scale")
    )
    held = content["held_out"]
    body = "\n".join(
        [
            f"Detectors refitted in {seconds:.0f} s; "
            f"{'equal to' if same else '**different from**'} the shipped `mixture.json`. "
            f"A head is `mixed` when the classifier calls it `unexplained` and at least two "
            f"roles hold {CLEAR} of its non-sink attention with probability {MIN_PROBABILITY} or "
            f"more. Heads: those the shipped classifier calls `unexplained` among "
            f"{content['blends_per_mask']} planted blends per mask (causal, encoder) and a "
            f"reference bank. A claim is right when every named role truly holds at least "
            f"{LOOSE} and the head holds two; recall is over heads holding two roles at {CLEAR}.",
            "",
            markdown(figures_table(content)),
            "",
            f"Held out: precision {held['blends']['precision']:.3f} (blends) and "
            f"{held['bank']['precision']:.3f} (bank), recall {held['blends']['recall']:.3f} and "
            f"{held['bank']['recall']:.3f}; named shares off by {held['blends']['share_error']:.3f}"
            f" and {held['bank']['share_error']:.3f} on average; calibration error "
            f"{held['blends']['calibration_error']:.3f} and "
            f"{held['bank']['calibration_error']:.3f}.",
        ]
    )
    write_section("Mixed heads", "benchmarks/mixed_heads.py", body)
    print(body)


if __name__ == "__main__":
    main()
