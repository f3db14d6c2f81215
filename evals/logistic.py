"""L2-penalised, optionally weighted logistic regression on standardised features (numpy,
Newton steps): the answerability and confidence models' fit."""

from __future__ import annotations

import numpy as np

from service.answerability import Logistic


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float = 1.0, weights: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Coefficients and intercept of an L2-penalised, optionally weighted logistic regression
    (Newton steps)."""
    n, d = x.shape
    sw = np.ones(n) if weights is None else weights
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.eye(d + 1) * l2
    penalty[d, d] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -40, 40)))
        grad = xb.T @ (sw * (p - y)) + penalty @ w
        hess = (xb * (sw * p * (1 - p))[:, None]).T @ xb + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:d], float(w[d])


def fit_xy(
    x: np.ndarray, y: np.ndarray, names: list[str], weights: np.ndarray | None = None
) -> Logistic:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    coef, intercept = fit_logistic((x - mean) / scale, y, weights=weights)
    return Logistic(
        features=names,
        mean=[float(v) for v in mean],
        scale=[float(v) for v in scale],
        coef=[float(v) for v in coef],
        intercept=intercept,
        threshold=0.5,
    )
