"""report.html as a person sees it: rendered by headless Chromium (Debian's `chromium`).

Checks that every image decoded (naturalWidth > 0 after load), that the headline is there and
is the one the verdict implies, and saves a screenshot beside the report for a person to look
at. Skipped without `chromium` on PATH, except where SCALING_REQUIRE_SERVICES=1 (CI), where a
missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report.headline import headline
from analysis.synthetic.scenarios import scenario

# Run once the page has loaded: count the images that decoded, and mark the body with it.
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  document.body.dataset.imagesTotal = imgs.length;
  document.body.dataset.imagesLoaded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
});
</script>"""


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("SCALING_REQUIRE_SERVICES") == "1":
            pytest.fail("chromium is not on PATH and SCALING_REQUIRE_SERVICES=1: install it")
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    return path


def _run(chromium: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("report")
    verdict = run_analysis(
        scenario("lucky_survivor", 61), table_judgement("linear", num_resamples=100), out
    )
    return out / "report.html", verdict


def test_report_renders_in_chromium_with_every_image_and_the_headline(report, tmp_path):
    chromium = _chromium()
    page, verdict = report
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    res = _run(chromium, "--virtual-time-budget=10000", "--dump-dom", probed.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    total = re.search(r'data-images-total="(\d+)"', dom)
    loaded = re.search(r'data-images-loaded="(\d+)"', dom)
    assert total and loaded, "the load probe did not run: " + dom[:500]
    assert int(total[1]) >= 4  # loss vs N, gain vs N, k(C), LR sweeps
    assert loaded[1] == total[1], f"{loaded[1]} of {total[1]} images loaded"
    lead = re.search(r'<div class="lead" id="headline">(.*?)</div>', dom, flags=re.S)
    assert lead, "no headline block in the rendered page"
    text = re.sub(r"<[^>]+>", "", lead[1])
    for sentence in headline(verdict):
        assert sentence.replace("&", "&amp;") in text
    assert "the gain persists" in text  # this study's truth: a constant multiplier

    shot = page.parent / "report.png"
    res = _run(chromium, f"--screenshot={shot}", "--window-size=1300,3000", page.as_uri())
    assert res.returncode == 0 and shot.is_file() and shot.stat().st_size > 50_000, res.stderr
    print(f"screenshot: {shot}")
