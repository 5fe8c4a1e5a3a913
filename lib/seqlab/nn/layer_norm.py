r"""Layer normalisation, a twin of ``torch.nn.LayerNorm``; notebook 12.

:math:`y = \gamma \odot (x - \mu) / \sqrt{\sigma^2 + \epsilon} + \beta` over each token's features, with the
biased variance, as torch (the Annotated Transformer's ``x.std()`` does not match torch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class LayerNorm(nn.Module):
    """``torch.nn.LayerNorm`` written out: ``forward(x (*, *normalized_shape))``, ``weight`` and ``bias`` as torch's.

    Half precision is normalised in float32 and cast back, as torch does.
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
