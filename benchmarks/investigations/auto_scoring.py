"""How should ``auto`` score its candidates?  In-sample or cross-fitted confusions, and a null model.

One-off investigation (issue 15).  ``auto`` scores a candidate by the log-likelihood of
withheld answers under a per-worker confusion counted from the candidate's labels.  Two
questions:

* **which pairs count the confusion**: the training answers paired with the labels of the fit
  that saw them (``insample``, crowdlearn 0.1.0: a worker's own answer helps make the label it
  is then scored against, which matters when a task has 2-3 answers), or the withheld answers
  of the other folds, each paired with the label of the fit that did not see it
  (``crossfit``);
* **a null model**: each worker's answer rate, whatever the task (a constant label).  A
  candidate whose labels predict the withheld answers no better than that null carries no
  information about the answers (an EM method that collapsed onto one class scores like it);
  ``+null zZ F`` drops the candidates that do not beat it by Z paired standard errors, and
  falls back on F (``ds`` or ``mv``) when none is left.

Every candidate is fitted once per fold and once on all answers; each rule then decides from
the same fits, so the rules differ only in how they score.  Crowds: the simulated grid of
``tune_defaults.py`` and the few-answers crowds of :data:`FEW_ANSWERS` (``--synthetic``,
``--few``: the parts that may choose a default), and the real categorical sets, whole and
thinned to 2 and 3 answers per task (``--real``, one draw; reported, not used to choose).

Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/investigations/auto_scoring.py [--synthetic] [--few] [--real] [--write-results]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from results_md import markdown_table, write_section  # noqa: E402
from sparse_redundancy import _mask  # noqa: E402
from tune_defaults import crowds  # noqa: E402

from crowdlearn import simulate  # noqa: E402
from crowdlearn.aggregation import auto as A  # noqa: E402
from crowdlearn.benchmarking import categorical_datasets  # noqa: E402
from crowdlearn.core.io import load_folder  # noqa: E402

ROOT = HERE.parents[1].parent / "shared" / "data"
#: scoring (insample / crossfit), then optionally "+null" (drop the candidates whose paired gain
#: over the null model is not above ``z`` standard errors) and the fallback when none is left
RULES = ("insample", "crossfit", "crossfit+null z0 ds", "crossfit+null z2 ds", "crossfit+null z2 mv",
         "insample+null z2 ds")

#: few answers per task *and* per worker, the regime the grid of ``tune_defaults.py`` lacks
#: (its sparse scenarios have 2-3 answers per task but 500 workers or 12 classes): small
#: binary and 3-4-class crowds with 2-3 answers per task, balanced and imbalanced (where a
#: constant label is nearly the truth), five seeds each
FEW_ANSWERS: dict[str, dict] = {
    "binary, 3 per task, weak": dict(n_tasks=200, n_workers=40, n_classes=2, labels_per_task=3,
                                     accuracy=(0.5, 0.8)),
    "binary, 2 per task": dict(n_tasks=300, n_workers=30, n_classes=2, labels_per_task=2,
                               accuracy=(0.55, 0.85)),
    "binary, 3 per task, spammers": dict(n_tasks=200, n_workers=40, n_classes=2, labels_per_task=3,
                                         accuracy=(0.6, 0.9), spammers=0.3),
    "4 classes, 3 per task": dict(n_tasks=300, n_workers=30, n_classes=4, labels_per_task=3,
                                  accuracy=(0.4, 0.8)),
    "binary, 3 per task, 90% one class": dict(n_tasks=300, n_workers=30, n_classes=2, labels_per_task=3,
                                              accuracy=(0.6, 0.75), class_prior=(0.9, 0.1)),
    "3 classes, 3 per task, imbalanced": dict(n_tasks=300, n_workers=30, n_classes=3, labels_per_task=3,
                                              accuracy=(0.5, 0.8), class_prior=(0.8, 0.15, 0.05)),
}
FEW_SEEDS = (0, 1, 2, 3, 4)


def _fits(data, seed: int = 0):
    """Per candidate: posteriors of the 5 fold fits (with the folds) and of the full fit."""
    rng = np.random.default_rng(seed)
    folds = A._folds(data, 5, rng)
    out = {}
    for cand in A.DEFAULT_CANDIDATES:
        fitted = []
        for mask in folds:
            if not mask.any():
                continue
            train, test = data._select_keep_ids(~mask), data._select_keep_ids(mask)
            est = A._make(cand, seed)[1].fit(train)
            fitted.append((train, test, est.probas_.reindex(index=data.tasks, columns=data.classes,
                                                            fill_value=0.0).to_numpy()))
        full = A._make(cand, seed)[1].fit(data)
        out[cand] = (fitted, full.probas_.reindex(index=data.tasks, columns=data.classes).to_numpy())
    return out


def _null(fitted, crossfit: bool) -> list[np.ndarray]:
    """The null model's per-answer scores: a constant label (class 0) for every task."""
    const = [(tr, te, np.eye(tr.n_classes)[np.zeros(tr.n_tasks, dtype=int)]) for tr, te, _ in fitted]
    return A._fold_scores(const, True, crossfit, 1.0)


