"""seqlab.nn's RNN, LSTM and GRU against their torch.nn twins, loaded with the same weights.

Every parity test compares outputs, final states and the gradients of all parameters, the
input and the initial state, float32, max abs error <= 1e-5. Both of seqlab's paths are tested:
the fused one (hand-written backward) and the plain autograd loop (``fused = False``).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.nn import CELLS as CELL_NAMES
from seqlab.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RecurrentTrace, RNNCell, recurrent_layer

TOL = 1e-5
T, B, I, H = 5, 3, 4, 6

# kind -> (seqlab class, torch class, extra constructor kwargs)
KINDS = {
    "rnn_tanh": (RNN, torch.nn.RNN, {}),
    "rnn_relu": (RNN, torch.nn.RNN, {"nonlinearity": "relu"}),
    "lstm": (LSTM, torch.nn.LSTM, {}),
    "gru": (GRU, torch.nn.GRU, {}),
}
CELLS = {
    "rnn_tanh": (RNNCell, torch.nn.RNNCell, {}),
    "rnn_relu": (RNNCell, torch.nn.RNNCell, {"nonlinearity": "relu"}),
    "lstm": (LSTMCell, torch.nn.LSTMCell, {}),
    "gru": (GRUCell, torch.nn.GRUCell, {}),
}


def make_pair(kind: str, *args, fused: bool = True, seed: int = 0, **kwargs):
    """A torch.nn module and its seqlab twin holding the same weights."""
    ours_cls, torch_cls, extra = KINDS[kind]
    torch.manual_seed(seed)
    reference = torch_cls(*args, **extra, **kwargs)
    ours = ours_cls(*args, **extra, **kwargs)
    ours.load_state_dict(reference.state_dict())
    ours.fused = fused
    return reference, ours


def leaf(*shape: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).requires_grad_()


def clone_leaf(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().clone().requires_grad_()


def flatten_state(state) -> list[torch.Tensor]:
    return list(state) if isinstance(state, tuple) else [state]


def run(module, x, hx=None, unpack_to: int | None = None, **kwargs):
    """Forward, a loss touching every output, backward; returns tensors to compare."""
    x, hx = clone_leaf(x), None if hx is None else tuple(clone_leaf(s) for s in hx)
    hx_arg = None if hx is None else (hx if len(hx) == 2 else hx[0])
    result = module(x, hx_arg, **kwargs)
    if type(module).__name__.endswith("Cell"):  # a cell returns h, or (h, c)
        output, state = (result[0] if isinstance(result, tuple) else result), result
    else:
        output, state = result
    if unpack_to is not None:  # torch returned a PackedSequence
        output, _ = pad_packed_sequence(output, total_length=unpack_to,
                                        batch_first=getattr(module, "batch_first", False))
    states = flatten_state(state)
    weights = torch.Generator().manual_seed(123)
    loss = (output * torch.randn(output.shape, generator=weights)).sum()
    for s in states:
        loss = loss + (s * torch.randn(s.shape, generator=weights)).sum()
    loss.backward()
    grads = {name.removeprefix("rnn."): p.grad for name, p in module.named_parameters()}
    grads["input"] = x.grad
    for k, s in enumerate(hx or ()):
        grads[f"hx{k}"] = s.grad
    return output.detach(), [s.detach() for s in states], grads


class PackedTwin(torch.nn.Module):
    """A torch.nn recurrent module that packs its padded input with ``lengths`` first."""

    def __init__(self, rnn: torch.nn.Module, lengths: torch.Tensor, batch_first: bool = False):
        super().__init__()
        self.rnn, self.lengths, self.batch_first = rnn, lengths, batch_first

    def forward(self, x, hx=None):
        return self.rnn(pack_padded_sequence(x, self.lengths, batch_first=self.batch_first,
                                             enforce_sorted=False), hx)


def max_error(a, b) -> float:
    out_a, states_a, grads_a = a
    out_b, states_b, grads_b = b
    assert out_a.shape == out_b.shape
    assert grads_a.keys() == grads_b.keys()
    errors = [(out_a - out_b).abs().max()]
    errors += [(s - t).abs().max() for s, t in zip(states_a, states_b, strict=True)]
    errors += [(grads_a[k] - grads_b[k]).abs().max() for k in grads_a]
    return max(float(e) for e in errors)


# --------------------------------------------------------------------------------------------
# Parity with torch.nn
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
@pytest.mark.parametrize("with_hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TB", "BT"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("kind", list(KINDS))
def test_layer_matches_torch(kind, num_layers, bidirectional, batch_first, with_hx, fused):
    reference, ours = make_pair(kind, I, H, num_layers=num_layers, bidirectional=bidirectional,
                                batch_first=batch_first, fused=fused)
    x = leaf(*((B, T, I) if batch_first else (T, B, I)), seed=1)
    rows = num_layers * (2 if bidirectional else 1)
    hx = None
    if with_hx:
        hx = tuple(leaf(rows, B, H, seed=2 + k) for k in range(2 if kind == "lstm" else 1))
    assert max_error(run(reference, x, hx), run(ours, x, hx)) <= TOL


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_bias_and_eval_dropout_match_torch(kind):
    reference, ours = make_pair(kind, I, H, num_layers=3, bias=False, dropout=0.5, bidirectional=True)
    reference.eval()
    ours.eval()
    x = leaf(T, B, I, seed=1)
    assert max_error(run(reference, x), run(ours, x)) <= TOL
    assert not any("bias" in name for name, _ in ours.named_parameters())


@pytest.mark.parametrize("with_hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_unbatched_input_matches_torch(kind, with_hx):
    reference, ours = make_pair(kind, I, H, num_layers=2, bidirectional=True, batch_first=True)
    x = leaf(T, I, seed=1)                       # (T, input_size): no batch dimension
    hx = tuple(leaf(4, H, seed=2 + k) for k in range(2 if kind == "lstm" else 1)) if with_hx else None
    result = run(ours, x, hx)
    assert result[0].shape == (T, 2 * H) and result[1][0].shape == (4, H)
    assert max_error(run(reference, x, hx), result) <= TOL


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TB", "BT"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_lengths_match_packed_sequence(kind, bidirectional, batch_first, fused):
    reference, ours = make_pair(kind, I, H, num_layers=2, bidirectional=bidirectional,
                                batch_first=batch_first, fused=fused)
    steps, batch = 6, 4
    lengths = torch.tensor([3, 6, 1, 4])         # unsorted, one full-length, one of length 1
    x = leaf(*((batch, steps, I) if batch_first else (steps, batch, I)), seed=1)
    hx = tuple(leaf(ours.num_layers * ours.num_directions, batch, H, seed=2 + k)
               for k in range(2 if kind == "lstm" else 1))

    expected = run(PackedTwin(reference, lengths, batch_first), x, hx, unpack_to=steps)
    got = run(ours, x, hx, lengths=lengths)
    assert max_error(expected, got) <= TOL
    padded = got[0] if batch_first else got[0].transpose(0, 1)          # (B, T, D*H)
    for b, n in enumerate(lengths.tolist()):
        assert torch.all(padded[b, n:] == 0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_packed_sequence_input_matches_torch(kind):
    reference, ours = make_pair(kind, I, H, num_layers=2, bidirectional=True)
    x = torch.randn(6, 4, I)
    packed = pack_padded_sequence(x, torch.tensor([3, 6, 1, 4]), enforce_sorted=False)
    out_ref, state_ref = reference(packed)
    out_ours, state_ours = ours(packed)
    assert torch.equal(out_ours.batch_sizes, out_ref.batch_sizes)
    assert torch.equal(out_ours.sorted_indices, out_ref.sorted_indices)
    assert (out_ours.data - out_ref.data).abs().max() <= TOL
    for s, t in zip(flatten_state(state_ours), flatten_state(state_ref), strict=True):
        assert (s - t).abs().max() <= TOL


@pytest.mark.parametrize("with_hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("kind", list(CELLS))
def test_cell_matches_torch(kind, bias, batched, with_hx):
    ours_cls, torch_cls, extra = CELLS[kind]
    torch.manual_seed(0)
    reference = torch_cls(I, H, bias=bias, **extra)
    ours = ours_cls(I, H, bias=bias, **extra)
    ours.load_state_dict(reference.state_dict())
    x = leaf(B, I, seed=1) if batched else leaf(I, seed=1)
    shape = (B, H) if batched else (H,)
    hx = tuple(leaf(*shape, seed=2 + k) for k in range(2 if kind == "lstm" else 1)) if with_hx else None
    assert max_error(run(reference, x, hx), run(ours, x, hx)) <= TOL


def test_cell_steps_reproduce_layer():
    """A layer is its cell applied at every step with the same weights."""
    torch.manual_seed(0)
    layer, cell = LSTM(I, H), LSTMCell(I, H)
    cell.load_state_dict({k.removesuffix("_l0"): v for k, v in layer.state_dict().items()})
    x = torch.randn(T, B, I)
    output, (h_n, c_n) = layer(x)
    h, c = torch.zeros(B, H), torch.zeros(B, H)
    for t in range(T):
        h, c = cell(x[t], (h, c))
        assert (output[t] - h).abs().max() <= TOL
    assert (h_n[0] - h).abs().max() <= TOL and (c_n[0] - c).abs().max() <= TOL


# --------------------------------------------------------------------------------------------
# Parameters: names, shapes, initialisation, state_dict round trips
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_state_dict_round_trip_both_ways(kind):
    ours_cls, torch_cls, extra = KINDS[kind]
    reference, ours = make_pair(kind, I, H, num_layers=2, bidirectional=True)
    assert list(ours.state_dict()) == list(reference.state_dict())          # same names, same order
    for (name, p), (_, q) in zip(ours.named_parameters(), reference.named_parameters(), strict=True):
        assert p.shape == q.shape, name
    torch.manual_seed(7)
    fresh_ours = ours_cls(I, H, num_layers=2, bidirectional=True, **extra)
    fresh_torch = torch_cls(I, H, num_layers=2, bidirectional=True, **extra)
    fresh_torch.load_state_dict(fresh_ours.state_dict())                     # ours -> torch, strict
    fresh_ours.load_state_dict(fresh_torch.state_dict())                     # and back
    x = torch.randn(T, B, I)
    assert (fresh_ours(x)[0] - fresh_torch(x)[0]).abs().max() <= TOL


@pytest.mark.parametrize("kind", list(CELLS))
def test_cell_state_dict_round_trip(kind):
    ours_cls, torch_cls, extra = CELLS[kind]
    ours, reference = ours_cls(I, H, **extra), torch_cls(I, H, **extra)
    assert list(ours.state_dict()) == list(reference.state_dict())
    reference.load_state_dict(ours.state_dict())
    ours.load_state_dict(reference.state_dict())


@pytest.mark.parametrize("kind", list(KINDS))
def test_init_is_uniform_within_torch_bound(kind):
    torch.manual_seed(0)
    ours = KINDS[kind][0](I, 16, num_layers=2, **KINDS[kind][2])
    bound = 1 / 16 ** 0.5
    for name, p in ours.named_parameters():
        assert p.abs().max() <= bound, name
        assert p.std() > bound / 4, name                   # spread out, not all zero
    gates = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}[kind]
    assert ours.weight_ih_l0.shape == (gates * 16, I) and ours.weight_ih_l1.shape == (gates * 16, 16)


def test_repr_matches_torch():
    kwargs = {"num_layers": 2, "bias": False, "batch_first": True, "dropout": 0.1, "bidirectional": True}
    assert repr(LSTM(4, 6, **kwargs)) == repr(torch.nn.LSTM(4, 6, **kwargs))
    assert repr(RNNCell(4, 6, bias=False, nonlinearity="relu")) == repr(torch.nn.RNNCell(4, 6, bias=False,
                                                                                      nonlinearity="relu"))
    assert repr(RNN(4, 6, nonlinearity="relu")) == "RNN(4, 6, nonlinearity='relu')"   # torch's omits it


# --------------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------------

def test_dropout_only_in_training():
    torch.manual_seed(0)
    model = GRU(I, H, num_layers=2, dropout=0.5)
    x = torch.randn(T, B, I)
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])
    first = model(x)[0]
    model.train()
    torch.manual_seed(1)
    a = model(x)[0]
    torch.manual_seed(2)
    b = model(x)[0]
    assert not torch.allclose(a, b) and not torch.allclose(a, first)


def test_dropout_with_one_layer_warns_like_torch():
    with pytest.warns(UserWarning, match="num_layers=1"):
        LSTM(I, H, dropout=0.2)


# --------------------------------------------------------------------------------------------
# The trace
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_trace_shapes_and_h(kind, fused):
    _, ours = make_pair(kind, I, H, num_layers=2, bidirectional=True, batch_first=True, fused=fused)
    x = torch.randn(B, T, I)
    output, _, trace = ours(x, return_trace=True)
    assert isinstance(trace, RecurrentTrace)
    assert trace.names == {"rnn_tanh": ("a", "h"), "rnn_relu": ("a", "h"), "lstm": ("i", "f", "g", "o", "c", "h"),
                           "gru": ("r", "z", "n", "h")}[kind]
    assert len(trace.layers) == 2
    for layer in trace.layers:
        assert set(layer) == {"forward", "reverse"}
        for direction in layer.values():
            assert set(direction) == set(trace.names)
            assert all(v.shape == (B, T, H) and not v.requires_grad for v in direction.values())
    assert torch.equal(trace.get("h", layer=1, direction="forward"), output[..., :H].detach())
    assert torch.equal(trace.get("h", layer=1, direction="reverse"), output[..., H:].detach())


def test_trace_same_on_both_paths():
    _, fused = make_pair("lstm", I, H, bidirectional=True)
    _, plain = make_pair("lstm", I, H, bidirectional=True, fused=False)
    x, lengths = torch.randn(T, B, I), torch.tensor([2, 5, 4])
    a, b = fused(x, lengths=lengths, return_trace=True)[2], plain(x, lengths=lengths, return_trace=True)[2]
    for direction in ("forward", "reverse"):
        for name in a.names:
            assert (a.get(name, 0, direction) - b.get(name, 0, direction)).abs().max() <= TOL


def _previous(values: torch.Tensor, initial: torch.Tensor, direction: str) -> torch.Tensor:
    """The value at the previous step of ``direction`` (B, T, H), given the initial one (B, H)."""
    if direction == "forward":
        return torch.cat([initial.unsqueeze(1), values[:, :-1]], dim=1)
    return torch.cat([values[:, 1:], initial.unsqueeze(1)], dim=1)


def test_lstm_trace_reproduces_states():
    _, model = make_pair("lstm", I, H, bidirectional=True)
    h0, c0 = torch.randn(2, B, H), torch.randn(2, B, H)
    _, _, trace = model(torch.randn(T, B, I), (h0, c0), return_trace=True)
    for k, direction in enumerate(("forward", "reverse")):
        i, f, g, o, c, h = (trace.get(n, 0, direction) for n in "ifgoch")
        assert (c - (f * _previous(c, c0[k], direction) + i * g)).abs().max() <= TOL   # c_t = f c_{t-1} + i g
        assert (h - o * torch.tanh(c)).abs().max() <= TOL                                # h_t = o tanh(c_t)
        assert torch.all((i > 0) & (i < 1) & (f > 0) & (f < 1) & (o > 0) & (o < 1) & (g.abs() < 1))


def test_gru_trace_reproduces_states():
    _, model = make_pair("gru", I, H, bidirectional=True)
    h0 = torch.randn(2, B, H)
    _, _, trace = model(torch.randn(T, B, I), h0, return_trace=True)
    for k, direction in enumerate(("forward", "reverse")):
        r, z, n, h = (trace.get(name, 0, direction) for name in "rznh")
        assert (h - ((1 - z) * n + z * _previous(h, h0[k], direction))).abs().max() <= TOL
        assert torch.all((r > 0) & (r < 1) & (z > 0) & (z < 1) & (n.abs() < 1))


@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu"])
def test_rnn_trace_reproduces_states(kind):
    _, model = make_pair(kind, I, H)
    x, h0 = torch.randn(T, B, I), torch.randn(1, B, H)
    _, _, trace = model(x, h0, return_trace=True)
    a, h = trace.get("a"), trace.get("h")
    act = torch.tanh if kind == "rnn_tanh" else torch.relu
    assert (h - act(a)).abs().max() <= TOL
    expected_a = (x.transpose(0, 1) @ model.weight_ih_l0.T + model.bias_ih_l0
                  + _previous(h, h0[0], "forward") @ model.weight_hh_l0.T + model.bias_hh_l0)
    assert (a - expected_a).abs().max() <= TOL


def test_trace_zero_at_padding_and_unbatched_batch_of_one():
    _, model = make_pair("gru", I, H, bidirectional=True)
    lengths = torch.tensor([2, 5, 3])
    _, _, trace = model(torch.randn(T, B, I), lengths=lengths, return_trace=True)
    assert torch.equal(trace.lengths, lengths)
    for b, n in enumerate(lengths.tolist()):
        for direction in ("forward", "reverse"):
            assert all(torch.all(trace.get(name, 0, direction)[b, n:] == 0) for name in trace.names)
    _, _, trace = model(torch.randn(T, I), return_trace=True)
    assert trace.get("z").shape == (1, T, H)
    with pytest.raises(KeyError, match="not 'c'"):
        trace.get("c")


# --------------------------------------------------------------------------------------------
# Errors: say what was expected and what came
# --------------------------------------------------------------------------------------------

def test_input_errors():
    model = LSTM(64, 128)
    expected = r"LSTM expected input of shape \(T, B, 64\) \[batch_first=False\], got \(10, 3, 32\)"
    with pytest.raises(ValueError, match=expected):
        model(torch.randn(10, 3, 32))
    with pytest.raises(ValueError, match=r"expected input of shape \(B, T, 64\) \[batch_first=True\]"):
        LSTM(64, 128, batch_first=True)(torch.randn(3, 10, 32))
    with pytest.raises(ValueError, match=r"expected input of shape \(T, 64\) \[unbatched\], got \(10, 32\)"):
        model(torch.randn(10, 32))
    with pytest.raises(ValueError, match=r"expected input of rank 3.*got rank 4, shape \(1, 10, 3, 64\)"):
        model(torch.randn(1, 10, 3, 64))
    with pytest.raises(TypeError, match=r"dtype torch.float32.*got torch.int64 \(token ids"):
        model(torch.zeros(10, 3, 64, dtype=torch.long))
    with pytest.raises(TypeError, match=r"expected input of dtype torch.float64.*got torch.float32"):
        LSTM(64, 128).double()(torch.randn(10, 3, 64))
    with pytest.raises(ValueError, match=r"at least one time step.*\(T = 0\)"):
        model(torch.randn(0, 3, 64))
    with pytest.raises(RuntimeError, match=r"input is on cpu but the parameters are on meta"):
        LSTM(64, 128).to("meta")(torch.randn(10, 3, 64))


def test_state_errors():
    model = LSTM(4, 6, num_layers=2)
    x = torch.randn(5, 3, 4)
    good = torch.zeros(2, 3, 6)
    with pytest.raises(ValueError, match=r"expected h0 of shape \(2, 3, 6\) \[num_layers \* num_directions, B, "
                                         r"hidden_size\], got \(1, 3, 6\)"):
        model(x, (torch.zeros(1, 3, 6), good))
    with pytest.raises(ValueError, match=r"expected c0 of shape \(2, 3, 6\).*got \(2, 3, 5\)"):
        model(x, (good, torch.zeros(2, 3, 5)))
    with pytest.raises(ValueError, match=r"expected h0 of shape \(2, 6\) .*unbatched, got \(2, 1, 6\)"):
        model(torch.randn(5, 4), (torch.zeros(2, 1, 6), torch.zeros(2, 1, 6)))
    with pytest.raises(TypeError, match=r"expected hx to be a tuple \(h0, c0\), got Tensor"):
        model(x, good)
    with pytest.raises(TypeError, match=r"expected hx to be a tensor h0, got tuple"):
        GRU(4, 6)(x, (torch.zeros(1, 3, 6),))
    with pytest.raises(TypeError, match=r"expected c0 of dtype torch.float32.*got torch.float64"):
        model(x, (good, good.double()))
    with pytest.raises(RuntimeError, match=r"h0 is on meta but the parameters are on cpu"):
        model(x, (good.to("meta"), good))


def test_lengths_errors():
    model = GRU(4, 6)
    x = torch.randn(5, 3, 4)
    with pytest.raises(ValueError, match=r"expected one length per batch element: 3 lengths, got 2"):
        model(x, lengths=torch.tensor([5, 2]))
    with pytest.raises(ValueError, match=r"expected every length <= T = 5 .*got lengths\[1\] = 7"):
        model(x, lengths=torch.tensor([5, 7, 2]))
    with pytest.raises(ValueError, match=r"expected every length >= 1, got lengths\[2\] = 0"):
        model(x, lengths=[5, 2, 0])
    with pytest.raises(TypeError, match=r"expected integer lengths, got dtype torch.float32"):
        model(x, lengths=torch.tensor([5.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match=r"expected lengths of shape \(B,\) = \(3,\), got \(3, 1\)"):
        model(x, lengths=torch.tensor([[5], [2], [1]]))
    with pytest.raises(ValueError, match=r"lengths is for batched input"):
        model(torch.randn(5, 4), lengths=torch.tensor([5]))
    packed = pack_padded_sequence(x, torch.tensor([5, 2, 1]))
    with pytest.raises(ValueError, match=r"PackedSequence carries its own lengths"):
        model(packed, lengths=torch.tensor([5, 2, 1]))


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"unknown nonlinearity 'sigmoid'; expected 'tanh' or 'relu'"):
        RNN(4, 6, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match=r"unknown nonlinearity 'gelu'"):
        RNNCell(4, 6, nonlinearity="gelu")
    for bad in (-0.1, 1.0, 1.5, True):
        message = r"dropout must be a number in \[0, 1\).*got " + repr(bad).replace(".", r"\.")
        with pytest.raises(ValueError, match=message):
            LSTM(4, 6, num_layers=2, dropout=bad)
    with pytest.raises(ValueError, match=r"hidden_size must be greater than zero, got 0"):
        GRU(4, 0)
    with pytest.raises(ValueError, match=r"num_layers must be an int greater than zero, got 0"):
        GRU(4, 6, num_layers=0)
    with pytest.raises(ValueError, match=r"proj_size must be an int in \[0, hidden_size\) = \[0, 6\).*got 6"):
        LSTM(4, 6, proj_size=6)                  # proj_size itself is built (see the projection tests below)


def test_cell_errors():
    cell = LSTMCell(4, 6)
    expected = r"LSTMCell expected input of shape \(B, 4\) or \(4,\) \[unbatched\], got \(3, 5\)"
    with pytest.raises(ValueError, match=expected):
        cell(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"LSTMCell expected c of shape \(3, 6\), got \(3, 7\)"):
        cell(torch.randn(3, 4), (torch.zeros(3, 6), torch.zeros(3, 7)))
    with pytest.raises(TypeError, match=r"GRUCell expected input of dtype torch.float32"):
        GRUCell(4, 6)(torch.zeros(3, 4, dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# Property test over random small shapes
# --------------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None, derandomize=True)
@given(kind=st.sampled_from(list(KINDS)), steps=st.integers(1, 6), batch=st.integers(1, 4),
       input_size=st.integers(1, 5), hidden=st.integers(1, 5), num_layers=st.integers(1, 2),
       bidirectional=st.booleans(), fused=st.booleans(), data=st.data())
def test_random_shapes_match_torch(kind, steps, batch, input_size, hidden, num_layers, bidirectional, fused, data):
    reference, ours = make_pair(kind, input_size, hidden, num_layers=num_layers, bidirectional=bidirectional,
                                fused=fused)
    x = leaf(steps, batch, input_size, seed=1)
    lengths = data.draw(st.none() | st.lists(st.integers(1, steps), min_size=batch, max_size=batch))
    if lengths is None:
        expected, got = run(reference, x), run(ours, x)
    else:
        lengths = torch.tensor(lengths)
        expected = run(PackedTwin(reference, lengths), x, unpack_to=steps)
        got = run(ours, x, lengths=lengths)
    assert max_error(expected, got) <= TOL


def test_forward_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LSTM(4, 6)(torch.randn(2, 1, 4))


@pytest.mark.parametrize("kind", list(KINDS))
def test_hand_written_backward_passes_gradcheck(kind):
    """The fused path's BPTT against finite differences, float64, with padding and both directions."""
    _, model = make_pair(kind, 3, 4, bidirectional=True)
    model.double()
    lengths = torch.tensor([3, 1])
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    hx = [torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True) for _ in range(2 if kind == "lstm" else 1)]

    def f(x, *hx):
        output, state = model(x, tuple(hx) if kind == "lstm" else hx[0], lengths=lengths)
        return (output, *flatten_state(state))

    assert torch.autograd.gradcheck(f, (x, *hx))


