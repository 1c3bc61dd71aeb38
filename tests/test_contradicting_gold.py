"""Gold listing one task (or item) twice with different values is refused by every answer
kind, as class labels' gold is (tests/test_robustness_unseen_class.py); rows repeating one
value are one gold.  Continuous gold ``t1,1.5`` then ``t1,2`` kept the last row silently
(mae 1.0 instead of an error), and so did multi-label, pairwise and similarity gold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdlearn.cli import main
from crowdlearn.continuous.data import ContinuousAnswers
from crowdlearn.multilabel.data import MultiLabelAnswers
from crowdlearn.pairwise.data import Comparisons
from crowdlearn.similarity.data import SimilarityAnswers

CONTINUOUS = pd.DataFrame({"task": ["t1", "t1", "t2", "t2"], "worker": ["a", "b", "a", "b"],
                           "label": [1.0, 2.0, 3.0, 3.0]})

#: kind -> (answers file, gold contradicting itself, the error's tail, gold repeating one value)
CASES = {
    "continuous": ("task,worker,label\nt1,a,1\nt1,b,2\nt2,a,3\nt2,b,3\n",
                   "task,truth\nt1,1.5\nt1,2\n", "task 't1' is given twice: '1.5' and '2'",
                   "task,truth\nt1,2\nt1,2.0\n"),
    "multilabel": ("task,worker,label\nt1,a,x|y\nt1,b,x\nt2,a,y\n",
                   "task,truth\nt1,x|y\nt2,y\nt1,x\n", "task 't1' is given twice: 'x|y' and 'x'",
                   "task,truth\nt1,x|y\nt1,y|x\n"),
    "pairwise": ("worker,left,right,label\na,p,q,left\nb,q,r,left\na,p,r,left\n",
                 "item,score\np,3\nq,2\np,1\n", "item 'p' is given twice: '3' and '1'",
                 "item,score\np,3\np,3.0\nq,2\n"),
    "similarity": ("worker,item_a,item_b,same\na,p,q,1\nb,q,r,0\na,p,r,0\n",
                   "item,truth\np,c1\np,c2\nq,c1\n", "item 'p' is given twice: 'c1' and 'c2'",
                   "item,truth\np,c1\np,c1\nq,c1\n"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_cli_refuses_gold_contradicting_itself(kind, tmp_path, capsys):
    answers, bad, message, same = CASES[kind]
    src, gold, repeated = tmp_path / "in.csv", tmp_path / "truth.csv", tmp_path / "same.csv"
    src.write_text(answers)
    gold.write_text(bad)
    repeated.write_text(same)
    assert main(["aggregate", str(src), "--kind", kind, "--gold", str(gold)]) == 2
    assert capsys.readouterr().err == f"crowdlearn: error: {gold}: gold of {message}\n"
    assert main(["aggregate", str(src), "--kind", kind, "--gold", str(repeated)]) == 0


def test_continuous_gold_contradicting_itself_is_refused_on_every_path():
    from crowdlearn import get_method

    bad = pd.Series([1.5, 2.0], index=["t1", "t1"])
    message = r"^gold of task 't1' is given twice: 1\.5 and 2\.0$"
    for fit in (lambda: get_method("mean")().fit(CONTINUOUS, gold=bad),
                lambda: ContinuousAnswers.from_frame(CONTINUOUS, truth=bad),
                lambda: ContinuousAnswers.from_frame(CONTINUOUS).with_truth(bad),
                # " t1" is the task "t1" (ids are stripped before they are compared)
                lambda: ContinuousAnswers.from_frame(CONTINUOUS).encode_gold(
                    pd.Series([1.5, 2.0], index=["t1", " t1"]))):
        with pytest.raises(ValueError, match=message):
            fit()
    # one value written twice, or a second row without a value (unknown), is one gold
    same = pd.Series([2.0, "2", None, 3.0], index=["t1", "t1", "t2", "t2"], dtype=object)
    np.testing.assert_array_equal(ContinuousAnswers.from_frame(CONTINUOUS, truth=same).truth, [2.0, 3.0])


def test_other_kinds_refuse_gold_contradicting_itself_in_python():
    ml = pd.DataFrame({"task": ["t1", "t2"], "worker": ["a", "a"], "label": ["x|y", "y"]})
    with pytest.raises(ValueError, match=r"^gold of task 't1' is given twice: 'x' and 'y'$"):
        MultiLabelAnswers.from_frame(ml, truth=pd.Series(["x", "y"], index=["t1", "t1"]))
    same = MultiLabelAnswers.from_frame(ml, truth=pd.Series(["x|y", "y|x"], index=["t1", "t1"]))
    assert same.truth_known.tolist() == [True, False]
    pw = pd.DataFrame({"worker": ["a", "b"], "left": ["p", "q"], "right": ["q", "r"], "label": ["left", "left"]})
    with pytest.raises(ValueError, match=r"^gold of item 'p' is given twice: 3\.0 and 1\.0$"):
        Comparisons.from_frame(pw, truth=pd.Series([3.0, 1.0], index=["p", "p"]))
    sim = pd.DataFrame({"worker": ["a", "b"], "item_a": ["p", "q"], "item_b": ["q", "r"], "same": [1, 0]})
    with pytest.raises(ValueError, match=r"^gold of item 'p' is given twice: 'c1' and 'c2'$"):
        SimilarityAnswers.from_frame(sim, truth=pd.Series(["c1", "c2"], index=["p", "p"]))
