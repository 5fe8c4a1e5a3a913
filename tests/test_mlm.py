"""Masked-language-model pieces: BERT's masking recipe (seqlab.data.masking) and BertForMaskedLM (seqlab.models.bert).

The head is checked against transformers' BertForMaskedLM with the same weights (transformers is a
pinned test-only dependency, as in test_minilm.py); the recipe's proportions are checked on 100,000
positions drawn with a fixed generator.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.data import IGNORE_INDEX, MaskedLMBatches, mask_tokens
from seqlab.models.bert import BertConfig, BertEncoder, BertForMaskedLM, convert_hf_state_dict
from seqlab.train import lm_loss

V, MASK = 30, 29                       # ids 0..28 are ordinary tokens (and specials), 29 is [MASK]


def big_batch(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, MASK, (200, 500), generator=torch.Generator().manual_seed(seed))   # 100,000 ids


# -- the masking recipe ----------------------------------------------------------------------------------------
def test_the_proportions_are_berts_15_then_80_10_10():
    ids = big_batch()
    inputs, labels = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(0))
    chosen = labels != IGNORE_INDEX
    share = chosen.float().mean().item()
    assert abs(share - 0.15) < 0.005                                        # 15,000 +- 113 (1 sd) expected
    masked = (inputs[chosen] == MASK).float().mean().item()
    unchanged = (inputs[chosen] == ids[chosen]).float().mean().item()
    replaced = ((inputs[chosen] != MASK) & (inputs[chosen] != ids[chosen])).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    # a random token equals the original 1 time in 28 (28 ordinary ids besides [MASK]): unchanged 0.1 + 0.1/28
    assert abs(unchanged - (0.1 + 0.1 / 28)) < 0.008
    assert abs(replaced - 0.1 * 27 / 28) < 0.008
    assert abs(masked + unchanged + replaced - 1) < 1e-6


def test_labels_keep_only_the_chosen_positions_and_unchosen_inputs_stay():
    ids = big_batch(2)[:20]
    inputs, labels = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(3))
    chosen = labels != IGNORE_INDEX
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])                       # nothing else is corrupted
    assert (inputs[inputs != ids] == MASK).float().mean() > 0.7            # what changed is mostly [MASK]
    assert inputs.dtype == labels.dtype == torch.long and inputs.shape == labels.shape == ids.shape


def test_the_loss_is_on_the_chosen_positions_only():
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=V, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                       max_len=40, dropout=0.0))
    ids = big_batch(4)[:4, :40]
    inputs, labels = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(5))
    chosen = labels != IGNORE_INDEX
    logits = model(inputs)
    expected = F.cross_entropy(logits[chosen], ids[chosen])
    assert torch.allclose(lm_loss(model, (inputs, labels)), expected, atol=1e-6)
    on_all = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
    assert not torch.allclose(on_all, expected, atol=1e-3)                  # the two differ: the choice matters


def test_special_tokens_are_never_chosen_nor_drawn_and_mask_is_never_a_random_token():
    PAD, CLS, SEP = 0, 1, 2
    ids = big_batch(6).clamp(min=3)
    ids[:, 0], ids[:, -1], ids[::2, -50:] = CLS, SEP, PAD                   # [CLS] ... [SEP] and some padding
    inputs, labels = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(7), special_ids=[PAD, CLS, SEP])
    special = (ids == PAD) | (ids == CLS) | (ids == SEP)
    assert (labels[special] == IGNORE_INDEX).all() and torch.equal(inputs[special], ids[special])
    replaced = (inputs != ids) & (inputs != MASK)
    assert replaced.sum() > 500                                             # there are random tokens to look at
    assert not torch.isin(inputs[replaced], torch.tensor([PAD, CLS, SEP, MASK])).any()
    # the share is of the eligible positions
    assert abs((labels != IGNORE_INDEX).float().sum() / (~special).float().sum() - 0.15) < 0.006


def test_the_generator_alone_decides_and_the_global_rng_is_untouched():
    ids = big_batch()[:8]
    state = torch.get_rng_state()
    a = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(11))
    b = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(11))
    c = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(12))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)
    # the positions chosen do not depend on the ids (every draw has the batch's shape)
    other = mask_tokens(torch.zeros_like(ids), MASK, V, torch.Generator().manual_seed(11))
    assert torch.equal(other.labels != IGNORE_INDEX, a.labels != IGNORE_INDEX)


def test_other_shares_and_p():
    ids = big_batch()
    inputs, labels = mask_tokens(ids, MASK, V, torch.Generator().manual_seed(0), p=0.4, mask_share=1.0,
                                 random_share=0.0)
    chosen = labels != IGNORE_INDEX
    assert abs(chosen.float().mean() - 0.4) < 0.01
    assert (inputs[chosen] == MASK).all()
    inputs, labels = mask_tokens(ids[:3], MASK, V, torch.Generator().manual_seed(0), p=1.0)
    assert (labels != IGNORE_INDEX).all()


@pytest.mark.parametrize("kwargs, error, words", [
    ({"ids": torch.zeros(2, 3)}, TypeError, "torch.long tensor of shape (..., n), got torch.float32"),
    ({"ids": torch.tensor(3)}, TypeError, "shape (..., n)"),
    ({"ids": [[1, 2]]}, TypeError, "got list"),
    ({"generator": None}, TypeError, "CPU torch.Generator"),
    ({"mask_id": 30}, ValueError, "mask_id must be an id in 0 .. 29"),
    ({"vocab_size": 1, "mask_id": 0}, ValueError, "vocab_size must be an int >= 2"),
    ({"p": 0.0}, ValueError, "must be in (0, 1], got 0.0"),
    ({"p": 1.5}, ValueError, "got 1.5"),
    ({"ids": torch.tensor([[1, 30]])}, ValueError, "ids must lie in 0 .. 29 (vocab_size=30), got an id of 30"),
    ({"ids": torch.tensor([[-1, 3]])}, ValueError, "got an id of -1"),
    ({"special_ids": [29]}, ValueError, "mask_id=29 is also in special_ids"),
    ({"special_ids": [40]}, ValueError, "special_ids must lie in 0 .. 29"),
    ({"mask_share": 0.95, "random_share": 0.1}, ValueError, "sum <= 1"),
])
def test_bad_arguments_are_named(kwargs, error, words):
    args = {"ids": torch.tensor([[1, 2, 3]]), "mask_id": MASK, "vocab_size": V, "generator": torch.Generator()}
    args.update(kwargs)
    with pytest.raises(error) as info:
        mask_tokens(**args)
    assert words in str(info.value)


def test_masked_lm_batches():
    text_ids = torch.randint(0, MASK, (5_000,), generator=torch.Generator().manual_seed(0))
    batches = MaskedLMBatches(text_ids, 8, 32, mask_id=MASK, vocab_size=V, seed=3)
    first = [b for _, b in zip(range(3), batches)]
    again = [b for _, b in zip(range(3), MaskedLMBatches(text_ids, 8, 32, mask_id=MASK, vocab_size=V, seed=3))]
    for (x, y), (x2, y2) in zip(first, again):
        assert x.shape == y.shape == (8, 32)
        assert torch.equal(x, x2) and torch.equal(y, y2)                    # the same seed, the same batches
    # the windows are the text's: where a label is kept it is the text's id, and the input is the text elsewhere
    windows = text_ids[: len(text_ids) // 32 * 32].view(-1, 32)
    x, y = first[0]
    for row_x, row_y in zip(x, y):
        keep = row_y != IGNORE_INDEX
        match = (windows[:, ~keep] == row_x[~keep]).all(1) & (windows[:, keep] == row_y[keep]).all(1)
        assert match.sum() == 1
    with pytest.raises(ValueError, match="mask_id must be an id"):
        MaskedLMBatches(text_ids, 8, 32, mask_id=V, vocab_size=V)


def test_a_window_gets_a_new_mask_each_epoch():
    text_ids = torch.randint(0, MASK, (8 * 32 + 1,), generator=torch.Generator().manual_seed(0))
    batches = MaskedLMBatches(text_ids, 8, 32, mask_id=MASK, vocab_size=V, shuffle=False)
    (x1, y1), = list(batches)
    (x2, y2), = list(batches)
    assert not torch.equal(y1, y2)


# -- the model ---------------------------------------------------------------------------------------------------
def small_config(**changes) -> BertConfig:
    settings = dict(vocab_size=V, d_model=32, nhead=4, num_layers=2, dim_feedforward=64, max_len=24, dropout=0.0)
    settings.update(changes)
    return BertConfig(**settings)


def test_shapes_and_the_tied_head():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config())
    ids = torch.randint(0, V, (3, 10))
    logits = model(ids)
    assert logits.shape == (3, 10, V)
    assert model.output_weight is model.bert.word_embeddings.weight        # one tensor, not a copy
    names = [n for n, _ in model.named_parameters()]
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in model.bert.parameters()) \
        + 32 * 32 + 32 + 2 * 32 + V                                         # head: W_t, b_t, LN, b_out only
    assert "bert.word_embeddings.weight" in names and not any("decoder" in n for n in names)
    assert model.bert.pooler is None and not model.config.pooler
    # the read-out's gradient reaches the embedding matrix also at ids that are not in the input
    F.cross_entropy(logits.flatten(0, 1), torch.full((30,), V - 1)).backward()
    unused = sorted(set(range(V)) - set(ids.flatten().tolist()))
    assert model.bert.word_embeddings.weight.grad[unused].abs().sum() > 0
    logits, out = model(ids, need_weights=True, output_hidden_states=True)
    assert logits.shape == (3, 10, V) and out.attentions.shape == (2, 3, 4, 10, 10)
    assert out.hidden_states.shape == (3, 3, 10, 32)


def test_initialisation_is_berts_and_starts_near_uniform():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(d_model=64, dim_feedforward=128))
    assert abs(model.bert.word_embeddings.weight.std().item() - 0.02) < 0.002
    assert model.output_bias.abs().max() == 0 and (model.transform_norm.weight == 1).all()
    ids = torch.randint(0, V, (4, 20))
    loss = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).item()
    assert abs(loss - torch.log(torch.tensor(float(V))).item()) < 0.1       # about ln V at step 0


def test_padding_is_not_read():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).eval()
    ids = torch.randint(0, V, (2, 12))
    other = ids.clone()
    other[1, 8:] = 0                                                         # different padding content
    a = model(ids, lengths=[12, 8])
    b = model(other, lengths=[12, 8])
    assert torch.allclose(a[1, :8], b[1, :8], atol=1e-6)


def test_causal_twin_reads_only_the_left_and_the_mlm_reads_both_sides():
    torch.manual_seed(0)
    causal = BertForMaskedLM(small_config(causal=True)).eval()
    torch.manual_seed(0)
    both = BertForMaskedLM(small_config()).eval()
    assert torch.equal(causal.bert.word_embeddings.weight, both.bert.word_embeddings.weight)   # same weights
    ids = torch.randint(0, V, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % V                                # change the right part
    assert torch.allclose(causal(ids)[:, :7], causal(changed)[:, :7], rtol=0, atol=1e-7)
    assert (both(ids)[:, :7] - both(changed)[:, :7]).abs().max() > 1e-5     # small weights (std 0.02), but not 0
    _, out = causal(ids, need_weights=True)
    assert out.attentions[..., torch.ones(12, 12, dtype=torch.bool).triu(1)].abs().max() == 0
    assert "causal" in repr(causal.bert) and "causal" not in repr(both.bert)


def test_bad_input_is_named():
    model = BertForMaskedLM(small_config())
    with pytest.raises(ValueError, match=r"input_ids must lie in 0 \.\. 29"):
        model(torch.tensor([[1, 30]]))
    with pytest.raises(ValueError, match="max_len=24 positions, got a sequence of 25"):
        model(torch.zeros(1, 25, dtype=torch.long))
    with pytest.raises((TypeError, ValueError), match="long"):
        model(torch.zeros(1, 5))


def test_the_head_matches_transformers_bert_for_masked_lm():
    import transformers

    transformers.logging.set_verbosity_error()
    hf_config = transformers.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=24, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12)
    torch.manual_seed(0)
    reference = transformers.BertForMaskedLM(hf_config).eval()
    with torch.no_grad():                          # non-zero biases and gains, so that every term is tested
        for name, p in reference.named_parameters():
            if p.dim() == 1:
                p.normal_(1.0 if name.endswith("LayerNorm.weight") else 0.0, 0.1)
    state = reference.state_dict()
    ours = BertForMaskedLM(small_config())
    head = {"cls.predictions.transform.dense.weight": "transform.weight",
            "cls.predictions.transform.dense.bias": "transform.bias",
            "cls.predictions.transform.LayerNorm.weight": "transform_norm.weight",
            "cls.predictions.transform.LayerNorm.bias": "transform_norm.bias",
            "cls.predictions.bias": "output_bias"}
    converted = {f"bert.{k}": v for k, v in
                 convert_hf_state_dict({k: v for k, v in state.items() if k.startswith("bert.")}).items()}
    converted.update({ours_name: state[name] for name, ours_name in head.items()})
    # their decoder is tied to the word embeddings as ours is; so it carries no weight of its own
    assert torch.equal(state["cls.predictions.decoder.weight"], state["bert.embeddings.word_embeddings.weight"])
    ours.load_state_dict(converted, strict=True)
    ours.eval()
    ids = torch.randint(0, V, (3, 17), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(3, 17, dtype=torch.long)
    mask[1, 12:] = 0
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask).logits
        got = ours(ids, mask)
    real = mask.bool()
    assert (got[real] - expected[real]).abs().max() < 1e-4


def test_the_mlm_learns_to_fill_a_blank_from_the_right():
    # sequences of one token repeated (t t t t t t); a blank at position 0 has only right-hand context, and
    # a short training run must learn to fill it (a left-to-right model has nothing to go on there)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(max_len=6))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        ids = torch.randint(0, MASK, (32, 1), generator=g).expand(32, 6)
        loss = lm_loss(model, mask_tokens(ids, MASK, V, g, p=0.3))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ids = torch.arange(MASK)[:, None].expand(MASK, 6)
    inputs = ids.clone()
    inputs[:, 0] = MASK
    with torch.no_grad():
        accuracy = (model.eval()(inputs)[:, 0].argmax(-1) == ids[:, 0]).float().mean()
    assert accuracy > 0.9


def test_bert_config_default_stays_bidirectional():
    assert BertConfig().causal is False and BertEncoder(small_config()).config.causal is False