def test_packed_input_feature_size_error():
    packed = pack_padded_sequence(torch.randn(5, 3, 7), torch.tensor([5, 2, 1]))
    with pytest.raises(ValueError, match=r"expected a PackedSequence of 4 features, got 7"):
        GRU(4, 6)(packed)


@pytest.mark.parametrize("cell", CELL_NAMES)
def test_recurrent_layer_builds_ours_or_torchs_by_name(cell):
    ours = recurrent_layer(cell, 3, 5, 2, 0.1, bidirectional=True)
    theirs = recurrent_layer(cell, 3, 5, 2, 0.1, bidirectional=True, reference=True)
    assert type(ours) is {"rnn": RNN, "lstm": LSTM, "gru": GRU}[cell]
    assert type(theirs) is {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell]
    for m in (ours, theirs):
        assert (m.input_size, m.hidden_size, m.num_layers, m.dropout) == (3, 5, 2, 0.1)
        assert m.batch_first and m.bidirectional
    assert repr(ours) == repr(theirs)
    ours.load_state_dict(theirs.state_dict())        # same parameter names and shapes


def test_recurrent_layer_passes_extra_arguments_and_rejects_unknown_cells():
    assert recurrent_layer("rnn", 2, 4, nonlinearity="relu", bias=False).nonlinearity == "relu"
    with pytest.raises(ValueError, match=r"cell must be one of \('rnn', 'lstm', 'gru'\), got 'transformer'"):
        recurrent_layer("transformer", 2, 4)


