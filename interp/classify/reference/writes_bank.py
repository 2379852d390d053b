"""The write bank: labelled synthetic heads the write classifier is fitted on.

Every bank head is a pair of weights ``W_V`` ``[d_model, d_head]``, ``W_O`` ``[d_head, d_model]``
read through a synthetic vocabulary, and scored by the *same* code as real heads
(:mod:`interp.weights.ov`: copying, the top- and bottom-k self rates, successor hits, against
random Gaussian heads of the same shape as the null) and turned into the same columns
(:func:`interp.classify.writes.write_frames`), so a bank column means exactly what a real one
means.

A bank *model* is a vocabulary: ``N_TOKENS`` ordinary tokens and three ordinal sequences (7,
10 and 12 items), with an embedding ``X`` (Gaussian rows, a shared offset of random
size and log-normal row norms, normalised as a norm sees them, centred or not) and an
unembedding ``Y = B X^T + noise`` (``B`` a random well-conditioned map: the unembedding reads
directions of its own, but the same tokens are told apart; noise 0 to 0.5) whose columns get
log-normal norms (tokens whose logits are large whatever the input); ``d_model`` and ``d_head``
vary across models (64-256 and 8-64).

Heads (``W_V`` Gaussian; ``R = X W_V`` what it reads from each token; ``s`` the component's share
of ``W_O``'s norm beside a Gaussian remainder):

- ``copying``: ``W_O = R^T Y^+``: it writes back what it read, so token t's own logit gets
  ``|r_t|^2`` and another token's ``r_t . r_u`` (Elhage et al.'s copying circuit, as far as its
  rank allows); ``s ~ U(0.45, 1)``;
- ``copy_suppression``: minus that (McDougall et al.'s copy suppression);
- ``successor``: ``W_O = R_a^T Y_b^+`` over the ordinal pairs (a, b): reading an item, it writes
  what raises the next one;
- ``none``: Gaussian heads, the roles above at ``s <= 0.2`` (weak: no role), a constant writer
  (rank 1: it raises the same tokens whatever it reads, which an eigenvalue score alone would
  call copying or its opposite), a low-rank Gaussian head, and a head that writes the
  unembedding's dominant direction.

The gap between ``s`` 0.2 and 0.45 is left empty: labels there would be coin flips. A bank head
and its bank model's null share one vocabulary; the bank's heads of one model stay in one fold
of the temperature fit (``group``).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import torch

from interp.classify.writes import NO_WRITE_ROLE, OV_SCORES, write_frames
from interp.weights import ov

N_TOKENS = 384
ORDINAL_LENGTHS = (7, 10, 12)
TOP_K = 10
N_NULL = 60
STRONG = (0.45, 1.0)
WEAK = (0.0, 0.2)
ROLES = ("copying", "copy_suppression", "successor")


class Vocabulary:
    """One bank model: normalised token inputs ``X`` ``[n, d]``, unembedding ``Y`` ``[d, n]``
    (sampled tokens first, then the ordinal items), and the ordinal sequences."""

    def __init__(self, rng: random.Random, g: torch.Generator) -> None:
        self.d_model = rng.choice((64, 96, 128, 192, 256))
        self.d_head = rng.choice([k for k in (8, 16, 32, 64) if k <= self.d_model // 2])
        d = self.d_model
        self.sequences, start = [], N_TOKENS
        for length in ORDINAL_LENGTHS:
            self.sequences.append(list(range(start, start + length)))
            start += length
        n = start
        x = torch.randn(n, d, generator=g)
        x = x + rng.uniform(0.0, 1.5) * torch.randn(d, generator=g)  # a shared offset
        x = x * torch.exp(rng.uniform(0.0, 0.4) * torch.randn(n, 1, generator=g))
        centres = rng.random() < 0.5
        x = x - x.mean(-1, keepdim=True) if centres else x
        self.x = x / x.pow(2).mean(-1, keepdim=True).sqrt()
        b = torch.linalg.qr(torch.randn(d, d, generator=g))[0] * (
            1 + 0.3 * torch.rand(d, generator=g)
        )
        y = b @ self.x.T + rng.uniform(0.0, 0.5) * torch.randn(d, n, generator=g)
        self.y = y * torch.exp(rng.uniform(0.0, 0.5) * torch.randn(1, n, generator=g))
        self.y_pinv = torch.linalg.pinv(self.y)  # [n, d]
        self.pairs = [(a, b) for seq in self.sequences for a, b in zip(seq, seq[1:])]
        self.next_pinv = torch.linalg.pinv(self.y[:, [b for _, b in self.pairs]])  # [pair, d]
        self.dominant = torch.linalg.svd(self.y, full_matrices=False)[0][:, 0]  # [d]

    @property
    def sample(self) -> torch.Tensor:
        return torch.arange(N_TOKENS)

    def component(self, kind: str, w_v: torch.Tensor) -> torch.Tensor:
        """``W_O`` ``[d_head, d_model]`` of a pure head of ``kind`` reading through ``w_v``."""
        r = self.x @ w_v  # [n, d_head]
        if kind in ("copying", "copy_suppression"):
            sign = 1.0 if kind == "copying" else -1.0
            return sign * r.T @ self.y_pinv
        return r[[a for a, _ in self.pairs]].T @ self.next_pinv

    def scores(self, w_v: torch.Tensor, w_o: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each OV score of the heads ``w_v`` ``[head, d, k]``, ``w_o`` ``[head, k, d]``."""
        reads = torch.einsum("nd,hdk->hnk", self.x, w_v)
        writes = w_o @ self.y
        sample = self.sample
        top, bottom = ov.self_ranks(reads[:, sample], writes[:, :, sample], TOP_K)
        flat = [i for seq in self.sequences for i in seq]
        where = {t: j for j, t in enumerate(flat)}
        return {
            "copying": ov.copying(reads[:, sample], writes[:, :, sample]),
            "copy_rate": top.float().mean(-1),
            "suppression_rate": bottom.float().mean(-1),
            "successor": ov.successor_hits(
                reads[:, flat],
                writes[:, :, flat],
                [[where[t] for t in seq] for seq in self.sequences],
            )
            .float()
            .mean(-1),
        }


