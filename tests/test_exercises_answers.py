"""Answers kept from one notebook to the next: plug_in keeps a passing answer, yours() gives it back re-checked."""

from __future__ import annotations

import linecache

import pytest
import torch

from seqlab.exercises import plug_in, yours
from seqlab.exercises._answers import answers_dir, definitions_of

SOURCE = '''import math

def attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V

def multi_head_attention(X, p, h, mask=None):
    d_k = X.shape[-1] // h
    Q, K, V = X @ p["W_Q"] + p["b_Q"], X @ p["W_K"] + p["b_K"], X @ p["W_V"] + p["b_V"]
    heads = [attention(Q[..., i * d_k:(i + 1) * d_k], K[..., i * d_k:(i + 1) * d_k], V[..., i * d_k:(i + 1) * d_k], mask)
             for i in range(h)]
    return torch.cat(heads, dim=-1) @ p["W_O"] + p["b_O"]{scale}

print("a demo line that is not kept")
'''


def notebook_function(source: str, name: str, cell: int):
    """A function defined as a notebook cell defines it: module __main__, its source in linecache."""
    filename = f"<ipython-input-{cell}-test>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "torch": torch}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@pytest.fixture
def kept(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLAB_ANSWERS", str(tmp_path / "answers"))
    return tmp_path / "answers"


def test_a_passing_answer_is_kept_and_given_back_to_a_later_notebook(kept, capsys):
    fn = notebook_function(SOURCE.format(scale=""), "multi_head_attention", 1)
    assert yours("multi_head_attention").label.startswith("the reference multi_head_attention (none of yours is kept")
    assert plug_in("multi_head_attention", fn).yours
    text = (kept / "multi_head_attention.py").read_text()
    assert "def attention" in text and "a demo line" not in text             # definitions and imports only
    again = yours("multi_head_attention")
    assert again.yours and again.label == "your multi_head_attention from notebook 10"
    capsys.readouterr()
    X = torch.randn(3, 4, dtype=torch.float64)
    p = {k: torch.randn(4, 4, dtype=torch.float64) if k[0] == "W" else torch.zeros(4, dtype=torch.float64)
         for k in ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")}
    assert torch.equal(again.fn(X, p, 2), fn(X, p, 2))
    assert capsys.readouterr().out == ""                                     # the kept code runs no demo


def test_a_failing_answer_is_not_kept_and_a_broken_kept_one_gives_the_reference(kept):
    wrong = notebook_function(SOURCE.format(scale=" * 2"), "multi_head_attention", 2)
    assert not plug_in("multi_head_attention", wrong).passed
    assert not (kept / "multi_head_attention.py").exists()
    kept.mkdir()
    (kept / "multi_head_attention.py").write_text("# multi_head_attention: kept; the function is multi_head_attention\n"
                                                  "def multi_head_attention(X, p, h, mask=None):\n    return X\n")
    assert yours("multi_head_attention").label.endswith("yours kept from notebook 10 no longer passes its check)")
    (kept / "multi_head_attention.py").write_text("# x: kept; the function is multi_head_attention\nthis is not python\n")
    assert not yours("multi_head_attention").yours


def test_library_functions_are_never_kept_and_off_keeps_nothing(kept, monkeypatch):
    from seqlab.exercises.nb12_transformer import layer_norm

    assert plug_in("layer_norm", layer_norm).passed and not kept.exists()
    monkeypatch.setenv("SEQLAB_ANSWERS", "off")
    assert answers_dir() is None
    fn = notebook_function(SOURCE.format(scale=""), "multi_head_attention", 3)
    assert plug_in("multi_head_attention", fn).passed and not kept.exists()
    assert not yours("multi_head_attention").yours


def test_definitions_of_needs_the_functions_own_source():
    assert definitions_of(len) is None
    assert "def multi_head_attention" in definitions_of(notebook_function(SOURCE.format(scale=""), "multi_head_attention", 4))
    with pytest.raises(ValueError, match="judged against a measurement"):
        yours("predict_learns")
