"""The self-attention stepper: its stages are seqlab's SelfAttention, one matrix at a time."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch

from seqlab.nn.self_attention import SelfAttention
from seqlab.widgets import AttentionStepper, attention_steps, describe_stage, draw_attention_stage
from seqlab.widgets.stepper import STAGES

X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
W_V = np.array([[1.0, 0.0], [1.0, 1.0]])


@pytest.mark.parametrize("causal", [False, True])
def test_stages_compute_what_self_attention_computes(causal):
    rng = np.random.default_rng(0)
    X4, W_q, W_k, W_v = rng.normal(size=(5, 4)), rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    steps = attention_steps(X4, W_q, W_k, W_v, causal=causal)
    head = SelfAttention(4, 3, 2, causal=causal).double()
    with torch.no_grad():                        # torch stores the transposes (see seqlab.nn.self_attention)
        head.W_q.weight.copy_(torch.tensor(W_q.T)); head.W_k.weight.copy_(torch.tensor(W_k.T))
        head.W_v.weight.copy_(torch.tensor(W_v.T))
    with torch.no_grad():
        z, weights = head(torch.tensor(X4)[None], return_weights=True)
    np.testing.assert_allclose(steps.Z, z[0].numpy(), atol=1e-12)
    np.testing.assert_allclose(steps.weights, weights[0].numpy(), atol=1e-12)
    np.testing.assert_allclose(steps.scaled, steps.scores / np.sqrt(3))
    assert np.isneginf(steps.masked[np.triu_indices(5, 1)]).all() == causal


def test_the_i_like_pizza_example():
    steps = attention_steps(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"])
    np.testing.assert_allclose(steps.scores, [[1, 0, 1], [0, 1, 1], [1, 1, 2]])
    np.testing.assert_allclose(steps.weights, [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401], [0.248, 0.248, 0.503]],
                               atol=1e-3)


def test_every_stage_draws_and_the_widget_redraws_on_each_control():
    steps = attention_steps(X, np.eye(2), np.eye(2), W_V, causal=True)
    for stage in range(len(STAGES)):
        fig = draw_attention_stage(steps, stage)
        assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) in (2, 3, 4)
    stepper = AttentionStepper(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"])
    before = stepper.live.image.value
    stepper.stage.value = 3
    stepper.causal.value = True
    assert stepper.redraws == 3 and stepper.live.image.value != before and stepper.stage_name.value == "4/6: mask (causal)"
    stepper.causal.value = False
    assert stepper.stage_name.value == "4/6: mask (none)"


def test_the_mask_panel_says_whether_anything_is_masked():
    for causal, title in ((False, "no mask"), (True, "masked (causal)")):
        steps = attention_steps(X, np.eye(2), np.eye(2), W_V, causal=causal)
        for stage in (3, 4):
            titles = [ax.get_title() for ax in draw_attention_stage(steps, stage).axes]
            assert title in titles and not ({"no mask", "masked (causal)"} - {title}) & set(titles)


@pytest.mark.parametrize("stage", range(len(STAGES)))
def test_every_axis_is_named_and_square_matrices_are_query_by_key(stage):
    steps = attention_steps(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"])
    for ax in draw_attention_stage(steps, stage).axes:
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
        rows, cols = ax.images[0].get_array().shape
        if rows == cols == 3 and [t.get_text() for t in ax.get_xticklabels()] == ["I", "like", "pizza"]:
            assert (ax.get_ylabel(), ax.get_xlabel()) == ("query i", "key j")


def _ink_rows(fig, text) -> int:
    """Height in pixels of the dark ink of one drawn text (its capitals, for a label like 'I')."""
    fig.canvas.draw()
    box = text.get_window_extent()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].mean(axis=2)          # (H, W), 0 = black
    height = pixels.shape[0]
    crop = pixels[int(height - box.y1):int(np.ceil(height - box.y0)), int(box.x0):int(np.ceil(box.x1))]
    return int((crop < 128).any(axis=1).sum())


@pytest.mark.parametrize("stage", range(len(STAGES)))
def test_labels_read_on_a_1280x720_slide(stage):
    """Token labels at least 10 px high as drawn (the figure is shown at its own pixel size), and the
    picture fits beside the controls on a 1280 x 720 slide, also for a longer example."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    steps = attention_steps(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"])
    fig = draw_attention_stage(steps, stage)
    FigureCanvasAgg(fig)
    label = next(t for t in fig.axes[0].get_yticklabels() + fig.axes[-1].get_yticklabels() if t.get_text() == "I")
    assert _ink_rows(fig, label) >= 10
    rng = np.random.default_rng(1)
    bigger = attention_steps(rng.normal(size=(8, 4)), rng.normal(size=(4, 4)), rng.normal(size=(4, 4)),
                             rng.normal(size=(4, 4)), causal=True)
    for steps in (steps, bigger):
        drawn = draw_attention_stage(steps, stage)
        width, height = drawn.get_size_inches() * drawn.dpi
        assert width <= 1240 and height <= 560, (width, height)