def _unit(w: torch.Tensor) -> torch.Tensor:
    return w / w.norm().clamp(min=1e-12)


def _heads(vocab: Vocabulary, rng: random.Random, g: torch.Generator, per_role: int) -> list[dict]:
    """The model's bank heads: dict(w_v, w_o, label, template, strength)."""
    d, k = vocab.d_model, vocab.d_head
    out = []

    def head(w_o_part: torch.Tensor | None, s: float, w_v: torch.Tensor) -> torch.Tensor:
        noise = _unit(torch.randn(k, d, generator=g))
        return noise if w_o_part is None else s * _unit(w_o_part) + (1.0 - s) * noise

    for role in ROLES:
        for strong in [True] * per_role + [False] * max(1, per_role // 3):
            w_v = torch.randn(d, k, generator=g) / math.sqrt(d)
            s = rng.uniform(*(STRONG if strong else WEAK))
            out.append(
                dict(
                    w_v=w_v,
                    w_o=head(vocab.component(role, w_v), s, w_v),
                    label=role if strong else NO_WRITE_ROLE,
                    template=role if strong else f"weak {role}",
                    strength=s,
                )
            )
    for template in ("gaussian", "constant", "low_rank", "dominant") * max(1, per_role // 2):
        w_v = torch.randn(d, k, generator=g) / math.sqrt(d)
        if template == "gaussian":
            w_o = torch.randn(k, d, generator=g)
        elif template == "constant":  # reads one direction, writes one fixed direction
            w_o = torch.randn(k, 1, generator=g) @ torch.randn(1, d, generator=g)
        elif template == "low_rank":
            rank = rng.choice((1, 2, 3))
            w_o = torch.randn(k, rank, generator=g) @ torch.randn(rank, d, generator=g)
        else:  # the unembedding's dominant left singular direction: raises frequent tokens
            w_o = torch.randn(k, 1, generator=g) * vocab.dominant[None]
            w_o = head(w_o, rng.uniform(0.5, 1.0), w_v)
        out.append(
            dict(w_v=w_v, w_o=_unit(w_o), label=NO_WRITE_ROLE, template=template, strength=0.0)
        )
    return out


def _null(vocab: Vocabulary, g: torch.Generator) -> dict[str, torch.Tensor]:
    w_v, w_o = ov.random_heads(N_NULL, vocab.d_model, vocab.d_head, g)
    return vocab.scores(w_v, w_o)


def _table(values: dict[str, torch.Tensor], null: dict[str, torch.Tensor]) -> pd.DataFrame:
    """A weights table (one bank model's heads as layer 0) from scores and their null."""
    rows = []
    for score in OV_SCORES:
        v = values[score].double().numpy()
        draws = null[score].double()
        low, high = (
            float(q) for q in draws.quantile(torch.tensor([0.025, 0.975], dtype=draws.dtype))
        )
        rows.append(
            pd.DataFrame(
                dict(
                    layer=0,
                    head=np.arange(len(v)),
                    score=score,
                    value=v,
                    baseline=float(draws.mean()),
                    null_low=low,
                    null_high=high,
                    ci_low=v,
                    ci_high=v,
                    n=N_TOKENS,
                )
            )
        )
    return pd.concat(rows, ignore_index=True)


def build_write_bank(seed: int = 0, n_models: int = 24, per_role: int = 6) -> pd.DataFrame:
    """The write bank: one row per bank head, the write matrix's columns, ``label``,
    ``template``, ``strength``, ``group`` (its bank model), ``d_model``, ``d_head``."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    frames = []
    for m in range(n_models):
        vocab = Vocabulary(rng, g)
        heads = _heads(vocab, rng, g, per_role)
        with torch.no_grad():
            values = vocab.scores(
                torch.stack([h["w_v"] for h in heads]), torch.stack([h["w_o"] for h in heads])
            )
            null = _null(vocab, g)
        matrix, _ = write_frames(_table(values, null))
        frame = matrix.reset_index(drop=True)
        frame["label"] = [h["label"] for h in heads]
        frame["template"] = [h["template"] for h in heads]
        frame["strength"] = [h["strength"] for h in heads]
        frame["group"] = f"{seed}:{m}"
        frame["d_model"], frame["d_head"] = vocab.d_model, vocab.d_head
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