def test_fused_path_refuses_a_step_whose_cache_keys_differ_from_cache_names():
    """The fused scan labels its cached tensors with ``cache_names``: a mismatch must fail, not mislabel."""
    from seqlab.nn.lstm import lstm_step

    def reordered_step(*args):
        state, cache = lstm_step(*args)
        return state, dict(reversed(list(cache.items())))

    class ReorderedLSTM(LSTM):
        def _step(self):
            return reordered_step

    model = ReorderedLSTM(3, 4)
    with pytest.raises(RuntimeError, match=r"cache keys \('tanh_c', 'c', 'o', 'g', 'f', 'i'\) differ from the "
                                           r"layer's cache_names \('i', 'f', 'g', 'o', 'c', 'tanh_c'\)"):
        model(torch.randn(5, 2, 3))
    model.fused = False                      # the plain loop labels by key, so any order works there
    model(torch.randn(5, 2, 3))


def test_fused_path_refuses_a_step_that_carries_a_tensor_requiring_grad():
    """The fused backward returns no gradient for a tensor bound into the step: it must fail, not freeze it."""
    from functools import partial

    from seqlab.nn.bptt import scan_fused
    from seqlab.nn.lstm import lstm_projected_step

    weight_hr = torch.randn(2, 4, requires_grad=True)
    step = partial(lstm_projected_step, weight_hr=weight_hr)
    xw, state, weight_hh = torch.randn(5, 3, 16), (torch.zeros(3, 2), torch.zeros(3, 4)), torch.randn(16, 2)
    args = (xw, state, weight_hh, None, None, LSTM.cache_names)
    with pytest.raises(RuntimeError, match=r"the fused path got a step whose keyword argument 'weight_hr' of "
                                           r"partial\('lstm_projected_step'\) \(shape \(2, 4\)\) requires grad: .*"
                                           r"Use the plain path \(model.fused = False\), or declare it as a "
                                           r"weight of the cell \(RecurrentBase.cell_weight_shapes\)"):
        scan_fused("LSTM", step, *args, hh_grad_is_xw_grad=True)
    with torch.no_grad():                                 # no gradient to lose
        scan_fused("LSTM", step, *args, hh_grad_is_xw_grad=True)
    scan_fused("LSTM", partial(lstm_projected_step, weight_hr=weight_hr.detach()), *args, hh_grad_is_xw_grad=True)

    class ClosureLSTM(LSTM):                               # reads its projection from a closure, undeclared
        def _step(self):
            weight = self.weight_hr_l0
            return lambda xw_t, state, w_hh, b_hh: lstm_projected_step(xw_t, state, w_hh, b_hh, weight_hr=weight)

        def cell_weight_shapes(self):
            return {}

    model = ClosureLSTM(3, 4, proj_size=2)
    model.register_parameter("weight_hr_l0", torch.nn.Parameter(torch.randn(2, 4)))
    with pytest.raises(RuntimeError, match=r"closure variable 'weight' of \S*ClosureLSTM._step.<locals>.<lambda> "
                                           r"\(shape \(2, 4\)\) requires grad"):
        model(torch.randn(5, 2, 3))
    model.fused = False
    model(torch.randn(5, 2, 3))[0].sum().backward()
    assert model.weight_hr_l0.grad.abs().max() > 0


