"""seqlab.ngram: counts, normalisation, hand-computed probabilities, perplexity, sampling, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seqlab.ngram import NGramLM

RNG_TEXT = "".join(np.random.default_rng(0).choice(list("abcde "), size=3000, p=[.3, .2, .2, .1, .1, .1]))


@pytest.mark.parametrize("smoothing", ["kneser-ney", "add-k"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_next_distribution_sums_to_one_for_random_contexts(n, smoothing):
    lm = NGramLM(n, smoothing, k=0.5, vocab=list("abcdefxyz ")).fit(RNG_TEXT)  # x, y, z, f never seen
    rng = np.random.default_rng(1)
    for _ in range(25):
        context = "".join(rng.choice(list("abcdefxyz "), size=int(rng.integers(0, 6))))
        p = lm.next_distribution(context)
        assert p.shape == (10,)
        assert np.all(p > 0), "smoothing leaves every symbol some probability"
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_maximum_likelihood_on_abab_matches_hand_counts():
    # "ababab": bigrams ab x3, ba x2; contexts a x3 (all followed by b), b x2 (followed by a).
    lm = NGramLM(2, "none").fit("ababab")
    assert lm.count("ab") == 3 and lm.count("ba") == 2 and lm.count("aa") == 0
    assert lm.next_distribution("a").tolist() == [0.0, 1.0]
    assert lm.next_distribution("b").tolist() == [1.0, 0.0]
    # First symbol: unigram 3/6; then every step is certain -> p("abab") = 1/2.
    assert lm.log_prob("abab") == pytest.approx(math.log(0.5))
    assert lm.perplexity("abab") == pytest.approx(0.5 ** -0.25)


def test_add_k_matches_hand_computation():
    # "aab": bigrams aa, ab; context a seen twice. V = 2 (a, b).
    lm = NGramLM(2, "add-k", k=1.0).fit("aab")
    assert lm.next_distribution("a") == pytest.approx([(1 + 1) / (2 + 2), (1 + 1) / (2 + 2)])
    assert lm.next_distribution("b") == pytest.approx([0.5, 0.5])  # unseen context -> uniform


def test_kneser_ney_matches_hand_computation():
    # Text "abcab", V = 3, bigram counts: ab 2, bc 1, ca 1. Discount fixed at D = 0.5.
    lm = NGramLM(2, discount=0.5).fit("abcab")
    # Unigram continuation counts N(. w): a after {c} -> 1; b after {a} -> 1; c after {b} -> 1; total 3.
    # p1(w) = max(1 - .5, 0)/3 + .5 * 3/3 * 1/3 = 1/6 + 1/6 = 1/3 for each w.
    p1 = np.full(3, 1 / 3)
    # Context "a": c(a .) = 2 (ab twice), one distinct follower. p(b|a) = 1.5/2 + .5*1/2*p1(b).
    expected_a = 0.5 * 1 / 2 * p1
    expected_a[1] += (2 - 0.5) / 2
    assert lm.next_distribution("a") == pytest.approx(expected_a)
    assert lm.next_distribution("a")[1] == pytest.approx(0.75 + 1 / 12)


def test_uniform_model_has_perplexity_equal_to_vocabulary_size():
    lm = NGramLM(1, "add-k", k=1.0).fit("abcdefgh")  # each symbol once: add-1 is exactly uniform
    assert np.allclose(lm.next_distribution(), 1 / 8)
    assert lm.perplexity("hgfedcbaabba") == pytest.approx(8.0)
    # A character model scoring text whose symbols are all equally likely.
    lm = NGramLM(1).fit("abcd" * 50)
    assert lm.perplexity("dcba" * 10) == pytest.approx(4.0, rel=1e-3)


def test_the_right_order_and_more_data_lower_perplexity():
    pattern = "the cat sat on the mat. "
    val = pattern * 20
    ppl = {n: NGramLM(n).fit(pattern * 50).perplexity(val) for n in (1, 2, 3, 5)}
    assert ppl[1] > ppl[2] > ppl[3] > ppl[5]
    assert ppl[5] < 1.1, "five characters of context make this text almost deterministic"
    # A noisy source: more training data, closer estimates, lower validation perplexity.
    rng = np.random.default_rng(0)
    noisy = "".join(c if rng.random() > 0.1 else rng.choice(list("xyz")) for c in pattern * 400)
    small, large, held_out = noisy[:600], noisy[:8000], noisy[8000:]
    vocab = sorted(set(noisy))
    assert NGramLM(3, vocab=vocab).fit(large).perplexity(held_out) < \
        NGramLM(3, vocab=vocab).fit(small).perplexity(held_out)


def test_context_argument_supplies_history():
    lm = NGramLM(3).fit("abcabcabcabc")
    with_context = lm.log_probs("ca", context="ab")
    alone = lm.log_probs("ca")
    assert with_context[0] > alone[0], "after 'ab', 'c' is near certain; with no history it is not"


def test_word_level_model():
    words = "the dog eats the cat . the cat eats the fish .".split()
    lm = NGramLM(2, "none").fit(words)
    assert lm.vocab == sorted(set(words))
    assert lm.count(["the", "cat"]) == 2
    p = lm.next_distribution(["the"])
    assert p[lm.stoi["cat"]] == pytest.approx(2 / 4) and p[lm.stoi["dog"]] == pytest.approx(1 / 4)
    sample = lm.sample(5, seed=0, prompt=["the"])
    assert isinstance(sample, list) and len(sample) == 5
    with pytest.raises(TypeError, match="list of tokens"):
        lm.perplexity("the cat")


def test_sample_is_seeded_and_follows_the_counts():
    lm = NGramLM(3).fit("abcabcabcabc" * 20)
    assert lm.sample(30, seed=1) == lm.sample(30, seed=1)
    assert lm.sample(30, seed=1, prompt="ab").startswith("cabcabc")
    assert lm.sample(0, seed=1) == ""


def test_errors_are_clear():
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        NGramLM(0)
    with pytest.raises(ValueError, match="smoothing must be one of"):
        NGramLM(2, "laplace")
    with pytest.raises(ValueError, match="needs k > 0"):
        NGramLM(2, "add-k", k=0)
    with pytest.raises(ValueError, match="empty data"):
        NGramLM(2).fit("")
    with pytest.raises(RuntimeError, match="not fitted"):
        NGramLM(2).perplexity("abc")
    lm = NGramLM(2, "none").fit("abab")
    with pytest.raises(ValueError, match="empty text"):
        lm.perplexity("")
    with pytest.raises(ValueError, match=r"'z' \(position 2\), which is not in this model's vocabulary"):
        lm.perplexity("abz")
    with pytest.raises(ValueError, match=r"'aa' at position 1 has probability 0"):
        lm.perplexity("aab")
    with pytest.raises(ValueError, match="exactly n=2"):
        lm.count("aba")
    # With smoothing, an unseen bigram is fine; a symbol outside the vocabulary is still an error.
    assert math.isfinite(NGramLM(2).fit("abab").perplexity("aab"))


# -- the notebook-1 exercise checkers (seqlab.exercises) that build on these ideas ---------------
def test_exercise_checkers_accept_references_and_catch_typical_mistakes():
    from collections import Counter

    from seqlab.exercises import EXERCISES, check, exercises_of

    # notebook 1's own (every exercise's reference is checked in test_exercises.py, once)
    for name, exercise in exercises_of("nb01").items():
        if exercise.measured is None:      # predict-then-measure exercises need a measurement: their own files test them
            assert check(name, exercise.reference), name

    def not_written(*args):
        raise NotImplementedError

    result = check("perplexity", not_written)
    assert not result and "not written yet" in repr(result)
    result = check("perplexity", lambda probs: math.prod(probs) ** (-1 / len(probs)))  # underflows
    assert not result and "underflow" in repr(result) and "check 5 of 5" in repr(result)
    result = check("perplexity", lambda probs: -sum(map(math.log, probs)) / len(probs))
    assert not result and "exponentiate" in repr(result)
    result = check("bigram_counts", lambda t: dict(Counter(t[i:i + 2] for i in range(0, len(t) - 1, 2))))
    assert not result and "overlap" in repr(result)
    result = check("bigram_prob", lambda t, a, b, k, V: (t.count(a + b) + k) / (t.count(a) + k * V))
    assert not result and "context" in repr(result)
    # The library agrees with the exercise's reference for add-k bigram probabilities.
    text = "to be, or not to be"
    lm = NGramLM(2, "add-k", k=0.5).fit(text)
    ref = EXERCISES["bigram_prob"].reference
    assert lm.next_distribution("o")[lm.stoi[" "]] == pytest.approx(ref(text, "o", " ", 0.5, lm.vocab_size))
