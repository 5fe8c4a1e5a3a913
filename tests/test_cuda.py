"""seqlab on a CUDA GPU: the same numbers as on the CPU, and clear errors across devices.

Skipped where torch sees no GPU (the course's own CI machines); run on a GPU machine with
``python -m pytest tests/test_cuda.py``. Parity is checked against torch.nn on the CPU in float64
as well as against torch.nn on the GPU (cuDNN), so that neither side's rounding hides a bug.
"""

from __future__ import annotations

import pytest
import torch

from seqlab.nn import GRU, LSTM, RNN, cuda_graphed
from seqlab.nn.masks import causal_mask
from seqlab.nn.multihead import MultiheadAttention
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.train import evaluate, lm_loss, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")

TOL = 1e-5
KINDS = {"rnn_tanh": (RNN, torch.nn.RNN, {}), "rnn_relu": (RNN, torch.nn.RNN, {"nonlinearity": "relu"}),
         "lstm": (LSTM, torch.nn.LSTM, {}), "gru": (GRU, torch.nn.GRU, {})}


@pytest.fixture(autouse=True)
def exact_float32_matmuls():
    """TF32 would round float32 products to 10-bit mantissas; parity at 1e-5 needs it off."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def forward_backward(module: torch.nn.Module, x: torch.Tensor, h0: torch.Tensor, kind: str) -> list[torch.Tensor]:
    """Outputs, final states and the gradients of every parameter, the input and h0 (on the CPU)."""
    x = x.detach().clone().requires_grad_()
    h0 = h0.detach().clone().requires_grad_()
    hx = (h0, torch.zeros_like(h0)) if kind == "lstm" else h0
    output, state = module(x, hx)
    states = list(state) if isinstance(state, tuple) else [state]
    loss = (output.sin()).sum() + sum((s.cos()).sum() for s in states)
    loss.backward()
    tensors = [output, *states, *(p.grad for p in module.parameters()), x.grad, h0.grad]
    return [t.detach().double().cpu() for t in tensors]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_seqlab_on_cuda_matches_torch(kind, bidirectional, fused):
    ours_cls, torch_cls, extra = KINDS[kind]
    torch.manual_seed(0)
    reference = torch_cls(8, 16, num_layers=2, bidirectional=bidirectional, batch_first=True, **extra)
    ours = ours_cls(8, 16, num_layers=2, bidirectional=bidirectional, batch_first=True, **extra)
    ours.load_state_dict(reference.state_dict())
    ours.fused = fused
    x = torch.randn(4, 30, 8)
    h0 = torch.randn(2 * (2 if bidirectional else 1), 4, 16)
    exact = forward_backward(reference.double(), x.double(), h0.double(), kind)     # torch.nn, CPU, float64
    cudnn = forward_backward(reference.float().cuda(), x.cuda(), h0.cuda(), kind)   # torch.nn, GPU, float32
    mine = forward_backward(ours.cuda(), x.cuda(), h0.cuda(), kind)                 # seqlab, GPU, float32
    assert all(t.is_cuda for t in ours.parameters())
    error_vs_exact = max((a - b).abs().max().item() for a, b in zip(mine, exact, strict=True))
    error_vs_cudnn = max((a - b).abs().max().item() for a, b in zip(mine, cudnn, strict=True))
    cudnn_vs_exact = max((a - b).abs().max().item() for a, b in zip(cudnn, exact, strict=True))
    # seqlab on the GPU is as close to the exact answer as cuDNN is, and close to cuDNN itself
    assert error_vs_exact <= max(TOL, 2 * cudnn_vs_exact), (error_vs_exact, cudnn_vs_exact)
    assert error_vs_cudnn <= max(TOL, 2 * cudnn_vs_exact), (error_vs_cudnn, cudnn_vs_exact)


def test_lengths_and_trace_on_cuda():
    torch.manual_seed(0)
    model = LSTM(3, 5, bidirectional=True, batch_first=True)
    x = torch.randn(2, 7, 3)
    lengths = torch.tensor([7, 4])
    out_cpu, _, trace_cpu = model(x, lengths=lengths, return_trace=True)
    out_gpu, _, trace_gpu = model.cuda()(x.cuda(), lengths=lengths, return_trace=True)
    assert out_gpu.is_cuda and trace_gpu.get("f", 0, "reverse").is_cuda
    assert (out_gpu.cpu() - out_cpu).abs().max() < TOL
    assert (trace_gpu.get("c", 0, "reverse").cpu() - trace_cpu.get("c", 0, "reverse")).abs().max() < TOL


def test_mixed_devices_are_named_in_the_error():
    model = GRU(4, 6).cuda()
    with pytest.raises(RuntimeError, match=r"input is on cpu but the parameters are on cuda:0"):
        model(torch.randn(5, 3, 4))
    with pytest.raises(RuntimeError, match=r"h0 is on cpu but the parameters are on cuda:0"):
        model(torch.randn(5, 3, 4, device="cuda"), torch.zeros(1, 3, 6))
    batch = (torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 8, dtype=torch.long))
    lm = CharLM(CharLMConfig(vocab_size=10, cell="gru", embed_size=8, hidden_size=16)).cuda()
    with pytest.raises(RuntimeError, match=r"is on cpu, but the model CharLM is on cuda:0\. Pass device='cuda:0'"):
        evaluate(lm, [batch])


def test_training_on_cuda_matches_training_on_the_cpu():
    """Same seed, same batches: the loss curve on the GPU follows the CPU's to float32 rounding."""
    g = torch.Generator().manual_seed(0)
    windows = [torch.randint(0, 12, (8, 21), generator=g) for _ in range(30)]
    batches = [(w[:, :-1], w[:, 1:]) for w in windows]                 # (inputs, next-character targets)
    curves = {}
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = CharLM(CharLMConfig(vocab_size=12, cell="lstm", embed_size=8, hidden_size=32))
        history = train(model, batches, lm_loss, max_steps=30, lr=1e-2, device=device, progress=False)
        assert next(model.parameters()).device.type == device
        curves[device] = torch.tensor(history.train_loss)
    assert (curves["cuda"] - curves["cpu"]).abs().max() < 1e-3
    assert curves["cuda"][-5:].mean() < curves["cuda"][:5].mean()