def peephole_lstm_step(xw_t, state, weight_hh, bias_hh=None, *, weight_ch):
    """An LSTM step with peepholes: i, f see c_{t-1} and o sees c_t through the rows of ``weight_ch`` (3, H)."""
    h_prev, c_prev = state
    gates = torch.addmm(xw_t, h_prev, weight_hh.t()) + (0 if bias_hh is None else bias_hh)
    a_i, a_f, a_g, a_o = gates.chunk(4, dim=1)
    i, f = torch.sigmoid(a_i + weight_ch[0] * c_prev), torch.sigmoid(a_f + weight_ch[1] * c_prev)
    g = torch.tanh(a_g)
    c = f * c_prev + i * g
    o, tanh_c = torch.sigmoid(a_o + weight_ch[2] * c), torch.tanh(c)
    return (o * tanh_c, c), {"i": i, "f": f, "g": g, "o": o, "c": c, "tanh_c": tanh_c}


class PeepholeLSTM(LSTM):
    """A new cell variant: it declares its extra weight, and the layer registers, binds and routes it."""

    def _step(self):
        return peephole_lstm_step

    def cell_weight_shapes(self):
        return {"weight_ch": (3, self.hidden_size)}


def test_a_cell_that_declares_its_weights_gets_their_gradients_on_the_default_path():
    torch.manual_seed(0)
    fused, plain = PeepholeLSTM(I, H, num_layers=2, bidirectional=True), PeepholeLSTM(I, H, num_layers=2,
                                                                                       bidirectional=True)
    plain.load_state_dict(fused.state_dict())
    plain.fused = False
    assert [n for n in dict(fused.named_parameters()) if n.startswith("weight_ch")] == \
        ["weight_ch_l0", "weight_ch_l0_reverse", "weight_ch_l1", "weight_ch_l1_reverse"]
    assert [len(group) for group in fused.all_weights] == [5] * 4
    x, lengths = leaf(T, B, I, seed=1), torch.tensor([5, 2, 3])
    a, b = run(fused, x, lengths=lengths), run(plain, x, lengths=lengths)
    assert all(g.abs().max() > 0 for g in a[2].values()), "a parameter got no gradient"
    assert max_error(a, b) == 0


