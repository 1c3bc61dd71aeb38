"""Active labelling: task and worker scores, the suggest/observe loop, replay, and `crowdlearn next`."""

import io

import numpy as np
import pandas as pd
import pytest

from crowdlearn import simulate
from crowdlearn.active import ActiveLoop, budget_summary, expected_information_gain, replay, task_scores, worker_scores
from crowdlearn.active.strategies import expected_accuracy_gain, worker_confusion_counts, worker_confusion_draw
from crowdlearn.cli import main
from conftest import load_shared


def test_information_gain_is_zero_for_spammers_and_largest_for_uncertain_tasks():
    post = np.array([[0.5, 0.5], [0.9, 0.1], [1.0, 0.0]])
    spammer = np.full((2, 2), 0.5)
    np.testing.assert_allclose(expected_information_gain(post, spammer), 0.0, atol=1e-12)
    good = np.array([[0.9, 0.1], [0.1, 0.9]])
    eig = expected_information_gain(post, good)
    assert eig[0] > eig[1] > eig[2] >= 0 and eig[2] == pytest.approx(0.0, abs=1e-12)
    # a perfect worker reveals the whole entropy of the task
    perfect = np.eye(2)
    np.testing.assert_allclose(expected_information_gain(post, perfect)[0], np.log(2))


def test_knowledge_gradient_is_the_gain_in_expected_accuracy_of_one_answer():
    post = np.array([[0.5, 0.5], [0.9, 0.1], [0.6, 0.4]])
    good = np.array([[0.7, 0.3], [0.3, 0.7]])
    kg = expected_accuracy_gain(post, good)
    # one 70%-accurate answer cannot flip a 0.9 task; on a coin flip it is worth 0.2 of accuracy
    np.testing.assert_allclose(kg, [0.2, 0.0, 0.1], atol=1e-12)
    np.testing.assert_allclose(expected_accuracy_gain(post, np.full((2, 2), 0.5)), 0.0, atol=1e-12)
    np.testing.assert_allclose(expected_accuracy_gain(post, np.eye(2)), 1.0 - post.max(axis=1))
    # one confusion per task gives the same as the shared one
    np.testing.assert_allclose(expected_accuracy_gain(post, np.repeat(good[None], 3, axis=0)), kg)
    # by simulation: the Bayes decision after one drawn answer is right that much more often
    rng = np.random.default_rng(0)
    q = np.array([0.6, 0.4])
    truth = rng.choice(2, size=200_000, p=q)
    answer = np.where(rng.random(len(truth)) < 0.7, truth, 1 - truth)
    decide = np.argmax(q[None] * good[:, answer].T, axis=1)
    assert np.mean(decide == truth) - q.max() == pytest.approx(kg[2], abs=0.005)


def test_task_and_worker_scores():
    rng = np.random.default_rng(0)
    post = np.array([[0.34, 0.33, 0.33], [0.8, 0.1, 0.1], [0.5, 0.5, 0.0]])
    assert np.argmax(task_scores("entropy", post, None, rng)) == 0
    assert np.argmax(task_scores("margin", post, None, rng)) == 2  # a tie between the top two
    with pytest.raises(ValueError, match="worker model"):
        task_scores("eig", post, None, rng)
    with pytest.raises(ValueError, match="unknown task strategy"):
        task_scores("loudest", post, None, rng)
    acc, n = np.array([0.9, 0.7, 0.7]), np.array([100, 100, 1])
    assert np.argmax(worker_scores("greedy", acc, n, rng)) == 0
    assert np.argmax(worker_scores("ucb", acc, n, rng)) == 2  # barely explored: optimism wins