# --- multi-head attention -------------------------------------------------------------------------

MHA_MASKS = {
    "none": {},
    "causal": {"is_causal": True},                                   # seqlab builds it; torch gets it given
    "bool_2d_and_padding": {"attn_mask": "bool_2d", "key_padding_mask": "padding"},
    "float_3d": {"attn_mask": "float_3d"},
}


def mha_masks(name: str, B: int, H: int, L: int, S: int, device) -> tuple[dict, dict]:
    """Forward kwargs for seqlab and for torch (torch needs the causal mask spelled out)."""
    g = torch.Generator().manual_seed(1)
    blocked = torch.rand(L, S, generator=g) < 0.4
    blocked[:, 0] = False                                            # every query keeps a key (torch: no NaN)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[1, S // 2:] = True
    float_3d = torch.randn(B * H, L, S, generator=g).masked_fill(torch.rand(B * H, L, S, generator=g) < 0.3,
                                                                 float("-inf"))
    float_3d[..., 0] = 0.0
    made = {"bool_2d": blocked, "padding": padding, "float_3d": float_3d}
    ours = {k: (made[v].to(device) if isinstance(v, str) else v) for k, v in MHA_MASKS[name].items()}
    theirs = dict(ours)
    if name == "causal":            # torch raises without attn_mask; with is_causal its SDPA path would align top-left
        theirs = {"attn_mask": ~causal_mask(L, S, device=device)}
    return ours, theirs


def mha_forward_backward(module, query, memory, **kwargs) -> list[torch.Tensor]:
    """Output, weights, and the gradients of the inputs and every parameter (by name), on the CPU in float64."""
    query = query.detach().clone().requires_grad_()
    memory = memory.detach().clone().requires_grad_()
    out, weights = module(query, memory, memory, **kwargs)
    loss = out.sin().sum() + (0.0 if weights is None else weights.cos().sum())
    loss.backward()
    tensors = [out, *([] if weights is None else [weights]), query.grad, memory.grad,
               *(p.grad for _, p in sorted(module.named_parameters()))]
    return [t.detach().double().cpu() for t in tensors]


