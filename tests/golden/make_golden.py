"""Write the golden tables: the default run's tables on two tiny models (GQA Llama, BERT).

tests/golden/test_golden.py reruns the same runs and compares. Regenerate only when a change
is meant to alter the tables (a new features version, another default ablation), and say so
in the commit: ``python tests/golden/make_golden.py``. Each folder's versions.json records the
library versions the tables were made with (the run manifest's list), which a failing
comparison prints beside the current ones.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "unit"))  # run as a script: the tiny models live there

TABLES = ("features", "roles", "effects", "pruning", "weights", "composition")


def golden_run(name: str, out_dir: Path) -> Path:
    """The default `interp run` (report skipped) of one tiny model, on one thread."""
    from tiny_models import tiny_bert, tiny_llama

    from interp import RunOptions
    from interp.pipeline.execute import run_pipeline

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = {"tiny-llama": tiny_llama, "tiny-bert": tiny_bert}[name]()
    options = RunOptions(out_dir=str(out_dir), run_name="golden", skip=("report",))
    return run_pipeline(options, model=model, progress=False)


def main() -> None:
    import pandas as pd

    for name in ("tiny-llama", "tiny-bert"):
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = golden_run(name, Path(tmp))
            target = HERE / name
            target.mkdir(exist_ok=True)
            for table in TABLES:
                pd.read_parquet(run_dir / f"{table}.parquet").to_csv(
                    target / f"{table}.csv", index=False
                )
            write_versions(target)
        print(f"{name}: written to {target}")


def write_versions(target: Path) -> None:
    """The library versions the golden tables of ``target`` were made with."""
    from interp.pipeline.provenance import package_versions

    (target / "versions.json").write_text(json.dumps(package_versions(), indent=2) + "\n")


if __name__ == "__main__":
    main()
