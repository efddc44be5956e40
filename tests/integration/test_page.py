"""report DIR --html: one self-contained page of where every rank is, made from a real hang's documents
and loaded in a real headless browser (Debian's chromium; .ci/run installs it; the browser checks skip,
saying so, where it is missing)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from harness import ROOT, read_verdict, snapshot_dir

from c10d_observer import page, verdict

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = os.environ.get("C10D_TEST_ARTIFACTS") or os.path.join(ROOT, "tests", "artifacts")


def _browser(url, *args):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--enable-logging=stderr", "--v=0"] + list(args) + [url],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.fixture(scope="module")
def stuck_dir(tmp_path_factory):
    """The documents of a 3-rank job while rank 1 skips an all_reduce (copied while the hang lasts)."""
    from harness import Job
    tmp = tmp_path_factory.mktemp("page")
    job = Job("skip", 3, tmp, culprit=1, step=2, timeout=1.0)
    try:
        read_verdict(job.dump_dir, 60, job.log_text())
        copy = str(tmp / "while-stuck")
        snapshot_dir(job.dump_dir, copy)
        job.release()
        assert job.finish() == [0, 0, 0], job.log_text()
    finally:
        job.close()
    return copy


def test_the_page_shows_the_stuck_cells_and_the_culprit_and_needs_nothing_outside(stuck_dir, tmp_path):
    out_html = str(tmp_path / "job.html")
    rep = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--html", out_html, stuck_dir],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert rep.returncode == 1, rep.stderr  # the page changes nothing of report's exit code and text
    assert "never arrived: rank 1" in rep.stdout and "page written to" in rep.stderr
    text = open(out_html).read()
    assert not re.search(r"https?://|<link|src=|@import|url\(", text), "the page must need nothing outside"
    rows = dict(re.findall(r"<tr class='([^']*)'><th>(\d+)", text)[i][::-1] for i in range(3))
    assert "culprit" in rows["1"] and "culprit" not in rows["0"] and "culprit" not in rows["2"], rows
    assert "data-rank='0'" in text and re.search(r"<td class='stuck' data-rank='0'", text)
    assert re.search(r"<td class='stuck' data-rank='2'", text)
    assert re.search(r"<td class='missing' data-rank='1'", text)
    assert "never arrived: rank 1" in text and "Calls in flight" in text
    # the culprit's main thread under its row, its own frames in bold: it stalls in the scenario's loop
    stack = re.search(r"<pre class='stack' data-rank='1'>(.*?)</pre>", text, re.S).group(1)
    assert "most recent call last" in stack and re.search(r"<b>.*in stall_until_released</b>", stack), stack
    assert text.count("<pre class='stack'") == 1  # only the culprit's
    # a time axis under the timeline: ticks from +0 s, evenly spaced, labelled in seconds
    axis = re.search(r"<div class='tl axis' id='axis'>(.*?)</div></div>", text).group(1)
    ticks = re.findall(r"left:([\d.]+)%'><span>\+([\d.]+) s</span>", axis)
    lefts, secs = [float(x) for x, _ in ticks], [float(t) for _, t in ticks]
    assert len(ticks) >= 2 and lefts[0] == 0.0 and secs[0] == 0.0, axis
    assert all(abs((b - a) - (lefts[1] - lefts[0])) < 0.02 for a, b in zip(lefts, lefts[1:])), lefts
    assert all(abs((b - a) - (secs[1] - secs[0])) < 1e-9 for a, b in zip(secs, secs[1:])), secs


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs Debian's)")
def test_the_page_loads_in_a_browser_without_error_and_a_screenshot_is_kept(stuck_dir, tmp_path):
    docs, _ = verdict.load_docs(stuck_dir)
    v = verdict.analyze(docs)
    path = str(tmp_path / "job.html")
    page.write(path, docs, v, stuck_dir)
    dom = _browser("file://" + path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<span id="loaded">yes</span>' in dom.stdout, dom.stdout[:2000]  # the page's script ran through
    assert "Uncaught" not in dom.stderr and "SyntaxError" not in dom.stderr, dom.stderr[-2000:]
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "verdict-page.png")
    s = _browser("file://" + path, "--screenshot=%s" % shot, "--window-size=1400,900")
    assert s.returncode == 0 and os.path.getsize(shot) > 10000, s.stderr[-2000:]
    print("screenshot: %s" % shot)


@pytest.mark.full  # tests/README.md: the full tier
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs Debian's)")
def test_at_1024_ranks_the_page_opens_on_the_ranks_that_matter(stuck_dir, tmp_path):
    """1,024 ranks: the real documents of ranks 0-2 (the stuck call's group) and 1,021 more ranks, copies of
    rank 0's document with their rank changed, outside that call.  All 1,024 rows are in the page; the
    filter, on by default past 64 ranks, shows the ranks of the stuck call."""
    docs, _ = verdict.load_docs(stuck_dir)
    for r in range(3, 1024):
        docs[r] = docs[0]._replace(rank=r)
    docs = {r: d._replace(world_size=1024) for r, d in docs.items()}
    v = verdict.analyze(docs)
    h = v["hangs"][0]
    matter = set(h["waiting_ranks"]) | set(h["missing_ranks"]) | set(v["culprit_ranks"])
    assert v["culprit_ranks"] == [1]
    path = str(tmp_path / "big.html")
    size = page.write(path, docs, v, stuck_dir)
    assert size < 5 * 2 ** 20, size
    dom = _browser("file://" + path, "--dump-dom")
    assert '<span id="loaded">yes</span>' in dom.stdout, dom.stderr[-2000:]
    rows = re.findall(r'<tr class="rank[^"]*"( style="display: none;")?><th>(\d+)', dom.stdout)
    shown = {int(r) for hidden, r in rows if not hidden}
    assert len(rows) == 1024 and shown == matter == {0, 1, 2}, sorted(shown)[:10]
