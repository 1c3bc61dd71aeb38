"""Platform export readers (crowdlearn.io): each export, written here from the platform's
documented format, reads to the same CrowdLabels as the equivalent long CSV; the real MTurk
batch file reads; bad files fail with one message naming file, record and field."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from conftest import MISSING_DATA, SHARED_DATA
from crowdlearn.core.data import CrowdLabels
from crowdlearn.io import (
    FORMATS,
    detect_export_format,
    read_export,
    read_export_frame,
    write_export,
)
from crowdlearn.io import cleanlab as cl_matrix
from crowdlearn.io import peerannot

# The ground answers every export below encodes: (task, worker, label); gold for t1.
ANSWERS = [
    ("t1", "w1", "cat"), ("t1", "w2", "cat"), ("t1", "w3", "dog"),
    ("t2", "w1", "dog"), ("t2", "w2", "dog"),
    ("t3", "w2", "cat"), ("t3", "w3", "cat"),
    ("t4", "w1", "bird"), ("t4", "w3", "dog"),
]
GOLD = {"t1": "cat"}


def long_csv(tmp_path, answers=ANSWERS, gold=GOLD, tasks=None, workers=None) -> CrowdLabels:
    """The equivalent long CSV, read the ordinary way (ids renamed when an export must)."""
    tasks = tasks or {}
    workers = workers or {}
    path = tmp_path / "long.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["task", "worker", "label"])
        for t, k, y in answers:
            w.writerow([tasks.get(t, t), workers.get(k, k), y])
    truth = pd.Series({tasks.get(t, t): g for t, g in gold.items()}) if gold else None
    return CrowdLabels.from_csv(path, truth=truth)


def assert_same(got: CrowdLabels, want: CrowdLabels) -> None:
    assert list(got.tasks) == list(want.tasks)
    assert list(got.workers) == list(want.workers)
    assert list(got.classes) == list(want.classes)
    triples = lambda d: sorted(zip(d.task.tolist(), d.worker.tolist(), d.label.tolist()))  # noqa: E731
    assert triples(got) == triples(want)
    if want.truth is None:
        assert got.truth is None
    else:
        np.testing.assert_array_equal(got.truth, want.truth)


# ------------------------------------------------------------------ Toloka
TOLOKA_HEADER = ["INPUT:image", "OUTPUT:result", "GOLDEN:result", "HINT:text", "ASSIGNMENT:link",
                 "ASSIGNMENT:assignment_id", "ASSIGNMENT:worker_id", "ASSIGNMENT:status",
                 "ASSIGNMENT:started"]


def toloka_rows():
    rows = []
    for n, (t, w, y) in enumerate(ANSWERS):
        rows.append({
            "INPUT:image": f"https://img.example/{t}.jpg", "OUTPUT:result": y,
            "GOLDEN:result": GOLD.get(t, ""), "HINT:text": "",
            "ASSIGNMENT:link": f"https://toloka.ai/task/1/{n}", "ASSIGNMENT:assignment_id": f"a{n}",
            "ASSIGNMENT:worker_id": w, "ASSIGNMENT:status": "APPROVED" if n % 2 else "SUBMITTED",
            "ASSIGNMENT:started": "2024-01-02T10:00:00", "ASSIGNMENT:task_id": t,
        })
    # a rejected assignment: dropped by default
    rows.append({**rows[0], "ASSIGNMENT:worker_id": "w9", "OUTPUT:result": "bird",
                 "ASSIGNMENT:status": "REJECTED", "ASSIGNMENT:assignment_id": "a99"})
    return rows


def write_tsv(path, header, rows, blank_after=None):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(header)
        for i, row in enumerate(rows):
            w.writerow([row.get(h, "") for h in header])
            if blank_after is not None and i == blank_after:
                fh.write("\n")  # Toloka's optional blank line between task suites


def test_toloka_round_trip_by_inputs(tmp_path):
    path = tmp_path / "assignments_from_pool_1.tsv"
    write_tsv(path, TOLOKA_HEADER, toloka_rows(), blank_after=2)
    assert detect_export_format(path) == "toloka"
    got = read_export(path)
    rename = {t: f"https://img.example/{t}.jpg" for t in ("t1", "t2", "t3", "t4")}
    assert_same(got, long_csv(tmp_path, tasks=rename))
    # rejected work kept on request
    with_rejected = read_export(path, statuses=("SUBMITTED", "APPROVED", "REJECTED"))
    assert with_rejected.n_labels == len(ANSWERS) + 1 and "w9" in list(with_rejected.workers)


def test_toloka_task_id_and_joined_inputs(tmp_path):
    path = tmp_path / "results.tsv"
    write_tsv(path, TOLOKA_HEADER + ["ASSIGNMENT:task_id"], toloka_rows())
    assert_same(read_export(path, "toloka"), long_csv(tmp_path))
    # two input fields, no task id: the task is the JSON array of the inputs
    header = ["INPUT:image", "INPUT:side", "OUTPUT:result", "ASSIGNMENT:worker_id"]
    rows = [{"INPUT:image": f"{t}.jpg", "INPUT:side": "left", "OUTPUT:result": y,
             "ASSIGNMENT:worker_id": w} for t, w, y in ANSWERS]
    write_tsv(path, header, rows)
    got = read_export(path)
    assert_same(got, long_csv(tmp_path, gold={}, tasks={t: f'["{t}.jpg","left"]' for t in "t1 t2 t3 t4".split()}))


def test_toloka_export_in_utf16_without_a_byte_order_mark(tmp_path):
    """Read as UTF-8 (its NUL bytes are valid UTF-8), it was "not a recognised export"."""
    path = tmp_path / "results.tsv"
    write_tsv(path, TOLOKA_HEADER + ["ASSIGNMENT:task_id"], toloka_rows())
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16-le"))
    assert detect_export_format(path) == "toloka"
    assert_same(read_export(path), long_csv(tmp_path))


def test_toloka_several_outputs_need_a_question(tmp_path):
    path = tmp_path / "results.tsv"
    header = ["INPUT:image", "OUTPUT:result", "OUTPUT:comment", "ASSIGNMENT:worker_id"]
    rows = [{"INPUT:image": t, "OUTPUT:result": y, "OUTPUT:comment": "ok", "ASSIGNMENT:worker_id": w}
            for t, w, y in ANSWERS]
    write_tsv(path, header, rows)
    with pytest.raises(ValueError, match=r"several output fields \('result', 'comment'\)"):
        read_export(path)
    assert_same(read_export(path, question="OUTPUT:result"), long_csv(tmp_path, gold={}))
    with pytest.raises(ValueError, match="no output field 'colour'.*'result', 'comment'"):
        read_export(path, question="colour")


# ------------------------------------------------------------------- MTurk
def mturk_rows():
    rows = []
    for n, (t, w, y) in enumerate(ANSWERS):
        rows.append({"HITId": t, "HITTypeId": "HT1", "Title": "Which animal?", "AssignmentId": f"A{n}",
                     "WorkerId": w, "AssignmentStatus": "Approved" if n % 3 else "Submitted",
                     "WorkTimeInSeconds": "12", "Input.image_url": f"{t}.jpg",
                     "Answer.animal": y, "Answer.comment": ""})
    rows.append({**rows[1], "AssignmentId": "A99", "WorkerId": "w9", "AssignmentStatus": "Rejected",
                 "Answer.animal": "bird"})
    rows.append({**rows[2], "AssignmentId": "A98", "WorkerId": "w8", "Answer.animal": ""})  # no answer
    return rows


def write_csv(path, header, rows, encoding="utf-8"):
    with open(path, "w", newline="", encoding=encoding) as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
        w.writerow(header)
        for row in rows:
            w.writerow([row.get(h, "") for h in header])


MTURK_HEADER = ["HITId", "HITTypeId", "Title", "AssignmentId", "WorkerId", "AssignmentStatus",
                "WorkTimeInSeconds", "Input.image_url", "Answer.animal", "Answer.comment"]


def test_mturk_round_trip_cp1252(tmp_path):
    path = tmp_path / "Batch_123_batch_results.csv"
    rows = mturk_rows()
    rows[0]["Answer.comment"] = "I´ve seen cats"  # 0xB4 in cp1252: not UTF-8
    write_csv(path, MTURK_HEADER, rows, encoding="cp1252")
    with pytest.raises(UnicodeDecodeError):
        path.read_text(encoding="utf-8")
    assert detect_export_format(path) == "mturk"
    with pytest.raises(ValueError, match="several answer fields"):
        read_export(path)
    assert_same(read_export(path, question="animal"), long_csv(tmp_path, gold={}))
    comments = read_export_frame(path, question="Answer.comment").answers
    assert comments.label.tolist() == ["I´ve seen cats"]


def test_a_stray_quote_in_an_export_names_its_line(tmp_path):
    """One quote opening an answer and never closed: pyarrow and ``csv`` both read the rest
    of the export as that answer, without an error (one answer of the first task was kept)."""
    path = tmp_path / "assignments_from_pool_1.tsv"
    write_tsv(path, TOLOKA_HEADER + ["ASSIGNMENT:task_id"], toloka_rows())
    lines = path.read_text().split("\n")
    lines[2] = lines[2].replace("\tcat\t", '\t"cat\t', 1)
    path.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"assignments_from_pool_1\.tsv: line 3: unterminated quote: "):
        read_export(path)
    # a ragged row too (pyarrow refuses it: Python's csv reads the file)
    lines[1] += "\textra"
    path.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"line 3: unterminated quote: "):
        read_export(path)
    # closed quoted answers with line breaks, separators and doubled quotes are answers
    rows = mturk_rows()
    rows[0]["Answer.comment"] = 'two\r\nlines, and a "quote"'
    write_csv(tmp_path / "batch.csv", MTURK_HEADER, rows)
    comments = read_export_frame(tmp_path / "batch.csv", question="Answer.comment").answers
    assert comments.label.tolist() == ['two\r\nlines, and a "quote"']


def test_mturk_one_column_per_radio_option(tmp_path):
    path = tmp_path / "batch.csv"
    options = ("bird", "cat", "dog")
    header = ["HITId", "WorkerId", "Input.image_url"] + [f"Answer.animal.{o}" for o in options]
    rows = [{"HITId": t, "WorkerId": w, "Input.image_url": t,
             **{f"Answer.animal.{o}": "true" if o == y else "false" for o in options}}
            for t, w, y in ANSWERS]
    write_csv(path, header, rows)
    assert_same(read_export(path), long_csv(tmp_path, gold={}))


def test_mturk_real_batch_file():
    path = SHARED_DATA / "music_similarity_pairs" / "raw" / "mturk_batch_results.csv"
    if not path.exists():
        pytest.skip(f"{MISSING_DATA} {path.parent}")
    labels = read_export(path, question="radio")
    # SOURCE.md: 2810 assignments, 5 with an empty answer; 281 HITs, 79 workers
    assert (labels.n_labels, labels.n_tasks, labels.n_workers) == (2805, 281, 79)
    assert list(labels.classes) == ["a", "b", "s"]
    counts = dict(zip(labels.classes, np.bincount(labels.label)))
    assert counts == {"a": 577, "b": 823, "s": 1405}  # left, right, tie in pairs.csv
    # the answers match the converted pairs.csv row for row (worker, answer)
    pairs = pd.read_csv(path.parents[1] / "pairs.csv", dtype=str)
    frame = read_export_frame(path, question="radio").answers
    side = frame.label.map({"a": "left", "b": "right", "s": None})
    raw = pd.read_csv(path, encoding="cp1252", dtype=str).dropna(subset=["Answer.radio"])
    expected = np.where(side.isna(), "tie", np.where(side == "left", raw["Input.docA"], raw["Input.docB"]))
    assert frame.worker.tolist() == pairs.worker.tolist()
    assert list(expected) == pairs.label.tolist()
    # the one non-UTF-8 byte (0xB4, cp1252 acute accent) decodes
    bground = read_export_frame(path, question="bground").answers.label
    assert bground.str.contains("\u00b4").any()
    # the answers mean what the HIT asked: the pairs' majority agrees with the order of the
    # truth groups (a = left more similar, b = right, s = same) far above the swapped reading
    group = pd.read_csv(path.parents[1] / "truth.csv", dtype=str).set_index("task")["truth"].astype(int)
    hits = raw.drop_duplicates("HITId").set_index("HITId")
    left, right = group.reindex(hits["Input.docA"]).to_numpy(), group.reindex(hits["Input.docB"]).to_numpy()
    pair_truth = pd.Series(np.where(left < right, "a", np.where(left > right, "b", "s")), index=hits.index)
    votes = pd.DataFrame(labels.vote_counts(), index=labels.tasks, columns=labels.classes)
    top = votes.idxmax(axis=1)[(votes.max(axis=1) > votes.apply(lambda r: r.nlargest(2).iloc[-1], axis=1))]
    agree = float((top == pair_truth.reindex(top.index)).mean())
    swapped = float((top.map({"a": "b", "b": "a", "s": "s"}) == pair_truth.reindex(top.index)).mean())
    assert agree > 0.55 and agree > swapped + 0.3, (agree, swapped)


# ------------------------------------------------------------ Label Studio
def labelstudio_export():
    by_task: dict[str, list] = {}
    for t, w, y in ANSWERS:
        by_task.setdefault(t, []).append((w, y))
    tasks = []
    for n, (t, answers) in enumerate(by_task.items()):
        anns = []
        for k, (w, y) in enumerate(answers):
            anns.append({
                "id": 100 * n + k, "completed_by": int(w[1:]), "was_cancelled": False,
                "ground_truth": False, "lead_time": 3.2, "task": n + 1,
                "result": [
                    {"id": f"r{n}{k}", "from_name": "animal", "to_name": "image", "type": "choices",
                     "value": {"choices": [y]}},
                    {"id": f"q{n}{k}", "from_name": "quality", "to_name": "image", "type": "rating",
                     "value": {"rating": 4}},
                ],
            })
        if t in GOLD:  # a reviewer's reference annotation: gold, not an answer
            anns.append({"id": 999, "completed_by": {"id": 50, "email": "lead@example.org"},
                         "was_cancelled": False, "ground_truth": True,
                         "result": [{"from_name": "animal", "to_name": "image", "type": "choices",
                                     "value": {"choices": [GOLD[t]]}}]})
        # a cancelled (skipped) annotation: dropped
        anns.append({"id": 998, "completed_by": 7, "was_cancelled": True, "ground_truth": False,
                     "result": []})
        tasks.append({"id": int(t[1:]), "data": {"image": f"/data/{t}.jpg"}, "annotations": anns,
                      "predictions": [{"model_version": "m1", "result": [
                          {"from_name": "animal", "to_name": "image", "type": "choices",
                           "value": {"choices": ["bird"]}}]}],
                      "created_at": "2024-03-09T21:52:49Z", "project": 3})
    return tasks


def test_labelstudio_round_trip(tmp_path):
    path = tmp_path / "project-3-at-2024.json"
    path.write_text(json.dumps(labelstudio_export(), indent=2))
    assert detect_export_format(path) == "labelstudio"
    with pytest.raises(ValueError, match=r"several control tag \(from_name\)s \('animal', 'quality'\)"):
        read_export(path)
    got = read_export(path, question="animal")
    want = long_csv(tmp_path, tasks={t: t[1:] for t in "t1 t2 t3 t4".split()},
                    workers={w: w[1:] for w in "w1 w2 w3".split()})
    assert_same(got, want)
    ratings = read_export(path, question="quality")  # numbers read as class labels for now
    assert list(ratings.classes) == ["4"] and ratings.n_labels == len(ANSWERS)


# ----------------------------------------------------------------- Prodigy
def test_prodigy_round_trip(tmp_path):
    path = tmp_path / "animals.jsonl"
    options = [{"id": o, "text": o.title()} for o in ("bird", "cat", "dog")]
    lines = []
    for t, w, y in ANSWERS:
        lines.append({"text": f"photo {t}", "options": options, "accept": [y], "answer": "accept",
                      "_input_hash": int(t[1:]) * 1000, "_task_hash": -int(t[1:]), "_view_id": "choice",
                      "_annotator_id": f"animals-{w}", "_session_id": f"animals-{w}",
                      "_timestamp": 1700000000})
    lines.append({**lines[0], "_annotator_id": "animals-w9", "answer": "ignore", "accept": []})
    lines.append({**lines[0], "_annotator_id": "animals-w8", "answer": "reject", "accept": []})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert detect_export_format(path) == "prodigy"
    got = read_export(path)
    want = long_csv(tmp_path, gold={}, tasks={t: str(int(t[1:]) * 1000) for t in "t1 t2 t3 t4".split()},
                    workers={w: f"animals-{w}" for w in "w1 w2 w3".split()})
    assert_same(got, want)


def test_prodigy_binary_labels_are_questions(tmp_path):
    path = tmp_path / "binary.jsonl"
    lines = [{"text": "a", "label": "SPORTS", "answer": "accept", "_input_hash": 1, "_annotator_id": "x"},
             {"text": "a", "label": "SPORTS", "answer": "reject", "_input_hash": 1, "_annotator_id": "y"},
             {"text": "a", "label": "POLITICS", "answer": "reject", "_input_hash": 1, "_annotator_id": "x"}]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(ValueError, match="several labels \\('SPORTS', 'POLITICS'\\)"):
        read_export(path)
    got = read_export(path, question="SPORTS")
    assert got.to_frame().values.tolist() == [["1", "x", "accept"], ["1", "y", "reject"]]


# ----------------------------------------------------------------- Argilla
def argilla_v1():
    by_task: dict[str, list] = {}
    for t, w, y in ANSWERS:
        by_task.setdefault(t, []).append((w, y))
    records = []
    for t, answers in by_task.items():
        responses = [{"user_id": w, "values": {"animal": {"value": y}, "notes": {"value": "fine"}},
                      "status": "submitted"} for w, y in answers]
        responses.append({"user_id": "w9", "values": {"animal": {"value": "bird"}}, "status": "discarded"})
        responses.append({"user_id": "w8", "values": {}, "status": "draft"})
        records.append({"fields": {"text": f"photo {t}"}, "external_id": t, "metadata": {},
                        "suggestions": [{"question_name": "animal", "value": "bird", "agent": "m"}],
                        "responses": responses})
    return records


def argilla_v2():
    out = []
    for rec in argilla_v1():
        responses: dict[str, list] = {}
        for r in rec["responses"]:
            for q, v in r["values"].items():
                responses.setdefault(q, []).append({"value": v["value"], "user_id": r["user_id"],
                                                    "status": r["status"]})
        out.append({"id": rec["external_id"], "fields": rec["fields"], "metadata": {},
                    "suggestions": {}, "responses": responses, "status": "completed"})
    return out


@pytest.mark.parametrize("shape", ["v1", "v2"])
def test_argilla_round_trip(tmp_path, shape):
    path = tmp_path / "records.json"
    records = argilla_v1() if shape == "v1" else argilla_v2()
    path.write_text(json.dumps(records))
    assert detect_export_format(path) == "argilla"
    with pytest.raises(ValueError, match="several questions \\('animal', 'notes'\\)"):
        read_export(path)
    assert_same(read_export(path, question="animal"), long_csv(tmp_path, gold={}))
    kept = read_export(path, question="animal", statuses=["submitted", "discarded"])
    assert kept.n_labels == len(ANSWERS) + 4  # one discarded answer per record


# ------------------------------------------------------------- CrowdFlower
CF_HEADER = ["_unit_id", "_created_at", "_golden", "_id", "_missed", "_started_at", "_tainted",
             "_channel", "_trust", "_worker_id", "_country", "_region", "_city", "_ip", "animal",
             "animal_gold", "animal_gold_reason", "image_url"]


def test_crowdflower_round_trip(tmp_path):
    path = tmp_path / "f1234567.csv"
    rows = []
    for n, (t, w, y) in enumerate(ANSWERS):
        golden = t in GOLD
        rows.append({"_unit_id": t, "_created_at": "1/2/2017 10:00:00", "_golden": str(golden).lower(),
                     "_id": str(5000 + n), "_missed": "", "_started_at": "1/2/2017 09:59:00",
                     "_tainted": "false", "_channel": "neodev", "_trust": "0.9", "_worker_id": w,
                     "_country": "USA", "animal": y, "animal_gold": GOLD.get(t, ""),
                     "animal_gold_reason": "it purrs" if golden else "", "image_url": f"{t}.jpg"})
    rows.append({**rows[3], "_id": "5999", "_worker_id": "w9", "_tainted": "true", "animal": "bird"})
    write_csv(path, CF_HEADER, rows)
    assert detect_export_format(path) == "crowdflower"
    assert_same(read_export(path), long_csv(tmp_path))
    assert read_export(path, statuses=("trusted", "tainted")).n_labels == len(ANSWERS) + 1
    # a test question accepting several answers gives no gold
    rows[0]["animal_gold"] = rows[1]["animal_gold"] = rows[2]["animal_gold"] = "cat\ndog"
    write_csv(path, CF_HEADER, rows)
    assert read_export(path).truth is None


def test_crowdflower_without_gold_needs_the_question(tmp_path):
    path = tmp_path / "report.csv"
    header = ["_unit_id", "_worker_id", "_golden", "animal", "image_url"]
    write_csv(path, header, [{"_unit_id": t, "_worker_id": w, "_golden": "false", "animal": y,
                              "image_url": t} for t, w, y in ANSWERS])
    with pytest.raises(ValueError, match="question=NAME among 'animal', 'image_url'"):
        read_export(path)
    assert_same(read_export(path, question="animal"), long_csv(tmp_path, gold={}))


# ------------------------------------------------------- peerannot, cleanlab
def test_peerannot_read_and_write(tmp_path):
    labels = long_csv(tmp_path, gold={})
    path = tmp_path / "answers.json"
    write_export(labels, path, "peerannot", ids=True)
    assert detect_export_format(path) == "peerannot"
    assert_same(read_export(path), labels)
    # peerannot's own form: integer codes, maps back to the ids
    maps = peerannot.write(labels, path)
    doc = json.loads(path.read_text())
    assert doc["0"] == {"0": 1, "1": 1, "2": 2}  # t1: w1 cat, w2 cat, w3 dog
    coded = read_export(path)
    assert [maps["tasks"][int(t)] for t in coded.tasks] == list(labels.tasks)
    assert [maps["classes"][int(c)] for c in coded.classes] == list(labels.classes)
    triples = lambda d: sorted(zip(d.task.tolist(), d.worker.tolist(), d.label.tolist()))  # noqa: E731
    assert triples(coded) == triples(labels)


def test_cleanlab_read_and_write(tmp_path):
    labels = long_csv(tmp_path, gold={})
    matrix = cl_matrix.to_matrix(labels)
    assert matrix.shape == (4, 3) and matrix.isna().sum().sum() == 12 - len(ANSWERS)
    assert matrix.loc["t1"].tolist() == [1.0, 1.0, 2.0]
    path = tmp_path / "multiannotator.csv"
    write_export(labels, path, "cleanlab", ids=True)
    assert detect_export_format(path) == "cleanlab"
    assert_same(read_export(path), labels)
    classes = cl_matrix.write(labels, path)  # codes, cleanlab's form
    coded = read_export(path, "cleanlab")
    assert [classes[int(c)] for c in coded.classes] == list(labels.classes)
    # a float matrix with NaN and no task column (pandas' default to_csv without index)
    matrix.to_csv(path, index=False)
    plain = read_export(path, "cleanlab")
    assert list(plain.classes) == ["0", "1", "2"] and list(plain.tasks) == ["0", "1", "2", "3"]


def test_writers_refuse_repeated_answers(tmp_path):
    labels = CrowdLabels.from_records([("t", "w", "a"), ("t", "w", "b")])
    for fmt in ("peerannot", "cleanlab"):
        with pytest.raises(ValueError, match="1 repeated \\(task, worker\\)"):
            write_export(labels, tmp_path / ("x.json" if fmt == "peerannot" else "x.csv"), fmt)


# ------------------------------------------------------------------ errors
def test_unknown_format_lists_the_formats(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("task,worker,label\nt1,w1,a\n")
    with pytest.raises(ValueError, match="cannot tell the export format.*" + ", ".join(FORMATS)):
        read_export(path)
    with pytest.raises(ValueError, match="unknown export format 'excel'"):
        read_export(path, "excel")


def test_bad_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = {"text": "a", "label": "X", "answer": "accept", "_input_hash": 1, "_annotator_id": "u"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n{\"text\": \"b\", \n")
    with pytest.raises(ValueError, match=rf"^{path}: line 3: not valid JSON"):
        read_export(path, "prodigy")


def test_missing_field_names_record_and_field(tmp_path):
    export = labelstudio_export()
    del export[1]["annotations"][0]["completed_by"]
    path = tmp_path / "ls.json"
    path.write_text(json.dumps(export))
    with pytest.raises(ValueError, match=rf"^{path}: record 1: field 'annotations\[0\]\.completed_by': missing"):
        read_export(path, question="animal")
    # a bad answer value
    export = labelstudio_export()
    export[2]["annotations"][1]["result"][0]["value"]["choices"] = ["cat", "dog"]
    path.write_text(json.dumps(export))
    with pytest.raises(ValueError, match=r"record 2: field 'annotations\[1\]\.result\[0\]\.value\.choices': "
                                         r"2 choices.*multi-label"):
        read_export(path, question="animal")


def test_partial_delimited_files(tmp_path):
    path = tmp_path / "results.tsv"
    rows = toloka_rows()
    rows[3]["ASSIGNMENT:worker_id"] = ""
    write_tsv(path, TOLOKA_HEADER, rows)
    with pytest.raises(ValueError, match=rf"^{path}: line 5: field 'ASSIGNMENT:worker_id': missing or empty"):
        read_export(path)
    # a truncated last row (the download stopped half-way)
    write_tsv(path, TOLOKA_HEADER, toloka_rows())
    text = path.read_text()
    path.write_text(text[: text.rstrip("\n").rfind("\t")] + "\n")
    with pytest.raises(ValueError, match=rf"^{path}: line 11: has 8 fields, the header has 9"):
        read_export(path)
    # an export whose worker column is missing
    write_csv(tmp_path / "batch.csv", ["HITId", "Answer.animal", "Input.x"], [{"HITId": "1"}])
    with pytest.raises(ValueError, match=r"line 1: field 'WorkerId': missing from the header"):
        read_export(tmp_path / "batch.csv", "mturk")


def test_status_filter_leaving_nothing_says_so(tmp_path):
    path = tmp_path / "results.tsv"
    write_tsv(path, TOLOKA_HEADER, toloka_rows())
    with pytest.raises(ValueError, match="no toloka answers left to read \\(10 assignments dropped by status\\)"):
        read_export(path, statuses="EXPIRED")


def test_kind_other_than_labels_or_numbers_is_refused(tmp_path):
    """Class labels and numbers are read; other kinds are refused, and class answers asked
    for as numbers name the answer that is not one."""
    path = tmp_path / "results.tsv"
    write_tsv(path, TOLOKA_HEADER, toloka_rows())
    with pytest.raises(ValueError, match="class labels or numbers"):
        read_export(path, kind="pairwise")
    with pytest.raises(ValueError, match="finite numbers"):
        read_export(path, kind="continuous")
    with pytest.raises(ValueError, match="peerannot files have no questions"):
        read_export(path, "peerannot", question="x")


def test_compressed_export(tmp_path):
    import gzip

    path = tmp_path / "results.tsv.gz"
    plain = tmp_path / "results.tsv"
    write_tsv(plain, TOLOKA_HEADER, toloka_rows())
    path.write_bytes(gzip.compress(plain.read_bytes()))
    assert_same(read_export(path), read_export(plain))


def test_utf16_export_with_bom(tmp_path):
    """Excel's "Unicode text" is UTF-16 with a byte-order mark, tab-separated."""
    plain = tmp_path / "results.tsv"
    write_tsv(plain, TOLOKA_HEADER, toloka_rows())
    wide = tmp_path / "results_excel.txt"
    wide.write_bytes(plain.read_text(encoding="utf-8").encode("utf-16"))
    assert detect_export_format(wide) == "toloka"
    assert_same(read_export(wide), read_export(plain))