def max_error(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    assert [t.shape for t in a] == [t.shape for t in b]
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
@pytest.mark.parametrize("masks", list(MHA_MASKS))
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_multihead_attention_on_cuda_matches_torch(batch_first, masks, fused):
    """seqlab on the GPU vs torch.nn on the GPU and vs torch.nn on the CPU in float64: outputs, per-head
    weights (explicit path) and every gradient; the fused path (SDPA, no weights) against torch's SDPA path."""
    E, H, B, L, S = 32, 4, 3, 6, 9
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    with torch.no_grad():
        reference.in_proj_bias.normal_()
        reference.out_proj.bias.normal_()
    ours = MultiheadAttention(E, H, batch_first=batch_first, fused=fused)
    ours.load_state_dict(reference.state_dict())
    shape = (lambda n: (B, n, E)) if batch_first else (lambda n: (n, B, E))
    query, memory = torch.randn(*shape(L)), torch.randn(*shape(S))
    need = {"need_weights": not fused, "average_attn_weights": False}
    ours_kw, theirs_kw = mha_masks(masks, B, H, L, S, "cpu")
    exact = mha_forward_backward(reference.double(), query.double(), memory.double(), **need,
                                 **{k: (v.double() if v.is_floating_point() else v) for k, v in theirs_kw.items()})
    ours_kw, theirs_kw = mha_masks(masks, B, H, L, S, "cuda")
    on_gpu = mha_forward_backward(reference.float().cuda(), query.cuda(), memory.cuda(), **need, **theirs_kw)
    mine = mha_forward_backward(ours.cuda(), query.cuda(), memory.cuda(), **need, **ours_kw)
    assert all(p.is_cuda for p in ours.parameters())
    error_vs_exact, error_vs_torch = max_error(mine, exact), max_error(mine, on_gpu)
    torch_vs_exact = max_error(on_gpu, exact)
    assert error_vs_exact <= max(TOL, 2 * torch_vs_exact), (error_vs_exact, torch_vs_exact)
    assert error_vs_torch <= max(TOL, 2 * torch_vs_exact), (error_vs_torch, torch_vs_exact)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_multihead_attention_fully_masked_rows_on_cuda_give_zeros(fused):
    torch.manual_seed(0)
    mha = MultiheadAttention(16, 4, batch_first=True, fused=fused).cuda()
    query = torch.randn(2, 5, 16, device="cuda", requires_grad=True)
    memory = torch.randn(2, 7, 16, device="cuda", requires_grad=True)
    attn_mask = torch.zeros(5, 7, dtype=torch.bool, device="cuda")
    attn_mask[1] = True                                              # query 1 may attend to nothing
    key_padding_mask = torch.zeros(2, 7, dtype=torch.bool, device="cuda")
    key_padding_mask[1] = True                                       # sequence 1 is all padding
    out, _ = mha(query, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                 need_weights=not fused)
    out.square().sum().backward()
    bias = mha.out_proj.bias.detach()                                # a zero attention output, through W^O
    assert torch.equal(out[:, 1].detach(), bias.expand(2, 16)) and torch.equal(out[1].detach(), bias.expand(5, 16))
    assert torch.isfinite(query.grad).all() and torch.isfinite(memory.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_multihead_attention_names_devices_in_its_errors():
    mha = MultiheadAttention(16, 4, batch_first=True).cuda()
    x = torch.randn(2, 5, 16, device="cuda")
    with pytest.raises(RuntimeError, match=r"query is on cpu but the parameters are on cuda:0"):
        mha(x.cpu(), x, x)
    with pytest.raises(RuntimeError, match=r"attn_mask is on cpu but the query is on cuda:0"):
        mha(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.bool))
    with pytest.raises(RuntimeError, match=r"key_padding_mask is on cpu but the query is on cuda:0"):
        mha(x, x, x, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool))


# -- the Transformer (seqlab.nn.transformer) --------------------------------------------------------------


