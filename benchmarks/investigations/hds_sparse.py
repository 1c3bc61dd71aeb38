"""Does ``hds`` hold up on sparse crowds with spammers, and what would help?

One-off investigation (RESULTS section ``hds-sparse-crowds``, issue 15).  ``hds`` learns its
population Dirichlet by empirical Bayes inside every M-step.  On simulated crowds with 1 to 5
answers per task and many spammers (the worker-choice scenarios of ``benchmarks/active.py``),
this table compares, against the planted truth: majority vote, ``ds``, ``hds``, ``auto``,
and two variants of ``hds``:

* population fitted once, on the counts of the majority-vote start, then kept fixed (no
  empirical Bayes inside EM);
* two communities (Venanzi et al. 2014's community model with C = 2): each worker's
  confusion is drawn from one of two population Dirichlets, with membership probabilities
  fitted by EM from each worker's Dirichlet-multinomial likelihood; the first M-step splits
  the workers at the median agreement with the start; a worker's confusion is the
  membership-weighted mixture of its two posterior means;
* variational empirical Bayes (the variational treatment of Kim & Ghahramani 2012's IBCC):
  the E-step scores answers with ``E[log pi_w] = psi(c_w + alpha) - psi(C_w + s)`` instead
  of the log of the posterior mean, and the population is the Dirichlet maximum-likelihood
  fit to the workers' mean ``E[log pi_w]`` (Minka's fixed point), so a sparse worker's
  uncertain confusion counts as uncertain instead of as a point.

``--real`` runs ``ds``, ``hds`` and the variants on the 16 categorical real sets.

Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/investigations/hds_sparse.py [--real] [--write-results]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from active import synthetic_scenarios  # noqa: E402
from results_md import markdown_table, write_section  # noqa: E402

from scipy.special import digamma, gammaln, logsumexp, polygamma  # noqa: E402

from crowdlearn.aggregation.hierarchical_ds import (  # noqa: E402
    HierarchicalDawidSkene,
    diagonal_floor,
    fit_dirichlet_rows,
)
from crowdlearn.benchmarking import gold_accuracy  # noqa: E402
from crowdlearn.core import kernels  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402
from crowdlearn.registry import get_method  # noqa: E402
from crowdlearn.simulate import crowd  # noqa: E402

ROOT = HERE.parents[1].parent / "shared" / "data"
REAL = ("bluebirds", "cifar10n", "dog", "duchenne", "face", "imagenet15n", "labelme", "music", "product",
        "recidivism_race", "sentiment_polarity", "trec2010", "wsd", "zencrowd_all", "zencrowd_in", "zencrowd_us")


class PopulationOnce(HierarchicalDawidSkene):
    """``hds`` with the population fitted once, on the first M-step's counts (the MV start)."""

    def _fit(self, data, gold, init):
        self._fitted_once = False
        return super()._fit(data, gold, init)

    def _m_step(self, data, post, pseudo, backend, work=None, threads=1):
        k, m = data.n_classes, data.n_workers
        counts, class_counts = kernels.mstep(data, post, backend)
        if not self._fitted_once:
            self._alpha = diagonal_floor(fit_dirichlet_rows(counts.reshape(m, k, k).transpose(0, 2, 1),
                                                            self._alpha, max_iter=200))
            self._fitted_once = True
        log_table = self._table_from_counts(counts, self._alpha + pseudo, backend)
        prior = class_counts + self.prior_alpha
        return log_table, np.log(prior / prior.sum())