def test_suggest_gives_distinct_tasks_and_workers_who_have_not_answered_them():
    data = simulate.dawid_skene(200, 12, 3, labels_per_task=2, seed=1)
    loop = ActiveLoop(strategy="eig", worker_strategy="ucb").observe(data)
    pick = loop.suggest(30, workers=data.workers)
    assert len(pick) == 30 and pick["task"].is_unique
    frame = data.to_frame()
    answered = set(zip(frame["task"], frame["worker"]))
    assert not any((t, w) in answered for t, w in zip(pick["task"], pick["worker"]))
    assert pick["score"].is_monotonic_decreasing
    # new tasks are scored with the class prior; never-seen workers with the crowd's mean
    fresh = loop.suggest(5, tasks=["new-1", "new-2"], workers=["someone-new"])
    assert set(fresh["task"]) == {"new-1", "new-2"} and set(fresh["worker"]) == {"someone-new"}


def test_worker_confusion_counts_are_soft_counts_plus_one_crowd_row():
    post = np.array([[1.0, 0.0], [0.25, 0.75]])
    task, worker, label = np.array([0, 1, 1]), np.array([0, 0, 1]), np.array([1, 1, 0])
    alpha = worker_confusion_counts(post, task, worker, label, n_workers=3)
    counts = np.array([[[0, 1.25], [0, 0.75]], [[0.25, 0], [0.75, 0]], [[0, 0], [0, 0]]])
    crowd = counts.sum(axis=0) / counts.sum(axis=(0, 2))[:, None]
    np.testing.assert_allclose(alpha, counts + crowd)
    # one pseudo-answer per true class; a worker never seen is the crowd's mean row
    np.testing.assert_allclose(alpha[2].sum(axis=1), 1.0)
    draw = worker_confusion_draw(alpha, np.random.default_rng(0))
    np.testing.assert_allclose(draw.sum(axis=2), 1.0)
    np.testing.assert_allclose(worker_confusion_draw(alpha, None), alpha / alpha.sum(axis=2, keepdims=True))


def test_joint_information_gain_sends_a_task_to_the_worker_who_can_tell_its_classes_apart():
    # the task is torn between classes 0 and 1; worker "sep" separates exactly those two,
    # worker "other" only recognises class 2 (its answers carry nothing about 0 vs 1), and
    # "other" is the more accurate one on average -- greedy on accuracy would ask it
    rows = [("t", "a", 0), ("t", "b", 1)]
    for i in range(60):  # calibration tasks with a clear majority, half of them class 2
        c = (0, 2, 1, 2)[i % 4]
        rows += [(f"c{i}", f"h{j}", c) for j in range(5)]
        rows.append((f"c{i}", "sep", c if c < 2 else 0))
        rows.append((f"c{i}", "other", 2 if c == 2 else 0))
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    loop = ActiveLoop(method="ds", strategy="eig", worker_strategy="eig").observe(frame)
    pick = loop.suggest(1, tasks=["t"], workers=["other", "sep"])
    assert pick["worker"].tolist() == ["sep"]
    # the knowledge gradient sends it to the same worker: only "sep" can flip the decision
    kg = ActiveLoop(method="ds", strategy="kg", worker_strategy="eig").observe(frame)
    assert kg.suggest(1, tasks=["t"], workers=["other", "sep"])["worker"].tolist() == ["sep"]
    greedy = ActiveLoop(method="ds", strategy="eig", worker_strategy="greedy").observe(frame)
    assert greedy.estimator_.skills_["other"] > greedy.estimator_.skills_["sep"]
    # the task score is the best available worker's gain: nobody informative, lower score
    alone = loop.suggest(1, tasks=["t"], workers=["other"])
    assert alone["score"].iloc[0] < pick["score"].iloc[0]
    # tasks whose every listed worker has answered them are not suggested
    assert loop.suggest(2, tasks=["t", "c0"], workers=["a", "b"]).empty is False
    assert loop.suggest(1, tasks=["t"], workers=["a", "b"]).empty


