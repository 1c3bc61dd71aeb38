"""The HTML report: structure, size, and a real browser (headless Chromium) loading and sorting it."""

import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

import crowdlearn as cl
from crowdlearn import simulate
from crowdlearn.cli import main
from crowdlearn.report import summarize
from conftest import load_shared


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.classes, self.refs = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.classes.append((tag, a.get("class", "")))
        for key in ("src", "href"):
            if a.get(key):
                self.refs.append(a[key])


def _parse(page):
    p = _Tags()
    p.feed(page)
    return p


def test_page_holds_every_part_and_no_external_resource():
    data = simulate.dawid_skene(300, 12, 3, labels_per_task=4, seed=0)
    ds = cl.DawidSkene().fit(data)
    page = summarize(ds, data).to_html(labels=data, comparison=None)
    tags = _parse(page)
    has = lambda tag, cls: any(t == tag and cls in c.split() for t, c in tags.classes)
    assert has("table", "workers") and has("table", "doubtful")
    assert has("svg", "confusion") and has("svg", "histogram") and has("svg", "reliability")
    assert has("svg", "convergence")  # ds has a history
    assert tags.refs == [] and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert "accuracy 0." in page and "log-loss" in page


def test_page_stays_small_for_a_hundred_thousand_tasks(tmp_path):
    data = simulate.dawid_skene(100_000, 2000, 3, labels_per_task=3, seed=1)
    est = cl.DawidSkene(max_iter=5).fit(data)
    path = tmp_path / "big.html"
    summarize(est, data).to_html(path, flags=False)
    assert path.stat().st_size < 2_000_000
    assert "of 2000" in path.read_text()  # the page says the worker table is capped


def test_cli_report_compares_methods(tmp_path, capsys):
    data = simulate.dawid_skene(200, 10, 3, labels_per_task=4, seed=2)
    src, out = tmp_path / "a.csv", tmp_path / "r.html"
    data.to_frame().to_csv(src, index=False)
    assert main(["report", str(src), "--method", "ds", "--method", "mv", "--out", str(out)]) == 0
    page = out.read_text()
    assert "Method comparison" in page and ">mv<" in page


def test_cli_report_bad_out_fails_before_the_fits(tmp_path, capsys, monkeypatch):
    """A missing folder for --out was an OSError ('[Errno 2] ...') after every fit."""
    import crowdlearn.cli.report as report_cli

    src = tmp_path / "a.csv"
    src.write_text("task,worker,label\n1,a,x\n2,a,y\n")
    monkeypatch.setattr(report_cli, "make_estimator", lambda *a, **k: pytest.fail("fitted before checking --out"))
    out = tmp_path / "no" / "r.html"
    assert main(["report", str(src), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"crowdlearn: error: {out}: the folder {out.parent} does not exist\n"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (.ci/run installs Debian's chromium)")
def test_dog_report_in_headless_chromium(tmp_path):
    data = load_shared("dog")
    ds = cl.DawidSkene().fit(data)
    page = summarize(ds, data).to_html(labels=data)
    # a copy that clicks the "n_labels" header once (ascending) and writes the first rows'
    # values into the title, which --dump-dom then shows after the scripts ran
    probe = page.replace("</body>", (
        "<script>document.querySelector('table.workers th:nth-child(3)').click();"
        "document.title='sorted:'+Array.from(document.querySelectorAll('table.workers tbody tr'))"
        ".slice(0,5).map(function(r){return r.cells[2].dataset.v}).join(',');</script></body>"))
    html_path, probe_path, shot = tmp_path / "dog.html", tmp_path / "probe.html", tmp_path / "dog.png"
    html_path.write_text(page)
    probe_path.write_text(probe)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", probe_path.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    assert "<table" in dom and 'class="confusion"' in dom and 'class="reliability"' in dom
    title = dom.split("<title>")[1].split("</title>")[0]
    values = [int(v) for v in title.removeprefix("sorted:").split(",")]
    assert values == sorted(values) and values[0] == int(data.labels_per_worker().min())
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1000,3000", html_path.as_uri()],
                   capture_output=True, timeout=120)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def test_positional_truth_is_refused_keyed_truth_gives_the_same_page():
    from crowdlearn.report_html import render_html

    data = simulate.dawid_skene(40, 6, 3, labels_per_task=3, seed=0)
    result = summarize(cl.MajorityVote().fit(data), data)
    truth = data.truth_series()
    with pytest.raises(ValueError, match=r"^truth must be keyed by task id"):
        render_html(result, truth=truth.to_numpy())
    assert render_html(result, truth=truth.to_dict()) == render_html(result, truth=truth)


def test_reliability_dots_count_every_gold_task():
    import re

    data = simulate.dawid_skene(300, 12, 3, labels_per_task=4, seed=0)
    page = summarize(cl.DawidSkene().fit(data), data).to_html(labels=data, comparison=None)
    svg = page[page.index('<svg class="reliability"'):]
    svg = svg[:svg.index("</svg>")]
    counts = [int(n) for n in re.findall(r"\((\d+) tasks\)</title>", svg)]
    assert counts and sum(counts) == data.n_tasks  # every gold task in one bin
    radii = [float(r) for r in re.findall(r'<circle [^>]*r="([0-9.]+)"', svg)]
    assert radii[int(np.argmax(counts))] == max(radii)  # the fullest bin has the largest dot
