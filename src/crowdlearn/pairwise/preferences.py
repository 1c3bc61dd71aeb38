"""Preference annotations for model alignment: which of two responses to a prompt is better.

Rows ``prompt, response_a, response_b, worker, label`` with ``label`` one of ``a``, ``b`` or a
tie (``tie``, ``draw``, ``=``; any case).  :class:`Preferences` holds them as a
:class:`~crowdlearn.core.data.CrowdLabels` whose task is the (prompt, response pair) and
whose classes are ``a``, ``b``, ``tie`` -- the same pair shown the other way round is the
same task with ``a`` and ``b`` swapped -- and :class:`PreferenceAggregator` turns the
annotations into a preference probability per pair with a reliability per annotator, and
writes DPO-ready JSON Lines (:meth:`PreferenceAggregator.to_dpo_jsonl`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.base import AnswerEstimator, Tags
from ..core.data import CrowdLabels
from ..core.ids import factorize_ids, row_list, strip_frame
from ..core.params import check_params
from .data import LEFT, RIGHT, TIE, TIE_MARKERS, Comparisons, check_role_columns, factorize_units
from .links import outcome_probs

__all__ = ["Preferences", "PreferenceAggregator", "PREFERENCE_CLASSES"]

#: the classes of a preference answer, in this order
PREFERENCE_CLASSES = ("a", "b", "tie")


class Preferences:
    """Preference annotations, one row per (annotator, prompt, response pair).

    Attributes
    ----------
    labels : CrowdLabels
        Task = pair code, worker = annotator, classes ``a``, ``b``, ``tie`` in the pair's
        canonical orientation.
    pairs : DataFrame
        One row per task: ``prompt``, ``response_1``, ``response_2`` (the canonical
        orientation: ``a`` means ``response_1`` is preferred).

    Notes
    -----
    Canonical orientation: the first time a (prompt, pair) appears fixes which response is
    ``response_1``; later rows showing the pair the other way round have ``a`` and ``b``
    swapped, so "the first response won" always means the same response.
    """

    ROLES = ("prompt", "response_a", "response_b", "worker", "label")

    def __init__(self, labels: CrowdLabels, pairs: pd.DataFrame) -> None:
        self.labels = labels
        self.pairs = pairs

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    def __len__(self) -> int:
        return self.labels.n_labels

    def __repr__(self) -> str:
        return (f"Preferences(annotations={len(self)}, pairs={self.n_pairs}, "
                f"prompts={self.pairs['prompt'].nunique()}, workers={self.labels.n_workers})")

    @classmethod
    def from_frame(cls, df: pd.DataFrame, prompt: str = "prompt", response_a: str = "response_a",
                   response_b: str = "response_b", worker: str = "worker", label: str = "label",
                   *, first_line: int | None = None) -> "Preferences":
        """Build from a DataFrame; one ``ValueError`` naming the rows for bad input.

        Text values lose surrounding whitespace, as every answer table's ids do
        (:func:`~crowdlearn.core.ids.strip_text`): ``"r1 "`` is the response ``"r1"``.
        """
        roles = {"prompt": prompt, "response_a": response_a, "response_b": response_b,
                 "worker": worker, "label": label}
        df = strip_frame(df, roles.values())
        check_role_columns(df, roles, "preference annotations", first_line)
        resp_a = df[response_a].astype(str).to_numpy()
        resp_b = df[response_b].astype(str).to_numpy()
        same = resp_a == resp_b
        if same.any():
            raise ValueError(f"the two responses are identical at {row_list(same, first_line)}")
        text = np.char.lower(np.char.strip(df[label].astype(str).to_numpy().astype(str)))
        code = np.full(len(df), -1, dtype=np.int64)
        code[text == "a"] = 0
        code[text == "b"] = 1
        code[np.isin(text, TIE_MARKERS)] = 2
        bad = code < 0
        if bad.any():
            first = df[label].to_numpy()[bad][0]
            raise ValueError(f"label {first!r} is not 'a', 'b' or a tie "
                             f"({', '.join(map(repr, TIE_MARKERS))}) at {row_list(bad, first_line)}")
        prompts = df[prompt].astype(str).to_numpy()
        # unordered pair key per prompt; the first orientation seen is the canonical one
        lo = np.where(resp_a < resp_b, resp_a, resp_b)
        hi = np.where(resp_a < resp_b, resp_b, resp_a)
        key = pd.Series(list(zip(prompts, lo, hi)), dtype=object)
        task, uniques = pd.factorize(key, sort=False)
        first_row = pd.Series(np.arange(len(df))).groupby(task).first().to_numpy()
        canon_a = resp_a[first_row]
        flipped = resp_a != canon_a[task]
        code = np.where(flipped & (code < 2), 1 - code, code)
        worker_codes, workers = factorize_ids(df[worker], "worker")
        pairs = pd.DataFrame({"prompt": prompts[first_row], "response_1": canon_a,
                              "response_2": resp_b[first_row]})
        labels = CrowdLabels.from_codes(task, worker_codes, code, tasks=pd.RangeIndex(len(pairs)),
                                        workers=workers, classes=list(PREFERENCE_CLASSES))
        return cls(labels, pairs)

    @classmethod
    def from_csv(cls, path, **kwargs) -> "Preferences":
        """Read a CSV/TSV/JSON Lines file with the columns of :attr:`ROLES`."""
        from ..core.tables import first_record_line, read_table

        names = {r: kwargs.get(r, r) for r in cls.ROLES}
        df = read_table(path, columns=tuple(names.values()))
        kwargs.setdefault("first_line", first_record_line(path))
        return cls.from_frame(df, **kwargs)

    def to_comparisons(self) -> Comparisons:
        """The annotations as comparisons grouped by prompt (items = responses).

        Built from the codes, not by writing each outcome as a label: a response whose text
        is ``tie`` would otherwise win every pair its annotators called a tie.  Units are
        (prompt, response) pairs, as in :meth:`Comparisons.from_frame` with a group
        (:func:`~crowdlearn.pairwise.data.factorize_units`): never joined into one text, so
        the response ``x::y`` of prompt ``g`` stays apart from the response ``y`` of prompt
        ``g::x``.
        """
        lab = self.labels
        prompt = self.pairs["prompt"].to_numpy(dtype=object)
        names = np.concatenate([self.pairs["response_1"].to_numpy(dtype=object),
                                self.pairs["response_2"].to_numpy(dtype=object)])
        codes, items = factorize_units(np.concatenate([prompt, prompt]), names)
        n_pairs = len(self.pairs)
        side_of_class = {"a": LEFT, "b": RIGHT, "tie": TIE}
        outcome = np.array([side_of_class[c] for c in lab.classes], dtype=np.int8)[lab.label]
        return Comparisons(lab.worker, codes[:n_pairs][lab.task], codes[n_pairs:][lab.task],
                           outcome, lab.workers, items)


class PreferenceAggregator(AnswerEstimator):
    """Preference probability per (prompt, response pair) with annotator reliabilities.

    ``method="crowd-bt"`` (default): Crowd-BT (Chen et al. 2013) with the responses of each
    prompt as the items (:class:`crowdlearn.pairwise.crowd_bt.CrowdBT` on comparisons grouped
    by prompt): ``P(1 over 2) = P_RK(s_1 - s_2)`` with the Rao-Kupper tie probability;
    reliability = ``eta_w``.  It pools the pairs of a prompt through the response scores
    (transitivity) and shares each annotator's reliability across prompts.  Chosen as the
    default on simulated crowds (``simulate.pairwise.preference_crowd``: 2 or 4 responses
    per prompt, 3 or 5 annotators per pair, 30% reversing annotators), where it recovered the
    better response more often than ``"ds"`` and majority vote.

    ``method="ds"``: Dawid-Skene (Dawid & Skene 1979) on the three outcomes
    ``a``, ``b``, ``tie`` with the pair as the task, reusing
    :class:`crowdlearn.aggregation.dawid_skene.DawidSkene`: each annotator gets a 3 x 3
    confusion matrix, and the posterior of the pair's true outcome is the preference
    probability.  Annotator reliability = the annotator's probability of answering the true
    outcome, ``sum_j pi_j confusion[w, j, j]``.

    It treats the pairs independently.

    Parameters
    ----------
    method : {"crowd-bt", "ds"}
    params : dict, optional
        Parameters of the underlying estimator.
    random_state : int, default 0

    Attributes
    ----------
    probas_ : DataFrame pair -> (a, b, tie)
    worker_reliability_ : Series annotator -> reliability
    pairs_ : DataFrame of the pairs (prompt, response_1, response_2)

    Notes
    -----
    ``result_frame()`` has one row per pair: ``p_1, p_2, p_tie``; ``outcome``, the most
    probable of ``response_1``, ``response_2`` and ``tie``; ``preferred``, the response more
    likely strictly preferred, with ``confidence`` its probability.  When a tie is the most
    probable outcome, ``preferred`` still names the likelier winner but its ``confidence`` is
    below ``p_tie``; :meth:`to_dpo_jsonl` leaves such pairs out at its default threshold.
    """

    _result_attr = "probas_"

    def __init__(self, method: str = "crowd-bt", params: dict | None = None, random_state=0):
        self.method = method
        self.params = params
        self.random_state = random_state

    def __crowd_tags__(self) -> Tags:
        return dataclasses.replace(super().__crowd_tags__(), kind="pairwise",
                                   answer_type="pairwise", accepts_gold=False)

    def fit(self, answers: Any) -> "PreferenceAggregator":
        check_params(self)
        prefs = answers if isinstance(answers, Preferences) else Preferences.from_frame(answers)
        params = dict(self.params or {})
        if self.method == "ds":
            from ..aggregation.dawid_skene import DawidSkene

            params.setdefault("random_state", self.random_state)
            ds = DawidSkene(**params).fit(prefs.labels)
            probas = ds.probas_.to_numpy()
            conf = np.asarray(ds.confusions_)
            prior = probas.mean(axis=0)
            reliability = np.einsum("j,wjj->w", prior, conf)
        elif self.method == "crowd-bt":
            from .crowd_bt import CrowdBT

            comps = prefs.to_comparisons()
            cbt = CrowdBT(**params).fit(comps)
            # the scores are keyed by (prompt, response) units
            ids_1 = pd.MultiIndex.from_arrays([prefs.pairs["prompt"], prefs.pairs["response_1"]])
            ids_2 = pd.MultiIndex.from_arrays([prefs.pairs["prompt"], prefs.pairs["response_2"]])
            d = cbt.scores_.loc[ids_1].to_numpy() - cbt.scores_.loc[ids_2].to_numpy()
            probas, _, _ = outcome_probs(d, float(np.log(cbt.theta_)))
            reliability = cbt.worker_reliability_.reindex(prefs.labels.workers).to_numpy()
        else:
            raise ValueError(f"method must be 'ds' or 'crowd-bt', got {self.method!r}")
        self.pairs_ = prefs.pairs.copy()
        self.probas_ = pd.DataFrame(probas, columns=list(PREFERENCE_CLASSES))
        self.worker_reliability_ = pd.Series(reliability, index=prefs.labels.workers,
                                             name="reliability")
        return self

    def _result_frame(self) -> pd.DataFrame:
        p = self.probas_.to_numpy()
        first = p[:, 0] >= p[:, 1]
        out = self.pairs_.copy()
        out.insert(0, "pair", np.arange(len(out)))
        out["p_1"], out["p_2"], out["p_tie"] = p[:, 0], p[:, 1], p[:, 2]
        # a tie is the outcome only when strictly more probable than either win
        out["outcome"] = np.where(p[:, 2] > np.maximum(p[:, 0], p[:, 1]), "tie",
                                  np.where(first, out["response_1"], out["response_2"]))
        out["preferred"] = np.where(first, out["response_1"], out["response_2"])
        out["confidence"] = np.where(first, p[:, 0], p[:, 1])
        return out

    def to_dpo_jsonl(self, path, min_confidence: float = 0.5) -> int:
        """Write one JSON object per pair -- ``prompt``, ``chosen``, ``rejected``,
        ``confidence`` -- the format of DPO trainers (e.g. TRL's ``DPOTrainer``), with
        ``confidence`` = the posterior probability that ``chosen`` is strictly preferred, a
        per-example weight.  Pairs below ``min_confidence`` (a likely tie or a coin flip)
        are left out.  Returns the number of lines written."""
        frame = self.result_frame()
        keep = frame["confidence"] >= min_confidence
        n = 0
        with open(Path(path), "w", encoding="utf-8") as fh:
            for row in frame.loc[keep].itertuples(index=False):
                rejected = row.response_2 if row.preferred == row.response_1 else row.response_1
                fh.write(json.dumps({"prompt": row.prompt, "chosen": row.preferred,
                                     "rejected": rejected,
                                     "confidence": round(float(row.confidence), 6)},
                                    ensure_ascii=False) + "\n")
                n += 1
        return n
