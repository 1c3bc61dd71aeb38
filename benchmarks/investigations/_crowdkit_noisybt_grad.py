"""Finite-difference check of crowd-kit 1.4.2's ``NoisyBradleyTerry`` gradient.

Runs inside ``benchmarks/.venv-crowdkit`` (called by ``crowdkit_noisybt_grad.py``); never
imports crowdlearn; prints one JSON object.

crowd-kit's parameter vector is ``x = [x0, scores (n_items), q (n_workers), gamma
(n_workers)]`` (``x0`` an anchor item used only by the regulariser); its loss is
``_compute_log_likelihood`` (minus the log-likelihood plus ``ratio * reg``) and its gradient
``_compute_gradient``.  This script evaluates both at random points of a small random data
set and compares the gradient with central finite differences of the loss, block by block.
It then tests the diagnosis of the issue -- the worker entries are written at index
``labels + w`` instead of ``1 + labels + w`` and with ``=`` instead of ``+=``, so each
worker's entry holds the derivative of its *last* answer only, one slot early -- by comparing
those entries with finite differences of that last answer's own loss.

Usage (in the crowd-kit venv)::

    python _crowdkit_noisybt_grad.py [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--answers", type=int, default=60)
    args = p.parse_args(argv)

    import crowdkit
    from crowdkit.aggregation import NoisyBradleyTerry

    rng = np.random.default_rng(args.seed)
    n, m, L = args.items, args.workers, args.answers
    left = rng.integers(0, n, L)
    right = (left + rng.integers(1, n, L)) % n
    winner = np.where(rng.random(L) < 0.5, left, right)
    # crowd-kit's own layout: item codes shifted by one (x[0] is the anchor)
    np_data = np.stack([left, right, winner], axis=1) + 1
    np_workers = rng.integers(0, m, L)

    loss = NoisyBradleyTerry._compute_log_likelihood
    grad = NoisyBradleyTerry._compute_gradient

    def fd(fun, x, eps=1e-6):
        out = np.empty_like(x)
        for k in range(len(x)):
            up, down = x.copy(), x.copy()
            up[k] += eps
            down[k] -= eps
            out[k] = (fun(up) - fun(down)) / (2 * eps)
        return out

    blocks = {"anchor x0": slice(0, 1), "scores except the last": slice(1, n),
              "last score": slice(n, n + 1), "q (position bias)": slice(n + 1, n + 1 + m),
              "gamma (skill)": slice(n + 1 + m, n + 1 + 2 * m)}
    report = {"crowdkit": crowdkit.__version__, "items": n, "workers": m, "answers": L,
              "points": 5, "blocks": {}, "diagnosis": {}, "regulariser": {}}
    worst = {k: 0.0 for k in blocks}
    scale = {k: 0.0 for k in blocks}
    diag_q = diag_g = 0.0
    for point in range(5):
        x = rng.normal(0.0, 1.0, 1 + n + 2 * m)
        ck = grad(x, np_data.copy(), np_workers, n, m, 0.0)
        num = fd(lambda z: loss(z, np_data.copy(), np_workers, n, m, 0.0), x)
        for name, sl in blocks.items():
            worst[name] = max(worst[name], float(np.max(np.abs(ck[sl] - num[sl]))))
            scale[name] = max(scale[name], float(np.max(np.abs(num[sl]))))
        # diagnosis: entry labels + w (q) and labels + m + w (gamma) hold worker w's last
        # answer's derivative with respect to its q (index 1 + n + w) and gamma (1 + n + m + w)
        for w in range(m):
            rows = np.flatnonzero(np_workers == w)
            if not len(rows):
                continue
            last = rows[-1:]
            one = fd(lambda z: loss(z, np_data[last].copy(), np_workers[last], n, m, 0.0), x)
            if w > 0:  # worker 0's slot is the last score's, which later answers add to
                diag_q = max(diag_q, abs(ck[n + w] - one[1 + n + w]))
            diag_g = max(diag_g, abs(ck[n + m + w] - one[1 + n + m + w]))
    report["blocks"] = {k: {"max_abs_error": worst[k], "max_abs_fd_gradient": scale[k]}
                        for k in blocks}
    report["diagnosis"] = {
        "q entry at index labels+w (w >= 1) vs d(last answer of w)/dq_w": diag_q,
        "gamma entry at index labels+workers+w vs d(last answer of w)/dgamma_w": diag_g}
    # the regulariser: loss adds +ratio*reg, the gradient is that of -ratio*reg
    x = rng.normal(0.0, 1.0, 1 + n + 2 * m)
    ratio = 1.0
    ck = grad(x, np_data.copy(), np_workers, n, m, ratio) - grad(x, np_data.copy(), np_workers, n, m, 0.0)
    num = (fd(lambda z: loss(z, np_data.copy(), np_workers, n, m, ratio), x)
           - fd(lambda z: loss(z, np_data.copy(), np_workers, n, m, 0.0), x))
    sl = slice(0, n + 1)
    report["regulariser"] = {
        "ratio": ratio,
        "max_abs(gradient_reg - fd_reg)": float(np.max(np.abs(ck[sl] - num[sl]))),
        "max_abs(gradient_reg + fd_reg)": float(np.max(np.abs(ck[sl] + num[sl]))),
        "max_abs(fd_reg)": float(np.max(np.abs(num[sl])))}
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