def test_lstm_backward_names_match_the_chain_rule():
    """d_i, d_f, d_g, d_o from lstm_step_backward equal autograd's gradients of the pre-activations."""
    from seqlab.nn.bptt import lstm_backward_prepare, lstm_step_backward
    from seqlab.nn.lstm import lstm_step

    g = torch.Generator().manual_seed(0)
    B, H = 3, 5
    xw = torch.randn(B, 4 * H, generator=g, dtype=torch.float64, requires_grad=True)
    h0, c0 = (torch.randn(B, H, generator=g, dtype=torch.float64) for _ in range(2))
    W = torch.randn(4 * H, H, generator=g, dtype=torch.float64)
    (h1, c1), cache = lstm_step(xw, (h0, c0), W)
    dh, dc = torch.randn(B, H, generator=g, dtype=torch.float64), torch.randn(B, H, generator=g, dtype=torch.float64)
    (h1 * dh + c1 * dc).sum().backward()
    stacked = {k: v.detach()[None] for k, v in cache.items()}
    prepared = {k: v[0] for k, v in lstm_backward_prepare(stacked, (torch.stack([h0, h1.detach()]),
                                                                     torch.stack([c0, c1.detach()]))).items()}
    d_gates, _, _, no_weights = lstm_step_backward((dh, dc), prepared, W)
    assert no_weights == {}
    d_i, d_f, d_g, d_o = d_gates.chunk(4, dim=1)
    for name, mine, auto in zip("ifgo", (d_i, d_f, d_g, d_o), xw.grad.chunk(4, dim=1)):
        assert torch.allclose(mine, auto, atol=1e-12), f"d_{name} differs from autograd"


