"""Which model to load, as data: what a run records so that any of its stages can load it again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, get_args

from interp.config import config, option, require

# float16 needs a device with float16 kernels: any CUDA GPU; on a CPU torch 2.13 runs it too
# (measured: benchmarks/dtype_speed.py), only slowly.
DType = Literal["float32", "bfloat16", "float16"]
DTYPES: tuple[DType, ...] = get_args(DType)


@config
class ModelSpec:
    """Which model to load: a packaged name, a local HF directory, a .gguf file or a Hub name."""

    name: str = option(default="smollm2-135m", flag="--model")
    """packaged name (see `interp models`), a .gguf file, a model directory or a Hub name"""
    device: str = option(default="cpu")
    """cpu, cuda, cuda:N or mps"""
    dtype: DType = option(default="float32")
    """bfloat16 / float16 halve memory and are fast on GPUs; on a CPU without native support they are slower"""
    causal: bool | None = option(default=None, flag="--causal/--bidirectional")
    """whether attention is causal; default: measured on the model with one short forward"""

    def __post_init__(self) -> None:
        require(self, "name", bool(self.name), "a model name, path or Hub id")
        require(
            self,
            "device",
            bool(self.device) and "\0" not in self.device,
            "a device such as cpu or cuda",
        )


def model_slug(name: str) -> str:
    """Folder-safe model name for the run directory (a path's last component for files and folders)."""
    base = Path(name).name if os.sep in name or name.endswith(".gguf") else name
    slug = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "-" for c in base)
    return slug.strip("-._")[:100].rstrip("-._") or "model"
