"""seqlab.cost: the counts against hand formulas and torch's FLOP counter, the memory meter against known saves."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.cost import (SavedTensorMeter, attention_flops, attention_matrix_bytes, best_time, count_flops,
                         count_bytes, count_ops, count_recurrent_steps, cuda_peak_bytes, decoder_flops, loglog_slope, recurrent_flops,
                         recurrent_step_flops, saved_bytes, sequential_steps, time_interleaved)
from seqlab import cost as cost_module
from seqlab.nn import GRU, LSTM, RNN, MultiheadAttention
from seqlab.nn.self_attention import SelfAttention

LAYERS = {"rnn": RNN, "gru": GRU, "lstm": LSTM}


def test_recurrent_counts_by_hand():
    # GRU, I = H = 64: 3 gate blocks, (3 * 64) x (64 + 64) multiply-adds per step, 2 FLOPs each
    assert recurrent_step_flops(64, 64, cell="gru") == 2 * 3 * 64 * 128 == 49_152
    assert recurrent_flops(100, 64, 64, cell="gru", batch=4) == 100 * 4 * 49_152
    assert recurrent_flops(10, 3, 5, cell="lstm") == 10 * 2 * 4 * 5 * 8
    assert recurrent_flops(10, 3, 5, cell="rnn") == 10 * 2 * 5 * 8


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("n, input_size, hidden", [(7, 3, 5), (32, 16, 16)])
def test_recurrent_flops_are_what_torchs_counter_sees(cell, n, input_size, hidden):
    torch.manual_seed(0)
    layer = LAYERS[cell](input_size, hidden, batch_first=True)
    x = torch.randn(2, n, input_size)
    with torch.no_grad():
        assert count_flops(lambda: layer(x)) == recurrent_flops(n, input_size, hidden, cell=cell, batch=2)


def test_attention_counts_by_hand():
    # one sequence, n = 8, d = 4, four projections: 2 * (4 * 8 * 16 + 2 * 8 * 8 * 4)
    assert attention_flops(8, 4) == 2 * (512 + 512) == 2048
    assert attention_flops(8, 4, heads=2) == attention_flops(8, 4)                 # heads do not change it
    assert attention_flops(8, 4, projections=3, batch=3) == 3 * 2 * (384 + 512)
    assert attention_flops(100, 4, keys=5) == 2 * (4 * 100 * 16 + 2 * 100 * 5 * 4)   # a window of 5 keys
    assert attention_matrix_bytes(4096, heads=8) == 4096 * 4096 * 8 * 4 == 536_870_912
    assert attention_matrix_bytes(10, keys=3, batch=2, dtype=torch.float16) == 2 * 10 * 3 * 2


@pytest.mark.parametrize("n, d, heads", [(16, 8, 1), (40, 32, 4), (64, 64, 8)])
def test_attention_flops_are_what_torchs_counter_sees(n, d, heads):
    torch.manual_seed(0)
    mha = MultiheadAttention(d, heads, batch_first=True)
    head = SelfAttention(d, d)
    x = torch.randn(3, n, d)
    with torch.no_grad():
        assert count_flops(lambda: mha(x, x, x)) == attention_flops(n, d, heads=heads, batch=3)
        assert count_flops(lambda: head(x)) == attention_flops(n, d, batch=3, projections=3)
        _, weights = mha(x, x, x, average_attn_weights=False)
    assert weights.numel() * weights.element_size() == attention_matrix_bytes(n, heads=heads, batch=3)


def test_decoder_flops_by_hand_and_on_seqlabs_gpt_with_and_without_the_kv_cache():
    from seqlab.models import GPT, GPTConfig

    # one layer, d = 4, d_ff = 16, vocab 10, 3 new tokens after 2 cached: 2 (4*3*16 + 2*3*4*16) + 4*3*5*4 + 2*3*4*10
    assert decoder_flops(3, 2, d=4, layers=1, vocab=10) == 2 * (192 + 384) + 240 + 240
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=20, max_len=40, d_model=16, num_layers=2, nhead=2, dim_feedforward=24)
    model = GPT(config).eval()
    ids = torch.randint(0, 20, (2, 40))
    sizes = {"d": 16, "layers": 2, "vocab": 20, "d_ff": 24, "batch": 2}
    with torch.no_grad():
        assert count_flops(lambda: model(ids[:, :30])) == decoder_flops(30, **sizes)
        cache = model.new_cache()
        model(ids[:, :29], cache=cache)
        assert count_flops(lambda: model(ids[:, 29:30], cache=cache)) == decoder_flops(1, 29, **sizes)
        assert count_flops(lambda: model(ids[:, 30:33], cache=cache)) == decoder_flops(3, 30, **sizes)
    with pytest.raises(ValueError, match="cached must be an int >= 0, got -1"):
        decoder_flops(1, -1, d=4, layers=1, vocab=10)


def test_decoder_flops_other_accountings():
    sizes = {"d": 4, "layers": 1, "vocab": 10}
    full = decoder_flops(3, 2, **sizes)
    # the read-out of the last token only: 2 of the 3 rows' 2 d V = 80 FLOPs each fewer
    assert decoder_flops(3, 2, **sizes, read_out="last") == full - 2 * 2 * 4 * 10
    # causal pairs: tokens 3, 4, 5 against 3, 4, 5 keys = 12 pairs instead of 15: 3 * 2 * 2 * d FLOPs fewer
    assert decoder_flops(3, 2, **sizes, scores="causal") == full - 3 * 2 * 2 * 4
    # one new token: the causal count is the full one (its row is whole), whatever is cached
    assert decoder_flops(1, 7, **sizes, scores="causal") == decoder_flops(1, 7, **sizes)
    # without a cache: t (t + 1) / 2 pairs
    t = 10
    assert (decoder_flops(t, **sizes) - decoder_flops(t, **sizes, scores="causal")) == 2 * 2 * 4 * (t * t - t * (t + 1) // 2)
    with pytest.raises(ValueError, match="read_out must be 'all' or 'last'"):
        decoder_flops(1, d=4, layers=1, vocab=10, read_out="first")
    with pytest.raises(ValueError, match="scores must be 'full' or 'causal'"):
        decoder_flops(1, d=4, layers=1, vocab=10, scores="half")


def test_count_bytes_reads_and_writes_but_not_views():
    x = torch.randn(10, 10)
    assert count_bytes(lambda: x.exp()) == 2 * 400                  # reads x, writes the result
    assert count_bytes(lambda: x.t()) == 0                          # a view moves nothing
    assert count_bytes(lambda: x.clone().exp_()) == 2 * 400 + 2 * 400     # an in-place op still reads and writes
    assert count_bytes(lambda: x @ x) == 3 * 400
    assert count_bytes(lambda: x @ x, at_least=101) == 0
    torch.manual_seed(0)
    mha = MultiheadAttention(16, 4)
    q = torch.randn(12, 1, 16)
    with torch.no_grad():
        # the explicit path passes over its (h, n, n) matrices 6 times: written by Q K^T, read and written by the
        # scaling, read and written by the softmax, read by A V
        assert count_bytes(lambda: mha(q, q, q, need_weights=False), at_least=4 * 12 * 12) == 6 * 4 * 4 * 12 * 12


def test_sequential_steps_counted_and_measured():
    assert sequential_steps("recurrent", 50) == 50 and sequential_steps("recurrent", 50, layers=3) == 150
    assert sequential_steps("attention", 50) == 1 and sequential_steps("attention", 50, layers=3) == 3
    torch.manual_seed(0)
    gru = GRU(4, 6, num_layers=2, batch_first=True)
    for n in (1, 9, 30):
        assert count_recurrent_steps(gru, torch.randn(2, n, 4)) == sequential_steps("recurrent", n, layers=2)
    assert "_step" not in vars(gru)                               # the class's step function is back
    bidirectional = LSTM(4, 6, bidirectional=True)
    assert count_recurrent_steps(bidirectional, torch.randn(9, 2, 4)) == 2 * 9    # one chain per direction


def test_operations_grow_with_n_for_a_recurrent_layer_and_not_for_attention():
    x = torch.randn(3, 4)
    assert count_ops(lambda: torch.sigmoid(x @ x.T)) == 3                         # transpose, mm, sigmoid
    torch.manual_seed(0)
    gru, mha = GRU(8, 8), MultiheadAttention(8, 2)
    ops = {}
    with torch.no_grad():
        for n in (4, 8, 16):
            x = torch.randn(n, 1, 8)
            ops[n, "gru"] = count_ops(lambda: gru(x))
            ops[n, "attention"] = count_ops(lambda: mha(x, x, x, need_weights=False))
    per_step = (ops[8, "gru"] - ops[4, "gru"]) // 4
    assert per_step > 0 and ops[16, "gru"] - ops[8, "gru"] == 8 * per_step      # a fixed number per token
    assert ops[4, "attention"] == ops[8, "attention"] == ops[16, "attention"]     # the same at any length


def test_the_meter_counts_each_storage_once_and_leaves_out_the_excluded():
    x = torch.randn(100, 10, requires_grad=True)
    with SavedTensorMeter(exclude=[x]) as meter:
        y = x.exp()                  # saves its result y (4,000 bytes)
        z = y[:, :5] * x[:, :5]      # saves views of y and of x: nothing new
        w = z.sin()                  # saves its input z (100 x 5 floats, 2,000 bytes)
    assert meter.bytes == 4000 + 2000 and meter.tensors == 2
    assert [shape for shape, _, _ in meter.shapes] == [(100, 10), (100, 5)]
    assert saved_bytes(lambda: x.sin()) == 4000                     # sin saves its input: x, unless excluded
    assert saved_bytes(lambda: x.sin(), exclude=[x]) == 0
    with torch.no_grad():
        assert saved_bytes(lambda: x.exp()) == 0                    # no graph, nothing kept
    w.sum().backward()                                              # the graph still works after the meter


def test_a_grus_saved_memory_by_hand():
    """seqlab's fused GRU keeps the states (n + 1, B, H) and four per-step caches (n, B, H): r, z, n, W_hn h.

    Sequence-first input, seqlab's inner layout: a batch-first batch of several sequences is first
    copied into that layout, and the copy is kept as well (the input projection's saved input)."""
    torch.manual_seed(0)
    gru = GRU(8, 16)
    for n in (5, 50):
        x = torch.randn(n, 3, 8, requires_grad=True)
        assert saved_bytes(lambda: gru(x), exclude=[x, *gru.parameters()]) == (5 * n + 1) * 3 * 16 * 4


def test_explicit_attention_keeps_the_weights_and_the_fused_kernel_does_not():
    torch.manual_seed(0)
    d, heads, B = 32, 4, 2
    explicit = MultiheadAttention(d, heads)           # sequence-first: no layout copy of the input is kept
    fused = MultiheadAttention(d, heads, fused=True)
    fused.load_state_dict(explicit.state_dict())
    kept = {}
    for n in (64, 128, 256):
        x = torch.randn(n, B, d, requires_grad=True)
        exclude = [x, *explicit.parameters(), *fused.parameters()]
        kept[n, "explicit"] = saved_bytes(lambda: explicit(x, x, x, need_weights=False), exclude=exclude)
        kept[n, "fused"] = saved_bytes(lambda: fused(x, x, x, need_weights=False), exclude=exclude)
        activations = 4 * B * n * d * 4              # q, k, v and the concatenated heads
        assert kept[n, "explicit"] == activations + attention_matrix_bytes(n, heads=heads, batch=B)
        assert kept[n, "fused"] < 2 * activations    # no (n, n) matrix: O(n d)
    assert loglog_slope([128, 256], [kept[128, "fused"], kept[256, "fused"]]) == pytest.approx(1.0)
    assert 1.5 < loglog_slope([128, 256], [kept[128, "explicit"], kept[256, "explicit"]]) < 2.0


def test_loglog_slope():
    ns = [16, 64, 256, 1024]
    assert loglog_slope(ns, [3 * n ** 2 for n in ns]) == pytest.approx(2.0)
    assert loglog_slope(ns, [recurrent_flops(n, 64, 64) for n in ns]) == pytest.approx(1.0)
    slope = loglog_slope(ns, [attention_flops(n, 64) for n in ns])
    assert 1.0 < slope < 2.0                        # n d^2 at short lengths, n^2 d at long ones
    with pytest.raises(ValueError, match="two or more"):
        loglog_slope([1], [1])
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 0], [1, 2])
    with pytest.raises(ValueError, match="not all be equal"):
        loglog_slope([2, 2], [1, 2])


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="cell must be one of.*'transformer'"):
        recurrent_flops(10, 4, 4, cell="transformer")
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        attention_flops(0, 4)
    with pytest.raises(ValueError, match="heads must divide d.*d=10, heads=4"):
        attention_flops(8, 10, heads=4)
    with pytest.raises(ValueError, match="hidden_size must be a positive int, got 2.5"):
        recurrent_step_flops(4, 2.5)
    with pytest.raises(ValueError, match="keys must be a positive int"):
        attention_matrix_bytes(8, keys=0)
    with pytest.raises(ValueError, match="'recurrent' or 'attention', got 'conv'"):
        sequential_steps("conv", 8)
    with pytest.raises(TypeError, match="seqlab recurrent layer.*SelfAttention"):
        count_recurrent_steps(SelfAttention(4, 4), torch.randn(1, 3, 4))