def transformer_forward_backward(model: torch.nn.Module, src: torch.Tensor, tgt: torch.Tensor,
                                 masks: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The output and the gradients of src, tgt and every parameter (float64, on the CPU)."""
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    model.zero_grad(set_to_none=True)
    src = src.detach().to(device, dtype).requires_grad_()
    tgt = tgt.detach().to(device, dtype).requires_grad_()
    masks = {k: v.to(device, dtype if v.is_floating_point() else v.dtype) if isinstance(v, torch.Tensor) else v
             for k, v in masks.items()}
    out = model(src, tgt, **masks)
    (out.sin()).sum().backward()
    return [t.detach().double().cpu() for t in (out, src.grad, tgt.grad, *(p.grad for p in model.parameters()))]


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")       # torch.nn.Transformer's own remark
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_transformer_on_cuda_matches_torch(norm_first, fused):
    from seqlab.nn.transformer import Transformer

    torch.manual_seed(0)
    kwargs = dict(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                  batch_first=True, norm_first=norm_first)
    reference = torch.nn.Transformer(**kwargs).eval()
    with torch.no_grad():                                   # every parameter random, LayerNorms included
        for p in reference.parameters():
            p.copy_(torch.randn(p.shape) * (p.shape[-1] ** -0.5 if p.dim() > 1 else 0.5))
    ours = Transformer(**kwargs, fused=fused).eval()
    ours.load_state_dict(reference.state_dict(), strict=True)
    src, tgt = torch.randn(3, 9, 32), torch.randn(3, 6, 32)
    pad = torch.arange(9)[None, :] >= torch.tensor([9, 5, 2])[:, None]          # torch's meaning: True at padding
    masks = {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(6), "tgt_is_causal": True,
             "src_key_padding_mask": pad, "memory_key_padding_mask": pad}
    exact = transformer_forward_backward(reference.double(), src, tgt, masks)          # torch.nn, CPU, float64
    on_gpu = transformer_forward_backward(reference.float().cuda(), src, tgt, masks)   # torch.nn, GPU, float32
    mine = transformer_forward_backward(ours.cuda(), src, tgt, masks)                  # seqlab, GPU, float32
    assert all(p.is_cuda for p in ours.parameters())
    error_vs_exact = max((a - b).abs().max().item() for a, b in zip(mine, exact, strict=True))
    error_vs_torch = max((a - b).abs().max().item() for a, b in zip(mine, on_gpu, strict=True))
    torch_vs_exact = max((a - b).abs().max().item() for a, b in zip(on_gpu, exact, strict=True))
    assert error_vs_exact <= max(TOL, 2 * torch_vs_exact), (error_vs_exact, torch_vs_exact)
    assert error_vs_torch <= max(TOL, 2 * torch_vs_exact), (error_vs_torch, torch_vs_exact)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_transformer_positional_and_all_padding_on_cuda(fused):
    from seqlab.nn.positional import ALiBi, RotaryPositionalEncoding
    from seqlab.nn.transformer import Transformer, TransformerEncoder, TransformerEncoderLayer

    torch.manual_seed(0)
    encoder = TransformerEncoder(TransformerEncoderLayer(32, 4, 64, batch_first=True, fused=fused), 2,
                                 positional=RotaryPositionalEncoding(8)).eval()
    src = torch.randn(2, 7, 32)
    pad = torch.tensor([[False] * 7, [True] * 7])                                # sequence 1: all padding
    on_cpu = encoder(src, src_key_padding_mask=pad)
    encoder.cuda()                                                                # the shared RoPE moves too
    assert encoder.positional.theta.is_cuda                                      # the stack owns it
    on_gpu = encoder(src.cuda(), src_key_padding_mask=pad.cuda())
    assert torch.isfinite(on_gpu).all()
    assert (on_gpu.cpu() - on_cpu).abs().max() < TOL
    model = Transformer(32, 4, 1, 1, 64, batch_first=True, positional=ALiBi(4), fused=fused).eval().cuda()
    src = torch.randn(2, 7, 32, device="cuda", requires_grad=True)
    out, weights = model(src, torch.randn(2, 5, 32, device="cuda"), src_key_padding_mask=pad.cuda(),
                         memory_key_padding_mask=pad.cuda(), need_weights=True)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(src.grad).all() and (src.grad[1] == 0).all()
    assert weights["cross"].is_cuda and weights["cross"].shape == (1, 2, 4, 5, 7)
    assert (weights["cross"][:, 1] == 0).all()                                    # nothing to attend to: zeros


# --------------------------------------------------------------------------------------------
# The scan replayed as CUDA graphs (seqlab.nn.cuda_graphed): same numbers, fixed shapes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True)], ids=["1-layer", "2-layer-bi"])
@pytest.mark.parametrize("kind", ["rnn_tanh", "lstm", "gru"])
def test_cuda_graphed_scan_gives_the_eager_numbers(kind, layers, bidirectional):
    ours_cls, _, extra = KINDS[kind]
    torch.manual_seed(0)
    eager = ours_cls(5, 7, num_layers=layers, bidirectional=bidirectional, **extra).cuda()
    graphed = ours_cls(5, 7, num_layers=layers, bidirectional=bidirectional, **extra).cuda()
    graphed.load_state_dict(eager.state_dict())
    example = torch.randn(9, 4, 5, device="cuda", requires_grad=True)
    cuda_graphed(graphed, example)
    for trial in range(2):   # two different inputs: each replay reads the new data, not the captured sample
        x = torch.randn(9, 4, 5, device="cuda")
        results = []
        for model in (eager, graphed):
            model.zero_grad(set_to_none=True)
            xi = x.clone().requires_grad_()
            output, state = model(xi)
            states = list(state) if isinstance(state, tuple) else [state]
            (output.sin().sum() + sum(s.cos().sum() for s in states)).backward()
            results.append([output, *states, xi.grad, *(p.grad for p in model.parameters())])
        for ours, theirs in zip(*results):
            torch.testing.assert_close(theirs, ours, rtol=TOL, atol=TOL)


def test_cuda_graphed_refuses_other_shapes_and_arguments():
    model = cuda_graphed(LSTM(3, 4).cuda(), torch.randn(6, 2, 3, device="cuda", requires_grad=True))
    with pytest.raises(ValueError, match=r"replays only for input of shape \(6, 2, 3\).*got shape \(6, 1, 3\)"):
        model(torch.randn(6, 1, 3, device="cuda", requires_grad=True))   # would broadcast silently
    with pytest.raises(TypeError, match=r"takes only its input in training mode"):
        model(torch.randn(6, 2, 3, device="cuda", requires_grad=True), lengths=[6, 5])
    model.eval()   # eval mode runs the ordinary forward: any shape, any argument
    output, _ = model(torch.randn(4, 1, 3, device="cuda"), lengths=[4])
    assert output.shape == (4, 1, 4)