def test_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"W_k must have shape \(2, d\) to multiply X \(3, 2\), got \(3, 2\)"):
        attention_steps(X, np.eye(2), np.ones((3, 2)), W_V)
    with pytest.raises(ValueError, match=r"one token label per row of X: got 2 labels for 3 rows"):
        AttentionStepper(X, np.eye(2), np.eye(2), W_V, tokens=["a", "b"])
    with pytest.raises(ValueError, match=r"stage must be in 0..5"):
        draw_attention_stage(attention_steps(X, np.eye(2), np.eye(2), W_V), 6)


def test_static_figure_is_the_stage_and_mask_the_stepper_was_made_with():
    stepper = AttentionStepper(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"], stage=4, causal=True)
    stepper.stage.value = 1
    stepper.causal.value = False
    static = stepper.static_figure()
    masked = static.axes[0]                          # stage 4: masked | softmax, causal: -inf above the diagonal
    assert "−∞" in [t.get_text() for t in masked.texts] and masked.get_title() == "masked (causal)"


def test_each_stage_is_described_from_its_own_numbers():
    tokens = ["I", "like", "pizza"]
    steps = attention_steps(X, np.eye(2), np.eye(2), W_V, tokens=tokens)
    texts = [describe_stage(steps, stage) for stage in range(len(STAGES))]
    assert len(set(texts)) == len(STAGES)
    assert all(text.startswith(f"Annotated matrices of self-attention, stage {s + 1} of 6") for s, text in enumerate(texts))
    # the softmax: each query's most-read key is the argmax of its row of A
    for i, j in enumerate(steps.weights.argmax(axis=1)):
        assert f"{tokens[i]!r} to {tokens[j]!r} {steps.weights[i, j]:.2f}" in texts[4]
    i, j = np.unravel_index(steps.scores.argmax(), steps.scores.shape)
    assert f"the largest, {steps.scores[i, j]:.3g}, is query {tokens[i]!r} against key {tokens[j]!r}" in texts[1]
    assert "no mask" in texts[3]
    causal = attention_steps(X, np.eye(2), np.eye(2), W_V, tokens=tokens, causal=True)
    assert "sets the 3 cells above the diagonal to −∞" in describe_stage(causal, 3)
    assert "'I' to 'I' 1.00" in describe_stage(causal, 4)
    with pytest.raises(ValueError, match=r"stage must be in 0..5"):
        describe_stage(steps, 6)


def test_stepper_static_figure_and_live_region_describe_the_stage():
    stepper = AttentionStepper(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"], stage=4, causal=True)
    assert stepper.static_figure().alt == describe_stage(stepper.steps(True), 4)
    stepper.stage.value = 5
    stepper.causal.value = False
    assert stepper.live.last_description == describe_stage(stepper.steps(False), 5)
