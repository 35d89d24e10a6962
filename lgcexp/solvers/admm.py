"""ADMM's stopping test and penalty adaptation (Boyd et al. 2011), shared by GTF and LSSC."""
from __future__ import annotations

import numpy as np


def admm_control(r: float, s: float, eps_pri: float, eps_dual: float, *, adaptive: bool,
                 changes: int, max_changes: int = 20) -> tuple[bool, float]:
    """One ADMM stopping test and penalty update (Boyd et al. 2011, §3.3.1 and §3.4.1): (converged, the
    factor to multiply ρ by). Converged when the primal residual ``r`` and the dual residual ``s`` are
    within their tolerances; otherwise, with ``adaptive`` and fewer than ``max_changes`` changes so far,
    :func:`residual_balance`'s factor, else 1.0."""
    if r <= eps_pri and s <= eps_dual:
        return True, 1.0
    if adaptive and changes < max_changes:
        return False, residual_balance(r, s, eps_pri, eps_dual)
    return False, 1.0


def residual_balance(r: float, s: float, eps_pri: float, eps_dual: float, mu: float = 10.0,
                     cap: float = 10.0) -> float:
    """ADMM penalty adaptation by residual balancing (Boyd et al. 2011, §3.4.1): the factor to multiply ρ by
    (and divide the scaled dual by) when the primal and dual residuals, each relative to its tolerance, are
    more than ``mu`` apart: the square root of their ratio, clipped to [1/cap, cap]; 1.0 otherwise."""
    rel_r, rel_s = max(r / eps_pri, 1e-12), max(s / eps_dual, 1e-12)
    if rel_r > mu * rel_s or rel_s > mu * rel_r:
        return float(np.clip(np.sqrt(rel_r / rel_s), 1.0 / cap, cap))
    return 1.0
