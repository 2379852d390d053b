"""Planted models: tiny GPT-2s whose weights are set by hand so that chosen heads do one job exactly.

They are ground truth for the toolkit: a head planted as ``previous_token`` puts all of its
attention on q-1, so :func:`interp.collect.stage.collect` must score it 1.0 on that feature, and a
head left unplanned attends uniformly, so it must score exactly the baseline.

Residual stream
---------------
The first ``F`` dimensions carry features; the next ``F`` hold their negatives (a *mirror*);
any further dimensions are zero. ``V`` is the vocabulary size, ``P`` the context length::

    TOK   [0, V)          one-hot of the token                   (token embedding)
    POS   [V, V+P)        one-hot of the position                (position embedding)
    PREV  [V+P, 2V+P)     one-hot of the previous token          (written by one previous-token head)
    CONST 2V+P            always 1                               (token embedding)
    PUNCT 2V+P+1          1 on punctuation tokens                (token embedding)
    PLAIN 2V+P+2          1 on every other token, so that the squared norm never depends on it

Why the mirror: GPT-2's pre-attention LayerNorm subtracts the mean and divides by the standard
deviation. With the mirror the mean is exactly 0, and the variance is ``2 n / D`` where ``n`` is
the number of active one-hots (4 before the PREV subspace is written, 5 after). Each layer's
``ln_1.weight`` is set to that known standard deviation (and the epsilon to 1e-12), so LayerNorm
is the identity on these streams and queries and keys read the one-hots as they are.

Heads
-----
A query/key *term* pairs residual dimensions one to one through fresh head dimensions and
adds ``weight * x_q[a] * x_k[b]`` to the attention score (GPT-2's ``1/sqrt(d_head)`` is folded
into the weights). Targets score ``SCALE`` (40) and everything else at most 0, so the softmax
puts at most ``n * exp(-40)``, about 1e-16, outside the targets: the planted scores are exact
to float precision. Self-exclusion uses a position term of weight ``-2 * SCALE``.

===================  ================================================================
previous_token       query POS[p] meets key POS[p-1]
current_token        query POS[p] meets key POS[p]
first_token          query CONST meets key POS[0]
delimiter            query CONST meets key PUNCT; minus itself
duplicate_token      query TOK meets key TOK; minus itself
induction            query TOK meets key PREV; minus itself
broad                zero query and key weights: uniform over the visible keys
===================  ================================================================

Unplanned heads have zero query, key, value and output weights: they attend uniformly
(exactly like ``broad``) and write nothing. Only one head writes into the residual stream:
the previous-token head that feeds the induction heads (value TOK, output PREV). When the
plan has induction heads but no previous-token head in an earlier layer, ``planted_model``
plants one in the first free head of layer 0 (or the first earlier layer with a free head).
MLPs are zero, so they write nothing either.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.model.load import LoadedModel, from_bridge

PLANTABLE = (
    "previous_token",
    "current_token",
    "first_token",
    "duplicate_token",
    "induction",
    "delimiter",
    "broad",
)
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
N_CTX = 96  # covers the default repeated probes (1 + 2 * 32 tokens) and short sentences
SCALE = 40.0  # attention logit of a target; exp(-40) leaves ~1e-16 of the mass elsewhere


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
class Layout:
    """Where each feature lives in the residual stream (see the module docstring)."""

    vocab: int
    n_ctx: int
    n_heads: int

    @property
    def tok(self) -> int:
        return 0

    @property
    def pos(self) -> int:
        return self.vocab

    @property
    def prev(self) -> int:
        return self.vocab + self.n_ctx

    @property
    def const(self) -> int:
        return 2 * self.vocab + self.n_ctx

    @property
    def punct(self) -> int:
        return self.const + 1

    @property
    def plain(self) -> int:
        return self.const + 2

    @property
    def n_features(self) -> int:
        return self.const + 3

    @property
    def d_head(self) -> int:
        # room for the widest head (TOK or POS terms plus a self-exclusion POS term), and for the mirror
        return max(self.vocab + self.n_ctx + 1, math.ceil(2 * self.n_features / self.n_heads))

    @property
    def d_model(self) -> int:
        return self.n_heads * self.d_head


def _complete_plan(
    plan: dict[tuple[int, int], str], n_layers: int, n_heads: int
) -> tuple[dict, tuple[int, int] | None]:
    """Validate the plan; add a supporting previous-token head for induction; pick the PREV writer."""
    plan = dict(plan)
    for (layer, head), role in plan.items():
        if role not in PLANTABLE:
            raise ValueError(f"role {role!r} cannot be planted; choose from {PLANTABLE}")
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"head ({layer}, {head}) is outside {n_layers} layers x {n_heads} heads"
            )
    induction_layers = [layer for (layer, _), role in plan.items() if role == "induction"]
    if not induction_layers:
        return plan, None
    first = min(induction_layers)
    if first == 0:
        raise ValueError(
            "an induction head needs a previous-token head in an earlier layer: plant it in layer >= 1"
        )
    writers = sorted(lh for lh, role in plan.items() if role == "previous_token" and lh[0] < first)
    if not writers:
        free = [(l, h) for l in range(first) for h in range(n_heads) if (l, h) not in plan]
        if not free:
            raise ValueError(
                f"no free head before layer {first} for the previous-token head induction needs"
            )
        plan[free[0]] = "previous_token"
        writers = free[:1]
    return plan, writers[0]


def _terms(role: str, lay: Layout) -> list[tuple[list[int], list[int], float]]:
    """(query dims, key dims, weight): score += weight * sum_i x_q[q_i] * x_k[k_i]."""
    p = lay.n_ctx
    pos = list(range(lay.pos, lay.pos + p))
    not_self = (pos, pos, -2 * SCALE)
    if role == "previous_token":
        return [(pos[1:], pos[:-1], SCALE)]
    if role == "current_token":
        return [(pos, pos, SCALE)]
    if role == "first_token":
        return [([lay.const], [lay.pos], SCALE)]
    if role == "delimiter":
        return [([lay.const], [lay.punct], SCALE), not_self]
    tok = list(range(lay.tok, lay.tok + lay.vocab))
    if role == "duplicate_token":
        return [(tok, tok, SCALE), not_self]
    if role == "induction":
        return [(tok, list(range(lay.prev, lay.prev + lay.vocab)), SCALE), not_self]
    return []  # broad


def _mirror(vec: torch.Tensor, lay: Layout) -> torch.Tensor:
    """Copy the feature half of [..., d_model] into the mirror half, negated."""
    f = lay.n_features
    vec[..., f : 2 * f] = -vec[..., :f]
    return vec


def planted_model(
    plan: dict[tuple[int, int], str], n_layers: int = 2, n_heads: int = 4, seed: int = 0
) -> LoadedModel:
    """A GPT-2 whose planned heads implement their roles exactly (see the module docstring).

    ``plan`` maps (layer, head) to a role of :data:`PLANTABLE`. Unplanned heads attend
    uniformly and write nothing. Induction heads need layer >= 1; a previous-token head is added
    in an earlier free head when the plan has none. The weights are fully determined by the plan;
    ``seed`` only fixes the (unused) randomness of initialisation, for reproducible bookkeeping.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    if n_layers < 1 or n_heads < 1:
        raise ValueError("n_layers and n_heads must be >= 1")
    plan, writer = _complete_plan(plan, n_layers, n_heads)
    tok = build_tokenizer()
    lay = Layout(vocab=len(tok), n_ctx=N_CTX, n_heads=n_heads)
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
        attn_implementation="eager",
    )
    with (
        torch.random.fork_rng()
    ):  # the random init is overwritten; seed it without touching the caller's RNG
        torch.manual_seed(seed)
        hf = GPT2LMHeadModel(config)
    punct = [t in PUNCTUATION for t in tok.convert_ids_to_tokens(list(range(lay.vocab)))]
    with torch.no_grad():
        for param in hf.parameters():
            param.zero_()
        wte, wpe = hf.transformer.wte.weight, hf.transformer.wpe.weight
        for t in range(lay.vocab):
            wte[t, lay.tok + t] = 1.0
            wte[t, lay.const] = 1.0
            wte[t, lay.punct if punct[t] else lay.plain] = 1.0
        for p in range(lay.n_ctx):
            wpe[p, lay.pos + p] = 1.0
        _mirror(wte, lay), _mirror(wpe, lay)
        for layer, block in enumerate(hf.transformer.h):
            active = 5 if writer is not None and layer > writer[0] else 4  # one-hots per position
            block.ln_1.weight.fill_(math.sqrt(2 * active / d))
            block.ln_2.weight.fill_(1.0)
            w_qkv = block.attn.c_attn.weight  # Conv1D [d_model, 3 * d_model]: x @ W -> q | k | v
            for head in range(n_heads):
                role = plan.get((layer, head), "broad")
                col = head * dh
                for q_dims, k_dims, weight in _terms(role, lay):
                    root = math.sqrt(abs(weight) * math.sqrt(dh))
                    for i, (a, b) in enumerate(zip(q_dims, k_dims)):
                        w_qkv[a, col + i] = root
                        w_qkv[b, d + col + i] = math.copysign(root, weight)
                    col += len(q_dims)
            if writer is not None and writer[0] == layer:
                col = writer[1] * dh
                w_o = block.attn.c_proj.weight  # Conv1D [d_model, d_model]: z @ W
                for t in range(lay.vocab):
                    w_qkv[lay.tok + t, 2 * d + col + t] = 1.0
                    w_o[col + t, lay.prev + t] = 1.0
                _mirror(w_o, lay)
        hf.transformer.ln_f.weight.fill_(1.0)
    roles = ",".join(f"L{l}H{h}={r}" for (l, h), r in sorted(plan.items()))
    return boot(hf, tok, f"planted[{roles}]")