def test_timing_helpers():
    ticks = iter(range(100))
    times = time_interleaved({"a": lambda: None, "b": lambda: None}, warmup=2, repeats=3,
                             clock=lambda: float(next(ticks)))
    assert times == {"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0]}    # warm-up rounds are not kept
    threads = torch.get_num_threads()
    x = torch.randn(64, 64)
    seconds = best_time(lambda: x @ x, repeats=3, threads=1)
    assert seconds >= 0 and math.isfinite(seconds)
    assert torch.get_num_threads() == threads                       # the setting is restored
    assert cuda_peak_bytes(lambda: x @ x, "cpu") is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")
def test_cuda_peak_counts_a_new_tensor():
    assert cuda_peak_bytes(lambda: torch.empty(1024, 1024, device="cuda"), "cuda") >= 4 * 1024 * 1024


# -- notebook 17's helpers: timings by length, path lengths, the long-sequence table, FFT, figures ------------
def test_time_by_length_times_every_call_at_every_length():
    built = []

    def calls(n):
        built.append(n)
        return {"sum": lambda: torch.ones(n).sum(), "cumsum": lambda: torch.ones(n).cumsum(0)}

    timed = cost_module.time_by_length(calls, [8, 16], repeats=2)
    assert built == [8, 16] and set(timed) == {(8, "sum"), (8, "cumsum"), (16, "sum"), (16, "cumsum")}
    assert all(t >= 0 for t in timed.values())


@pytest.mark.parametrize("n", [2, 17, 1024])
def test_path_lengths_follow_the_tables_formulas(n):
    path = cost_module.path_length
    assert path(lambda l: range(n), n) == 1                                   # self-attention
    assert path(lambda l: (0, 1), n) == n - 1                                 # a recurrence, step by step
    assert path(lambda l: range(3), n) == math.ceil((n - 1) / 2)              # contiguous width-3 kernels
    assert path(lambda l: [j * 3 ** l for j in range(3)], n) == max(1, math.ceil(math.log(n, 3) - 1e-9))
    assert path(lambda l: range(17), n) == math.ceil((n - 1) / 16)            # a window of 16 keys back


def test_a_path_that_never_arrives_is_an_error():
    with pytest.raises(ValueError, match="never reads the first"):
        cost_module.path_length(lambda l: (0,), 8)


def test_the_long_sequence_table_has_one_row_per_model_and_the_state_space_rows():
    table = cost_module.long_sequence_table().splitlines()
    models = cost_module.LONG_SEQUENCE_MODELS
    assert len(table) == 2 + len(models) and all(row.count("|") == 6 for row in table)
    assert all(f"| {model} (" in row for model, row in zip(models, table[2:]))
    assert models["S4"][3:] == ("O(n log n)", "O(1)") and models["Mamba"][3] == "O(n)"


@pytest.mark.parametrize("n", [1, 5, 64])
def test_fft_convolve_is_the_causal_convolution(n):
    g = torch.Generator().manual_seed(n)
    kernel, x = (torch.randn(n, generator=g, dtype=torch.float64) for _ in range(2))
    direct = torch.stack([sum(kernel[j] * x[t - j] for j in range(t + 1)) for t in range(n)])
    assert torch.allclose(cost_module.fft_convolve(kernel, x), direct, atol=1e-12)


def test_fft_convolve_says_which_shapes_it_needs():
    with pytest.raises(ValueError, match=r"same shape \(n,\), got \(4,\) and \(5,\)"):
        cost_module.fft_convolve(torch.ones(4), torch.ones(5))


def test_a_loglog_plot_gives_each_series_its_slope_in_the_legend_and_the_alt_text():
    import matplotlib.pyplot as plt

    xs = [64, 128, 256, 512]
    fig, alt = cost_module.loglog_plot(xs, {"GRU": [3 * x for x in xs], "attention": [x * x for x in xs]},
                                       xlabel="tokens n", ylabel="FLOPs", title="t", unit=(1e3, "kFLOP"), note="Note.")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:2] == ["GRU (slope 1.00)", "attention (slope 2.00)"]
    assert "GRU: from 0.192 kFLOP to 1.54 kFLOP, slope 1.00" in alt and "attention: from 4.1 kFLOP" in alt
    assert alt.endswith("Note.") and fig.get_facecolor()[:3] == (1.0, 1.0, 1.0)
    plt.close(fig)
    with pytest.raises(ValueError, match="one value per x"):
        cost_module.loglog_plot(xs, {"GRU": [1, 2]}, xlabel="n", ylabel="y", title="t")


