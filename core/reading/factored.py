"""FactoredMatrix: a low-rank product kept as its two factors (as TransformerLens does)."""
from __future__ import annotations

import torch


class FactoredMatrix:
    """A low-rank product A @ B kept as its factors (as TransformerLens does).

    A [..., m, r], B [..., r, n]. The product is formed only when asked (.AB); singular values come
    from the r x r core, so they cost O((m + n) r^2) rather than an m x n SVD.
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor):
        if A.shape[-1] != B.shape[-2]:
            raise ValueError(f"inner sizes differ: A {tuple(A.shape)}, B {tuple(B.shape)}.")
        self.A, self.B = A.detach(), B.detach()

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.A.shape[:-1], self.B.shape[-1])

    @property
    def AB(self) -> torch.Tensor:
        """The product [..., m, n]."""
        return self.A @ self.B

    @property
    def T(self) -> FactoredMatrix:
        return FactoredMatrix(self.B.transpose(-1, -2), self.A.transpose(-1, -2))

    def __matmul__(self, other):
        if isinstance(other, FactoredMatrix):
            return FactoredMatrix(self.A, (self.B @ other.A) @ other.B)
        return FactoredMatrix(self.A, self.B @ other)

    def __rmatmul__(self, other):
        return FactoredMatrix(other @ self.A, self.B)

    @property
    def S(self) -> torch.Tensor:
        """Singular values [..., min(r, m, n)], largest first."""
        Ra = torch.linalg.qr(self.A.double())[1]
        Rb = torch.linalg.qr(self.B.transpose(-1, -2).double())[1]
        return torch.linalg.svdvals(Ra @ Rb.transpose(-1, -2)).float()

    def svals(self, full: bool = False) -> torch.Tensor:
        """Singular values; full=True pads with exact zeros to min(m, n) (the rank bound made visible)."""
        s = self.S
        if full:
            n = min(self.shape[-2:]) - s.shape[-1]
            s = torch.cat([s, s.new_zeros(*s.shape[:-1], max(n, 0))], -1)
        return s

    def rank(self) -> int:
        """Numerical rank: singular values above 1e-5 * the largest (2-D matrices only)."""
        s = self.S
        return int((s > 1e-5 * s.max()).sum()) if s.numel() and s.max() > 0 else 0

    def norm(self) -> torch.Tensor:
        """Frobenius norm [...]."""
        return self.S.norm(dim=-1)