def test_joint_strategies_are_deterministic_and_suggest_distinct_unanswered_pairs():
    data = simulate.dawid_skene(150, 10, 3, labels_per_task=2, seed=4)
    frame = data.to_frame()
    answered = set(zip(frame["task"], frame["worker"]))
    for strategy, ws in (("eig", "eig"), ("eig", "eig-thompson"), ("kg", "eig")):
        picks = [ActiveLoop(strategy=strategy, worker_strategy=ws, random_state=3).observe(data)
                 .suggest(25, workers=data.workers) for _ in range(2)]
        pd.testing.assert_frame_equal(picks[0], picks[1])
        assert len(picks[0]) == 25 and picks[0]["task"].is_unique
        assert picks[0]["score"].is_monotonic_decreasing and (picks[0]["score"] >= 0).all()
        assert not any((t, w) in answered for t, w in zip(picks[0]["task"], picks[0]["worker"]))


def test_uncertainty_sampling_asks_about_the_contested_tasks_first():
    frame = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4, "worker": list("wxyz") * 2,
                          "label": [0, 0, 0, 0, 0, 1, 0, 1]})
    pick = ActiveLoop(method="mv", strategy="entropy").observe(frame).suggest(1)
    assert pick["task"].tolist() == ["b"]


def test_errors():
    with pytest.raises(ValueError, match="unknown strategy"):
        ActiveLoop(strategy="loudest")
    with pytest.raises(ValueError, match="no answers observed"):
        ActiveLoop().suggest(3)
    with pytest.raises(ValueError, match="missing"):
        ActiveLoop().observe(pd.DataFrame({"task": [1], "label": [0]}))


def test_replay_reveals_only_recorded_answers_and_every_strategy_ends_at_the_full_fit():
    data = simulate.dawid_skene(120, 10, 3, labels_per_task=4, seed=3)
    curves = {s: replay(data, s, step=40, random_state=0) for s in ("random", "entropy")}
    for c in curves.values():
        assert c["labels"].iloc[0] == data.n_tasks and c["labels"].iloc[-1] == data.n_labels
        assert c["labels"].is_monotonic_increasing
    assert curves["random"]["accuracy"].iloc[-1] == curves["entropy"]["accuracy"].iloc[-1]
    capped = replay(data, "entropy", budget=10**9, step=100)  # a budget above the answers is capped
    assert capped["labels"].iloc[-1] == data.n_labels
    s = budget_summary(curves["entropy"], curves["entropy"]["accuracy"].iloc[-1])
    assert 0 < s["share_of_answers"] <= 1 and 0 < s["auc"] <= 1


def test_replay_on_bluebirds_beats_random_selection():
    data = load_shared("bluebirds")
    target = replay(data, "random", step=200, random_state=0)["accuracy"].iloc[-1]
    auc = {s: np.mean([budget_summary(replay(data, s, step=100, random_state=seed), target)["auc"]
                       for seed in range(2)]) for s in ("random", "eig")}
    assert auc["eig"] > auc["random"], auc


def test_cli_next(tmp_path, capsys):
    data = simulate.dawid_skene(100, 8, 3, labels_per_task=2, seed=0)
    src = tmp_path / "answers.csv"
    data.to_frame().to_csv(src, index=False)
    avail = tmp_path / "workers.csv"
    pd.DataFrame({"worker": data.workers[:3]}).to_csv(avail, index=False)
    out = tmp_path / "next.csv"
    assert main(["next", str(src), "--budget", "7", "--workers", str(avail), "--out", str(out)]) == 0
    got = pd.read_csv(out, dtype=str)
    assert list(got.columns) == ["task", "worker", "score"] and len(got) == 7 and got["task"].is_unique
    assert set(got["worker"]) <= set(map(str, data.workers[:3]))
    assert main(["next", str(src), "--budget", "5"]) == 0
    out_csv = capsys.readouterr().out
    assert out_csv.splitlines()[0] == "task,worker,score" and len(out_csv.splitlines()) == 6


