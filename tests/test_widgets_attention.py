"""seqlab.widgets.attention: the weights shown are the model's own, the head summaries name known
patterns, the figure shows the chosen view readably, and the explorer's controls redraw it."""

from __future__ import annotations

import io

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from seqlab.widgets import PNGFigure  # noqa: E402
from seqlab.widgets.attention import (AttentionExplorer, AttentionMap, AttentionPlot, attention_from_model,  # noqa: E402
                                      attention_map, describe_view, draw_attention, summarize_head, top_attended)

SRC = "the cat sat on the mat <eos>".split()
TGT = "<bos> die katze sass auf".split()


def _softmax(x: np.ndarray, causal: bool = False) -> np.ndarray:
    if causal:
        n, m = x.shape[-2:]
        x = np.where(np.tril(np.ones((n, m), dtype=bool), m - n), x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _transformer_weights(batch: int = 2, layers: int = 2, heads: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    """What seqlab's Transformer(need_weights=True) returns: batch-first, per head, per layer."""
    rng = np.random.default_rng(seed)
    S, T = len(SRC), len(TGT)
    return {"encoder": torch.tensor(_softmax(2 * rng.normal(size=(layers, batch, heads, S, S))), dtype=torch.float32),
            "decoder_self": torch.tensor(_softmax(2 * rng.normal(size=(layers, batch, heads, T, T)), causal=True),
                                         dtype=torch.float32),
            "cross": torch.tensor(_softmax(2 * rng.normal(size=(layers, batch, heads, T, S))), dtype=torch.float32)}


@pytest.fixture(scope="module")
def maps() -> dict[str, AttentionMap]:
    return attention_from_model(_transformer_weights(), SRC, TGT, index=1)


# -- compute: building and checking maps ----------------------------------------------------------------

def test_from_a_transformer_dict_the_three_kinds_are_the_models_own_weights():
    weights = _transformer_weights()
    maps = attention_from_model(weights, SRC, TGT, index=1)
    assert list(maps) == ["encoder self-attention", "decoder masked self-attention", "cross-attention"]
    enc, dec, cross = maps.values()
    np.testing.assert_array_equal(enc.weights, weights["encoder"][:, 1].double().numpy())
    np.testing.assert_array_equal(cross.weights, weights["cross"][:, 1].double().numpy())
    assert (enc.query_tokens, enc.key_tokens) == (tuple(SRC), tuple(SRC))
    assert (dec.query_tokens, dec.key_tokens) == (tuple(TGT), tuple(TGT))
    assert (cross.query_tokens, cross.key_tokens) == (tuple(TGT), tuple(SRC))
    assert enc.self_attention and dec.self_attention and not cross.self_attention
    assert (cross.layers, cross.heads, cross.n_queries, cross.n_keys) == (2, 4, len(TGT), len(SRC))


def test_from_torch_multihead_attention_per_head_and_averaged():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(3, len(SRC), 8)
    with torch.no_grad():
        _, per_head = mha(x, x, x, average_attn_weights=False)           # (B, H, L, S)
        _, averaged = mha(x, x, x)                                       # (B, L, S)
    amap, = attention_from_model(per_head, SRC, index=2).values()
    assert amap.kind == "self-attention" and amap.weights.shape == (1, 2, len(SRC), len(SRC))
    np.testing.assert_allclose(amap.weights[0], per_head[2].double().numpy())
    mean, = attention_from_model(averaged, SRC, index=2).values()
    assert mean.weights.shape == (1, 1, len(SRC), len(SRC))
    np.testing.assert_allclose(mean.weights[0, 0], amap.weights[0].mean(0), atol=1e-6)
    tgt = torch.randn(3, len(TGT), 8)
    with torch.no_grad():
        _, cross = mha(tgt, x, x, average_attn_weights=False)
    cmap, = attention_from_model(cross, SRC, TGT, index=0).values()
    assert cmap.kind == "cross-attention" and (cmap.query_tokens, cmap.key_tokens) == (tuple(TGT), tuple(SRC))
    with torch.no_grad():
        _, unbatched = mha(x[0], x[0], x[0], average_attn_weights=False)  # (H, L, S)
    one, = attention_from_model(unbatched, SRC, index=None).values()
    np.testing.assert_allclose(one.weights[0], unbatched.double().numpy())


def test_stack_and_decoder_outputs_and_padding_is_cropped():
    weights = _transformer_weights(layers=3)
    stack, = attention_from_model(weights["encoder"], SRC, index=0, kind="encoder self-attention").values()
    assert stack.kind == "encoder self-attention" and stack.layers == 3
    decoder = attention_from_model({"self": weights["decoder_self"], "cross": weights["cross"]}, SRC, TGT)
    assert list(decoder) == ["decoder masked self-attention", "cross-attention"]
    layer = attention_from_model({"self": weights["decoder_self"][0], "cross": weights["cross"][0]}, SRC, TGT)
    assert layer["cross-attention"].layers == 1
    # example 0 is 4 tokens long in a batch padded to 7: its keys 4.. are masked, so they carry no weight
    scores = torch.randn(2, 2, 7, 7)
    scores[0, :, :, 4:] = -torch.inf
    padded, = attention_from_model(torch.softmax(scores, -1), SRC[:4], index=0).values()
    assert padded.weights.shape == (1, 2, 4, 4)
    with pytest.raises(ValueError, match=r"puts? up to .* on key positions 4..6, beyond the 4 key tokens"):
        attention_from_model(torch.softmax(scores, -1), SRC[:4], index=1)


def test_from_model_errors_are_clear():
    weights = _transformer_weights()
    with pytest.raises(ValueError, match="target_tokens are needed"):
        attention_from_model(weights, SRC)
    with pytest.raises(IndexError, match=r"index 2 is outside the batch of 2"):
        attention_from_model(weights, SRC, TGT, index=2)
    with pytest.raises(ValueError, match="no weights for 'cross-attention': run the model with need_weights=True"):
        attention_from_model({**weights, "cross": None}, SRC, TGT)
    with pytest.raises(ValueError, match=r"keys of Transformer's .* got \['decoder', 'encoder'\]"):
        attention_from_model({"encoder": weights["encoder"], "decoder": weights["cross"]}, SRC, TGT)
    with pytest.raises(ValueError, match=r"4 query and 4 key tokens given, but the weights cover only"):
        attention_from_model(weights["encoder"][:, :, :, :3, :3], SRC[:4], index=0)


def test_attention_map_accepts_one_head_and_one_layer_and_checks_tokens():
    w = _softmax(np.random.default_rng(0).normal(size=(3, 3)))
    assert attention_map(w, SRC[:3]).weights.shape == (1, 1, 3, 3)
    assert attention_map(np.stack([w, w]), SRC[:3]).weights.shape == (1, 2, 3, 3)
    with pytest.raises(ValueError, match=r"have 3 query rows \(shape \(1, 1, 3, 3\) read as \(layers, heads, queries, "
                                         r"keys\)\) but 4 query tokens were given"):
        attention_map(w, SRC[:4])
    with pytest.raises(ValueError, match=r"have 3 key columns .* but 2 key tokens were given"):
        attention_map(w, SRC[:3], SRC[:2], kind="cross-attention")
    with pytest.raises(ValueError, match=r"must be \(layers, heads, n_queries, n_keys\).* got shape \(1, 1, 1, 3, 3\)"):
        attention_map(w[None, None, None], SRC[:3])
    with pytest.raises(TypeError, match="floating-point attention weights, got dtype torch.bool"):
        attention_map(torch.ones(3, 3, dtype=torch.bool), SRC[:3])


def test_attention_map_refuses_scores_and_rows_that_do_not_sum_to_one():
    scores = np.random.default_rng(0).normal(size=(2, 3, 3))
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]: layer 0, head 0, query 0 \('the'\), key 0 "
                                         r"\('cat'\)|probabilities in \[0, 1\]: layer 0, head 0, query 0 \('the'\)"):
        attention_map(scores, SRC[:3])
    half = np.full((3, 3), 0.5)
    with pytest.raises(ValueError, match=r"must sum to 1 \(or to 0 for a query with no allowed key\): layer 0, head 0, "
                                         r"query 0 \('the'\) sums to 1.5"):
        attention_map(half, SRC[:3])
    masked = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])   # query 0 may attend nowhere
    assert attention_map(masked, SRC[:3]).weights[0, 0, 0].sum() == 0
    with pytest.raises(ValueError, match=r"its 4 queries must be among its 3 keys"):
        attention_map(np.full((4, 3), 1 / 3), SRC[:4], SRC[:3])