def test_contradicting_gold_names_the_line(tmp_path):
    path = tmp_path / "results.tsv"
    rows = toloka_rows()
    rows[2]["GOLDEN:result"] = "dog"  # t1's third row: gold cat earlier
    write_tsv(path, TOLOKA_HEADER, rows)
    with pytest.raises(ValueError, match=r"line 4: field 'GOLDEN:result': gold 'dog' for task .*t1.jpg' "
                                         r"contradicts the gold 'cat'"):
        read_export(path)


def test_labelstudio_without_task_ids(tmp_path):
    export = labelstudio_export()
    for task in export:
        del task["id"]
        for ann in task["annotations"]:
            if isinstance(ann["completed_by"], int):  # the older {"id", "email"} form
                ann["completed_by"] = {"id": ann["completed_by"], "email": "x@example.org"}
    path = tmp_path / "ls.json"
    path.write_text(json.dumps(export))
    want = long_csv(tmp_path, tasks={t: f"/data/{t}.jpg" for t in "t1 t2 t3 t4".split()},
                    workers={w: w[1:] for w in "w1 w2 w3".split()})
    assert_same(read_export(path, question="animal"), want)


def test_cleanlab_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    labels = long_csv(tmp_path, gold={})
    path = tmp_path / "matrix.parquet"
    write_export(labels, path, "cleanlab", ids=True)
    assert detect_export_format(path) == "cleanlab"
    assert_same(read_export(path), labels)


