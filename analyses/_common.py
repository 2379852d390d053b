"""Plumbing shared by the experiments: options, trainings through the cache, tables, figures, write-up.

Every experiment is ``python -m analyses.NAME [--quick] [--out DIR] [--cache DIR] [--processes N]``
and writes, under ``--out`` (default ``analyses/results``; ``reports/analyses-quick`` in quick
mode, so that a smoke test never overwrites a full run's write-up):

- ``NAME.md``: the write-up, generated from the numbers just measured; it opens with the claim,
  a one-line **Answer**, the command, the run time, the code it ran (git commit, features
  version), the seeds and how many models were trained or loaded from the cache;
- ``NAME.json``: the same facts as data (title, answer, run time, commit, features version, ...),
  what the documentation's "Experiments" block (``analyses/readme.py``) and ``python -m analyses
  --stale`` read;
- ``NAME/*.csv`` (the tables behind every number) and ``NAME/*.png`` (seaborn figures).

A full run into the default folder also regenerates the documentation's "Experiments" block
(``python tools/docs.py experiments``), so that redoing an experiment is one command.
``python -m analyses`` runs several (see ``__main__.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._results import machine, regenerate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "analyses" / "results"
QUICK_RESULTS = ROOT / "reports" / "analyses-quick"  # git-ignored
# Every experiment, in the order in which they share trained models (later ones load what earlier
# ones trained); those that label heads with the classifier must be rerun when its features change.
EXPERIMENTS = ("specialisation", "one_head", "split_cost", "concat_mixing", "head_count", "pruning")
USES_CLASSIFIER = ("specialisation", "concat_mixing")
USES_ABLATE_DEFAULTS = ("pruning",)  # ablates with the ablate stage's default kind


@dataclass
class Experiment:
    """One run of an experiment: where it writes and what it has written so far."""

    name: str
    quick: bool
    out: Path
    cache: Path | None
    processes: int
    argv: list[str]
    started: float = field(default_factory=time.perf_counter)
    trained: int = 0  # models trained by this run
    loaded: int = 0  # models found in the cache
    cached_train_seconds: float = 0.0  # what the loaded models once took to train

    @property
    def folder(self) -> Path:
        return self.out / self.name

    @property
    def command(self) -> str:
        return " ".join(["python -m", f"analyses.{self.name}", *map(shlex.quote, self.argv)])

    def table(self, name: str, frame: pd.DataFrame) -> Path:
        """Write ``NAME/name.csv``; returns its path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        return path

    def figure(self, name: str, fig: Any) -> str:
        """Save a matplotlib figure as ``NAME/name.png``; returns the markdown that shows it."""
        import matplotlib.pyplot as plt

        self.folder.mkdir(parents=True, exist_ok=True)
        fig.savefig(self.folder / f"{name}.png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        return f"![{name}]({self.name}/{name}.png)"

    def train(self, jobs: list[Any]) -> list[Any]:
        """Train (or load) every job through the cache, ``processes`` at a time."""
        from interp.synthetic.cache import is_cached, train_many

        cached = [is_cached(job, self.cache) for job in jobs]
        results = train_many(
            jobs, self.cache, processes=self.processes, progress=sys.stderr.isatty()
        )
        self.trained += cached.count(False)
        self.loaded += cached.count(True)
        self.cached_train_seconds += sum(r.train_seconds for r, c in zip(results, cached) if c)
        return results

    def write(
        self, title: str, claim: str, answer: str, seeds: str, sections: list[tuple[str, str]]
    ) -> Path:
        """Write ``NAME.md`` (the claim, the answer, how it was run, then ``sections``: heading,
        body) and ``NAME.json`` (the same facts as data)."""
        seconds = time.perf_counter() - self.started
        code = code_version()
        data = {
            "name": self.name,
            "title": title,
            "claim": claim,
            "answer": answer,
            "command": self.command,
            "quick": self.quick,
            "run_seconds": round(seconds, 2),
            "machine": machine(),
            "date": dt.date.today().isoformat(),
            **code,
            "seeds": seeds,
            "trained": self.trained,
            "loaded": self.loaded,
            "cached_train_seconds": round(self.cached_train_seconds, 2),
        }
        cache = f"{self.trained} model(s) trained in this run, {self.loaded} loaded from the cache"
        if self.loaded:
            cache += f" (they had taken {self.cached_train_seconds / 60:.1f} min of training)"
        lines = [
            f"# {title}",
            "",
            f"**Claim.** {claim}",
            "",
            f"**Answer.** {answer}",
            "",
            f"- Command: `{self.command}`{' (quick mode: a smoke test, not a result)' if self.quick else ''}",
            f"- Run time: {seconds / 60:.1f} min ({seconds:.0f} s) on {data['machine']}, {data['date']}",
            f"- Code: {code_line(code)}",
            f"- Seeds: {seeds}",
            f"- Models: {cache}",
            f"- Tables (csv) and figures (png): `{self.name}/`, next to this file",
            "",
        ]
        for heading, body in sections:
            lines += [f"## {heading}", "", body.strip(), ""]
        path = self.out / f"{self.name}.md"
        path.write_text("\n".join(lines))
        path.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
        if not self.quick and self.out == RESULTS.resolve():
            regenerate("experiments")
        return path


def dependency_versions() -> dict[str, Any]:
    """The versions a write-up's numbers can depend on besides its own code, as installed now:
    ``features_version`` and ``reference_version`` (the features and the reference bank the
    classifier labels heads with) and ``ablation`` (the ablate stage's default kind)."""
    from interp.ablate.config import AblateConfig
    from interp.classify.reference import REFERENCE_VERSION
    from interp.collect.config import FEATURES_VERSION

    return {
        "features_version": FEATURES_VERSION,
        "reference_version": REFERENCE_VERSION,
        "ablation": AblateConfig().ablations[0],
    }


def depends_on(name: str) -> tuple[str, ...]:
    """The keys of :func:`dependency_versions` that experiment ``name``'s write-up depends on."""
    return (("features_version", "reference_version") if name in USES_CLASSIFIER else ()) + (
        ("ablation",) if name in USES_ABLATE_DEFAULTS else ()
    )


def why_stale(results: Path, name: str, now: dict | None = None) -> list[str]:
    """Why experiment ``name``'s write-up under ``results`` is out of date (empty: it is not):
    it is missing, or its data records another version of something it depends on than ``now``
    (default: the installed :func:`analyses._common.dependency_versions`)."""
    path = results / f"{name}.md"
    if not path.exists():
        return ["no write-up"]
    now = dependency_versions() if now is None else now
    made = write_up_data(path) or {}
    return [
        f"{key} {made[key] if key in made else 'not recorded'}, now {now[key]}"
        for key in depends_on(name)
        if made.get(key) != now[key]
    ]


def code_version() -> dict[str, Any]:
    """What a write-up was made with: ``commit`` (None outside a git checkout), ``uncommitted``
    (changes to the code beside it) and :func:`dependency_versions`."""
    from interp.pipeline.provenance import git_hash

    commit = git_hash()
    dirty = False
    if commit is not None:
        # the results folder itself is left out: rewriting it is what a run does
        changed = [
            "git",
            "diff",
            "--quiet",
            "HEAD",
            "--",
            "interp",
            "analyses",
            ":(exclude)analyses/results",
        ]
        dirty = subprocess.run(changed, cwd=ROOT, capture_output=True).returncode != 0
    return {"commit": commit, "uncommitted": dirty, **dependency_versions()}


def code_line(code: dict[str, Any]) -> str:
    """``interp <commit>[ + uncommitted changes], features version N``: the write-up's "Code" line."""
    if code["commit"] is None:
        return f"interp (no git checkout), features version {code['features_version']}"
    dirty = " + uncommitted changes" if code["uncommitted"] else ""
    return f"interp {code['commit'][:12]}{dirty}, features version {code['features_version']}"


def write_up_data(write_up: Path) -> dict[str, Any] | None:
    """The data a write-up ``NAME.md`` was made with, from ``NAME.json`` beside it (None when
    there is none)."""
    path = write_up.with_suffix(".json")
    return json.loads(path.read_text()) if path.exists() else None


def features_version(write_up: Path) -> int | None:
    """The features version whose classifier labelled a write-up's heads (None when its data
    records none)."""
    return (write_up_data(write_up) or {}).get("features_version")


def start(
    name: str, doc: str, extra: list[tuple[tuple[str, ...], dict[str, Any]]] = ()
) -> tuple[Experiment, argparse.Namespace]:
    """Parse the common options (plus ``extra`` ones) and set up the run."""
    parser = argparse.ArgumentParser(
        prog=f"python -m analyses.{name}", description=doc.strip().splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a small, fast version (what CI runs)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default: analyses/results; quick mode: reports/analyses-quick)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="trained-model cache (default: ~/.cache/interp/trained)",
    )
    parser.add_argument(
        "--processes", type=int, default=2, help="trainings run in parallel (default 2)"
    )
    for flags, kwargs in extra:
        parser.add_argument(*flags, **kwargs)
    args = parser.parse_args()
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    if args.out is None:
        args.out = QUICK_RESULTS if args.quick else RESULTS
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    args.out.mkdir(parents=True, exist_ok=True)
    exp = Experiment(name, args.quick, args.out.resolve(), args.cache, args.processes, sys.argv[1:])
    return exp, args


def md(frame: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a markdown table (floats rounded to ``digits``)."""

    def cell(v: Any) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    head = [str(c) for c in frame.columns]
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows])


def mean_ci(frame: pd.DataFrame, by: list[str], value: str, level: float = 0.95) -> pd.DataFrame:
    """Mean, standard deviation, n and a t-interval of ``value`` per group of ``by`` (over seeds)."""
    from scipy import stats

    rows = []
    for key, group in frame.groupby(by, sort=True):
        x = group[value].dropna().to_numpy(dtype=float)
        n = len(x)
        mean = x.mean() if n else np.nan
        sd = x.std(ddof=1) if n > 1 else np.nan
        half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n) if n > 1 else np.nan
        key = key if isinstance(key, tuple) else (key,)
        rows.append(
            {
                **dict(zip(by, key)),
                "mean": mean,
                "sd": sd,
                "n": n,
                "ci_low": mean - half,
                "ci_high": mean + half,
            }
        )
    return pd.DataFrame(rows)


def pm(mean: float, low: float, high: float, digits: int = 3) -> str:
    """``mean [low, high]`` for the write-up."""
    if np.isnan(low):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
