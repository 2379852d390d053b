"""Where planted models keep each feature in the residual stream, and how a head's weights read and
write them (interp.synthetic.planted builds the models; this module is their wiring).

Residual stream
---------------
The first ``F`` dimensions carry features; the next ``F`` hold their negatives (a *mirror*);
any further dimensions are zero. ``V`` is the vocabulary size, ``P`` the context length,
``L x H`` the heads::

    TOK    [0, V)            one-hot of the token                      (token embedding)
    POS    [V, V+P)          one-hot of the position                   (position embedding)
    PREV   [V+P, 2V+P)       one-hot of the previous token             (written by one previous-token head)
    INHIB  [2V+P, 3V+P)      one-hot of the token an inhibitor marks   (written by one inhibitor head)
    OUT    [3V+P, 4V+P)      what the heads say about the next token   (the only part the unembedding reads)
    MARK   [4V+P, 4V+P+LH)   one dimension per head, its constant      (written by every head that writes)
    CONST  4V+P+LH           always 1                                  (token embedding)
    PUNCT, PLAIN, NAME       1 on punctuation, on a name of NAMES, on every other token (exactly one of them)

Why the mirror: GPT-2's pre-attention LayerNorm subtracts the mean and divides by the standard
deviation. With the mirror the mean is exactly 0, and the variance is ``2 n / D`` where ``n`` is
the number of active one-hots (4 from the embeddings, plus one per marker, PREV and INHIB written
by an earlier layer). Each layer's ``ln_1.weight`` is set to that known standard deviation (and
the epsilon to 1e-12), so LayerNorm is the identity on these streams and queries and keys read
the one-hots as they are. The unembedding (untied from the embedding) reads OUT alone: a token's
logit is what the heads wrote for it.

Where a head looks
------------------
A query/key *term* pairs residual dimensions one to one through fresh head dimensions and
adds ``weight * x_q[a] * x_k[b]`` to the attention score (GPT-2's ``1/sqrt(d_head)`` is folded
into the weights). Targets score ``SCALE`` (40) and everything else at most 0, so the softmax
puts at most ``n * exp(-40)``, about 1e-16, outside the targets: the planted scores are exact
to float precision. Self-exclusion uses a position term of weight ``-2 * SCALE``. A head planted
with a ``sink`` adds a first-position term that takes that share beside a single target.

===================  ================================================================
previous_token       query POS[p] meets key POS[p-1]
current_token        query POS[p] meets key POS[p]
first_token          query CONST meets key POS[0]
delimiter            query CONST meets key PUNCT; minus itself
duplicate_token      query TOK meets key TOK; minus itself
induction            query TOK meets key PREV; minus itself
broad                zero query and key weights: uniform over the visible keys
name                 query CONST meets key NAME; minus query INHIB[t] meeting key TOK[t]
                     (twice): the names no inhibitor marked (a task's mover,
                     interp.synthetic.circuit)
===================  ================================================================

What a head writes
------------------
A head's value reads the token (TOK) or CONST, and its output writes, with the mirror:

===================  ================================================================
constant             CONST into its MARK dimension: it writes, but nothing about tokens
                     (every plain role of :data:`interp.synthetic.planted.PLANTABLE` planted by name)
copy                 TOK[t] -> OUT[t] (OV = +identity through embedding and unembedding)
suppress             TOK[t] -> -OUT[t] (OV = -identity: copy suppression)
successor            TOK[t] -> OUT[next(t)] along each sequence of :data:`interp.synthetic.planted.ORDINALS`
zero                 nothing: the head attends and writes nothing (unplanned heads too)
previous             TOK[t] -> PREV[t] (what induction heads read)
inhibit              TOK[t] -> INHIB[t] (what a ``name`` head's queries read: Q-composition)
===================  ================================================================

``strength`` scales the token map; every head that writes also writes its constant marker, so
that a successor head reading a word with no successor still writes something. Heads that
write tokens into OUT sit in the last layer: the size of their output varies with where they
look, which the exact LayerNorm of a later layer could not absorb; PREV and INHIB writers look
at one key per query, so theirs is always one one-hot. MLPs are zero, so they write nothing.

"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SCALE = 40.0  # attention logit of a target; exp(-40) leaves ~1e-16 of the mass elsewhere


@dataclass(frozen=True)
class Layout:
    """Where each feature lives in the residual stream (see the module docstring)."""

    vocab: int
    n_ctx: int
    n_layers: int
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
    def inhib(self) -> int:
        return 2 * self.vocab + self.n_ctx

    @property
    def out(self) -> int:
        return 3 * self.vocab + self.n_ctx

    @property
    def mark(self) -> int:
        return 4 * self.vocab + self.n_ctx

    @property
    def const(self) -> int:
        return self.mark + self.n_layers * self.n_heads

    @property
    def punct(self) -> int:
        return self.const + 1

    @property
    def plain(self) -> int:
        return self.const + 2

    @property
    def name(self) -> int:
        return self.const + 3

    @property
    def n_features(self) -> int:
        return self.const + 4

    @property
    def d_head(self) -> int:
        # room for the widest head (TOK or POS terms plus a self-exclusion POS term), and for the mirror
        return max(self.vocab + self.n_ctx + 1, math.ceil(2 * self.n_features / self.n_heads))

    @property
    def d_model(self) -> int:
        return self.n_heads * self.d_head

    def span(self, start: int) -> list[int]:
        """The ``vocab`` dimensions of a token subspace that starts at ``start``."""
        return list(range(start, start + self.vocab))


def terms(role: str, lay: Layout, sink: float = 0.0) -> list[tuple[list[int], list[int], float]]:
    """(query dims, key dims, weight): score += weight * sum_i x_q[q_i] * x_k[k_i]. ``sink``: the
    share of attention the first position takes beside a query's one target (its score
    ``SCALE + log(sink / (1 - sink))``); with several targets they share the rest."""
    pos = list(range(lay.pos, lay.pos + lay.n_ctx))
    not_self = (pos, pos, -2 * SCALE)
    tok = lay.span(lay.tok)
    terms = {
        "previous_token": [(pos[1:], pos[:-1], SCALE)],
        "current_token": [(pos, pos, SCALE)],
        "first_token": [([lay.const], [lay.pos], SCALE)],
        "delimiter": [([lay.const], [lay.punct], SCALE), not_self],
        "duplicate_token": [(tok, tok, SCALE), not_self],
        "induction": [(tok, lay.span(lay.prev), SCALE), not_self],
        # a name no inhibitor has written: every name scores SCALE, a marked one -SCALE
        "name": [([lay.const], [lay.name], SCALE), (lay.span(lay.inhib), tok, -2 * SCALE)],
    }
    found = terms.get(role, [])  # broad: zero query and key weights
    if sink > 0:
        found = found + [([lay.const], [lay.pos], SCALE + math.log(sink / (1.0 - sink)))]
    return found


def token_map(
    writes: str, strength: float, successors: dict[int, int], lay: Layout
) -> list[tuple[int, int, float]]:
    """(token read, residual dimension written, weight) of a head's value -> output map;
    ``successors``: token -> the next token of its ordinal sequence."""
    if writes in ("previous", "inhibit"):
        start = lay.prev if writes == "previous" else lay.inhib
        return [(t, start + t, 1.0) for t in range(lay.vocab)]
    sign = {"copy": 1.0, "suppress": -1.0}.get(writes)
    if sign is not None:
        return [(t, lay.out + t, sign * strength) for t in range(lay.vocab)]
    if writes == "successor":
        return [(a, lay.out + b, strength) for a, b in successors.items()]
    return []  # constant, zero


def mirror(vec: torch.Tensor, lay: Layout) -> torch.Tensor:
    """Copy the feature half of [..., d_model] into the mirror half, negated."""
    f = lay.n_features
    vec[..., f : 2 * f] = -vec[..., :f]
    return vec
