"""Complete weights or a clear error, for every model source that reads a file.

transformers fills a parameter the checkpoint lacks with its random initialisation and only
logs it (and the CLI silences that log), so a safetensors file with three layers removed would
run to the end and report heads that were never trained. Every model file is therefore loaded
here with ``output_loading_info=True`` and checked:

- a missing key (a parameter the model has and the file lacks) is an error, except the parts
  no stage reads (:data:`UNUSED_MISSING`: an encoder's masked-LM head, whose logits no metric
  uses -- encoder effects are measured on the sentence embedding);
- an unexpected key (a tensor the file has and the model does not use) is an error, except
  parts known to be left over by the model class (:data:`UNUSED_UNEXPECTED`: BERT's pooler);
- a shape mismatch is an error (transformers would re-initialise the tensor);
- a NaN or infinite value in any tensor is an error (every head after it would read NaN).

Errors name the keys in one line, grouped by layer (``model.layers.{3,4,5}.* (27 weights)``).
A pickled ``.bin`` checkpoint is read only through ``torch.load(weights_only=True)``; when that
refuses the file, the message says to convert it, never to load it unsafely.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from interp.errors import ModelError, first_line

UNUSED_MISSING = (re.compile(r"^cls\.predictions\."),)  # BERT-family masked-LM head (encoders only)
UNUSED_UNEXPECTED = (re.compile(r"(^|\.)pooler\."),)  # BERT's pooler: not part of a masked-LM model


def model_class(config: Any, causal: bool) -> Any:
    """The transformers class the TransformerLens bridge would load this config with."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    from interp.model import families

    found = families.architecture(config)
    if (
        found is None
    ):  # no adapter: the plain auto classes (the bridge then says which family it lacks)
        return AutoModelForCausalLM if causal else AutoModelForMaskedLM
    return families.hf_model_class(found)


def load_checked(
    cls: Any, source: str | Path, where: str | Path, encoder: bool, **kwargs: Any
) -> Any:
    """``cls.from_pretrained(source, **kwargs)``, refused unless every parameter came from the file."""
    try:
        hf, info = cls.from_pretrained(
            source, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
        )
    except Exception as exc:  # noqa: BLE001  (transformers, safetensors and torch raise many types)
        raise load_error(where, exc) from None
    check_complete(info, where, encoder)
    check_finite(hf, where)
    return hf


def load_error(where: str | Path, exc: BaseException) -> ModelError:
    """One line for a weights file that cannot be read at all."""
    text = str(exc)
    if "weights_only" in text or type(exc).__name__ == "UnpicklingError":
        return ModelError(
            f"{where}: the pickled .bin checkpoint holds Python objects that cannot be loaded safely; "
            f"convert it to safetensors with the tool that made it"
        )
    kind = "model directory" if Path(where).is_dir() else "model"
    return ModelError(
        f"cannot load {kind} {where}: its weights cannot be read ({first_line(exc)}); "
        f"the file may be truncated or corrupt: download or export it again"
    )


def check_complete(info: dict[str, Any], where: str | Path, encoder: bool) -> None:
    """Raise ModelError naming the keys when the loading info shows a parameter not from the file."""
    missing = [k for k in info.get("missing_keys", ()) if not (encoder and _any(UNUSED_MISSING, k))]
    if missing:
        raise ModelError(
            f"{where} lacks {_n(missing)} the model needs ({summarize(missing)}): they would be "
            f"random; the file is incomplete: export it again"
        )
    mismatched = sorted(info.get("mismatched_keys", ()))
    if mismatched:
        key, in_file, in_model = mismatched[0]
        raise ModelError(
            f"{where} has {_n(mismatched)} of the wrong shape ({key}: {tuple(in_file)} in the file, "
            f"{tuple(in_model)} in the model): the weights do not match config.json"
        )
    unexpected = [k for k in info.get("unexpected_keys", ()) if not _any(UNUSED_UNEXPECTED, k)]
    if unexpected:
        raise ModelError(
            f"{where} holds {_n(unexpected)} the model does not use ({summarize(unexpected)}): "
            f"config.json describes another model than the weights; fix config.json or the weights"
        )


# Sizes a config.json gives that must be positive whole numbers for the model to exist at all.
SIZES = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "head_dim",
    "max_position_embeddings",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "n_inner",
)


def check_config(config: Any, where: str | Path) -> None:
    """Raise ModelError naming the field when config.json gives a size that is no positive whole
    number (0 heads, a negative width): building the model would fail deep inside transformers,
    and say the weights were unreadable when the config is what is wrong."""
    for name in SIZES:
        value = getattr(config, name, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(
                f"{where}: config.json gives {name} = {value!r}, which must be a positive whole number; "
                f"fix config.json (it does not describe a model)"
            )
    heads, width = (
        getattr(config, "num_attention_heads", None),
        getattr(config, "hidden_size", None),
    )
    if getattr(config, "head_dim", None) is None and heads and width and width % heads:
        raise ModelError(
            f"{where}: config.json gives hidden_size = {width}, which num_attention_heads = {heads} does "
            f"not divide; fix config.json (it does not describe a model)"
        )


def check_finite(hf: Any, where: str | Path) -> None:
    """Raise ModelError naming the tensors that hold NaN or infinite values: every activation
    downstream of one would be NaN, and NaN attention read as features gives labels that look
    confident and mean nothing."""
    import torch

    bad = []
    with torch.no_grad():
        for name, tensor in hf.named_parameters():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                bad.append(name)
    if bad:
        raise ModelError(
            f"{where} has {_n(bad)} holding NaN or infinite values ({summarize(bad)}): the file is "
            f"damaged or was saved after training diverged; export it again"
        )


def _n(items: list) -> str:
    return f"{len(items)} weight" + ("" if len(items) == 1 else "s")


def _any(patterns: tuple[re.Pattern, ...], key: str) -> bool:
    return any(p.search(key) for p in patterns)


def summarize(keys: list[str], limit: int = 3) -> str:
    """Keys grouped by their first numeric component: ``model.layers.{3,4,5}.* (27 weights)``."""
    groups: dict[str, set[int]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for key in sorted(keys):
        parts = key.split(".")
        at = next((i for i, p in enumerate(parts) if p.isdigit()), None)
        name = key if at is None else ".".join(parts[:at]) + ".{}.*"
        if at is not None:
            groups[name].add(int(parts[at]))
        counts[name] += 1
    shown = []
    for name in list(counts)[:limit]:
        label = (
            name.replace("{}", "{" + ",".join(map(str, sorted(groups[name]))) + "}")
            if name in groups
            else name
        )
        shown.append(label + (f" ({counts[name]} weights)" if counts[name] > 1 else ""))
    more = len(counts) - limit
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")
