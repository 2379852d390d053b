# Over 400 lines: the run directory's one owner: layout, atomic writes, manifest.
"""Run directories: layout, names, manifest, atomic writes and ``load_run``.

A run lives in ``reports/<model-slug>/<run-name>/``::

    manifest.json            format, options, provenance (versions, hashes, seed), stages, timings
    features.parquet / .csv  one per table that the run has produced
    syntax.parquet / .csv
    roles.parquet / .csv
    effects.parquet / .csv
    pruning.parquet / .csv
    clusters.parquet / .csv, role_summary.parquet / .csv   (classify)
    task_attention.parquet / .csv   (ablate, for tasks with named positions)
    figures/                 PNG + SVG
    report.html, report.pdf

A run name is one path component from a safe alphabet, and the run directory must resolve
(symbolic links followed) to a place inside ``--out``: a name never reaches a user's other
files. Every file is written to a temporary name in the same folder and renamed into place, so
a crash, a signal or a full disk never leaves a half-written table; a stage records itself in
the manifest only after all its outputs are in place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import re
import stat
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interp.errors import RunError, first_line
from interp.pipeline.tables import TABLES

# A run name is one path component: no separators, no leading dot (hidden, or '..').
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

MANIFEST = "manifest.json"
# Version of the manifest's layout: 2 added "format", stage ids and stage inputs. A manifest of
# a later format was written by a newer interp, which may mean something else by its fields.
MANIFEST_FORMAT = 2
_UMASK = os.umask(0)
os.umask(_UMASK)


# --- names and places -----------------------------------------------------------------------


def check_run_name(name: str) -> str:
    """``name`` if it is one safe path component (letters, digits, ``.``, ``_``, ``-``; not
    starting with ``.`` or ``-``; at most 100 characters), else a RunError."""
    if not RUN_NAME.fullmatch(name):
        raise RunError(
            f"run name {name!r} is not allowed: use 1-100 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (no '/', no '..')"
        )
    return name


def run_path(out_dir: str | Path, slug: str, run_name: str) -> Path:
    """``out_dir/slug/run_name``, refused unless it resolves to a place inside ``out_dir``."""
    out = Path(out_dir).expanduser()
    target = out / check_run_name(slug) / check_run_name(run_name)
    if not resolved(target).is_relative_to(resolved(out)):
        raise RunError(
            f"{target} leads outside {out} (through a symbolic link): choose another --out or --name"
        )
    return target


def resolved(path: Path) -> Path:
    """``path.resolve()``, or a RunError for a loop of symbolic links (which has no place to resolve to)."""
    try:
        return path.resolve()
    except (
        RuntimeError,
        OSError,
    ):  # Python 3.11 raises RuntimeError for a loop, 3.13 OSError (ELOOP)
        raise RunError(
            f"{path} leads into a loop of symbolic links: remove the loop or choose another --out"
        ) from None


def check_out_dir(out_dir: str | Path) -> Path:
    """Fail early (before loading a model) if runs cannot be written under ``out_dir``."""
    out = Path(out_dir).expanduser()
    resolved(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"output directory {out} is a file: pass --out with a folder")
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise RunError(f"output directory {out} is not writable: pass --out with a writable folder")
    return out


def check_out_file(path: str | Path, suffix: str = ".html") -> Path:
    """A file a command may write (``compare --out``): an ``.html`` name without control
    characters, in an existing writable folder (symbolic links followed), and either new or an
    HTML page already (a user's other files are never overwritten)."""
    path = Path(path).expanduser()
    if any(ord(c) < 32 for c in str(path)) or path.suffix.lower() != suffix:
        raise RunError(
            f"--out {str(path)!r} must name a {suffix} file (no control characters in the name)"
        )
    target = resolved(path)
    if not target.parent.is_dir() or not os.access(target.parent, os.W_OK | os.X_OK):
        raise RunError(
            f"--out {path}: folder {target.parent} does not exist or is not writable; create it or choose another --out"
        )
    if target.exists():
        if not target.is_file():
            raise RunError(f"--out {path} exists and is not a file: choose another --out")
        with open(target, "rb") as f:
            head = f.read(64).lstrip().lower()
        if not head.startswith(b"<!doctype html"):
            raise RunError(
                f"--out {path} exists and is not an HTML page: choose another --out (it is never overwritten)"
            )
    return path


def make_dirs(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents; return the folders made now (outermost first),
    so that a run that fails before anything finished can remove exactly those."""
    missing = [p for p in (path, *path.parents) if not p.exists()][::-1]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_dirs(missing)
        raise RunError(
            f"cannot create {path}: {exc.strerror} (pass --out with a writable folder)"
        ) from None
    return missing


def remove_dirs(made: list[Path]) -> None:
    """Remove folders :func:`make_dirs` made, innermost first, each only if it is empty."""
    for path in reversed(made):
        try:
            path.rmdir()
        except OSError:
            return


def clear_temporaries(run_dir: Path) -> None:
    """Delete temporary files a killed process left in a run directory (``.<name>.*.tmp``)."""
    for tmp in Path(run_dir).glob(".*.tmp"):
        _unlink(str(tmp))


# --- atomic writes --------------------------------------------------------------------------

_writing: list[tuple[Path, str]] = []  # (run directory, stage) whose record goes at its first write


@contextmanager
def stage_writes(run_dir: Path, stage: str) -> Iterator[None]:
    """For the block, the first file written into ``run_dir`` (other than the manifest) first
    drops ``stage``'s record: a stage stopped half-way through rewriting its outputs never counts
    as done, while a stage that fails before writing anything leaves the run as it was."""
    _writing.append((Path(run_dir).resolve(), stage))
    try:
        yield
    finally:
        if _writing and _writing[-1][1] == stage:
            _writing.pop()


def _before_write(path: Path) -> None:
    if not _writing or path.name == MANIFEST:
        return
    run_dir, stage = _writing[-1]
    if path.resolve().is_relative_to(run_dir):
        _writing.pop()
        forget_stage(run_dir, stage)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds."""
    path = Path(path)
    _before_write(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except OSError as exc:
        _unlink(tmp)
        raise write_error(path, exc) from None
    except BaseException:
        _unlink(tmp)
        raise


def write_error(path: Path, exc: OSError) -> RunError:
    """The one-line RunError for a write that failed: what happened and what to do."""
    if exc.errno == errno.ENOSPC:
        return RunError(
            f"cannot write {path}: the disk is full (free some disk space and rerun with --resume)"
        )
    if exc.errno == errno.EISDIR or path.is_dir():
        return RunError(
            f"cannot write {path}: a directory of that name is in the way (remove or rename it)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return RunError(
            f"cannot write {path}: permission denied (pass --out with a writable folder)"
        )
    return RunError(f"cannot write {path}: {exc.strerror or exc}")


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


# --- tables ---------------------------------------------------------------------------------


def write_table(run_dir: Path, name: str, frame: pd.DataFrame) -> None:
    """Write a declared table as parquet and csv, validated against its schema (an infinite
    value is written as NaN: the tables say "no finite value" one way only)."""
    frame = TABLES[name].validate(TABLES[name].finite(frame)) if name in TABLES else frame
    with atomic_path(Path(run_dir) / f"{name}.parquet") as tmp:
        frame.to_parquet(tmp, index=False)
    with atomic_path(Path(run_dir) / f"{name}.csv") as tmp:
        frame.to_csv(tmp, index=False)


def remove_table(run_dir: Path, name: str) -> None:
    """Delete a table's parquet and csv (a stage whose new run writes no such table: an older
    copy would describe what that stage no longer measured)."""
    for suffix in (".parquet", ".csv"):
        path = Path(run_dir) / f"{name}{suffix}"
        if path.exists():
            _before_write(path)
            _unlink(str(path))


def read_table(run_dir: Path, name: str) -> pd.DataFrame | None:
    """A table of the run (None if the stage that writes it has not run), checked and cast to
    its declared schema; an unreadable or malformed table is a RunError naming the file."""
    path = Path(run_dir) / f"{name}.parquet"
    if not path.exists():
        return None
    try:
        _regular(path)
        frame = pd.read_parquet(path)
        return TABLES[name].validate(frame) if name in TABLES else frame
    except (OSError, ValueError, TypeError, KeyError) as exc:  # pyarrow's errors are among these
        raise RunError(
            f"{path} is unreadable or malformed ({first_line(exc)}); rerun the stage that writes it"
        ) from None


def required_table(run_dir: Path, name: str, writer: str) -> pd.DataFrame:
    """A table a stage cannot do without: :func:`read_table`, or a RunError naming the stage
    (``writer``) to run first."""
    frame = read_table(run_dir, name)
    if frame is None:
        raise RunError(
            f"{run_dir} has no {name} table: run `interp {writer} {run_dir}` (or `interp run`) first"
        )
    return frame


def read_archive(path: Path, fields: tuple[str, ...], version: int) -> dict[str, Any] | None:
    """The named arrays of a versioned ``.npz`` a stage wrote (no pickles), None when the file is
    not there; a damaged file, a missing field or another format version is a ValueError."""
    if not Path(path).exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in fields}
    except (OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(first_line(exc)) from None
    if int(arrays["version"]) != version:
        raise ValueError(f"format {int(arrays['version'])}, this version reads {version}")
    return arrays


def _regular(path: Path) -> None:
    """Refuse anything but a regular file before opening it (a FIFO would block the reader)."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise OSError(errno.EINVAL, "not a regular file")


# --- the manifest ---------------------------------------------------------------------------


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest, checked: a JSON object of a format this version understands."""
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        raise RunError(f"{run_dir} is not a run directory (no {MANIFEST}); run `interp run` first")
    try:
        _regular(path)
        text = path.read_bytes().decode("utf-8")
        manifest = json.loads(text)
    except UnicodeDecodeError:
        raise RunError(
            f"{path} is corrupt (not UTF-8 text); rerun `interp run` for a new run"
        ) from None
    except json.JSONDecodeError as exc:
        raise RunError(
            f"{path} is corrupt ({exc.msg} at line {exc.lineno}); rerun `interp run` for a new run"
        ) from None
    except (OSError, RecursionError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "nested too deeply"
        raise RunError(
            f"{path} cannot be read ({reason}); rerun `interp run` for a new run"
        ) from None
    return _checked(path, manifest)


def _checked(path: Path, manifest: Any) -> dict[str, Any]:
    if not isinstance(manifest, dict):
        raise RunError(
            f"{path} is corrupt (a JSON {type(manifest).__name__}, not an object); rerun `interp run` for a new run"
        )
    fmt = manifest.get("format", 1)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise RunError(
            f"{path} is corrupt (format {fmt!r} is not a version number); rerun `interp run` for a new run"
        )
    if fmt > MANIFEST_FORMAT:
        raise RunError(
            f"{path} was written by a newer interp (manifest format {fmt}, this one reads up to "
            f"{MANIFEST_FORMAT}); upgrade interp to use this run"
        )
    for key in ("stages", "model", "options", "provenance", "corpora"):
        if key in manifest and not isinstance(manifest[key], dict):
            raise RunError(
                f"{path} is corrupt ({key!r} is not an object); rerun `interp run` for a new run"
            )
    if any(not isinstance(entry, dict) for entry in manifest.get("stages", {}).values()):
        raise RunError(
            f"{path} is corrupt (a stage record is not an object); rerun `interp run` for a new run"
        )
    for field, value in _nested(manifest):
        if not isinstance(value, dict):
            raise RunError(
                f"{path} is corrupt ({field} is a JSON {json_type(value)}, not an object); rerun "
                f"`interp run` for a new run"
            )
    return manifest


def _nested(manifest: dict[str, Any]) -> list[tuple[str, Any]]:
    """The manifest's fields below the top that must be objects where present: the options'
    stage configs (``options.stages`` and each of its entries), each stage record's config, the
    model's spec."""
    found: list[tuple[str, Any]] = []
    options = manifest.get("options", {})
    if "stages" in options:
        found.append(("options.stages", options["stages"]))
        if isinstance(options["stages"], dict):
            found += [(f"options.stages.{k}", v) for k, v in options["stages"].items()]
    for name, record in manifest.get("stages", {}).items():
        if record.get("config") is not None:
            found.append((f"stages.{name}.config", record["config"]))
    spec = manifest.get("model", {}).get("spec")
    if spec is not None:
        found.append(("model.spec", spec))
    return found


def json_type(value: Any) -> str:
    """How JSON names the type of a value read from it."""
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    manifest = {"format": MANIFEST_FORMAT, **{k: v for k, v in manifest.items() if k != "format"}}
    write_text(
        Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, default=jsonable, sort_keys=False)
    )


def record_stage(run_dir: Path, stage: str, config: Any, seconds: float, **extra: Any) -> None:
    """Mark a stage as complete with its config, timing and a fresh id (after its outputs are
    written); stages that read its outputs record that id, so that they know when it reran."""
    manifest = read_manifest(run_dir)
    manifest.setdefault("stages", {})[stage] = {
        "config": jsonable(config),
        "seconds": round(seconds, 2),
        "id": uuid.uuid4().hex[:12],
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }
    write_manifest(run_dir, manifest)


def forget_stage(run_dir: Path, stage: str) -> None:
    """Drop a stage's record before it runs again: until it finishes, it does not count as done."""
    manifest = read_manifest(run_dir)
    if stage in manifest.get("stages", {}):
        del manifest["stages"][stage]
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


# --- reading a run back ---------------------------------------------------------------------