# -- compute: what one query reads, what one head does ----------------------------------------------------

def test_top_attended_lists_the_largest_weights_first_and_leaves_masked_keys_out():
    row = torch.tensor([0.1, 0.4, 0.0, 0.4, 0.1])
    assert top_attended(row, ["a", "b", "c", "d", "e"], k=3) == [(1, "b", pytest.approx(0.4)),
                                                                 (3, "d", pytest.approx(0.4)),
                                                                 (0, "a", pytest.approx(0.1))]
    assert [j for j, _, _ in top_attended(row, "abcde", k=10)] == [1, 3, 0, 4]
    with pytest.raises(ValueError, match="one key token per weight: got 2 tokens for 5 weights"):
        top_attended(row, ["a", "b"])
    with pytest.raises(ValueError, match=r"one query's row \(n_keys,\), got shape \(1, 5\)"):
        top_attended(row[None], "abcde")
    with pytest.raises(ValueError, match="k must be at least 1"):
        top_attended(row, "abcde", k=0)


def test_summaries_name_the_textbook_heads():
    n = 6
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0                                      # the first token can only read itself
    s = summarize_head(previous)
    assert s.name == "previous token" and s.previous == 1.0
    assert s.distance == pytest.approx(5 / 6) and s.entropy == 0.0
    assert summarize_head(np.eye(n)).name == "itself"
    first = np.zeros((n, n))
    first[:, 0] = 1
    assert summarize_head(first).name == "first token"
    uniform = summarize_head(np.full((n, n), 1 / n))
    assert uniform.name == "broad" and uniform.entropy == pytest.approx(np.log(n)) == uniform.max_entropy
    causal = summarize_head(_softmax(np.zeros((n, n)), causal=True))  # uniform over what each query may see
    assert causal.name == "broad" and causal.entropy == pytest.approx(causal.max_entropy)
    cross = summarize_head(np.eye(4, 6), self_attention=False)
    assert cross.name == "first token" or cross.name == "sharp"
    assert np.isnan(cross.itself) and np.isnan(cross.distance) and cross.peak == 1.0
    assert summarize_head(np.zeros((3, 3))).name == "reads nothing"
    assert "mean distance 0.8" in s.describe() and "on previous 1.00" in s.describe() and s.describe().count("\n") == 1


