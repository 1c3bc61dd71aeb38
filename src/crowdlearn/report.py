"""Result bundles: what a fitted aggregator says about tasks, workers and single answers.

>>> res = summarize(DawidSkene().fit(labels), labels)     # doctest: +SKIP
>>> res.tasks.head(); res.workers.sort_values("accuracy").head()   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core.data import CrowdLabels, as_crowd_labels

__all__ = ["AggregationResult", "summarize", "posterior_table"]


@dataclass(frozen=True)
class AggregationResult:
    """Per-task, per-worker and per-answer tables for one fit.

    Attributes
    ----------
    tasks : DataFrame indexed by task
        ``label``, ``confidence`` (max posterior), ``entropy`` (nats), ``n_labels``,
        ``agreement`` (share of the task's answers equal to ``label``).
    workers : DataFrame indexed by worker
        ``accuracy`` (model estimate where the method has a worker model, else agreement),
        ``n_labels``, ``agreement`` (share of answers equal to the consensus), ``worst_class``
        (true class with the lowest estimated recall, where confusions exist).
    annotations : DataFrame, one row per answer
        ``task``, ``worker``, ``label``, ``agrees`` (equals the consensus) and ``quality``
        (posterior probability of the answered class).
    confusions : ndarray (n_workers, K, K) or None
        ``[worker, true, answered]``, rows sum to 1.
    method : str
    probas : DataFrame (tasks x classes) or None
        The posteriors.
    history : list of float
        The fit's objective per iteration (empty for closed-form methods).
    truth : Series or None
        Gold labels of the data, where known.
    """

    tasks: pd.DataFrame
    workers: pd.DataFrame
    annotations: pd.DataFrame
    confusions: np.ndarray | None
    method: str
    probas: pd.DataFrame | None = None
    history: list = field(default_factory=list)
    truth: pd.Series | None = None

    def to_html(self, path=None, *, flags: bool | pd.DataFrame = True, comparison: pd.DataFrame | None = None,
                labels=None, **kwargs) -> str:
        """A self-contained HTML page of this result (:func:`crowdlearn.report_html.render_html`).

        ``flags=True`` runs the spammer and adversary detectors on ``labels`` (the answers;
        required for it), a DataFrame gives the flags, False leaves them out.  Writes ``path``
        when given; returns the page.
        """
        from .report_html import render_html

        if flags is True:
            flags = _detector_flags(labels) if labels is not None else None
        elif flags is False:
            flags = None
        page = render_html(self, truth=self.truth, flags=flags, comparison=comparison, **kwargs)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(page)
        return page


def _detector_flags(labels) -> pd.DataFrame:
    """``spammer`` and ``adversary`` per worker from :mod:`crowdlearn.diagnostics.detection`."""
    from .diagnostics.detection import detect_adversaries, detect_spammers

    sp = detect_spammers(labels)["spammer"]
    ad = detect_adversaries(labels)["adversary"]
    return pd.DataFrame({"spammer": sp, "adversary": ad.reindex(sp.index).fillna(False)})


def posterior_table(estimator) -> pd.DataFrame:
    """``task, label, confidence, p_<class>...``: the CLI's output format."""
    proba = estimator.probas_
    head = pd.DataFrame(
        {
            "task": proba.index.to_numpy(),
            "label": estimator.labels_.to_numpy(),
            "confidence": proba.max(axis=1).to_numpy(),
        }
    )
    cols = pd.DataFrame(proba.to_numpy(), columns=[f"p_{c}" for c in proba.columns])
    return pd.concat([head, cols], axis=1)


def summarize(estimator, labels) -> AggregationResult:
    """Build the result bundle of a fitted aggregator on the data it was fitted on."""
    data: CrowdLabels = as_crowd_labels(labels)
    proba = estimator.probas_.reindex(index=data.tasks, columns=data.classes).to_numpy()
    consensus = data.classes.get_indexer(estimator.labels_.reindex(data.tasks))
    n_task = data.labels_per_task()
    hits = (data.label == consensus[data.task]).astype(float)
    agree_task = np.bincount(data.task, weights=hits, minlength=data.n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        plogp = np.where(proba > 0, proba * np.log(np.where(proba > 0, proba, 1.0)), 0.0)
    tasks = pd.DataFrame(
        {
            "label": estimator.labels_.reindex(data.tasks).to_numpy(),
            "confidence": proba.max(axis=1),
            "entropy": -plogp.sum(axis=1),
            "n_labels": n_task,
            "agreement": np.divide(agree_task, n_task, out=np.zeros(data.n_tasks), where=n_task > 0),
        },
        index=data.tasks,
    )

    n_w = data.labels_per_worker()
    agree_w = np.divide(
        np.bincount(data.worker, weights=hits, minlength=data.n_workers), n_w,
        out=np.zeros(data.n_workers), where=n_w > 0,
    )
    confusions = getattr(estimator, "confusions_", None)
    worst = None
    if confusions is not None and confusions.shape[0] == data.n_workers:
        prior = getattr(estimator, "priors_", None)
        prior = (
            prior.to_numpy() if prior is not None else np.full(data.n_classes, 1.0 / data.n_classes)
        )
        recall = np.einsum("wjj->wj", confusions)
        accuracy = recall @ prior
        worst = data.classes.take(recall.argmin(axis=1))
    else:
        skills = getattr(estimator, "skills_", None)
        if skills is not None:
            s = skills.reindex(data.workers).to_numpy(dtype=float)
            accuracy = s if np.all((s >= 0) & (s <= 1)) else agree_w
        else:
            accuracy = agree_w
    workers = pd.DataFrame(
        {"accuracy": accuracy, "n_labels": n_w, "agreement": agree_w}, index=data.workers
    )
    if worst is not None:
        workers["worst_class"] = worst

    annotations = data.to_frame()
    annotations["agrees"] = hits.astype(bool)
    annotations["quality"] = proba[data.task, data.label]
    truth = None
    if data.truth is not None and np.any(data.truth >= 0):
        known = data.truth >= 0
        truth = pd.Series(data.classes.take(data.truth[known]), index=data.tasks[known])
    return AggregationResult(
        tasks=tasks,
        workers=workers,
        annotations=annotations,
        confusions=confusions,
        method=type(estimator).__name__,
        probas=pd.DataFrame(proba, index=data.tasks, columns=data.classes),
        history=list(getattr(estimator, "history_", []) or []),
        truth=truth,
    )