def test_cuda_graphed_on_the_cpu_says_why_not():
    from seqlab.nn import cuda_graphed
    with pytest.raises(RuntimeError, match=r"needs a module on a CUDA device; LSTM is on cpu.*no kernel launches"):
        cuda_graphed(LSTM(3, 4), torch.randn(5, 2, 3, requires_grad=True))
    with pytest.raises(TypeError, match=r"expected an nn.Module, got function"):
        cuda_graphed(lambda x: x, torch.randn(5, 2, 3))


# --------------------------------------------------------------------------------------------
# LSTM with a projection (proj_size > 0): h_t = W_hr (o_t * tanh c_t)
# --------------------------------------------------------------------------------------------

P = 4          # proj_size, below H
# torch warns that oneDNN has no projected LSTM and falls back to its own loop: nothing to act on
quiet_onednn = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")


@quiet_onednn
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])   # fused falls back to the plain path
@pytest.mark.parametrize("with_hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TB", "BT"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_projected_lstm_matches_torch(num_layers, bidirectional, batch_first, with_hx, fused):
    """Outputs, (h_n, c_n) and the gradients of every weight (weight_hr included), the input and (h0, c0)."""
    reference, ours = make_pair("lstm", I, H, num_layers=num_layers, bidirectional=bidirectional,
                                batch_first=batch_first, proj_size=P, fused=fused)
    x = leaf(*((B, T, I) if batch_first else (T, B, I)), seed=1)
    rows = num_layers * (2 if bidirectional else 1)
    hx = (leaf(rows, B, P, seed=2), leaf(rows, B, H, seed=3)) if with_hx else None
    expected, got = run(reference, x, hx), run(ours, x, hx)
    assert got[0].shape[-1] == (2 if bidirectional else 1) * P
    assert [s.shape for s in got[1]] == [(rows, B, P), (rows, B, H)]
    assert any(k.startswith("weight_hr") for k in got[2])
    assert all(g.abs().max() > 0 for g in got[2].values()), "a parameter got no gradient"
    assert max_error(expected, got) <= TOL


@quiet_onednn
def test_projected_lstm_with_lengths_packed_and_unbatched_matches_torch():
    reference, ours = make_pair("lstm", I, H, num_layers=2, bidirectional=True, proj_size=P)
    steps, batch, lengths = 6, 4, torch.tensor([3, 6, 1, 4])
    x = leaf(steps, batch, I, seed=1)
    hx = (leaf(4, batch, P, seed=2), leaf(4, batch, H, seed=3))
    expected = run(PackedTwin(reference, lengths), x, hx, unpack_to=steps)
    assert max_error(expected, run(ours, x, hx, lengths=lengths)) <= TOL
    packed = pack_padded_sequence(x.detach(), lengths, enforce_sorted=False)
    assert (ours(packed)[0].data - reference(packed)[0].data).abs().max() <= TOL
    single = leaf(steps, I, seed=4)                                   # unbatched (T, I)
    assert max_error(run(reference, single), run(ours, single)) <= TOL


def test_projected_lstm_has_torchs_parameters_repr_and_trace():
    reference, ours = make_pair("lstm", I, H, num_layers=2, bidirectional=True, proj_size=P)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == [(n, p.shape) for n, p in reference.named_parameters()]
    assert ours.weight_hr_l1_reverse.shape == (P, H) and ours.weight_hh_l0.shape == (4 * H, P)
    assert [[w.shape for w in group] for group in ours.all_weights] == \
        [[w.shape for w in group] for group in reference.all_weights]
    assert repr(ours) == repr(reference) == f"LSTM({I}, {H}, proj_size={P}, num_layers=2, bidirectional=True)"
    output, _, trace = ours(torch.randn(T, B, I), return_trace=True)
    assert trace.get("h", layer=1, direction="reverse").shape == (B, T, P)
    assert trace.get("c", layer=1, direction="reverse").shape == (B, T, H)
    assert torch.equal(trace.get("h", layer=1, direction="forward"), output[..., :P].detach().transpose(0, 1))
    built = recurrent_layer("lstm", I, H, proj_size=P)
    assert built.proj_size == P and built(torch.randn(B, T, I))[0].shape == (B, T, P)


def test_projected_lstm_errors_name_the_sizes():
    for bad in (-1, H, H + 1, 2.0):
        with pytest.raises(ValueError, match=rf"LSTM proj_size must be an int in \[0, hidden_size\) = \[0, {H}\) "
                                             rf"\(0: no projection\), got {bad!r}"):
            LSTM(I, H, proj_size=bad)
    model = LSTM(I, H, num_layers=2, proj_size=P)
    x, c0 = torch.randn(T, B, I), torch.zeros(2, B, H)
    with pytest.raises(ValueError, match=rf"expected h0 of shape \(2, {B}, {P}\) \[num_layers \* num_directions, B, "
                                         rf"proj_size\], got \(2, {B}, {H}\)"):
        model(x, (torch.zeros(2, B, H), c0))
    with pytest.raises(ValueError, match=rf"expected c0 of shape \(2, {B}, {H}\) \[num_layers \* num_directions, B, "
                                         rf"hidden_size\], got \(2, {B}, {P}\)"):
        model(x, (torch.zeros(2, B, P), torch.zeros(2, B, P)))


# -- peephole connections: a cell weight the fused path differentiates ------------------------------
def _peephole_pair(**kwargs):
    torch.manual_seed(0)
    fused = LSTM(I, H, peephole=True, dtype=torch.float64, **kwargs)
    plain = LSTM(I, H, peephole=True, dtype=torch.float64, **kwargs)
    plain.load_state_dict(fused.state_dict())
    plain.fused = False
    return fused, plain


@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("num_layers, bidirectional", [(1, False), (1, True), (2, False), (2, True)])
@pytest.mark.parametrize("lengths", [None, [5, 2, 3]])
def test_peephole_fused_and_plain_agree_on_outputs_and_every_gradient(peephole, num_layers, bidirectional, lengths):
    torch.manual_seed(0)
    fused = LSTM(I, H, num_layers, peephole=peephole, bidirectional=bidirectional, dtype=torch.float64)
    plain = LSTM(I, H, num_layers, peephole=peephole, bidirectional=bidirectional, dtype=torch.float64)
    plain.load_state_dict(fused.state_dict())
    plain.fused = False
    x = leaf(T, B, I, seed=1).double().detach().requires_grad_()
    hx = (leaf(num_layers * (1 + bidirectional), B, H, seed=2).double(),
          leaf(num_layers * (1 + bidirectional), B, H, seed=3).double())
    kwargs = {} if lengths is None else {"lengths": torch.tensor(lengths)}
    a, b = run(fused, x, hx, **kwargs), run(plain, x, hx, **kwargs)
    assert set(a[2]) == set(b[2]) and all(g is not None for g in a[2].values())
    assert max_error(a, b) < 1e-12
    names = [n for n in a[2] if n.startswith("weight_c")]
    assert len(names) == (3 * num_layers * (1 + bidirectional) if peephole else 0)


def test_peephole_packed_sequence_fused_equals_plain():
    fused, plain = _peephole_pair(num_layers=2, bidirectional=True)
    x = leaf(T, B, I, seed=4).double().detach()
    lengths = torch.tensor([5, 3, 2])
    packed = lambda t: pack_padded_sequence(t, lengths, enforce_sorted=False)     # noqa: E731
    outputs = []
    for model in (fused, plain):
        leaf_x = x.clone().requires_grad_()
        output, (h_n, c_n) = model(packed(leaf_x))
        (pad_packed_sequence(output, total_length=T)[0].square().sum() + h_n.sum() + c_n.sum()).backward()
        outputs.append([leaf_x.grad, *(p.grad for p in model.parameters()), h_n.detach(), c_n.detach()])
    assert all(torch.allclose(p, q, atol=1e-12, rtol=0) for p, q in zip(*outputs))


def test_peephole_weights_get_a_gradient_on_the_fused_path_and_run_it():
    """The silent freeze: a declared cell weight must get its gradient from the fused backward, not none."""
    fused, _ = _peephole_pair(num_layers=2, bidirectional=True)
    output, _ = fused(leaf(T, B, I, seed=5).double())
    assert type(output.grad_fn).__name__.startswith("_FusedScanBackward") or \
        "_FusedScan" in str(output.grad_fn.next_functions)                     # the fused scan ran
    output.sum().backward()
    for name, p in fused.named_parameters():
        assert p.grad is not None and p.grad.abs().max() > 0, f"{name} got no gradient"
    assert fused.weight_co_l1_reverse.grad.shape == (H,)
    # the peepholes change the output: a model with them zeroed is an ordinary LSTM
    with torch.no_grad():
        for name, p in fused.named_parameters():
            if name.startswith("weight_c"):
                p.zero_()
    plain = LSTM(I, H, 2, bidirectional=True, dtype=torch.float64)
    plain.load_state_dict({k: v for k, v in fused.state_dict().items() if not k.startswith("weight_c")})
    x = leaf(T, B, I, seed=6).double()
    assert torch.allclose(fused(x)[0], plain(x)[0], atol=1e-14)


def test_fused_peephole_scan_passes_gradcheck():
    from seqlab.nn.bptt import scan_fused
    from seqlab.nn.lstm import lstm_peephole_step

    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.5).requires_grad_()

    xw, h0, c0, w_hh, b_hh = r(4, 2, 4 * 3), r(2, 3), r(2, 3), r(4 * 3, 3), r(4 * 3)
    w_ci, w_cf, w_co = r(3), r(3), r(3)
    mask = torch.tensor([[True, True], [True, True], [True, False], [True, False]]).unsqueeze(-1)

    def scan(xw, h0, c0, w_hh, b_hh, w_ci, w_cf, w_co, mask=None):
        out, (h, c), _ = scan_fused("LSTM", lstm_peephole_step, xw, (h0, c0), w_hh, b_hh, mask, LSTM.cache_names,
                                    hh_grad_is_xw_grad=False, cell_weights={"weight_ci": w_ci, "weight_cf": w_cf,
                                                                             "weight_co": w_co})
        return out, h, c

    inputs = (xw, h0, c0, w_hh, b_hh, w_ci, w_cf, w_co)
    assert torch.autograd.gradcheck(scan, inputs)
    assert torch.autograd.gradcheck(lambda *a: scan(*a, mask=mask), inputs)