# -- draw ---------------------------------------------------------------------------------------------------

def _texts(fig) -> list:
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]


def _assert_readable_and_inside(fig) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    assert width <= 1100 and height <= 640, f"{width}x{height} px does not fit a 1280x720 screen with controls"
    for text in _texts(fig):
        assert text.get_fontsize() >= 8, text.get_text()
        box = text.get_window_extent(renderer)
        assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, \
            f"{text.get_text()!r} is cut off: {box} in {width}x{height}"


def test_one_head_shows_tokens_on_both_axes_the_row_and_what_the_token_attends_to(maps):
    cross = maps["cross-attention"]
    fig = draw_attention(cross, layer=1, head=2, token=3)
    assert isinstance(fig, PNGFigure) and plt.get_fignums() == []
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == SRC and [t.get_text() for t in ax.get_yticklabels()] == TGT
    assert "key" in ax.get_xlabel() and "query" in ax.get_ylabel()
    np.testing.assert_array_equal(ax.images[0].get_array(), cross.weights[1, 2])
    box, = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert box.get_y() == 2.5
    row = cross.weights[1, 2, 3]
    written = {round(t.get_position()[0]): t.get_text() for t in ax.texts
               if t.get_visible() and t.get_position()[1] == 3 and t.get_fontweight() != "bold"}  # not the red label
    for j, weight in enumerate(row):
        if weight >= 0.005:
            assert float(written[j]) == pytest.approx(weight, abs=0.005)
    texts = "\n".join(t.get_text() for t in fig.texts)
    best = int(np.argmax(row))
    assert f"query 3: {TGT[3]!r}" in texts and f"{SRC[best]}  ({best})" in texts and f"{row[best]:.2f}" in texts
    assert "cross-attention: layer 1, head 2" in [t.get_text() for t in fig.texts]
    _assert_readable_and_inside(fig)


def test_all_heads_is_a_grid_with_the_chosen_head_framed(maps):
    enc = maps["encoder self-attention"]
    fig = draw_attention(enc, layer=0, head=1, token=2, all_heads=True)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == enc.heads
    for h, ax in enumerate(heatmaps):
        np.testing.assert_array_equal(ax.images[0].get_array(), enc.weights[0, h])
        assert ax.get_title(loc="left").startswith(f"head {h}: ")
        frames = [p for p in ax.patches if p.get_visible() and p.get_edgecolor()[:3] == (0, 0, 0)]
        assert len(frames) == (h == 1)
    assert any("head 1: query 2 'sat' attends most to" in t.get_text() for t in fig.texts)
    _assert_readable_and_inside(fig)


