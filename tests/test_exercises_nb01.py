"""Notebook 01's prediction exercise: the shuffle keeps every character, the checker explains wrong choices."""

from __future__ import annotations

import pytest

from seqlab.exercises import check
from seqlab.exercises.nb01_sequences import measure_word_shuffle, shuffle_words

from exercise_helpers import failure_message


def test_shuffle_keeps_every_character_and_every_line():
    text = "to be or not to be\n  that is the question\n\nwhether 'tis nobler"
    shuffled = shuffle_words(text, seed=3)
    assert sorted(shuffled) == sorted(text) and shuffled != text
    assert [len(line) for line in shuffled.split("\n")] == [len(line) for line in text.split("\n")]
    assert shuffle_words(text, seed=3) == shuffled, "seeded: the same shuffle every time"


def test_measurement_unigram_blind_5gram_not():
    measured = measure_word_shuffle()
    (uni_before, uni_after), (five_before, five_after) = measured["unigram"], measured["5-gram"]
    assert abs(uni_after - uni_before) < 1e-9 * uni_before, "a unigram model cannot see the order"
    assert five_after > 1.2 * five_before, "the 5-gram sees the junctions between words"
    assert check("predict_word_shuffle", lambda: "5-gram")


@pytest.mark.parametrize("wrong, hint", [
    ("unigram", "scores every character on its own"),
    ("both", "scores every character on its own"),
    ("neither", "reads 4 characters back"),
    ("5gram", "answer with one of"),
])
def test_shuffle_prediction_hints(wrong, hint):
    text = failure_message("predict_word_shuffle", lambda: wrong)
    assert hint in text
    if wrong in ("unigram", "both", "neither"):
        assert "measured: unigram" in text, "the hint shows the measurement"
