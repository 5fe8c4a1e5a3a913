"""The encoder-decoder: pair batches, teacher forcing, greedy decoding and beam search."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from seqlab.data import make_dates
from seqlab.data.pairs import PAIR_SPECIALS, PairBatches, pair_vocabs, teacher_forcing
from seqlab.data.batching import IGNORE_INDEX
from seqlab.decoding import Hypothesis, beam_search
from seqlab.models.seq2seq import (ScheduledSampling, Seq2Seq, Seq2SeqConfig, decode_feeding, error_by_position,
                                   linear_schedule, seq2seq_loss, wrong_by_position)
from seqlab.train import train

# -- data -----------------------------------------------------------------------------------------

def test_pair_vocabs_put_the_specials_first():
    source, target = pair_vocabs([("3 May 1998", "1998-05-03"), ("May 4, 2001", "2001-05-04")])
    assert source.itos[:3] == target.itos[:3] == list(PAIR_SPECIALS)
    assert set(target.itos[3:]) == set("0123456789-") - {"6", "7"}
    with pytest.raises(ValueError, match="at least one"):
        pair_vocabs([])


def test_teacher_forcing_shifts_the_target_behind_bos():
    decoder_in, decoder_out = teacher_forcing(torch.tensor([7, 8, 9]), bos_id=1, eos_id=2)
    assert decoder_in.tolist() == [1, 7, 8, 9] and decoder_out.tolist() == [7, 8, 9, 2]
    with pytest.raises(ValueError, match=r"1-D tensor of target ids, got \(1, 3\)"):
        teacher_forcing(torch.tensor([[7, 8, 9]]), 1, 2)


def test_pair_batches_pad_sources_and_targets():
    pairs = [(torch.tensor([5, 6, 7]), torch.tensor([3, 4])), (torch.tensor([5]), torch.tensor([3, 4, 5, 6]))]
    (src, src_lengths, tgt_in, tgt_out), = list(PairBatches(pairs, 2, shuffle=False))
    assert src.tolist() == [[5, 6, 7], [5, 0, 0]] and src_lengths.tolist() == [3, 1]
    assert tgt_in.tolist() == [[1, 3, 4, 0, 0], [1, 3, 4, 5, 6]]
    assert tgt_out.tolist() == [[3, 4, 2, IGNORE_INDEX, IGNORE_INDEX], [3, 4, 5, 6, 2]]


def test_pair_batches_shuffle_by_seed_and_cover_every_pair_once():
    pairs = [(torch.tensor([i + 3]), torch.tensor([i + 3])) for i in range(10)]
    first = [b[0][:, 0].tolist() for b in PairBatches(pairs, 4, seed=1)]
    again = [b[0][:, 0].tolist() for b in PairBatches(pairs, 4, seed=1)]
    assert first == again and sorted(sum(first, [])) == list(range(3, 13)) and first[0] != [3, 4, 5, 6]


def test_pair_batches_errors_name_the_example():
    with pytest.raises(ValueError, match=r"example 1: target must be a non-empty 1-D torch.long tensor, got "
                                         r"torch.float32"):
        PairBatches([(torch.tensor([3]), torch.tensor([3])), (torch.tensor([3]), torch.tensor([1.0]))], 2)
    with pytest.raises(ValueError, match=r"example 0: expected a pair \(source ids, target ids\), got Tensor"):
        PairBatches([torch.tensor([3, 4, 5])], 2)


# -- beam search -----------------------------------------------------------------------------------

V, EOS, BOS = 4, 0, 3          # a toy decoder over tokens 0..3 (0 is <eos>), no real network


def markov_step(table: torch.Tensor):
    """A decoder whose next-token distribution depends on the last token only: log p = table[last]."""
    def step(tokens, state):
        return table[tokens], state + 1                                   # state counts steps, shape (1, n, 1)
    return step


def random_table(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.log_softmax(2.0 * torch.randn(V, V, generator=g), dim=-1)


def all_outputs(table: torch.Tensor, max_len: int) -> list[Hypothesis]:
    """Every output of at most max_len steps, by brute force."""
    outputs = []
    for length in range(max_len):
        for tokens in itertools.product(range(1, V), repeat=length):
            path = (BOS, *tokens, EOS)
            outputs.append(Hypothesis(tokens, sum(float(table[a, b]) for a, b in zip(path, path[1:])), True))
    return outputs


@pytest.mark.parametrize("seed", range(5))
def test_a_wide_beam_finds_the_most_probable_output(seed):
    table = random_table(seed)
    best = max(all_outputs(table, 5), key=lambda h: h.log_prob)
    found = beam_search(markov_step(table), torch.zeros(1, 1, 1), bos_id=BOS, eos_id=EOS, beam_size=V ** 4, max_len=5)
    assert found[0].finished and found[0].tokens == best.tokens
    assert found[0].log_prob == pytest.approx(best.log_prob, abs=1e-5)
    # complete outputs first, best first; then those cut off at max_len
    flags = [h.finished for h in found]
    assert flags == sorted(flags, reverse=True)
    scores = [h.log_prob for h in found if h.finished]
    assert scores == sorted(scores, reverse=True)


def test_beam_beats_greedy_where_the_likeliest_first_token_leads_nowhere():
    # after <bos>: token 1 (p = 0.6) or token 2 (0.4); after 1 nothing is likely (<eos> 0.3 at best),
    # after 2 <eos> is sure
    p = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.3, 0.7 / 3, 0.7 / 3, 0.7 / 3], [1.0, 1e-9, 1e-9, 1e-9],
                      [1e-9, 0.6, 0.4, 1e-9]])
    table = (p / p.sum(1, keepdim=True)).log()
    greedy, = beam_search(markov_step(table), torch.zeros(1, 1, 1), bos_id=BOS, eos_id=EOS, beam_size=1, max_len=5)
    beam = beam_search(markov_step(table), torch.zeros(1, 1, 1), bos_id=BOS, eos_id=EOS, beam_size=2, max_len=5)
    assert greedy.tokens == (1,) and greedy.log_prob == pytest.approx(math.log(0.6 * 0.3), abs=1e-6)
    assert beam[0].tokens == (2,) and beam[0].log_prob == pytest.approx(math.log(0.4), abs=1e-6)


def test_beam_search_reorders_the_state_with_its_hypotheses():
    table = random_table(0)
    seen = []

    def step(tokens, state):          # state carries each hypothesis's own token history
        assert state.shape == (1, len(tokens), 6)
        seen.append(state.clone())
        history = state.roll(-1, dims=2)
        history[0, :, -1] = tokens.float()
        return table[tokens], history

    hyps = beam_search(step, torch.full((1, 1, 6), -1.0), bos_id=BOS, eos_id=EOS, beam_size=3, max_len=5)
    final = seen[-1]
    for row in range(final.shape[1]):   # every row's history is a real prefix: <bos> first, then tokens
        history = [int(v) for v in final[0, row] if v >= 0]
        assert history[0] == BOS and all(1 <= t < V for t in history[1:])
    assert all(h.finished for h in hyps)


def test_beam_search_errors_and_length_penalty():
    table = random_table(1)
    with pytest.raises(ValueError, match="beam_size must be at least 1, got 0"):
        beam_search(markov_step(table), torch.zeros(1, 1, 1), bos_id=BOS, eos_id=EOS, beam_size=0)
    with pytest.raises(ValueError, match=r"step must return log-probabilities of shape \(n, V\) = \(1, V\), got \(4,\)"):
        beam_search(lambda t, s: (table[0], s), torch.zeros(1, 1, 1), bos_id=BOS, eos_id=EOS)
    h = Hypothesis((5, 6, 7), -6.0, True)
    assert h.score(0.0) == -6.0 and h.score(1.0) == pytest.approx(-1.5)


# -- the model --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dates():
    pairs = make_dates(3000, seed=0)
    source, target = pair_vocabs([(p.source, p.target) for p in pairs])
    encoded = [(source.encode(p.source), target.encode(p.target)) for p in pairs]
    return pairs, source, target, encoded


@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
def test_forward_shapes_and_loss_ignore_padding(dates, cell):
    _, source, target, encoded = dates
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), cell=cell, hidden_size=16, embed_size=8))
    src, src_lengths, tgt_in, tgt_out = next(iter(PairBatches(encoded[:8], 8, shuffle=False)))
    logits = model(src, src_lengths, tgt_in)
    assert logits.shape == (8, tgt_in.shape[1], len(target))
    # the loss of the batch is the mean over the real positions of each sequence's own loss
    per_sequence = [F.cross_entropy(model(src[b:b + 1, :int(src_lengths[b])], None, tgt_in[b:b + 1])[0],
                                    tgt_out[b], ignore_index=IGNORE_INDEX, reduction="sum") for b in range(8)]
    real = (tgt_out != IGNORE_INDEX).sum()
    assert seq2seq_loss(model, (src, src_lengths, tgt_in, tgt_out)).item() == pytest.approx(
        (sum(per_sequence) / real).item(), abs=1e-5)


def test_padding_does_not_change_a_translation(dates):
    _, source, target, encoded = dates
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), hidden_size=16, embed_size=8)).eval()
    src, src_lengths, _, _ = next(iter(PairBatches(encoded[:16], 16, shuffle=False)))
    batched = model.greedy(src, src_lengths, max_len=12)
    alone = [model.greedy(src[b:b + 1, :int(src_lengths[b])], max_len=12)[0] for b in range(16)]
    assert all(torch.equal(a, b) for a, b in zip(batched, alone))


def test_trained_model_reverses_and_beam_agrees_with_log_prob():
    g = torch.Generator().manual_seed(0)
    pairs = []
    for _ in range(3000):                         # reverse 2..5 digits (ids 3..12): quick to learn
        source = torch.randint(3, 13, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g)
        pairs.append((source, source.flip(0)))
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(13, 13, hidden_size=64, embed_size=16))
    train(model, PairBatches(pairs[:2500], 64, seed=0), seq2seq_loss, max_steps=300, lr=1e-2,
          progress=False, seed=0)
    model.eval()
    src, src_lengths, _, _ = next(iter(PairBatches(pairs[2500:], 500, shuffle=False)))
    outputs = model.greedy(src, src_lengths, max_len=8)
    correct = sum(torch.equal(o, target) for o, (_, target) in zip(outputs, pairs[2500:]))
    assert correct / 500 > 0.8, correct          # 436 of 500 when written
    for source, _ in pairs[2500:2510]:
        hyps = model.beam(source, beam_size=3, max_len=8)
        assert len(hyps) == 3 and all(h.finished for h in hyps)
        for h in hyps:   # the search's running score is the model's own log-probability of the output
            assert h.log_prob == pytest.approx(model.log_prob(source, torch.tensor(h.tokens)), abs=1e-4)
        greedy, = model.greedy(source[None], max_len=8)
        assert hyps[0].log_prob >= model.log_prob(source, greedy) - 1e-5


def test_model_errors_are_clear(dates):
    _, source, target, _ = dates
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), hidden_size=8, embed_size=4))
    with pytest.raises(ValueError, match=r"Encoder expects ids of shape \(B, T\) and dtype torch.long, got "
                                         r"torch.float32 tensor of shape \(2, 5\)"):
        model(torch.zeros(2, 5), None, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"same number of sequences, got 2 and 3"):
        model(torch.ones(2, 5, dtype=torch.long), None, torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"beam translates one source: expected ids of shape \(S,\), got \(1, 5\)"):
        model.beam(torch.ones(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"seq2seq_loss expects batches \(src, src_lengths, tgt_in, tgt_out\)"):
        seq2seq_loss(model, (torch.ones(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)))


# -- exposure bias: decoding that feeds the decoder its own choices, and scheduled sampling ------------

@pytest.mark.parametrize("attention", [None, "dot"])
def test_decode_feeding_is_teacher_forcing_at_0_and_greedy_decoding_at_1(dates, attention):
    _, source, target, encoded = dates
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), hidden_size=16, embed_size=8, attention=attention)).eval()
    src, src_lengths, tgt_in, tgt_out = next(iter(PairBatches(encoded[:12], 12, shuffle=False)))
    with torch.no_grad():
        assert torch.allclose(decode_feeding(model, src, src_lengths, tgt_in, feed_own=0.0),
                              model(src, src_lengths, tgt_in), atol=1e-6)
        own = decode_feeding(model, src, src_lengths, tgt_in, feed_own=1.0).argmax(dim=-1)     # (B, T)
        greedy = model.greedy(src, src_lengths, max_len=tgt_in.shape[1])
    for row, written in zip(own, greedy):       # the same tokens up to greedy's <eos> (greedy cuts it off)
        assert torch.equal(row[:len(written)], written)


def test_wrong_by_position_counts_each_pair_at_its_own_positions():
    # a "model" whose decoder always writes token 3: right exactly where the target holds a 3
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(6, 6, hidden_size=4, embed_size=2))
    with torch.no_grad():
        model.decoder.head.weight.zero_()
        model.decoder.head.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 5.0, 0.0, 0.0]))
    pairs = [(torch.tensor([4, 5]), torch.tensor([3, 4, 3])), (torch.tensor([5]), torch.tensor([3]))]
    for free_running in (False, True):
        wrong, real = wrong_by_position(model, pairs, free_running=free_running)
        assert real.tolist() == [[True] * 4, [True, True, False, False]]
        assert wrong.tolist() == [[False, True, False, True], [False, True, False, False]]   # <eos> is never a 3
        assert error_by_position(model, pairs, free_running=free_running).tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="at least one"):
        wrong_by_position(model, [], free_running=True)


def test_scheduled_sampling_loss_follows_its_schedule_and_its_own_generator(dates):
    _, source, target, encoded = dates
    batch = next(iter(PairBatches(encoded[:16], 16, shuffle=False)))
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), hidden_size=16, embed_size=8))
    never = ScheduledSampling(lambda step: 0.0)
    assert never(model, batch).item() == pytest.approx(seq2seq_loss(model, batch).item(), abs=1e-6)
    ramp = linear_schedule(0.5, 4)
    assert [ramp(step) for step in (0, 2, 4, 9)] == [0.0, 0.25, 0.5, 0.5]
    state = torch.get_rng_state()
    losses = []
    for _ in range(2):                                  # the same seed draws the same inputs
        loss_fn = ScheduledSampling(lambda step: 0.5, seed=3)
        losses.append([loss_fn(model, batch).item() for _ in range(3)])
        assert loss_fn.calls == 3 and loss_fn.probabilities == [0.5] * 3
    assert losses[0] == losses[1] and len(set(losses[0])) > 1    # and different draws at each call
    assert torch.equal(state, torch.get_rng_state())               # torch's global generator untouched
    always = ScheduledSampling(lambda step: 1.0)
    with torch.no_grad():
        free = decode_feeding(model, batch[0], batch[1], batch[2], feed_own=1.0)
    expected = F.cross_entropy(free.reshape(-1, free.shape[-1]), batch[3].reshape(-1), ignore_index=IGNORE_INDEX)
    assert always(model, batch).item() == pytest.approx(expected.item(), abs=1e-6)
    model.eval()                                        # evaluation: teacher forcing, and no step counted
    assert always(model, batch).item() == pytest.approx(seq2seq_loss(model, batch).item(), abs=1e-6)
    assert always.calls == 1


def test_scheduled_sampling_trains_and_errors_are_clear(dates):
    _, source, target, encoded = dates
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(len(source), len(target), hidden_size=16, embed_size=8))
    loss_fn = ScheduledSampling(linear_schedule(0.25, 20))
    history = train(model, PairBatches(encoded, 32, seed=0), loss_fn, max_steps=30, lr=1e-2, progress=False, seed=0)
    assert loss_fn.calls == 30 and loss_fn.probabilities[-1] == 0.25 and loss_fn.probabilities[0] == 0.0
    assert np_mean(history.train_loss[-5:]) < history.train_loss[0]
    src, src_lengths, tgt_in, _ = next(iter(PairBatches(encoded[:2], 2, shuffle=False)))
    with pytest.raises(ValueError, match=r"feed_own is a probability, in \[0, 1\]; got 1.5"):
        decode_feeding(model, src, src_lengths, tgt_in, feed_own=1.5)
    with pytest.raises(ValueError, match="same number of sequences, got 2 and 1"):
        decode_feeding(model, src, src_lengths, tgt_in[:1], feed_own=0.5)
    with pytest.raises(ValueError, match="final is a probability"):
        linear_schedule(2.0, 10)
    with pytest.raises(ValueError, match="ScheduledSampling expects batches"):
        loss_fn(model, (src, src_lengths))


def np_mean(values):
    return sum(values) / len(values)


def test_cut_at_eos_keeps_each_row_up_to_its_first_eos_and_a_row_without_one_whole():
    from seqlab.decoding import cut_at_eos

    written = torch.tensor([[5, 2, 7, 2], [6, 6, 6, 6], [2, 9, 9, 9]])          # eos_id = 2
    assert [row.tolist() for row in cut_at_eos(written, 2)] == [[5], [6, 6, 6, 6], []]