@pytest.mark.parametrize("n", [20, 48])
def test_long_sentences_and_eight_heads_still_fit_and_read(n):
    tokens = [f"tok{i}" for i in range(n)]
    amap = attention_map(_softmax(np.random.default_rng(3).normal(size=(3, 8, n, n)), causal=True), tokens)
    for all_heads in (False, True):
        fig = draw_attention(amap, 2, 7, n - 1, all_heads=all_heads)
        _assert_readable_and_inside(fig)
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels[0] == "tok0" and len(labels) >= n // 3      # every token, or every k-th when they would overlap


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))[..., :3]


@pytest.mark.parametrize("all_heads", [False, True])
def test_fast_redraw_paints_what_a_fresh_figure_paints(maps, all_heads):
    dec = maps["decoder masked self-attention"]
    live = AttentionPlot(dec, all_heads=all_heads)
    # back to views seen before (their pixels kept) and to one pushed out of the four kept
    for view in [(0, 0, 0), (0, 0, 4), (0, 3, 4), (1, 3, 4), (1, 3, 1), (0, 1, 2), (0, 3, 0), (1, 2, 2), (1, 1, 2),
                 (0, 0, 1), (0, 3, 3), (1, 3, 4)]:
        live.update(*view)
        fresh = io.BytesIO()
        draw_attention(dec, *view, all_heads=all_heads).savefig(fresh, format="png", dpi=live.figure.dpi)
        np.testing.assert_array_equal(_pixels(live.png()), _pixels(fresh.getvalue()))


def test_draw_rejects_a_view_outside_the_map(maps):
    with pytest.raises(ValueError, match=r"head must be in 0..3 for 'cross-attention', got 4"):
        draw_attention(maps["cross-attention"], 0, 4, 0)
    with pytest.raises(ValueError, match=r"token must be in 0..4"):
        draw_attention(maps["cross-attention"], 0, 0, 5)


# -- controls -------------------------------------------------------------------------------------------------

@pytest.fixture
def explorer(maps) -> AttentionExplorer:
    return AttentionExplorer(maps)


def test_explorer_shows_every_control_and_a_picture(explorer, maps):
    assert explorer.live.image.value[:8] == b"\x89PNG\r\n\x1a\n" and explorer.redraws == 1
    assert set(explorer.controls) == {"kind", "layer", "head", "all_heads", "token"}
    assert isinstance(explorer.kind, widgets.Dropdown) and list(explorer.kind.options) == list(maps)
    assert isinstance(explorer.all_heads, widgets.ToggleButton)
    assert explorer.layer.max == 1 and explorer.head.max == 3 and not explorer.head.disabled
    assert explorer.token.label == "0: the" and explorer.token.value == 0
    rows = explorer.widget.children[:2]
    assert explorer.kind in rows[0].children and explorer.token in rows[1].children
    assert hasattr(explorer, "_ipython_display_")


@pytest.mark.parametrize("control, value", [("layer", 1), ("head", 2), ("token", 5), ("all_heads", True),
                                            ("kind", "cross-attention")])
def test_moving_a_control_redraws_a_new_picture(explorer, control, value):
    before, count = explorer.live.image.value, explorer.redraws
    getattr(explorer, control).value = value
    assert explorer.redraws == count + 1 and explorer.live.image.value != before
    assert explorer.live.last_values[control] == value


def test_in_the_grid_moving_the_head_moves_the_frame(explorer):
    explorer.all_heads.value = True
    before = explorer.live.image.value
    explorer.head.value = 3
    assert explorer.live.image.value != before
    plot = explorer.plot("encoder self-attention", True)
    assert [frame.get_visible() for frame in plot.frames] == [False, False, False, True]


def test_switching_kind_follows_its_queries_and_redraws_once(explorer, maps):
    explorer.token.value = 6                                       # '<eos>', the 7th source token
    count = explorer.redraws
    explorer.kind.value = "cross-attention"                        # 5 target tokens as queries
    assert explorer.redraws == count + 1
    assert [label for label, _ in explorer.token.options] == [f"{i}: {t}" for i, t in enumerate(TGT)]
    assert explorer.token.value == 4 and explorer.live.last_values["token"] == 4
    explorer.kind.value = "encoder self-attention"
    assert len(explorer.token.options) == len(SRC) and explorer.token.value == 4


