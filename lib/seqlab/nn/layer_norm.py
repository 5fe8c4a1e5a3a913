r"""Layer normalisation: each token's features rescaled to mean 0 and variance 1, then to a learned scale.

For one token's feature vector :math:`x \in \mathbb{R}^{d}` (``d = d_model``, or the product of
``normalized_shape``):

.. math::

    \mu = \frac{1}{d} \sum_{i=1}^{d} x_i, \qquad
    \sigma^2 = \frac{1}{d} \sum_{i=1}^{d} (x_i - \mu)^2, \qquad
    \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta

with a learned gain :math:`\gamma` (``weight``, initialised to 1) and shift :math:`\beta` (``bias``,
initialised to 0), both of shape ``normalized_shape``. The statistics are taken over the features
of *one* token, never over the batch (that is batch norm), so a token's output does not depend on
the other tokens or the batch size, and training and evaluation compute the same thing.

**The variance is the biased one**, :math:`\frac{1}{d}\sum (x_i - \mu)^2`, and :math:`\epsilon` is
added *inside* the square root: exactly ``torch.nn.LayerNorm``. The Annotated Transformer's
``LayerNorm`` differs on both counts: it divides by ``x.std(-1)``, the *unbiased* standard
deviation (:math:`\frac{1}{d-1}`), and adds :math:`\epsilon` to the standard deviation instead of the
variance. The two agree only approximately (by a factor :math:`\sqrt{d/(d-1)}` when
:math:`\epsilon` is negligible), so that version does not load-and-match a ``torch.nn.LayerNorm``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class LayerNorm(nn.Module):
    r"""``torch.nn.LayerNorm`` written out: the same arguments, parameter names (``weight``, ``bias``) and outputs.

    ``forward(x (*, *normalized_shape))`` normalises over the last ``len(normalized_shape)``
    dimensions. ``elementwise_affine=False`` drops :math:`\gamma` and :math:`\beta` (both are then
    ``None``); ``bias=False`` keeps :math:`\gamma` only. Half-precision inputs are normalised in
    float32 and cast back, as torch does, so that the mean and variance do not lose their digits.
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        if not self.normalized_shape or min(self.normalized_shape) < 1:
            raise ValueError(f"normalized_shape must be a positive size or a non-empty tuple of them, "
                             f"got {normalized_shape}")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        # registered as None when absent, as torch does, so that .weight / .bias always exist
        self.register_parameter("weight", nn.Parameter(torch.empty(self.normalized_shape, **factory))
                                if elementwise_affine else None)                                  # gamma
        self.register_parameter("bias", nn.Parameter(torch.empty(self.normalized_shape, **factory))
                                if elementwise_affine and bias else None)                         # beta
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """gamma = 1 and beta = 0: at initialisation LN only standardises."""
        if self.weight is not None:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        k = len(self.normalized_shape)
        if x.dim() < k or tuple(x.shape[-k:]) != self.normalized_shape:
            expected = "(*, " + ", ".join(map(str, self.normalized_shape)) + ")"
            raise ValueError(f"LayerNorm{self.normalized_shape} expects input of shape {expected} "
                             f"(its last {k} dimension{'s' if k > 1 else ''} = normalized_shape), "
                             f"got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"LayerNorm expects a floating-point input, got {x.dtype}")
        dims = tuple(range(-k, 0))
        low_precision = x.dtype in (torch.float16, torch.bfloat16)
        x_ = x.float() if low_precision else x
        mu = x_.mean(dim=dims, keepdim=True)                               # (*, 1, .., 1)
        sigma2 = (x_ - mu).pow(2).mean(dim=dims, keepdim=True)             # biased: 1/d, as nn.LayerNorm
        y = (x_ - mu) * torch.rsqrt(sigma2 + self.eps)                     # x_hat (*, *normalized_shape)
        if self.weight is not None:
            y = y * self.weight                                            # gamma (.) x_hat
        if self.bias is not None:
            y = y + self.bias                                              # + beta
        return y.to(x.dtype) if low_precision else y

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