def worker_dirmult(counts: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Per worker, ``sum_j log DirMult(counts[w, j, :] | alpha[j])``; counts (W, K, K)."""
    big_a, totals = alpha.sum(axis=1), counts.sum(axis=2)
    return ((gammaln(big_a)[None] - gammaln(totals + big_a[None])).sum(axis=1)
            + (gammaln(counts + alpha[None]) - gammaln(alpha)[None]).sum(axis=(1, 2)))


def weighted_dirichlet(counts: np.ndarray, alpha: np.ndarray, weights: np.ndarray, steps: int = 5) -> np.ndarray:
    """Minka's fixed point for one Dirichlet per row with each worker's counts weighted."""
    a, totals, w3 = np.maximum(alpha, 1e-6), counts.sum(axis=2), weights[:, None, None]
    for _ in range(steps):
        big_a = a.sum(axis=1)
        num = (w3 * (digamma(counts + a[None]) - digamma(a)[None])).sum(axis=0)
        den = (weights[:, None] * (digamma(totals + big_a[None]) - digamma(big_a)[None])).sum(axis=0)
        a = np.maximum(np.where(den[:, None] > 0, a * num / np.maximum(den, 1e-300)[:, None], a), 1e-6)
    return a


def worker_counts(data, post, backend):
    """The M-step's soft counts as (W, true, answered), and the class totals."""
    k, m = data.n_classes, data.n_workers
    counts, class_counts = kernels.mstep(data, post, backend)
    return counts.reshape(m, k, k).transpose(0, 2, 1), class_counts


def m_step_result(log_conf, class_counts, prior_alpha):
    """(W, true, answered) log confusions and class totals -> the kernels' table and log prior."""
    m, k, _ = log_conf.shape
    prior = class_counts + prior_alpha
    return (np.ascontiguousarray(log_conf.transpose(0, 2, 1).reshape(m * k, k)),
            np.log(np.maximum(prior / prior.sum(), 1e-300)))


class TwoCommunities(HierarchicalDawidSkene):
    """``hds`` with two population Dirichlets (communities) instead of one."""

    def _m_step(self, data, post, pseudo, backend, work=None, threads=1):
        k, m = data.n_classes, data.n_workers
        c3, class_counts = worker_counts(data, post, backend)
        if self.n_iter_ == 0:  # first M-step of a start: split at the median agreement
            agree = np.einsum("wjj->w", c3) / np.maximum(c3.sum(axis=(1, 2)), 1e-12)
            good = (agree >= np.median(agree)).astype(float)
            resp = 0.05 + 0.9 * np.stack([good, 1.0 - good], axis=1)
            self._alphas = np.stack([np.ones((k, k)) + 3 * np.eye(k), np.ones((k, k))])
        else:
            resp = self._responsibilities(c3)
        self._alphas = np.stack([diagonal_floor(weighted_dirichlet(c3, a, resp[:, c]))
                                 for c, a in enumerate(self._alphas)])
        self._rho = (resp.sum(axis=0) + 1.0) / (m + 2.0)
        resp = self._responsibilities(c3)
        self._alpha = self._alphas[int(np.argmax(self._rho))]  # reported population: the larger
        conf = sum(resp[:, c, None, None] * (c3 + a[None]) / (c3 + a[None]).sum(axis=2, keepdims=True)
                   for c, a in enumerate(self._alphas))
        return m_step_result(np.log(np.maximum(conf, 1e-300)), class_counts, self.prior_alpha)

    def _responsibilities(self, c3):
        ll = np.stack([worker_dirmult(c3, a) for a in self._alphas], axis=1) + np.log(self._rho)[None]
        return np.exp(ll - logsumexp(ll, axis=1, keepdims=True))

    def _evidence(self, post, counts):
        q = np.clip(post, 1e-300, 1.0)
        ll = np.stack([worker_dirmult(counts, a) for a in self._alphas], axis=1) + np.log(self._rho)[None]
        return float((post * (self._log_prior[None, :] - np.log(q))).sum()) + float(logsumexp(ll, axis=1).sum())

    def _snapshot(self):
        return {**super()._snapshot(), "_alphas": self._alphas, "_rho": self._rho}


def inverse_digamma(y: np.ndarray, steps: int = 5) -> np.ndarray:
    """``x`` with ``digamma(x) = y`` (Minka's starting point, then Newton steps)."""
    x = np.where(y >= -2.22, np.exp(y) + 0.5, -1.0 / (y - digamma(1.0)))
    for _ in range(steps):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return x


class VariationalEB(HierarchicalDawidSkene):
    """``hds`` scored with ``E[log pi_w]`` and its population fitted to the mean ``E[log pi_w]``."""

    def _m_step(self, data, post, pseudo, backend, work=None, threads=1):
        c3, class_counts = worker_counts(data, post, backend)
        for _ in range(3):  # alternate the workers' Dirichlet posteriors and the population
            mean_log = self._expected_log(c3).mean(axis=0)
            a = self._alpha
            for _ in range(20):
                a = np.maximum(inverse_digamma(digamma(a.sum(axis=1, keepdims=True)) + mean_log), 1e-6)
            self._alpha = diagonal_floor(a)
        return m_step_result(self._expected_log(c3), class_counts, self.prior_alpha)

    def _expected_log(self, c3):
        post_a = c3 + self._alpha[None]
        return digamma(post_a) - digamma(post_a.sum(axis=2, keepdims=True))


def methods():
    return {"mv": lambda: get_method("mv")(), "ds": lambda: get_method("ds")(),
            "hds": lambda: get_method("hds")(starts=("mv",)),
            "hds, population fitted once": lambda: PopulationOnce(starts=("mv",)),
            "hds, two communities": lambda: TwoCommunities(starts=("mv",)),
            "hds, variational EB": lambda: VariationalEB(starts=("mv",))}


def synthetic(seeds=(0, 1, 2), per_task=(1, 2, 3, 5)) -> str:
    rows = []
    for name, (k, groups) in synthetic_scenarios().items():
        for per in per_task:
            accs = []
            for seed in seeds:
                data = crowd(400, k, groups, labels_per_task=per, seed=1000 + seed)
                acc = {m: gold_accuracy(make().fit(data).labels_, data) for m, make in methods().items()}
                acc["auto"] = gold_accuracy(get_method("auto")().fit(data).labels_, data)
                accs.append(acc)
            rows.append({"scenario": name, "answers per task": per, **pd.DataFrame(accs).mean().to_dict()})
            print(rows[-1], flush=True)
    return (f"#### Simulated crowds, 400 tasks, accuracy against the planted truth (mean of {len(seeds)} seeds); "
            "`hds` from the majority-vote start only\n\n" + markdown_table(pd.DataFrame(rows), floatfmt=".3f", index=False))


def real() -> str:
    rows = []
    for name in REAL:
        data = load_folder(ROOT / name)
        rows.append({"dataset": name, **{m: gold_accuracy(make().fit(data).labels_, data)
                                          for m, make in methods().items() if m != "mv"}})
        print(rows[-1], flush=True)
    return "#### Real sets, gold accuracy\n\n" + markdown_table(pd.DataFrame(rows), floatfmt=".4f", index=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    parts = [synthetic()] + ([real()] if args.real else [])
    md = "\n\n".join(parts) + f"\n\n({time.time() - t0:.0f}s)"
    print(md)
    if args.write_results:
        write_section("hds-sparse-crowds", md, "OMP_NUM_THREADS=1 python benchmarks/investigations/hds_sparse.py"
                      + (" --real" if args.real else "") + " --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