def test_multi_label_answers_are_refused_by_name(tmp_path):
    records = argilla_v1()
    records[2]["responses"][0]["values"]["animal"]["value"] = ["cat", "dog"]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    with pytest.raises(ValueError, match=r"record 2: field 'responses\[0\]\.values\.animal': .*multi-label"):
        read_export(path, question="animal")
    path = tmp_path / "choice.jsonl"
    path.write_text(json.dumps({"options": [{"id": "a"}, {"id": "b"}], "accept": ["a", "b"],
                                "answer": "accept", "_input_hash": 1, "_annotator_id": "u"}))
    with pytest.raises(ValueError, match=r"line 1: field 'accept': 2 options chosen"):
        read_export(path)


def test_peerannot_bad_structure(tmp_path):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"0": {"0": 1}, "1": {"2": [0, 1]}}))
    with pytest.raises(ValueError, match=r"task '1': field '2': expected one label"):
        read_export(path, "peerannot")


def test_argilla_hub_shape_and_default_status(tmp_path):
    """FeedbackDataset.push_to_huggingface rows (one key per question), and responses given
    without a status (Argilla takes them as submitted)."""
    by_task: dict[str, list] = {}
    for t, w, y in ANSWERS:
        by_task.setdefault(t, []).append((w, y))
    rows = [{"text": f"photo {t}", "animal": [{"user_id": w, "value": y, "status": "submitted"} for w, y in a],
             "animal-suggestion": "bird", "animal-suggestion-metadata": {"agent": "m"},
             "external_id": t, "metadata": "{}"} for t, a in by_task.items()]
    path = tmp_path / "hub.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert detect_export_format(path) == "argilla"
    assert_same(read_export(path), long_csv(tmp_path, gold={}))
    # no external_id: the text field is the task
    for r in rows:
        del r["external_id"]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert_same(read_export(path), long_csv(tmp_path, gold={}, tasks={t: f"photo {t}" for t in by_task}))
    records = argilla_v1()
    for rec in records:
        for r in rec["responses"]:
            if r["status"] == "submitted":
                del r["status"]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    assert_same(read_export(path, question="animal"), long_csv(tmp_path, gold={}))