def test_scores_of_certain_tasks_are_zero_not_negative_zero(tmp_path, capsys):
    """Answers of one class give certain posteriors, whose entropy was -0.0 (the negated sum
    of 1 log 1), and `crowdlearn next` printed scores of -0.0."""
    assert not np.signbit(task_scores("entropy", np.ones((2, 1)), None, np.random.default_rng(0))).any()
    src = tmp_path / "answers.csv"
    src.write_text("task,worker,label\n1,a,x\n1,b,x\n2,a,x\n")
    for strategy in ("entropy", "margin", "eig", "kg"):
        assert main(["next", str(src), "--budget", "2", "--strategy", strategy]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[1:] and all(line.endswith(",0.0") for line in out.splitlines()[1:]), (strategy, out)


def test_budget_zero_is_an_empty_suggestion_in_python_and_on_the_command_line(tmp_path, capsys):
    """suggest(0) returned an empty frame while `next --budget 0` was an error: both now give
    no suggestion (the CLI a header-only table), and a negative budget is an error naming it."""
    data = simulate.dawid_skene(60, 8, 3, labels_per_task=2, seed=0)
    for worker_strategy, workers in ((None, None), ("greedy", data.workers[:3]), ("eig", data.workers[:3])):
        pick = ActiveLoop(worker_strategy=worker_strategy).observe(data).suggest(0, workers=workers)
        assert list(pick.columns) == ["task", "worker", "score"] and len(pick) == 0, worker_strategy
    with pytest.raises(ValueError, match="got -1"):
        ActiveLoop().observe(data).suggest(-1)
    src = tmp_path / "answers.csv"
    data.to_frame().to_csv(src, index=False)
    assert main(["next", str(src), "--budget", "0"]) == 0
    assert capsys.readouterr().out == "task,worker,score\n"
    out = tmp_path / "next.csv"
    assert main(["next", str(src), "--budget", "0", "--out", str(out)]) == 0
    assert out.read_text() == "task,worker,score\n"
    assert main(["next", str(src), "--budget", "-1"]) == 2
    assert "crowdlearn: error: --budget must be >= 0, got -1" in capsys.readouterr().err
    # no answers yet (the first round of a loop): the error says what to do instead
    (tmp_path / "none.csv").write_text("task,worker,label\n")
    assert main(["next", str(tmp_path / "none.csv"), "--budget", "2"]) == 2
    err = capsys.readouterr().err
    assert "no rows: next ranks tasks by the answers so far" in err and err.count("\n") == 1
    # a worker rule without workers to choose among was silently ignored
    assert main(["next", str(src), "--budget", "2", "--worker-strategy", "greedy"]) == 2
    assert "--worker-strategy chooses among the workers of --workers" in capsys.readouterr().err


def test_cli_next_lists_match_number_ids_of_parquet_answers(tmp_path, capsys):
    """--tasks and --workers files are text: their "1" and "10" are the tasks 1 and the worker 10
    of Parquet answers (they were new tasks, scored with the prior, and a new worker sent to
    tasks that worker 10 had answered); fewer suggestions than the budget say why."""
    pytest.importorskip("pyarrow")
    src = tmp_path / "a.parquet"
    pd.DataFrame({"task": [1, 1, 2, 2, 3], "worker": [10, 11, 10, 11, 11],
                  "label": ["x", "x", "y", "y", "x"]}).to_parquet(src)
    (tmp_path / "t.csv").write_text("task\n1\n2\n")
    (tmp_path / "w.csv").write_text("worker\n10\n")
    assert main(["next", str(src), "--budget", "5", "--tasks", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr()
    assert sorted(pd.read_csv(io.StringIO(out.out))["task"]) == [1, 2]
    assert pd.read_csv(io.StringIO(out.out))["score"].max() < 0.01  # answered, agreed: no prior 0.69
    assert "the pool has 2 task(s)" in out.err
    assert main(["next", str(src), "--budget", "3", "--workers", str(tmp_path / "w.csv")]) == 0
    out = capsys.readouterr()
    got = pd.read_csv(io.StringIO(out.out))
    assert got["task"].tolist() == [3] and got["worker"].tolist() == [10], out.out
    assert "1 of them not yet answered by a listed worker" in out.err


def test_cli_next_lists_read_the_columns_named_by_task_col_and_worker_col(tmp_path, capsys):
    """--tasks and --workers files were read by the columns 'task' and 'worker' whatever
    --task-col / --worker-col said (as aggregate's --tasks file is read by --task-col): a list
    whose id column is named as the answers' must be read, one lacking it named in the error."""
    src = tmp_path / "a.csv"
    src.write_text("item,annotator,answer\nq1,u1,x\nq1,u2,y\nq2,u1,x\nq2,u2,x\nq3,u2,y\n")
    (tmp_path / "t.csv").write_text("item\nq1\nq3\nq9\n")
    (tmp_path / "w.csv").write_text("annotator\nu1\n")
    cols = ["--task-col", "item", "--worker-col", "annotator", "--label-col", "answer"]
    assert main(["next", str(src), "--budget", "5", "--tasks", str(tmp_path / "t.csv"),
                 "--workers", str(tmp_path / "w.csv"), *cols]) == 0
    out = capsys.readouterr()
    got = pd.read_csv(io.StringIO(out.out), dtype=str)
    assert sorted(got["task"]) == ["q3", "q9"] and set(got["worker"]) == {"u1"}, out
    # a list without the named column: one line naming the file and the column it lacks
    (tmp_path / "old.csv").write_text("task\nq1\n")
    for flag in ("--tasks", "--workers"):
        assert main(["next", str(src), "--budget", "2", flag, str(tmp_path / "old.csv"), *cols]) == 2
        err = capsys.readouterr().err
        want = "'item'" if flag == "--tasks" else "'annotator'"
        assert err.count("\n") == 1 and "old.csv" in err and want in err and "missing column" in err, err
    # an empty cell in a list is no task (it was suggested as one, scored with the prior)
    (tmp_path / "gap.csv").write_text("item,note\nq1,a\n,b\n")
    assert main(["next", str(src), "--budget", "2", "--tasks", str(tmp_path / "gap.csv"), *cols]) == 2
    err = capsys.readouterr().err
    assert "gap.csv: missing value in column 'item' at line 3" in err, err


def test_activelab_scores_tasks_with_a_classifier_including_unanswered_ones():
    data = simulate.dawid_skene(300, 10, 3, labels_per_task=2, seed=0)
    p = np.full((data.n_tasks + 3, 3), 0.1)
    p[np.arange(data.n_tasks), data.truth] = 0.8  # a good classifier on the answered tasks
    p[data.n_tasks:] = 1 / 3  # and no idea about three new ones
    probs = pd.DataFrame(p, index=list(data.tasks) + ["n0", "n1", "n2"], columns=data.classes)
    loop = ActiveLoop(strategy="activelab", pred_probs=probs).observe(data)
    pick = loop.suggest(3, tasks=probs.index)
    assert set(pick["task"]) == {"n0", "n1", "n2"}  # where neither model nor crowd knows
    with pytest.raises(ValueError, match="needs pred_probs"):
        ActiveLoop(strategy="activelab")
    with pytest.raises(ValueError, match="no row for task"):
        loop.suggest(2, tasks=["elsewhere"])


def test_knowledge_gradient_is_exactly_zero_when_no_answer_can_flip_the_decision():
    """The gain was a difference of two sums, so a task one answer cannot flip scored the
    rounding error (1e-16) on some rows and 0 on others: those rows went first, and the
    promised random tie-break among zero-gain tasks did not happen."""
    from crowdlearn.active.strategies import expected_accuracy_gain

    rng = np.random.default_rng(0)
    p = 0.97 + 0.03 * rng.random(2000)
    post = np.column_stack([p, 1 - p])
    conf = np.array([[0.8, 0.2], [0.3, 0.7]])
    assert (expected_accuracy_gain(post, conf) == 0).all()
    per_task = np.repeat(conf[None], 2000, axis=0)
    assert (expected_accuracy_gain(post, per_task) == 0).all()
    flip = np.array([[0.55, 0.45]])
    assert expected_accuracy_gain(flip, conf)[0] == pytest.approx(0.45 * 0.7 - 0.55 * 0.2)


@pytest.mark.parametrize("k", [None, "2", float("nan"), float("inf"), 1.5])
def test_suggest_refuses_a_k_that_is_not_a_count(k):
    # None used to raise int()'s TypeError and inf an OverflowError, neither naming k
    data = simulate.dawid_skene(20, 4, 2, labels_per_task=2, seed=0)
    with pytest.raises(ValueError, match="k must be a non-negative integer"):
        ActiveLoop().observe(data).suggest(k)


def test_suggest_matches_ids_by_value_and_draws_by_id():
    """Answers read as text and ids given as numbers (or the reverse) name the same tasks and
    workers: task 33 was scored as a new task and offered to a worker who had answered it.
    The random strategy and the tie-breaks draw per id, so the same answers read with number
    ids or text ids give the same suggestions."""
    data = simulate.dawid_skene(60, 8, 2, labels_per_task=3, seed=0)
    frame = data.to_frame().astype(int)
    as_text = frame.astype(str)
    loop = ActiveLoop().observe(as_text)
    task = int(frame["task"].iloc[0])
    done = frame.loc[frame["task"] == task, "worker"].tolist()
    out = loop.suggest(1, tasks=[task], workers=done)
    assert out.empty  # everyone offered has answered it already
    assert loop.suggest(1, tasks=[task], workers=[w for w in range(8) if w not in done])["task"].tolist() == [str(task)]
    for strategy in ("random", "entropy"):
        a = ActiveLoop(strategy=strategy).observe(frame).suggest(10)
        b = ActiveLoop(strategy=strategy).observe(as_text).suggest(10)
        assert a["task"].astype(str).tolist() == b["task"].tolist()


@pytest.mark.filterwarnings("ignore:.*worker quality cannot be estimated")
@pytest.mark.parametrize("worker_strategy", [None, "greedy", "eig"])
def test_replay_ends_when_only_repeated_answers_of_a_worker_are_left(worker_strategy):
    # worker a answered task 1 twice: once one of a's answers is revealed, the loop never asks
    # a about task 1 again, so the other could not be revealed and the replay looped forever
    df = pd.DataFrame({"task": [1, 1, 1, 2, 2, 3, 3], "worker": ["a", "a", "b", "a", "b", "a", "b"],
                       "label": [0, 1, 1, 0, 0, 1, 1]})
    from crowdlearn.core.data import CrowdLabels

    data = CrowdLabels.from_frame(df, truth=pd.Series([1, 0, 1], index=[1, 2, 3]))
    curve = replay(data, worker_strategy=worker_strategy, step=1, random_state=1)
    assert curve["labels"].is_monotonic_increasing
    assert data.n_labels - 1 <= curve["labels"].iloc[-1] <= data.n_labels


@pytest.mark.filterwarnings("ignore:.*worker quality cannot be estimated")
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("method", ["mv", "glad", "onecoin"])
@pytest.mark.parametrize("strategy", ["eig", "kg"])
def test_answers_of_one_class_only_give_finite_scores_without_warnings(method, strategy):
    # the crowd's one-coin confusion of a single class divided 0 by 0 off its (absent) diagonal
    answers = pd.DataFrame({"task": ["t1", "t2"], "worker": ["w1", "w2"], "label": ["a", "a"]})
    pick = ActiveLoop(method=method, strategy=strategy).observe(answers).suggest(3, tasks=["t1", "t2", "t3"])
    assert len(pick) == 3 and np.isfinite(pick["score"]).all()


def test_observe_spells_later_ids_as_first_seen():
    """A later batch naming task 2 as text ("2", from a CSV) after the number 2 (Parquet) is
    the same task, as ``partial_fit`` reads it; it was refused as one id of two types."""
    loop = ActiveLoop()
    loop.observe(pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": ["x", "x", "y", "y"]}))
    loop.observe(pd.DataFrame({"task": ["2", "3"], "worker": ["c", "c"], "label": ["y", "x"]}))
    assert loop.answers_.tasks.tolist() == [1, 2, "3"]
    assert loop.answers_.n_labels == 6
    assert set(loop.suggest(3)["task"]) == {1, 2, "3"}
