from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan import write_plan
from ipuplan.cli import app
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.replan.pipeline import optimize
from ipuplan.report.html import anatomy_rows, render_html
from ipuplan.space.scopes import candidate_space

ARTIFACTS = Path(os.environ.get("IPUPLAN_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))


def test_page_is_self_contained_with_timeline_and_peak(reference_plan):
    page = render_html(reference_plan)
    assert '<svg id="timeline"' in page and 'id="peak-marker"' in page
    assert '<b id="peak-step">47</b>' in page and "367,216 B" in page
    assert page.count('class="series"') == 4 and page.count('class="budget"') == 3
    assert "<script" not in page and not re.search(r"(src|href)=\"https?:", page)


def test_anatomy_lists_the_peak_step_with_free_and_frozen(reference_plan):
    facts = plan_facts(reference_plan)
    rows = anatomy_rows(facts, candidate_space(facts, "kernels"), 47)
    assert len(rows) == len(reference_plan.steps[47].live)
    assert rows[0].bytes >= rows[-1].bytes
    states = {row.value_id: row.state for row in rows}
    assert states[20] == "free"  # a resident weight (storage)
    assert states[153] == "free"  # the partials of the Gemm family at step 47 (kernels)
    assert states[4].startswith("frozen: ")  # a norm scale a kernel reads


def test_report_cli_with_against_and_png(tmp_path, reference_plan):
    better = tmp_path / "better.json"
    write_plan(optimize(reference_plan, workers=1, time_limit=5, scope="storage").plan, better)
    page, png = tmp_path / "r.html", tmp_path / "r.png"
    result = CliRunner().invoke(app, ["report", str(REFERENCE), "--against", str(better), "-o", str(page), "--png", str(png)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "against" in text and "198,256 B" in text and text.count('class="series"') == 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    again = CliRunner().invoke(app, ["report", str(REFERENCE), "-o", str(page)])
    assert again.exit_code == 2 and "--force" in again.stderr


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None and not os.environ.get("IPUPLAN_REQUIRE_CHROMIUM"),
    reason="Debian's chromium is not installed (.ci/run installs it and requires this test)",
)
def test_report_renders_in_headless_chromium(tmp_path, reference_plan):
    assert _chromium() is not None, "chromium is required here (IPUPLAN_REQUIRE_CHROMIUM is set)"
    page = tmp_path / "report.html"
    page.write_text(render_html(reference_plan))
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
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