def test_single_kind_one_layer_one_head_leaves_out_or_disables_what_cannot_change():
    amap = attention_map(_softmax(np.random.default_rng(0).normal(size=(4, 4))), SRC[:4])
    explorer = AttentionExplorer(amap)
    assert "kind" not in explorer.controls and explorer.kind not in explorer.widget.children[0].children
    assert explorer.layer.disabled and explorer.head.disabled and explorer.all_heads.disabled
    explorer.token.value = 2
    assert explorer.redraws == 2
    bare = AttentionExplorer(amap.weights[0], SRC[:4], token=1)           # an array and its tokens
    assert bare.token.value == 1 and bare.map.weights.shape == (1, 1, 4, 4)


def test_static_figure_is_the_state_the_explorer_was_made_with(maps):
    explorer = AttentionExplorer(maps, kind="cross-attention", layer=1, head=2, token=3)
    explorer.head.value = 0
    explorer.kind.value = "encoder self-attention"
    fig = explorer.static_figure()
    assert "cross-attention: layer 1, head 2" in [t.get_text() for t in fig.texts]
    assert fig.axes[0].images[0].get_array().shape == (len(TGT), len(SRC))


def test_explorer_errors(maps):
    with pytest.raises(ValueError, match=r"kind must be one of \[.*\], got 'attention'"):
        AttentionExplorer(maps, kind="attention")
    with pytest.raises(ValueError, match="need their query_tokens"):
        AttentionExplorer(np.eye(3))
    with pytest.raises(ValueError, match="tokens come with each AttentionMap"):
        AttentionExplorer(maps, SRC)
    with pytest.raises(ValueError, match=r"layer must be in 0..1"):
        AttentionExplorer(maps, layer=2)


def test_redraws_do_not_leak_figures(explorer):
    for token in range(4):
        explorer.token.value = token
    explorer.all_heads.value = True
    explorer.kind.value = "cross-attention"
    explorer.static_figure()
    assert plt.get_fignums() == []


def test_seqlab_transformer_weights_go_in_unchanged():
    from seqlab.nn.transformer import Transformer, TransformerEncoder, TransformerEncoderLayer

    torch.manual_seed(0)
    model = Transformer(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=32,
                        dropout=0.0, batch_first=True).eval()
    src, tgt = torch.randn(2, len(SRC), 16), torch.randn(2, len(TGT), 16)
    causal = torch.triu(torch.ones(len(TGT), len(TGT), dtype=torch.bool), 1)     # torch's meaning: True = blocked
    with torch.no_grad():
        _, weights = model(src, tgt, tgt_mask=causal, need_weights=True)
    maps = attention_from_model(weights, SRC, TGT, index=1)
    assert [(m.layers, m.heads, m.n_queries, m.n_keys) for m in maps.values()] == \
        [(2, 2, len(SRC), len(SRC)), (3, 2, len(TGT), len(TGT)), (3, 2, len(TGT), len(SRC))]
    np.testing.assert_array_equal(maps["cross-attention"].weights, weights["cross"][:, 1].double().numpy())
    assert np.all(np.triu(maps["decoder masked self-attention"].weights[2, 1], 1) == 0)     # the mask held
    explorer = AttentionExplorer(maps, kind="decoder masked self-attention", layer=2)
    assert explorer.layer.max == 2 and explorer.redraws == 1
    encoder = TransformerEncoder(TransformerEncoderLayer(16, 2, 32, 0.0, batch_first=True), 2).eval()
    with torch.no_grad():
        _, stack = encoder(src, need_weights=True)                              # (L, B, H, n, n)
    amap, = attention_from_model(stack, SRC, index=0, kind="encoder self-attention").values()
    np.testing.assert_array_equal(amap.weights, stack[:, 0].double().numpy())


# -- describe: the picture in words (alt text, screen readers) ---------------------------------------------

@pytest.mark.parametrize("kind, layer, head, token", [("encoder self-attention", 0, 0, 0),
                                                      ("encoder self-attention", 1, 3, 4), ("cross-attention", 1, 2, 3)])