def test_dataframes_holding_tabular_exports(tmp_path):
    """toloka-kit's get_assignments_df, a batch file read by hand, cleanlab's own matrix."""
    toloka = pd.DataFrame(toloka_rows()).drop(columns="ASSIGNMENT:task_id")
    assert detect_export_format(toloka) == "toloka"
    rename = {t: f"https://img.example/{t}.jpg" for t in ("t1", "t2", "t3", "t4")}
    assert_same(read_export(toloka), long_csv(tmp_path, tasks=rename))
    toloka.loc[3, "ASSIGNMENT:worker_id"] = None
    with pytest.raises(ValueError, match=r"^DataFrame: row position 3: field 'ASSIGNMENT:worker_id': missing"):
        read_export(toloka)
    mturk = pd.DataFrame(mturk_rows())
    assert_same(read_export(mturk, question="animal"), long_csv(tmp_path, gold={}))
    labels = long_csv(tmp_path, gold={})
    matrix = cl_matrix.to_matrix(labels)  # float codes, NaN, tasks as index
    coded = read_export(matrix)
    assert list(coded.tasks) == list(labels.tasks) and list(coded.classes) == ["0", "1", "2"]
    with pytest.raises(ValueError, match="a labelstudio export is JSON"):
        read_export(toloka, "labelstudio")


def test_unknown_question_lists_the_candidates(tmp_path):
    path = tmp_path / "report.csv"
    header = ["_unit_id", "_worker_id", "_golden", "animal", "animal_gold", "image_url"]
    write_csv(path, header, [{"_unit_id": t, "_worker_id": w, "_golden": "false", "animal": y,
                              "image_url": t} for t, w, y in ANSWERS])
    with pytest.raises(ValueError, match="no question 'colour'; the export's questions are 'animal', 'image_url'"):
        read_export(path, question="colour")
