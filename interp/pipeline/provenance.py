"""What a run was made from, recorded so that it can be checked and reproduced.

The manifest's ``provenance`` holds the package versions, the git hash, the machine, the seed,
and content hashes (sha256) of everything a table depends on besides the options: the model's
files, every user corpus and the shipped probe data. Each stage also records the hashes of its
own inputs (:func:`stage_inputs`), so that ``--resume`` redoes a stage whose corpus or model
file changed on disk although its path did not, and ``interp run --from-manifest`` refuses to
"reproduce" a run from files that are no longer the same.

Hashing streams the file (about 1 GB/s): 0.09 s for the packaged SmolLM2 GGUF (98 MB).
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import hashlib
import os
import platform
import stat
import subprocess
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

PACKAGES = (
    "interp",
    "torch",
    "transformer-lens",
    "transformers",
    "tokenizers",
    "safetensors",
    "gguf",
    "numpy",
    "pandas",
    "pyarrow",
    "scikit-learn",
    "scipy",
    "pydantic",
    "seaborn",
    "click",
)
# Files of a model directory that do not change what the model computes.
_NOT_MODEL = (".md", ".gitattributes")


def provenance(
    seed: int | None, model_hash: str | None = None, corpora: dict[str, str] | None = None
) -> dict[str, Any]:
    """What produced a run: versions, git hash, machine, time, seed and content hashes."""
    return {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": package_versions(),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus",
        "git_hash": git_hash(),
        "seed": seed,
        "model_hash": model_hash,
        "corpus_hashes": dict(corpora or {}),
        "data_hash": data_hash(),
    }


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return versions


def git_hash() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def corpus_hash(texts: list[str]) -> str:
    """A short hash of a list of probe texts (as the tokenizer saw them)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def file_hash(path: str | Path) -> str:
    """sha256 of a file's bytes, streamed; cached per (path, size, mtime, inode) in this process.
    OSError for anything but a regular file: a FIFO would block the reader, a device never ends."""
    st = Path(path).stat()
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return _file_hash(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=256)
def _file_hash(path: str, size: int, mtime_ns: int, inode: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def tree_hash(paths: list[Path], root: Path) -> str:
    """One hash over several files: their names relative to ``root`` and their contents."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(
            str(path.relative_to(root)).encode("utf-8")
            + b"\0"
            + file_hash(path).encode("ascii")
            + b"\n"
        )
    return h.hexdigest()


def data_hash() -> str:
    """Hash of the shipped probe data (prose, cards): a change there changes the features."""
    root = Path(str(files("interp.data")))
    return tree_hash(
        [
            p
            for p in root.iterdir()
            if p.is_file() and p.suffix in (".txt", ".jsonl", ".conllu", ".csv")
        ],
        root,
    )


def model_files(name: str, source: str) -> tuple[list[Path], Path] | None:
    """The files a model was loaded from, and their root; None where there are none to hash (a
    bridge built in Python, a Hub model absent from the local cache)."""
    from interp.model.load import PACKAGED, packaged_path

    if source == "packaged":
        path = packaged_path(PACKAGED[name])
    elif source in ("gguf", "hf-dir"):
        path = Path(name).expanduser()
    elif source == "hub":
        path = _hub_snapshot(name)
    else:
        return None
    if path is None or not path.exists():
        return None
    if path.is_file():
        return [path], path.parent
    chosen = [
        p
        for p in path.iterdir()
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(_NOT_MODEL)
    ]
    return chosen, path


def model_hash(name: str, source: str) -> str | None:
    """One content hash over a model's files (weights, config, tokenizer), or None."""
    found = model_files(name, source)
    return tree_hash(*found) if found else None


def _hub_snapshot(name: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001  (not cached, or no such repo: nothing to hash)
        return None
