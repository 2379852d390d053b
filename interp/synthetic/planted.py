"""Planted models: tiny GPT-2s whose weights are set by hand so that chosen heads do one job exactly.

They are ground truth for the toolkit: a head planted as ``previous_token`` puts all of its
attention on q-1, so :func:`interp.collect.stage.collect` must score it 1.0 on that feature; a
head planted to copy maps every token to itself through the embedding and the unembedding; and a
head left unplanned attends uniformly and writes nothing, so it must score exactly the baseline
and come out ``inactive``.

A plan maps (layer, head) to where the head looks, a role of :data:`PLANTABLE` (it then writes a
constant: something, but nothing about tokens), or to a :class:`Planted` head that also says what
it writes: ``Planted("previous_token", "copy")`` looks at q-1 and copies that token (its OV circuit
is +identity through the embedding and the unembedding), ``"suppress"`` is -identity,
``"successor"`` maps each item of :data:`ORDINALS` to the next (Sunday to Monday, December to
January), ``"zero"`` writes nothing.
:func:`truth` lists every head of a plan's model as it was planted. How the weights are set:
interp.synthetic.layout (where each feature lives in the residual stream, how a head looks and
what it writes); interp.synthetic.circuit plants an indirect-object circuit of task roles.

When the plan has induction heads but no previous-token head in an earlier layer,
``planted_model`` plants one in the first free head of layer 0 (or the first earlier layer with a
free head); the previous-token head before the first induction layer writes PREV.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from interp.model.load import LoadedModel, from_bridge
from interp.synthetic.layout import Layout, mirror, terms, token_map

PLANTABLE = (
    "previous_token",
    "current_token",
    "first_token",
    "duplicate_token",
    "induction",
    "delimiter",
    "broad",
)
ATTENDS = PLANTABLE + ("name",)  # "name": a task's mover (interp.synthetic.layout)
SINGLE_KEY = ("previous_token", "current_token", "first_token")  # one key per query
WRITES = ("constant", "copy", "suppress", "successor", "zero", "previous", "inhibit")
TOKEN_WRITES = ("copy", "suppress", "successor")  # into OUT, which the unembedding reads
WRITE_ROLES = {
    "copy": "copying",
    "suppress": "copy_suppression",
    "successor": "successor",
    "zero": "inactive",
}
SPECIALS = ("<bos>", "<eos>", "<pad>", "<unk>")
PUNCTUATION = (".", ",", "?", "!", ";", ":")
WORDS = (
    "the",
    "a",
    "cat",
    "dog",
    "bird",
    "fish",
    "man",
    "woman",
    "child",
    "teacher",
    "house",
    "tree",
    "sees",
    "likes",
    "chases",
    "eats",
    "finds",
    "runs",
    "sleeps",
    "sings",
    "is",
    "was",
    "big",
    "small",
    "red",
    "old",
    "happy",
    "green",
    "and",
    "but",
    "then",
    "he",
    "she",
    "it",
    "they",
    "we",
    "you",
    "in",
    "on",
    "near",
    "with",
    "today",
    "here",
    "there",
    "yes",
    "no",
)
NAMES = ("mary", "john", "anna", "tom", "kate", "paul", "lisa", "mark")
ORDINALS = (  # the sequences a successor head steps along, one token per item
    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10"),
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ),
)
CYCLIC = ("monday", "january")  # sequences whose last item is followed by the first
PLANTED_WORDS = PUNCTUATION + WORDS + NAMES + tuple(w for s in ORDINALS for w in s)


def successor_pairs() -> list[tuple[str, str]]:
    """Every (item, next item) of :data:`ORDINALS`, wrapping where the sequence is cyclic."""
    pairs = []
    for sequence in ORDINALS:
        wrap = (sequence[-1], sequence[0]) if sequence[0] in CYCLIC else None
        pairs += list(zip(sequence, sequence[1:])) + ([wrap] if wrap else [])
    return pairs


N_CTX = 96  # covers the default repeated probes (1 + 2 * 32 tokens) and short sentences


def build_tokenizer(words: Sequence[str] = PUNCTUATION + WORDS) -> Any:
    """A real fast word-level tokenizer over ``SPECIALS + words``; it prepends ``<bos>``.

    Text is lower-cased and split on whitespace and punctuation, so offsets and the
    punctuation flags of :class:`interp.probes.align.Aligner` work as on a BPE tokenizer.
    Unknown words become ``<unk>``.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys(SPECIALS + tuple(words)))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        add_bos_token=True,
    )
    # TransformerLens re-reads a tokenizer from its name_or_path, which an in-memory one lacks:
    # a save / load round trip gives it one; add_bos_token=True tells TL not to reload it.
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        return PreTrainedTokenizerFast.from_pretrained(tmp, add_bos_token=True)