#: the rule AutoAggregator now follows (crossfit scoring, min_z 2, fallback ds, its reference)
ADOPTED = "crossfit+null z2 ds"


def _decide(fits, rule: str) -> tuple[np.ndarray, str]:
    """Stacked posteriors (and the dropped candidates) under one scoring rule."""
    crossfit = rule.startswith("crossfit")
    per = {c: np.concatenate(A._fold_scores(f, True, crossfit, 1.0)) for c, (f, _) in fits.items()}
    names = list(per)
    keep, note = names, ""
    if "+null" in rule:
        _, z_min, fallback = rule.split(" ")
        z_min = float(z_min[1:])
        null = np.concatenate(_null(next(iter(fits.values()))[0], crossfit))
        keep = [c for c in names if _z(per[c] - null) > z_min]
        note = ",".join(sorted(set(names) - set(keep)))
        if not keep:
            keep, note = [fallback], "none"
    w = A.stacking_weights(np.exp(np.column_stack([per[c] for c in keep])))
    w[w < 0.01] = 0
    w /= w.sum()
    post = sum(wi * fits[c][1] for wi, c in zip(w, keep))
    return post, note


def _z(diff: np.ndarray) -> float:
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    return float(diff.mean() / se) if se > 0 else (0.0 if diff.mean() == 0 else np.sign(diff.mean()) * np.inf)


def _acc(post, data) -> float:
    truth = np.asarray(data.truth)
    known = truth >= 0
    return float(np.mean(np.argmax(post, axis=1)[known] == truth[known]))


def run_sets(sets, out) -> pd.DataFrame:
    rows = []
    for name, data in sets:
        t0 = time.time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = _fits(data)
            row = {"crowd": name, "ds": _acc(fits["ds"][1], data), "mv": _acc(fits["mv"][1], data)}
            for rule in RULES:
                post, note = _decide(fits, rule)
                row[rule] = _acc(post, data)
                if rule == ADOPTED:
                    row["dropped by the adopted rule"] = note
        rows.append(row)
        out(f"{row} ({time.time() - t0:.0f}s)")
    return pd.DataFrame(rows)


LEGEND = ("Gold accuracy of `ds`, `mv` and of `auto` (stacking, the default candidates) under each "
          "scoring rule, from the same fits. `insample`: crowdlearn 0.1.0's rule; `crossfit`: the "
          "scoring confusion counted on the other folds' withheld answers; `+null zZ F`: only "
          "candidates beating the null model by more than Z paired standard errors take part, "
          "fallback F when none does. `dropped`: candidates the adopted rule (`" + ADOPTED
          + "`) left out (`none`: it fell back). Summary rows: mean per group of crowds, and the "
          "largest loss against `ds` (points).")


def _with_summary(table: pd.DataFrame) -> pd.DataFrame:
    cols = ["ds", "mv", *RULES]
    group = table["crowd"].str.replace(r" s\d+$", "", regex=True).str.extract(r"(k=\d)$")[0].fillna("")
    out = [table]
    for g in sorted(group.unique()):
        sub = table[group == g]
        label = f"mean ({g})" if g else "mean"
        out.append(sub[cols].mean().to_frame().T.assign(crowd=label))
        worst = (sub[cols].sub(sub["ds"], axis=0).min() * 100).to_frame().T.assign(crowd=label.replace("mean", "worst vs ds, points"))
        out.append(worst)
    return pd.concat(out, ignore_index=True)


def synthetic_sets():
    return [(f"{scen} s{seed}", d) for (scen, seed), d in crowds().items()]


def few_sets():
    return [(f"{scen} s{seed}", simulate.dawid_skene(**kw, seed=seed))
            for scen, kw in FEW_ANSWERS.items() for seed in FEW_SEEDS]


def real_sets():
    for name in categorical_datasets(ROOT):
        full = load_folder(ROOT / name)
        yield name, full
        for k in (2, 3):
            yield f"{name} k={k}", full._select_keep_ids(_mask(full, k, 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--few", action="store_true", help="the few-answers crowds (FEW_ANSWERS)")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    for flag, sets in (("synthetic", synthetic_sets), ("few", few_sets), ("real", real_sets)):
        if not getattr(args, flag):
            continue
        table = run_sets(sets(), print)
        md = LEGEND + "\n\n" + markdown_table(_with_summary(table), floatfmt=".4f", index=False)
        print(md)
        if args.write_results:
            write_section(f"auto-scoring-{flag}", md, "OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python "
                          f"benchmarks/investigations/auto_scoring.py --{flag} --write-results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