def test_fused_scan_refuses_cell_weights_its_backward_does_not_differentiate():
    from seqlab.nn.bptt import BACKWARD, Backward, scan_fused
    from seqlab.nn.lstm import lstm_peephole_step, lstm_projected_step

    xw, state, w_hh = torch.randn(5, 3, 16), (torch.zeros(3, 2), torch.zeros(3, 4)), torch.randn(16, 2)
    with pytest.raises(ValueError, match=r"the fused LSTM backward has no gradient for the cell weight\(s\) "
                                         r"\['weight_hr'\]; it computes \['weight_cf', 'weight_ci', 'weight_co'\]"):
        scan_fused("LSTM", lstm_projected_step, xw, state, w_hh, None, None, LSTM.cache_names,
                   hh_grad_is_xw_grad=True, cell_weights={"weight_hr": torch.randn(2, 4, requires_grad=True)})
    # a Backward that lists a weight but whose step returns no gradient for it fails loudly at backward
    original = BACKWARD["LSTM"]
    forgetful = Backward(lambda *a, **w: original.step_backward(*a, **w)[:3] + ({},), original.prepare,
                         original.cell_weights)
    weights = {n: torch.randn(4, dtype=torch.float64, requires_grad=True) for n in ("weight_ci", "weight_cf", "weight_co")}
    xw, state = torch.randn(5, 3, 16, dtype=torch.float64), (torch.zeros(3, 4, dtype=torch.float64),) * 2
    w_hh = torch.randn(16, 4, dtype=torch.float64)
    BACKWARD["LSTM"] = forgetful
    try:
        out, _, _ = scan_fused("LSTM", lstm_peephole_step, xw.requires_grad_(), state, w_hh, None, None,
                               LSTM.cache_names, hh_grad_is_xw_grad=True, cell_weights=weights)
        with pytest.raises(RuntimeError, match=r"returned no gradient for the cell weight\(s\) \['weight_ci', "):
            out.sum().backward()
    finally:
        BACKWARD["LSTM"] = original


def test_peephole_option_is_off_by_default_and_named_in_the_repr():
    assert "weight_ci_l0" not in dict(LSTM(I, H).named_parameters())
    model = LSTM(I, H, 2, proj_size=3, peephole=True)
    assert repr(model) == "LSTM(4, 6, proj_size=3, num_layers=2, peephole=True)"
    assert [len(group) for group in model.all_weights] == [8, 8]
    assert [n for n in dict(model.named_parameters()) if n.endswith("_l0")] == \
        ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0", "weight_ci_l0", "weight_cf_l0",
         "weight_co_l0"]
    with pytest.raises(TypeError, match="peephole must be True or False, got 1"):
        LSTM(I, H, peephole=1)


def test_peephole_with_a_projection_runs_plain_and_trains_every_weight():
    torch.manual_seed(0)
    model = LSTM(I, H, proj_size=3, peephole=True, dtype=torch.float64)
    output, _ = model(leaf(T, B, I, seed=7).double())
    assert "_FusedScan" not in type(output.grad_fn).__name__
    output.sum().backward()
    assert all(p.grad.abs().max() > 0 for p in model.parameters())