def boot(hf_model: Any, tokenizer: Any, name: str) -> LoadedModel:
    """Wrap a Hugging Face GPT-2 in a TransformerBridge and a LoadedModel (no Hub access)."""
    from transformer_lens.model_bridge import TransformerBridge

    from interp.model.load import _quiet

    with _quiet():
        bridge = TransformerBridge.boot_transformers(
            name, hf_model=hf_model.eval(), tokenizer=tokenizer, device="cpu"
        )
    bridge.eval()
    return from_bridge(bridge, bridge.tokenizer, name)


@dataclass(frozen=True)
class Planted:
    """One planted head: where it looks (``attends``, :data:`ATTENDS`) and what it writes
    (``writes``, :data:`WRITES`), the token map scaled by ``strength``; ``sink``: the share of
    its attention parked on the first position beside a single target."""

    attends: str = "broad"
    writes: str = "constant"
    strength: float = 1.0
    sink: float = 0.0

    @property
    def looks(self) -> str:
        """The catalogue role of its attention (the task attention ``name`` has none: broad over names)."""
        return self.attends

    @property
    def write_role(self) -> str | None:
        """The catalogue role of what it writes; None where that names no role (a constant, or
        the token a later head reads)."""
        return WRITE_ROLES.get(self.writes)

    def label(self) -> str:
        hidden = ("constant", "previous")  # what every planted head of this kind writes anyway
        text = self.attends if self.writes in hidden else f"{self.attends}+{self.writes}"
        return text + (f"~{self.sink:g}" if self.sink else "")


Plan = Mapping[tuple[int, int], "str | Planted"]


def _checked(plan: Plan, n_layers: int, n_heads: int) -> dict[tuple[int, int], Planted]:
    """The plan as Planted heads, each checked (see the module docstring's rules)."""
    heads = {lh: Planted(p) if isinstance(p, str) else p for lh, p in plan.items()}
    for (layer, head), p in heads.items():
        if not isinstance(p, Planted) or p.attends not in ATTENDS:
            raise ValueError(f"role {p!r} cannot be planted; choose from {ATTENDS}")
        if p.writes not in WRITES:
            raise ValueError(f"L{layer}H{head} writes {p.writes!r}; choose from {WRITES}")
        if not 0.0 <= p.sink < 1.0:
            raise ValueError(f"L{layer}H{head}: sink {p.sink} is a share of attention in [0, 1)")
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"head ({layer}, {head}) is outside {n_layers} layers x {n_heads} heads"
            )
        if p.writes in TOKEN_WRITES and layer != n_layers - 1:
            raise ValueError(
                f"L{layer}H{head} writes tokens ({p.writes}): plant it in the last layer, where the "
                f"varying size of its output meets only the final LayerNorm"
            )
        if p.writes in ("previous", "inhibit") and (p.attends not in SINGLE_KEY or p.sink):
            raise ValueError(
                f"L{layer}H{head} writes {p.writes!r}, which later heads read as one token: it must "
                f"attend to one key ({', '.join(SINGLE_KEY)}), with no sink"
            )
    for kind in ("previous", "inhibit"):
        if sum(p.writes == kind for p in heads.values()) > 1:
            raise ValueError(f"plant at most one head that writes {kind!r}")
    return heads


def _complete_plan(
    plan: Plan, n_layers: int, n_heads: int
) -> tuple[dict[tuple[int, int], Planted], tuple[int, int] | None]:
    """Validate the plan; add a supporting previous-token head for induction; pick the PREV writer."""
    heads = _checked(plan, n_layers, n_heads)
    induction_layers = [layer for (layer, _), p in heads.items() if p.attends == "induction"]
    if not induction_layers:
        return heads, next((lh for lh, p in heads.items() if p.writes == "previous"), None)
    first = min(induction_layers)
    if first == 0:
        raise ValueError(
            "an induction head needs a previous-token head in an earlier layer: plant it in layer >= 1"
        )
    writers = sorted(
        lh
        for lh, p in heads.items()
        if p.attends == "previous_token" and p.writes in ("constant", "previous") and lh[0] < first
    )
    if not writers:
        free = [(l, h) for l in range(first) for h in range(n_heads) if (l, h) not in heads]
        if not free:
            raise ValueError(
                f"no free head before layer {first} for the previous-token head induction needs"
            )
        writers = free[:1]
    heads[writers[0]] = replace(heads.get(writers[0], Planted("previous_token")), writes="previous")
    return heads, writers[0]


def truth(plan: Plan, n_layers: int = 2, n_heads: int = 4) -> dict[tuple[int, int], Planted]:
    """Every head of the model ``planted_model(plan, n_layers, n_heads)`` builds, as Planted:
    the plan completed (a previous-token head added for induction), the unplanned heads
    ``Planted("broad", "zero")`` (they attend uniformly and write nothing)."""
    heads, _ = _complete_plan(plan, n_layers, n_heads)
    unplanned = Planted("broad", "zero")
    return {(l, h): heads.get((l, h), unplanned) for l in range(n_layers) for h in range(n_heads)}


