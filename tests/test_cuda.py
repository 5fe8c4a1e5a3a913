"""seqlab on a CUDA GPU: the same numbers as on the CPU, and clear errors across devices.

Skipped where torch sees no GPU (the course's own CI machines); run on a GPU machine with
``python -m pytest tests/test_cuda.py``. Parity is checked against torch.nn on the CPU in float64
as well as against torch.nn on the GPU (cuDNN), so that neither side's rounding hides a bug.
"""

from __future__ import annotations

import pytest
import torch

from seqlab.nn import GRU, LSTM, RNN
from seqlab.nn.charlm import CharLM, CharLMConfig
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