def test_the_band_figure_draws_the_kept_weights_and_the_band_they_stand_for():
    import matplotlib.pyplot as plt

    from seqlab.nn.attention import sliding_window_attend

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    _, weights = sliding_window_attend(q, k, v, 2)
    fig, alt = cost_module.band_figure(weights, 2, list("abcdefghi"), title="the reference")
    assert len(fig.axes) == 2 and fig.axes[0].get_images()[0].get_array().shape == (9, 5)
    assert fig.axes[1].get_images()[0].get_array().shape == (9, 9)
    # 9 queries, window 2: 5 + 4 + 3 keys at each end cut, 5 in the middle: 9 * 5 - 2 * (2 + 1) = 39 in the band
    assert "a band 5 wide along the diagonal, 39 of the 81 entries; 42 entries are exactly zero" in alt
    assert "every row sums to 1.00" in alt and "Title: the reference." in alt
    plt.close(fig)
    with pytest.raises(ValueError, match=r"\(n, 2 \* window \+ 1\) = \(n, 5\), got \(9, 9\)"):
        cost_module.band_figure(torch.ones(9, 9), 2)
    with pytest.raises(ValueError, match="9 positions, got 3 tokens"):
        cost_module.band_figure(weights, 2, ["a", "b", "c"])


def test_the_band_figure_shows_where_a_band_differs_from_full_attention():
    import matplotlib.pyplot as plt

    from seqlab.nn.attention import attend, sliding_window_attend
    from seqlab.nn.masks import band_mask

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    _, weights = sliding_window_attend(q, k, v, 2)
    _, full = attend(q, k, v, band_mask(9, 2))
    fig, alt = cost_module.band_figure(weights, 2, reference=full)
    assert len(fig.axes) == 4 and "Three heat maps" in alt and "white everywhere" in alt      # 3 maps + a colour bar
    assert abs(fig.axes[2].get_images()[0].get_array()).max() < 1e-12
    plt.close(fig)
    _, sharper = sliding_window_attend(2 * q, k, v, 2)
    fig, alt = cost_module.band_figure(sharper, 2, reference=full)
    assert "they differ by up to" in alt and abs(fig.axes[2].get_images()[0].get_array()).max() > 0.05
    plt.close(fig)
    with pytest.raises(ValueError, match=r"full \(n, n\) = \(9, 9\) weights, got \(9, 5\)"):
        cost_module.band_figure(weights, 2, reference=weights)