def test_description_names_the_key_the_drawn_row_weighs_most(maps, kind, layer, head, token):
    amap = maps[kind]
    plot = AttentionPlot(amap)
    plot.update(layer, head, token)
    drawn = np.asarray(plot.image.get_array())[token]                       # the row the picture shows
    j = int(drawn.argmax())
    text = describe_view(amap, layer, head, token)
    summary = summarize_head(amap.weights[layer, head], self_attention=amap.self_attention)
    assert text.startswith(f"Heatmap of {kind}, layer {layer}, head {head}: {amap.n_queries} query tokens")
    assert f"query {token} {amap.query_tokens[token]!r}" in text
    assert f"attends most to {amap.key_tokens[j]!r} ({drawn[j]:.2f}), then " in text
    assert f"Head {head} looks like {summary.name!r}" in text


def test_description_follows_the_state_and_the_grid_names_every_head(maps):
    amap = maps["encoder self-attention"]
    texts = {describe_view(amap, layer, head, token) for layer in (0, 1) for head in (0, 1) for token in (0, 5)}
    assert len(texts) == 8
    grid = describe_view(amap, 1, 2, 5, all_heads=True)
    assert grid.startswith(f"Grid of heatmaps of the {amap.heads} heads of encoder self-attention, layer 1, head 2 framed")
    for h in range(amap.heads):
        j = int(amap.weights[1, h, 5].argmax())
        assert f"head {h} (" in grid and f"{amap.key_tokens[j]!r} ({amap.weights[1, h, 5, j]:.2f})" in grid


def test_explorer_static_figure_and_live_region_say_what_is_shown(maps):
    explorer = AttentionExplorer(maps, kind="cross-attention", layer=1, head=2, token=3)
    static = explorer.static_figure()
    assert static.alt == describe_view(maps["cross-attention"], 1, 2, 3)
    assert static._repr_mimebundle_()[1] == {"image/png": {"alt": static.alt}}
    explorer.head.value = 0
    explorer.all_heads.value = True
    assert explorer.live.last_description == describe_view(maps["cross-attention"], 1, 0, 3, all_heads=True)
    assert explorer.live.last_description == explorer.describe(**explorer.values())


def test_head_shares_average_each_heads_shares_over_the_sentences():
    from seqlab.widgets.attention import head_shares
    n = 5
    previous = torch.zeros(n, n)
    previous[0, 0] = 1
    previous[torch.arange(1, n), torch.arange(n - 1)] = 1            # every query on the token before it
    last = torch.zeros(n, n)
    last[:, -1] = 1                                                  # every query on the last token
    one = torch.stack([torch.stack([previous, last])])              # (1 layer, 2 heads, n, n)
    two = torch.stack([torch.stack([previous, previous])])
    shares = head_shares([one, two])
    assert set(shares) == {"previous token", "next token", "first token", "last token"}
    assert shares["previous token"].shape == (1, 2) and shares["previous token"][0, 0] == 1.0
    assert shares["previous token"][0, 1] == 0.5 + 0.5 * 0.0 and shares["last token"][0, 1] == 0.5 * 1.0 + 0.5 * 0.0
    with pytest.raises(ValueError, match=r"\(layers, heads, n, n\)"):
        head_shares([torch.ones(2, 3)])
    with pytest.raises(ValueError, match="at least one sentence"):
        head_shares([])


def test_the_mask_figure_draws_each_mask_and_counts_its_pairs():
    import matplotlib.pyplot as plt

    from seqlab.nn.masks import causal_mask
    from seqlab.widgets.attention import mask_figure
    fig, alt = mask_figure([("causal", causal_mask(4), list("abcd")), ("full", torch.ones(3, 3, dtype=torch.bool), "xyz")])
    assert len(fig.axes) == 2 and "causal, 10 of 16 pairs allowed; full, 9 of 9 pairs allowed" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="square booleans"):
        mask_figure([("bad", torch.ones(2, 3, dtype=torch.bool), "ab")])


def test_the_head_shares_figure_draws_each_kind_and_names_its_largest_share():
    import matplotlib.pyplot as plt

    from seqlab.widgets.attention import head_shares_figure
    shares = {"previous token": np.zeros((2, 3)), "[CLS]": np.full((2, 3), 0.6)}
    shares["previous token"][1, 2] = 0.9
    fig, alt = head_shares_figure(shares)
    assert len([ax for ax in fig.axes if ax.axison]) == 2
    assert "the previous token: 0.90 at layer 1, head 2" in alt and "previous token 1, [CLS] 6 of 6" in alt
    plt.close(fig)
