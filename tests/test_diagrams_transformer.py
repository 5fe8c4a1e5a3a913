"""The Transformer, GPT-block and KV-cache diagrams: their labels, the code and notebook they describe, alt text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diagram_helpers import assert_legible, close_figures, faded_labels, labels as texts, lit_patches  # noqa: F401
from seqlab.diagrams import Diagram, gpt_block, kv_cache, transformer
from seqlab.models.gpt import GPT, GPTConfig

NOTEBOOKS = {12: Path(__file__).resolve().parent.parent / "notebooks" / "12-transformer-block.ipynb",
             13: Path(__file__).resolve().parent.parent / "notebooks" / "13-transformer-model.ipynb"}


def text_at(diagram: Diagram, start: str) -> float:
    """The height of the one label that starts with ``start``."""
    found = [t.get_position()[1] for t in diagram.figure.axes[0].texts if t.get_text().startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


def lit_artists(diagram: Diagram) -> int:
    return len(lit_patches(diagram))


DIAGRAMS = {"transformer": transformer, "transformer pre-norm": lambda: transformer(norm_first=True),
            "gpt_block": gpt_block, "gpt_block post-norm": lambda: gpt_block(norm_first=False),
            "kv_cache(1)": lambda: kv_cache(step=1), "kv_cache(8)": lambda: kv_cache(step=8)}


@pytest.mark.parametrize("name", DIAGRAMS)
def test_each_diagram_is_opaque_described_and_its_labels_neither_overlap_nor_leave_the_figure(name):
    assert_legible(DIAGRAMS[name]())


def test_the_transformer_has_both_stacks_and_every_part_of_the_paper():
    diagram = transformer()
    labels = " ".join(texts(diagram))
    for part in ("$\\mathrm{MultiHead}(X, X, X)$", "$\\mathrm{MaskedMultiHead}(Y, Y, Y)$",
                 "$\\mathrm{MultiHead}(Y, M, M)$", "memory $M$", "$\\mathrm{FFN}$", "\\sqrt{d_{model}}",
                 "positional\nencoding", "linear", "softmax", "source tokens", "shifted right"):
        assert part in labels, part
    assert texts(diagram).count("$N\\times$") == 2                                # an encoder and a decoder stack
    assert texts(diagram).count("LN") == 2 + 3                                    # one per sublayer
    assert texts(diagram).count("feed-forward\n$\\mathrm{FFN}$") == 2
    assert "final LN" not in labels and lit_artists(diagram) == 0
    assert "post-norm" in diagram.alt and "memory M" in diagram.alt


def test_post_norm_puts_the_ln_after_the_sublayer_and_pre_norm_before_it():
    post, pre = transformer(), transformer(norm_first=True)
    # the decoder's lowest LN: above its masked self-attention in the paper's layout, below it in pre-norm
    post_ln, pre_ln = (min(t.get_position()[1] for t in d.figure.axes[0].texts if t.get_text() == "LN")
                       for d in (post, pre))
    attention = "masked self-attention"
    assert text_at(post, attention) < post_ln and pre_ln < text_at(pre, attention)
    assert texts(pre).count("final LN") == 2 and "pre-norm" in pre.alt and "final LN" in pre.alt


def test_each_section_tag_names_a_section_of_notebook_12_or_13_about_that_part():
    """The tags follow the headings of notebooks 12 and 13: renumber a section and this fails."""
    headings = {}
    for number, path in NOTEBOOKS.items():
        cells = json.loads(path.read_text())["cells"]
        headings.update({(number, int(m.group(1))): m.group(2) for c in cells if c["cell_type"] == "markdown"
                         for m in [re.match(r"## (\d+)\. (.*)", "".join(c["source"]))] if m})
    about = {(12, 2): "LayerNorm", (12, 3): "feed-forward", (12, 4): "encoder", (12, 5): "pre-norm", (13, 1): "decoder",
             (13, 4): "encoder–decoder"}
    tags = {tuple(map(int, m.groups())) for t in texts(transformer(norm_first=True))
            for m in [re.fullmatch(r"(\d+) §(\d+)", t)] if m}
    assert tags == set(about)
    for key, word in about.items():
        assert word.lower() in headings[key].lower(), (key, headings.get(key))


def test_the_gpt_block_draws_what_seqlabs_gpt_builds():
    model = GPT(GPTConfig(vocab_size=10, max_len=8, d_model=8, num_layers=1, nhead=2))
    assert model.blocks[0].norm_first and GPTConfig.__dataclass_fields__["norm_first"].default is True
    assert type(model.norm).__name__ == "LayerNorm" and model.head.weight is model.embed.weight
    diagram = gpt_block()
    labels = " ".join(texts(diagram))
    for part in ("$\\mathrm{LN}_1$", "$\\mathrm{LN}_2$", "masked self-attention", "GELU", "final LN", "E[x]",
                 "learned\npositions $P$", "$X^{(0)} = E[x] + P$", "(tied)",
                 "$X \\leftarrow X + \\mathrm{MaskedMultiHead}(\\mathrm{LN}_1(X))$"):
        assert part in labels, part
    assert "MultiHead(Y, M, M)" not in labels and "cross-attention:" not in labels     # decoder-only
    assert text_at(diagram, "$\\mathrm{LN}_1$") < text_at(diagram, "masked self-attention")   # pre-norm
    assert "pre-norm" in diagram.alt and "no cross-attention" in diagram.alt and lit_artists(diagram) == 0


def test_a_post_norm_gpt_block_has_no_final_ln():
    diagram = gpt_block(norm_first=False)
    assert "final LN" not in texts(diagram) and "post-norm" in diagram.alt
    assert text_at(diagram, "masked self-attention") < text_at(diagram, "$\\mathrm{LN}_1$")


@pytest.mark.parametrize("t", [1, 4, 8])
def test_the_kv_cache_holds_t_rows_of_which_only_the_last_is_new(t):
    diagram = kv_cache(step=t)
    labels = texts(diagram)
    for name in ("k", "v"):
        rows = [s for s in labels if re.fullmatch(f"\\${name}_{{\\d}}\\$", s)]
        assert rows == [f"${name}_{{{i}}}$" for i in range(1, t + 1)]
        assert f"${name}_{{{t}}} = x_{{{t}}} W_{name.upper()}$" in labels          # only the new token is projected
    assert f"$q_{{{t}}} = x_{{{t}}} W_Q$" in labels and f"$K$ cache\n$({t}, d_k)$" in labels
    assert any(f"{t} key" in s for s in labels)
    assert faded_labels(diagram) == t - 1                                           # the tokens not fed again
    assert lit_artists(diagram) >= 6                                # x_t, q_t, k_t, v_t and the two appended rows
    assert f"step {t}" in diagram.alt and f"all {t} cached rows" in diagram.alt and "red" in diagram.alt


@pytest.mark.parametrize("call, message", [
    (lambda: transformer(norm_first="pre"), r"norm_first should be True \(pre-norm\) or False .* got 'pre'"),
    (lambda: gpt_block(norm_first=1), r"norm_first should be True \(pre-norm\) or False \(post-norm\), got 1"),
    (lambda: kv_cache(step=0), "step should be an int from 1 to 8, got 0"),
    (lambda: kv_cache(step=9), "step should be an int from 1 to 8, got 9"),
    (lambda: kv_cache(step=2.0), "step should be an int from 1 to 8, got 2.0"),
    (lambda: kv_cache(step=True), "step should be an int from 1 to 8, got True"),
])
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()
