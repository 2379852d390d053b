"""Shared steps of loading a model: quiet third-party output, one-line reasons, the bridge."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from typing import Any

import torch

from interp.errors import first_line
from interp.model import lens


@contextlib.contextmanager
def quiet():
    """transformers and TransformerLens print progress bars and advice we do not want in the CLI."""
    level = logging.getLogger("transformers").level
    logging.getLogger("transformers").setLevel(logging.ERROR)
    # Set only while loading: a tqdm imported here would otherwise keep its bars off for good.
    import tqdm.std  # noqa: F401  (reads TQDM_* once, at import: import it before setting one)

    saved = os.environ.get("TQDM_DISABLE")
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        os.environ["TQDM_DISABLE"] = "1"
        try:
            yield
        finally:
            logging.getLogger("transformers").setLevel(level)
            if saved is None:
                os.environ.pop("TQDM_DISABLE", None)
            else:
                os.environ["TQDM_DISABLE"] = saved


def boot(source: str, device: str, dtype: torch.dtype, hf: Any, tok: Any, fail: Any) -> Any:
    """The bridge over a loaded Hugging Face model; anything it refuses becomes ``fail(reason)``."""
    try:
        with quiet():
            return lens.boot(source, device, dtype, hf_model=hf.to(device), tokenizer=tok)
    except Exception as exc:  # noqa: BLE001  (TransformerLens raises many types for a model it cannot wrap)
        raise fail(first_line(exc)) from None
