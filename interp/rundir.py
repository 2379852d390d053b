"""Run directories: layout, manifest, atomic writes, resume and ``load_run``.

A run lives in ``reports/<model-slug>/<run-name>/``::

    manifest.json            config, package versions, git hash, seed, corpus hashes, timings
    features.parquet / .csv  one per table that the run has produced
    roles.parquet / .csv
    effects.parquet / .csv
    pruning.parquet / .csv
    clusters.csv             unexplained-head clusters (classify stage)
    figures/                 PNG + SVG
    report.html, report.pdf

Every file is written to a temporary name in the same folder and renamed into place, so a
crash or a full disk never leaves a half-written table; a stage records itself in the
manifest only after all its outputs are in place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from interp.errors import RunError
from interp.tables import TABLES

MANIFEST = "manifest.json"
_UMASK = os.umask(0)
os.umask(_UMASK)
PACKAGES = ("interp", "torch", "transformer-lens", "transformers", "pandas", "scikit-learn", "seaborn", "click")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except OSError as exc:
        _unlink(tmp)
        raise RunError(f"cannot write {path}: {exc.strerror or exc} (free some disk space or choose another --out)") from None
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_table(run_dir: Path, name: str, frame: pd.DataFrame) -> None:
    """Write a declared table as parquet and csv, validated against its schema."""
    frame = TABLES[name].validate(frame) if name in TABLES else frame
    with atomic_path(Path(run_dir) / f"{name}.parquet") as tmp:
        frame.to_parquet(tmp, index=False)
    with atomic_path(Path(run_dir) / f"{name}.csv") as tmp:
        frame.to_csv(tmp, index=False)


def read_table(run_dir: Path, name: str) -> pd.DataFrame | None:
    """A table of the run (None if the stage that writes it has not run), checked and cast to
    its declared schema; an unreadable or malformed table is a RunError naming the file."""
    path = Path(run_dir) / f"{name}.parquet"
    if not path.exists():
        return None
    try:
        frame = pd.read_parquet(path)
        return TABLES[name].validate(frame) if name in TABLES else frame
    except (OSError, ValueError) as exc:
        raise RunError(f"{path} is unreadable or malformed ({_first_line(exc)}); rerun the stage that writes it") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        raise RunError(f"{run_dir} is not a run directory (no {MANIFEST}); run `interp run` first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunError(f"{path} is corrupt ({exc.msg}); rerun the stage that wrote it") from None


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    write_text(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, default=jsonable, sort_keys=False))


def record_stage(run_dir: Path, stage: str, config: Any, seconds: float, **extra: Any) -> None:
    """Mark a stage as complete with its config and timing (after its outputs are written)."""
    manifest = read_manifest(run_dir)
    manifest.setdefault("stages", {})[stage] = {
        "config": jsonable(config), "seconds": round(seconds, 2),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **extra,
    }
    write_manifest(run_dir, manifest)


def jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def provenance(seed: int) -> dict[str, Any]:
    """What produced a run: versions, git hash, machine, time."""
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "git_hash": git_hash(),
        "seed": seed,
    }


def git_hash() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def corpus_hash(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def check_out_dir(out_dir: str | Path) -> Path:
    """Fail early (before loading a model) if runs cannot be written under ``out_dir``."""
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise RunError(f"output directory {out} is a file: pass --out with a folder")
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise RunError(f"output directory {out} is not writable: pass --out with a writable folder")
    return out


def prepare_run_dir(out_dir: str | Path, model_slug: str, run_name: str | None) -> Path:
    """Create (or reuse) ``out_dir/<model>/<run-name>``; raise RunError if that cannot be done."""
    out = check_out_dir(out_dir)
    name = run_name or dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = out / model_slug / name
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"cannot create {run_dir}: {exc.strerror} (pass --out with a writable folder)") from None
    if not os.access(run_dir, os.W_OK):
        raise RunError(f"{run_dir} is not writable: pass --out with a writable folder")
    return run_dir


@dataclass
class RunTables:
    """A run's tables as DataFrames (None where the stage has not run) and its manifest."""

    path: Path
    manifest: dict[str, Any]
    features: pd.DataFrame | None
    roles: pd.DataFrame | None
    effects: pd.DataFrame | None
    pruning: pd.DataFrame | None
    clusters: pd.DataFrame | None


def load_run(path: str | Path) -> RunTables:
    """Load a run directory's tables: ``interp.load_run("reports/smollm2-135m/demo").roles``."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise RunError(f"no run directory at {run_dir}")
    manifest = read_manifest(run_dir)
    clusters = run_dir / "clusters.csv"
    return RunTables(
        path=run_dir, manifest=manifest,
        features=read_table(run_dir, "features"), roles=read_table(run_dir, "roles"),
        effects=read_table(run_dir, "effects"), pruning=read_table(run_dir, "pruning"),
        clusters=pd.read_csv(clusters) if clusters.exists() else None,
    )
