"""The HTML report (`report.html`): one self-contained page with the timeline and the peak, the anatomy of a step
(each live value free or frozen in the scope shown), each family as one unit, drawn as a browser draws it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ipuplan.report.html import anatomy_rows, render_html

ARTIFACTS = Path(os.environ.get("IPUPLAN_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))


def test_page_is_self_contained_with_timeline_and_peak(facts, spaces):
    page = render_html(facts, spaces["full"])
    assert '<svg id="timeline"' in page and 'id="peak-marker"' in page
    assert '<b id="peak-step">47</b>' in page and "367,216 B" in page
    assert page.count('class="series"') == 4 and page.count('class="budget"') == 3
    assert "<script" not in page and not re.search(r"(src|href)=\"https?:", page)


def test_anatomy_lists_the_peak_step_with_free_and_frozen(reference_plan, facts, spaces):
    rows = anatomy_rows(facts, spaces["kernels"], 47)
    assert len(rows) == len(reference_plan.steps[47].live)
    assert rows[0].bytes >= rows[-1].bytes
    states = {row.value_id: row.state for row in rows}
    assert states[20] == "free"  # a resident weight (storage)
    assert states[153] == "free"  # the partials of the Gemm family at step 47 (kernels)
    assert states[4].startswith("frozen: ")  # a norm scale a kernel reads


def families_table(page: str) -> dict[str, str]:
    """The page's families table: family label -> what the optimiser may do with it."""
    table = page.split("<table id='families'>", 1)[1].split("</table>", 1)[0]
    return dict(re.findall(r"<tr><td>([^<]*)</td><td>[^<]*</td><td class='n'>[\d,]*</td><td>([^<]*)</td></tr>", table))


@pytest.mark.parametrize(("scope", "state"), [("full", "free as one unit"), ("kernels", "frozen: ")])
def test_report_shows_the_element_wise_family_as_one_unit(facts, spaces, scope, state):
    page = render_html(facts, spaces[scope])
    families = families_table(page)
    assert families["element-wise family: Add at steps 5, 6, 40, 41, 59, 60"].startswith(state)
    assert families["Gemm family: Convert at step 45; Gemm at step 47; Sum at step 48"] == "free as one unit"
    assert len(families) == 23  # 10 Gemm, 4 attention, 9 element-wise families not held
    anatomy = page.split('<table id="anatomy">', 1)[1].split("</table>", 1)[0]
    assert "<td>Gemm family: Convert at step 45; Gemm at step 47; Sum at step 48</td>" in anatomy  # at its own step


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None and not os.environ.get("IPUPLAN_REQUIRE_CHROMIUM"),
    reason="Debian's chromium is not installed (.ci/run installs it and requires this test)",
)
def test_report_renders_in_headless_chromium(tmp_path, facts, spaces):
    assert _chromium() is not None, "chromium is required here (IPUPLAN_REQUIRE_CHROMIUM is set)"
    page = tmp_path / "report.html"
    page.write_text(render_html(facts, spaces["full"]))
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert 'id="timeline"' in dom and 'id="peak-step">47<' in dom
    assert dom.count("<polyline") == 4 and "anatomy" in dom
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report-reference.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1100,900", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[0] == 900 and pixels.shape[1] == 1100
    green = (abs(pixels[..., 0] - 0x2C / 255) < 0.05) & (abs(pixels[..., 1] - 0xA0 / 255) < 0.05) & (
        abs(pixels[..., 2] - 0x2C / 255) < 0.05)
    assert green.sum() > 200  # the standard + interleaved line is drawn