def _active(heads: dict[tuple[int, int], Planted], layer: int) -> int:
    """One-hots per position in the residual stream that enters ``layer``: the token, position,
    constant and flag, plus every earlier head's marker and its PREV or INHIB one-hot."""
    earlier = [p for (l, _), p in heads.items() if l < layer and p.writes != "zero"]
    return 4 + len(earlier) + sum(p.writes in ("previous", "inhibit") for p in earlier)


def planted_model(plan: Plan, n_layers: int = 2, n_heads: int = 4, seed: int = 0) -> LoadedModel:
    """A GPT-2 whose planned heads implement their roles exactly (see the module docstring).

    ``plan`` maps (layer, head) to a role of :data:`PLANTABLE` (the head looks there and writes
    its constant) or to a :class:`Planted` head (where it looks and what it writes). Unplanned
    heads attend uniformly and write nothing. Induction heads need layer >= 1; a previous-token
    head is added in an earlier free head when the plan has none. The weights are fully
    determined by the plan; ``seed`` only fixes the (unused) randomness of initialisation, for
    reproducible bookkeeping.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    if n_layers < 1 or n_heads < 1:
        raise ValueError("n_layers and n_heads must be >= 1")
    heads, _ = _complete_plan(plan, n_layers, n_heads)
    tok = build_tokenizer(PLANTED_WORDS)
    vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
    index = {word: t for t, word in enumerate(vocab)}
    successors = {index[a]: index[b] for a, b in successor_pairs()}
    lay = Layout(vocab=len(tok), n_ctx=N_CTX, n_layers=n_layers, n_heads=n_heads)
    d, dh = lay.d_model, lay.d_head
    config = GPT2Config(
        vocab_size=lay.vocab,
        n_positions=lay.n_ctx,
        n_embd=d,
        n_layer=n_layers,
        n_head=n_heads,
        n_inner=4,
        layer_norm_epsilon=1e-12,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        attn_implementation="eager",  # type: ignore[call-arg]  # taken by PretrainedConfig
    )
    with (
        torch.random.fork_rng()
    ):  # the random init is overwritten; seed it without touching the caller's RNG
        torch.manual_seed(seed)
        hf: Any = GPT2LMHeadModel(config)  # its submodules, read by name below
    with torch.no_grad():
        for param in hf.parameters():
            param.zero_()
        wte, wpe = hf.transformer.wte.weight, hf.transformer.wpe.weight
        for t, word in enumerate(vocab):
            wte[t, lay.tok + t] = 1.0
            wte[t, lay.const] = 1.0
            flag = lay.punct if word in PUNCTUATION else lay.name if word in NAMES else lay.plain
            wte[t, flag] = 1.0
            hf.lm_head.weight[t, lay.out + t] = 1.0
        for pos in range(lay.n_ctx):
            wpe[pos, lay.pos + pos] = 1.0
        mirror(wte, lay), mirror(wpe, lay)
        for layer, block in enumerate(hf.transformer.h):
            block.ln_1.weight.fill_(math.sqrt(2 * _active(heads, layer) / d))
            block.ln_2.weight.fill_(1.0)
            w_qkv = block.attn.c_attn.weight  # Conv1D [d_model, 3 * d_model]: x @ W -> q | k | v
            w_o = block.attn.c_proj.weight  # Conv1D [d_model, d_model]: z @ W
            for head in range(n_heads):
                p = heads.get((layer, head), Planted("broad", "zero"))
                col = head * dh
                for q_dims, k_dims, weight in terms(p.attends, lay, p.sink):
                    root = math.sqrt(abs(weight) * math.sqrt(dh))
                    for i, (a, b) in enumerate(zip(q_dims, k_dims)):
                        w_qkv[a, col + i] = root
                        w_qkv[b, d + col + i] = math.copysign(root, weight)
                    col += len(q_dims)
                if p.writes == "zero":
                    continue
                col = head * dh  # value and output columns: the token map, then the marker
                for i, (t, out, weight) in enumerate(
                    token_map(p.writes, p.strength, successors, lay)
                ):
                    w_qkv[lay.tok + t, 2 * d + col + i] = 1.0
                    w_o[col + i, out] = weight
                w_qkv[lay.const, 2 * d + col + dh - 1] = 1.0
                w_o[col + dh - 1, lay.mark + layer * n_heads + head] = 1.0
            mirror(w_o, lay)
        hf.transformer.ln_f.weight.fill_(1.0)
    roles = ",".join(f"L{l}H{h}={p.label()}" for (l, h), p in sorted(heads.items()))
    return boot(hf, tok, f"planted[{roles}]")
