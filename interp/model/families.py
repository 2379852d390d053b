"""Model families: which architecture the TransformerLens bridge wraps a model with, and which
families transformers reads from GGUF files.

The bridge picks its adapter from the Hugging Face config: ``architectures`` first, then a table
of ``model_type`` values. A config may carry neither: transformers builds the config of a GGUF
file without ``architectures``, and TransformerLens' table lacks some model types (a GGUF of
Gemma 3 reads as ``gemma3_text``, OLMo's is ``olmo``). :func:`architecture` then derives the
name the way transformers itself would pick the class: its auto-class table for the model type
(``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, or the masked-LM table for encoders), kept only when
the bridge has an adapter of that name. :func:`name_architecture` writes it into the config, so
that the bridge and every cached copy of the config (see :mod:`interp.model.load`) carry it.

A model of a family the bridge cannot wrap, or a GGUF file of a family transformers cannot
read, is refused in one line that names the file, the family and what to do. This module reads
TransformerLens' adapter table (which architectures it wraps, with which transformers class);
how a bridge is run and hooked stays in :mod:`interp.model.lens`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.errors import ModelError, first_line
from interp.model import lens

# --- TransformerLens' adapter table ---------------------------------------------------------------


def architecture_of(config: Any) -> str | None:
    """The architecture TransformerLens' own rules pick for a Hugging Face config (its
    ``architectures``, then its table of model types); None where they find none."""
    from transformer_lens.model_bridge.sources._hf_format import (
        determine_architecture_from_hf_config,
    )

    try:
        return determine_architecture_from_hf_config(config)
    except ValueError:  # its message lists all 162 architectures: the caller says it in one line
        return None


def supported_architectures() -> frozenset[str]:
    """Every architecture name the installed bridge has an adapter for."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return frozenset(SUPPORTED_ARCHITECTURES)


def hf_model_class(architecture: str) -> Any:
    """The transformers class the bridge loads an architecture with."""
    from transformer_lens.model_bridge.sources.transformers.helpers import (
        get_hf_model_class_for_architecture,
    )

    return get_hf_model_class_for_architecture(architecture)


def _automap(model_type: str) -> list[str]:
    """transformers' own class names for a model type, in the order this toolkit prefers them."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    tables = (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if model_type in lens.ENCODER_MODEL_TYPES:
        tables = tables[::-1]
    return [t[model_type] for t in tables if isinstance(t.get(model_type), str)]


def architecture(config: Any) -> str | None:
    """The architecture the bridge wraps a model of this config with, or None where it has no
    adapter: the bridge's own choice, else derived from ``model_type`` (see the module doc)."""
    found = architecture_of(config)
    if found is not None:
        return found
    supported = supported_architectures()
    return next(
        (name for name in _automap(getattr(config, "model_type", "") or "") if name in supported),
        None,
    )


def name_architecture(config: Any, where: str | Path) -> str:
    """Set ``config.architectures`` to the architecture the bridge will use (when the config
    names none it supports) and return it; ModelError naming ``where`` when there is none."""
    found = architecture(config)
    if found is None:
        family = getattr(config, "model_type", None) or "unknown"
        raise ModelError(
            f"{where}: TransformerLens {lens.installed_version()} has no adapter for the {family!r} model "
            f"family; use a model of a family it supports (`interp models --families` lists them)"
        )
    if found not in (getattr(config, "architectures", None) or ()):
        config.architectures = [found]
    return found


# --- GGUF ----------------------------------------------------------------------------------------


def _squash(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()


def gguf_readable() -> tuple[str, ...]:
    """The ``general.architecture`` values transformers reads from GGUF files (llama.cpp's names)."""
    names: set[str] = set()
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        names.update(GGUF_SUPPORTED_ARCHITECTURES)
    except ImportError:  # a transformers without the legacy reader
        pass
    try:
        from transformers.integrations.gguf import GGUF_CONFIG_ARCHS

        names.update(GGUF_CONFIG_ARCHS)
    except ImportError:
        pass
    return tuple(sorted(names - {"general", "tokenizer"}))


def gguf_family(path: Path) -> str:
    """``general.architecture`` of a GGUF file (its family, in llama.cpp's naming)."""
    try:
        import gguf
    except ImportError:
        raise ModelError("reading GGUF files needs the gguf package: pip install gguf") from None
    try:
        field = gguf.GGUFReader(str(path)).fields["general.architecture"]
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except Exception as exc:  # noqa: BLE001  (gguf raises many types for a damaged file)
        raise ModelError(
            f"cannot read GGUF file {path}: {first_line(exc)} "
            f"(is the file complete and a supported architecture?)"
        ) from None


def check_gguf(path: Path) -> str:
    """The family of a GGUF file, refused in one line when transformers cannot read that family."""
    import transformers

    family = gguf_family(path)
    readable = gguf_readable()
    if _squash(family) not in {_squash(name) for name in readable}:
        raise ModelError(
            f"{path}: transformers {transformers.__version__} cannot read GGUF files of the {family!r} "
            f"family (it reads {', '.join(readable)}); load the model's Hugging Face checkpoint "
            f"(a directory with config.json and safetensors) instead"
        )
    return family


def supported_families() -> list[dict[str, str]]:
    """One row per model type (transformers' name) the bridge can wrap: the architecture it wraps
    it as, and whether transformers reads a GGUF file of it. Families without attention
    heads (Mamba, RWKV) are listed too; loading one says that it has none."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    readable = {_squash(name) for name in gguf_readable()}
    supported = supported_architectures()
    rows = []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        found = architecture_of(_TypeOnly(model_type)) or next(
            (n for n in _automap(model_type) if n in supported), None
        )
        if found is None:
            continue
        gguf_name = model_type.removesuffix("_text")
        rows.append(
            {
                "family": model_type,
                "architecture": found,
                "from GGUF": "yes" if _squash(gguf_name) in readable else "no",
            }
        )
    return rows


class _TypeOnly:
    """A stand-in config that has only a model type (for listing families without building one)."""

    def __init__(self, model_type: str):
        self.model_type = model_type
