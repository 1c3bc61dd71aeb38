"""Preference annotations (prompt, response_a, response_b, worker, label) -> DPO JSON Lines."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdlearn.pairwise.preferences import PreferenceAggregator, Preferences
from crowdlearn.simulate.pairwise import preference_crowd


def _accuracy(agg, planted) -> float:
    r = agg.result_frame()
    return float(np.mean((r["p_2"] > r["p_1"]).astype(int).to_numpy() == planted.better.to_numpy()))


@pytest.mark.parametrize("method", ["crowd-bt", "ds"])
def test_aggregation_beats_majority_and_finds_reliabilities(method):
    prefs, planted = preference_crowd(60, 4, 20, 3, seed=1)
    votes = prefs.labels.vote_counts()
    majority = float(np.mean((votes[:, 1] > votes[:, 0]).astype(int) == planted.better.to_numpy()))
    agg = PreferenceAggregator(method=method).fit(prefs)
    assert _accuracy(agg, planted) > majority + 0.03
    rel = agg.worker_reliability_.loc[planted.eta.index]
    assert np.corrcoef(rel, planted.eta)[0, 1] > 0.85
    probas = agg.probas_.to_numpy()
    np.testing.assert_allclose(probas.sum(axis=1), 1.0, atol=1e-9)


def test_dpo_jsonl(tmp_path):
    prefs, _ = preference_crowd(20, 3, 10, 3, seed=2)
    agg = PreferenceAggregator().fit(prefs)
    path = tmp_path / "dpo.jsonl"
    n = agg.to_dpo_jsonl(path, min_confidence=0.6)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == n > 0
    frame = agg.result_frame()
    assert n == int((frame["confidence"] >= 0.6).sum())
    for rec in lines:
        assert set(rec) == {"prompt", "chosen", "rejected", "confidence"}
        assert rec["chosen"] != rec["rejected"] and 0.6 <= rec["confidence"] <= 1.0
    # the chosen response is the one with the larger preference probability
    first = frame.set_index(["prompt", "response_1", "response_2"])
    rec = lines[0]
    key = next(k for k in first.index if k[0] == rec["prompt"] and set(k[1:]) == {rec["chosen"], rec["rejected"]})
    row = first.loc[key]
    assert rec["chosen"] == (key[1] if row["p_1"] >= row["p_2"] else key[2])


@pytest.mark.parametrize("method", ["crowd-bt", "ds"])
def test_outcome_is_tie_when_a_tie_is_most_probable(method):
    # three annotators call (C, D) a tie; (A, B) is won by A throughout
    df = pd.DataFrame({"prompt": ["p1"] * 3 + ["p2"] * 3, "response_a": ["A"] * 3 + ["C"] * 3,
                       "response_b": ["B"] * 3 + ["D"] * 3, "worker": ["u", "v", "w"] * 2,
                       "label": ["a"] * 3 + ["tie"] * 3})
    r = PreferenceAggregator(method=method).fit(df).result_frame().set_index("prompt")
    assert r.loc["p1", "outcome"] == "A" and r.loc["p1", "preferred"] == "A"
    assert r.loc["p2", "outcome"] == "tie"
    assert r.loc["p2", "p_tie"] > r.loc["p2", "confidence"]


def test_a_response_spelled_like_a_tie_keeps_its_outcomes(tmp_path):
    """A response whose text is ``tie``: Crowd-BT read the pair's ties as wins of that
    response (the comparisons were rebuilt with ``tie`` as the label of a tie), and the DPO
    file held a pair every annotator called a tie."""
    response = "tie"
    df = pd.DataFrame({"prompt": ["p1"] * 3 + ["p2"] * 3,
                       "response_a": [response] * 3 + ["C"] * 3,
                       "response_b": ["win"] * 3 + [response] * 3, "worker": ["u", "v", "w"] * 2,
                       "label": ["tie"] * 3 + ["b"] * 3})
    agg = PreferenceAggregator().fit(df)
    comps = Preferences.from_frame(df).to_comparisons()
    assert np.bincount(comps.outcome, minlength=3).tolist() == [0, 3, 3]
    r = agg.result_frame().set_index("prompt")
    assert r.loc["p1", "outcome"] == "tie" and r.loc["p1", "p_1"] == pytest.approx(r.loc["p1", "p_2"])
    assert r.loc["p2", "outcome"] == response and r.loc["p2", "preferred"] == response
    assert agg.to_dpo_jsonl(tmp_path / "dpo.jsonl") == 1
    line = json.loads((tmp_path / "dpo.jsonl").read_text())
    assert (line["prompt"], line["chosen"], line["rejected"]) == ("p2", response, "C")


def test_prompt_and_response_holding_the_separator_stay_distinct():
    """Units were the text f"{prompt}::{response}": the response ``x::y`` of prompt ``g`` and
    the response ``y`` of prompt ``g::x`` were one item, so Crowd-BT tied two prompts'
    responses together (3 items, and the pairs' preferences read from a shared score)."""
    df = pd.DataFrame({"prompt": ["g"] * 3 + ["g::x"] * 3,
                       "response_a": ["x::y"] * 3 + ["y"] * 3, "response_b": ["b"] * 3 + ["c"] * 3,
                       "worker": ["u", "v", "w"] * 2, "label": ["a"] * 3 + ["b"] * 3})
    comps = Preferences.from_frame(df).to_comparisons()
    assert comps.n_items == 4 and comps.components()[0] == 2
    assert list(comps.items) == [("g", "b"), ("g", "x::y"), ("g::x", "c"), ("g::x", "y")]
    r = PreferenceAggregator().fit(df).result_frame().set_index("prompt")
    assert r.loc["g", "preferred"] == "x::y" and r.loc["g::x", "preferred"] == "c"
    assert r.loc["g", "confidence"] > 0.5 and r.loc["g::x", "confidence"] > 0.5


def test_swapped_orientation_is_the_same_pair():
    df = pd.DataFrame({"prompt": ["p", "p", "p"], "response_a": ["x", "y", "x"],
                       "response_b": ["y", "x", "y"], "worker": ["u", "v", "w"],
                       "label": ["a", "b", "TIE"]})
    prefs = Preferences.from_frame(df)
    assert prefs.n_pairs == 1
    assert prefs.labels.label.tolist() == [0, 0, 2]  # "b" on (y, x) is "x wins" = a on (x, y)


def test_bad_preference_input():
    df = pd.DataFrame({"prompt": ["p", "p"], "response_a": ["x", "x"], "response_b": ["y", "x"],
                       "worker": ["u", "v"], "label": ["a", "a"]})
    with pytest.raises(ValueError, match=r"identical at row position 1\b"):
        Preferences.from_frame(df)
    df.loc[1, "response_b"] = "z"
    df.loc[1, "label"] = "c"
    with pytest.raises(ValueError, match=r"label 'c' is not 'a', 'b' or a tie.*row position 1\b"):
        Preferences.from_frame(df)
    with pytest.raises(ValueError, match="method"):
        PreferenceAggregator(method="mv").fit(df.assign(label="a"))
