"""Notebook 16 — BERT: predicting what the right side is worth to the MLM, the masking recipe given its random draws,
mean pooling over real tokens, predicting which of two sentence pairs the pretrained MiniLM finds more similar, and
BERT's attention mask built from padding."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seqlab.data.batching import IGNORE_INDEX
from seqlab.data.masking import apply_masking
from seqlab.exercises._core import (Case, Exercise, Measured, as_pair, first_difference, pair_within, randn64,
                                   register, shares_pair, tensor_hint)
from seqlab.experiments.sentence_pairs import PAIR_A, PAIR_B, measure_pair_similarities

MASK_ID = 9                                  # the cases' [MASK]; ordinary tokens are 0..8


# -- 1. the masking recipe, given its draws --------------------------------------------------------------------
def _mask_tokens(ids: Tensor, choose_draw: Tensor, how_draw: Tensor, random_tokens: Tensor, mask_id: int,
                 p: float = 0.15) -> tuple[Tensor, Tensor]:
    inputs, labels = apply_masking(ids, choose_draw, how_draw, random_tokens, mask_id, p)
    return inputs, labels


def _masking_case(seed: int, shape: tuple[int, ...], p: float = 0.15) -> tuple:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, MASK_ID, shape, generator=g)
    choose = torch.rand(shape, generator=g)
    how = torch.rand(shape, generator=g)
    # every kind of chosen position occurs: [MASK], random and unchanged, and no draw sits on a boundary
    chosen = choose.flatten() < p
    slots = torch.nonzero(chosen).flatten()
    how.view(-1)[slots[:3]] = torch.tensor([0.35, 0.85, 0.95])[: len(slots[:3])]
    randoms = (ids + 1 + torch.randint(0, MASK_ID - 1, shape, generator=g)) % MASK_ID   # never the original id
    return ids, choose, how, randoms, MASK_ID, p


def _same_pair(got: Any, expected: tuple[Tensor, Tensor]) -> bool:
    return (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(t, Tensor) for t in got)
            and all(g.shape == e.shape and torch.equal(g.long(), e) for g, e in zip(got, expected)))


def _diagnose_masking(args: tuple, got: Any, expected: tuple[Tensor, Tensor]) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"return two tensors, (inputs, labels); got {type(got).__name__}."
    for name, g, e in zip(("inputs", "labels"), got, expected):
        hint = tensor_hint(g, e)
        if hint:
            return f"{name}: {hint}"
    ids, choose, how, randoms, mask_id, p = args
    inputs, labels = got[0].long(), got[1].long()
    chosen = choose < p
    if not torch.equal(inputs, expected[0]):
        if torch.equal(inputs, torch.where(chosen, torch.full_like(ids, mask_id), ids)):
            return ("every chosen position became [MASK]. BERT's recipe: 80% [MASK] (how_draw < 0.8), 10% a random "
                    "token (0.8 <= how_draw < 0.9), 10% left unchanged.")
        if torch.equal(inputs, torch.where(chosen & (how < 0.8), torch.full_like(ids, mask_id),
                                           torch.where(chosen, randoms, ids))):
            return ("the last 10% of chosen positions (how_draw >= 0.9) must keep their own token; you gave them a "
                    "random one.")
        if torch.equal(inputs, torch.where(choose > p, torch.full_like(ids, mask_id), ids)) or \
                (inputs != ids).float().mean() > 0.5:
            return "a position is chosen when choose_draw < p (15% of them), not the other way round."
        return f"inputs: {first_difference(inputs, expected[0])} (ids {ids.shape}, [MASK] = {mask_id})."
    if torch.equal(labels, ids):
        return ("labels hold every position's id, so the loss would be on all positions; at the 85% not chosen the "
                f"answer is in the input. Set their labels to IGNORE_INDEX ({IGNORE_INDEX}).")
    if torch.equal(labels, torch.where(chosen, inputs, torch.full_like(ids, IGNORE_INDEX))):
        return "the labels are the original ids (what the model must recover), not the corrupted inputs."
    if torch.equal(labels[chosen], ids[chosen]) and not (labels[~chosen] == IGNORE_INDEX).all():
        other = sorted(set(labels[~chosen].tolist()))[:3]
        return (f"the positions not chosen must have the label IGNORE_INDEX ({IGNORE_INDEX}), which cross_entropy "
                f"skips; you gave them {other}.")
    return f"labels: {first_difference(labels, expected[1])}."


register(Exercise(
    name="mask_tokens",
    signature="mask_tokens(ids, choose_draw, how_draw, random_tokens, mask_id, p=0.15) -> (inputs, labels), all "
              "(..., n); chosen where choose_draw < p; of those how_draw < 0.8 -> mask_id, < 0.9 -> random_tokens, "
              "else unchanged; labels: ids where chosen, IGNORE_INDEX elsewhere",
    reference=_mask_tokens,
    cases=[Case(_masking_case(0, (40,)), "one sequence of 40 ids"),
           Case(_masking_case(1, (4, 30)), "a batch of 4 sequences of 30"),
           Case(_masking_case(2, (3, 20), p=0.4), "p = 0.4: more positions chosen")],
    hidden=lambda seed: [Case(_masking_case(seed, (2, 25), p=0.3), "2 sequences of 25 ids, p = 0.3")],
    hint="chosen = choose_draw < p; inputs: [MASK] where chosen & (how_draw < 0.8), random_tokens where chosen & "
         "(0.8 <= how_draw < 0.9); labels = torch.where(chosen, ids, IGNORE_INDEX).",
    diagnose=_diagnose_masking,
    same=_same_pair,
))


# -- 2. mean pooling over the real tokens ----------------------------------------------------------------------
def _mean_pool(last_hidden_state: Tensor, attention_mask: Tensor) -> Tensor:
    from seqlab.minilm import SentenceEncoder

    return SentenceEncoder.mean_pool(last_hidden_state, attention_mask)


def _pool_case(seed: int, lengths: list[int], n: int, d: int) -> tuple[Tensor, Tensor]:
    h = randn64(len(lengths), n, d, seed=seed) + 0.5
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).long()
    h[mask == 0] = 3.0 + randn64(int((mask == 0).sum()), d, seed=seed + 1)   # padding states: far from the rest
    return h, mask


def _diagnose_pool(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    h, mask = args
    real = mask.to(h.dtype)[..., None]
    normalise = torch.nn.functional.normalize
    mean_real = (h * real).sum(1) / real.sum(1)
    candidates = [
        (normalise(h.mean(1), dim=-1), "you averaged the padding in: sum the states of the real tokens only "
                                       "(multiply by the mask) and divide by the number of real tokens."),
        (mean_real, "that is the mean over the real tokens; the published embedding is then divided by its L2 norm "
                    "(torch.nn.functional.normalize(u, dim=-1)), so that a dot product is a cosine."),
        (h.mean(1), "average over the real tokens only, then divide by the L2 norm."),
        (normalise(h[:, 0], dim=-1), "that is the [CLS] token's state (position 0); mean pooling averages over "
                                     "every real token."),
        ((normalise(h, dim=-1) * real).sum(1) / real.sum(1), "normalise after averaging, not each token before."),
    ]
    for wrong, message in candidates:
        if got.shape == wrong.shape and torch.allclose(got.to(wrong.dtype), wrong, atol=1e-8):
            return message
    return None


register(Exercise(
    name="mean_pool",
    signature="mean_pool(last_hidden_state: (B, n, d_model), attention_mask: (B, n) 1 at real tokens, 0 at "
              "padding) -> "
              "(B, d_model): the mean over real tokens, divided by its L2 norm",
    reference=_mean_pool,
    cases=[Case(_pool_case(0, [5], 5, 4), "one sentence, no padding"),
           Case(_pool_case(2, [6, 3], 6, 4), "two sentences, the second with 3 padding positions"),
           Case(_pool_case(4, [2, 7, 4], 7, 8), "three sentences of 2, 7 and 4 tokens, d = 8")],
    hidden=lambda seed: [Case(_pool_case(seed, [3, 1], 5, 6), "two sentences of 3 and 1 tokens, d = 6")],
    hint="real = mask[..., None]; u = (h * real).sum(1) / real.sum(1); return u / u.norm(dim=-1, keepdim=True).",
    diagnose=_diagnose_pool,
    same=lambda got, expected: isinstance(got, Tensor) and got.shape == expected.shape
    and bool(torch.allclose(got.to(expected.dtype), expected, atol=1e-8)),
))


# -- 3. predict, then measure: which pair does MiniLM find more similar? -----------------------------------------
def _more_similar() -> str:
    a, b = measure_pair_similarities()
    return "A" if a > b else "B"


def _diagnose_pair(args: tuple, got: Any, expected: str) -> str | None:
    if not isinstance(got, str) or got.strip().upper() not in ("A", "B"):
        return f"answer with the string 'A' or 'B', not {got!r}."
    a, b = measure_pair_similarities()
    return (f"measured: pair A (a negation, same words) {a:.2f}, pair B (a paraphrase, other words) {b:.2f}. "
            + ("Mean pooling averages mostly the same word vectors, and one 'not' moves the average little."
               if expected == "A" else
               "Trained on paraphrase pairs, MiniLM puts sentences with the same meaning close even when no word "
               "is shared; the negation moves the embedding further than one word suggests."))


register(Exercise(
    name="predict_more_similar",
    signature="predict_more_similar() -> 'A' or 'B': the pair to which MiniLM's embeddings give the higher cosine "
              f"(A = {PAIR_A}, B = {PAIR_B}); checked against a measurement",
    reference=_more_similar,
    cases=[Case((), "pair A (negation) against pair B (paraphrase), MiniLM's cosine")],
    hint="run the model: encoder.encode(list(PAIR_A + PAIR_B)), then the two dot products.",
    diagnose=_diagnose_pair,
    same=lambda got, expected: isinstance(got, str) and got.strip().upper() == expected,
))


# -- 4. predict, then measure: what the right side is worth to the MLM -------------------------------------------
RIGHT_TOLERANCE = 0.08            # eight percentage points each


def _predict_right_context(measured: tuple[float, float]) -> tuple[float, float]:
    return measured                           # the right prediction is the measurement itself


def _diagnose_right_context(args: tuple, got: Any, expected: tuple[float, float]) -> str | None:
    pair = as_pair(got)
    if pair is None:
        return "put two shares in my_prediction: (both sides, left side only), e.g. (0.5, 0.5)."
    if max(pair) > 1 or min(pair) < 0:
        return f"give shares between 0 and 1 (0.5 for 50%), not percentages: you wrote {pair}."
    (both, left), (m_both, m_left) = pair, expected
    told = (f"measured: both sides {m_both:.2f}, left side only {m_left:.2f}; you predicted {both:.2f} and "
            f"{left:.2f}")
    advice = []
    if both <= left < m_both:
        advice.append("you gave the right side no worth; the same 31 characters of context fill clearly more blanks "
                      "when 15 of them lie right of the blank: the MLM was trained to read both sides, and the "
                      "characters just after a blank are as telling as those just before it")
    else:
        if abs(both - m_both) > RIGHT_TOLERANCE:
            advice.append("with both sides the small MLM (400 steps, about 300 targets a step) fills about a third of "
                          "the blanks" if both > m_both else
                          "with both sides it does clearly better than character frequencies (0.15)")
        if abs(left - m_left) > RIGHT_TOLERANCE:
            advice.append("with the left side only, the MLM does little better than character frequencies (0.15): it "
                          "was trained on blanks that nearly always had characters on both sides" if left > m_left
                          else "even with the left side only it beats character frequencies (0.15)")
    return f"{told}. " + "; ".join(advice) + "." if advice else f"{told}."


register(Exercise(
    name="predict_right_context",
    signature="(both_sides, left_only): your prediction of the share of clean held-out blanks the MLM fills right "
              "with 16 characters left and 15 right of the blank, and with the 31 characters before it only "
              "(checked against the notebook's measurement, +-0.08 each)",
    reference=_predict_right_context,
    cases=[Case((), "the MLM's share of blanks filled: both sides, left side only")],
    hint="both conditions give the MLM 31 clean characters; only where they lie differs.",
    diagnose=_diagnose_right_context,
    same=pair_within(RIGHT_TOLERANCE),
    measured=Measured('(fill["MLM, both sides (16 + 15)"]["accuracy"], fill["MLM, left side only (31)"]["accuracy"]), '
                      "the shares of clean blanks the MLM fills right with both sides and with the left side only",
                      "section 3's cell that fills the held-out blanks", shares_pair),
))


# -- 5. BERT's attention mask from padding -----------------------------------------------------------------------
def _bert_attention_mask(input_ids: Tensor, pad_id: int = 0) -> Tensor:
    real = input_ids != pad_id                                     # (B, n): True at real tokens
    n = input_ids.shape[-1]
    return real[:, None, :].expand(-1, n, -1)                      # (B, n, n): query i may read key j iff j is real


def _mask_by_query(input_ids: Tensor, pad_id: int = 0) -> Tensor:
    real = input_ids != pad_id
    return real[:, :, None].expand(-1, -1, input_ids.shape[-1])    # rows: the padding *queries* blocked


def _mask_causal(input_ids: Tensor, pad_id: int = 0) -> Tensor:
    n = input_ids.shape[-1]
    return _bert_attention_mask(input_ids, pad_id) & torch.ones(n, n, dtype=torch.bool).tril()   # GPT's triangle too


# two slips the checker names, as masks notebook 16 runs inside MiniLM (the embedding shows what each does)
MASK_MISTAKES = {"a slip: the padding queries blocked, not the keys": _mask_by_query,
                 "a slip: GPT's causal triangle as well": _mask_causal}


def _ids_case(seed: int, lengths: list[int], n: int, pad_id: int = 0) -> tuple[Tensor, int]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 3000, (len(lengths), n), generator=g)
    ids[torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]] = pad_id
    return ids, pad_id


def _diagnose_attention_mask(args: tuple, got: Any, expected: Tensor) -> str | None:
    ids, pad_id = args
    real = ids != pad_id
    n = ids.shape[-1]
    if isinstance(got, Tensor) and got.shape == real.shape:
        return ("that is the (B, n) mask of real tokens; attention needs one row per query: (B, n, n), where "
                "[b, i, j] says whether query i may read key j (broadcast real[:, None, :]).")
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if got.dtype != torch.bool:
        values = sorted({float(v) for v in got.flatten().tolist()})[:3]
        if any(v == float("-inf") for v in values):
            return ("that is the additive form (0 where allowed, -inf where blocked); return the boolean form here: "
                    "True where query i may read key j.")
        return f"return booleans (True = may attend), not {got.dtype} values {values}."
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    keys = real[:, None, :].expand(-1, n, -1)
    queries = real[:, :, None].expand(-1, -1, n)
    if torch.equal(got, ~keys):
        return ("True must mean 'may attend' (seqlab's convention, and that of scaled_dot_product_attention); you "
                "set it at the padding. torch.nn.MultiheadAttention's key_padding_mask uses that opposite meaning.")
    if torch.equal(got, keys & causal) or torch.equal(got, causal.expand_as(got)):
        return ("BERT's attention is not causal: every token reads the real tokens on its right too. The lower "
                "triangle is GPT's mask.")
    if torch.equal(got, queries):
        return ("you blocked the padding queries (rows) instead of the padding keys (columns): [b, i, j] says whether "
                "query i may read key j, and what no token may read is a padding key.")
    if torch.equal(got, queries & keys):
        return ("padding queries are left with no key at all. BERT blocks only the padding keys: every query, a "
                "padding one too, reads every real token (the padding positions' outputs are ignored later).")
    if pad_id != 0 and torch.equal(got, (ids != 0)[:, None, :].expand(-1, n, -1)):
        return f"use pad_id (here {pad_id}), not a fixed 0, to find the padding."
    if bool(got.all()):
        return "every key may be read, padding included: block the keys that are padding (ids equal to pad_id)."
    return f"{first_difference(got.long(), expected.long())} (1 = may attend)."


register(Exercise(
    name="bert_attention_mask",
    signature="bert_attention_mask(input_ids: (B, n), pad_id=0) -> (B, n, n) booleans, True where query i may read "
              "key j: every query reads every real (non-padding) key",
    reference=_bert_attention_mask,
    cases=[Case(_ids_case(0, [5, 3], 5), "two sentences of 5 and 3 tokens, padded to 5"),
           Case(_ids_case(1, [2, 6, 4], 6), "three sentences of 2, 6 and 4 tokens, padded to 6"),
           Case(_ids_case(2, [4, 1], 4, pad_id=7), "padding id 7 instead of 0")],
    hidden=lambda seed: [Case(_ids_case(seed, [7, 2, 5, 3], 7), "four sentences padded to 7")],
    hint="real = input_ids != pad_id, (B, n); then real[:, None, :].expand(-1, n, -1): the same row for every query.",
    diagnose=_diagnose_attention_mask,
    same=lambda got, expected: isinstance(got, Tensor) and got.shape == expected.shape and got.dtype == torch.bool
    and bool(torch.equal(got, expected)),
))
