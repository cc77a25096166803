from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan, write_plan
from ipuplan.cli import app
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.replan.pipeline import optimize
from ipuplan.report.html import anatomy_rows, render_html

runner = CliRunner()
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


def test_report_cli_with_against_and_png(tmp_path, reference_plan):
    better = tmp_path / "better.json"
    write_plan(optimize(reference_plan, workers=1, time_limit=5, scope="storage").plan, better)
    page, png = tmp_path / "r.html", tmp_path / "r.png"
    result = runner.invoke(app, ["report", str(REFERENCE), "--against", str(better), "-o", str(page), "--png",
                                 str(png)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "against" in text and "176,740 B" in text and text.count('class="series"') == 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    again = runner.invoke(app, ["report", str(REFERENCE), "-o", str(page)])
    assert again.exit_code == 2 and "--force" in again.stderr


def anatomy_marks(page: str) -> tuple[int, dict[int, str]]:
    """The page's peak step, and per value of its anatomy table: free or frozen."""
    step = int(re.search(r'<b id="peak-step">(\d+)</b>', page).group(1))
    table = page.split('<table id="anatomy">', 1)[1].split("</table>", 1)[0]
    marks = re.findall(r"<tr><td>(\d+)</td>.*?<td class='(free|frozen)'>", table)
    return step, {int(value): mark for value, mark in marks}


def expected_marks(facts, space, step: int) -> dict[int, str]:
    reasons = space.reasons()
    return {v: "free" if reasons[v] is None else "frozen" for v in facts.plan.steps[step].live}


def test_optimize_report_marks_the_free_values_of_the_runs_scope(tmp_path, facts, spaces):
    page = tmp_path / "storage.html"
    args = ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--scope", "storage", "--workers", "1",
            "--time-limit", "5", "--report", str(page)]
    assert runner.invoke(app, args).exit_code == 0
    text = page.read_text()
    step, marks = anatomy_marks(text)
    result = load_plan(tmp_path / "o.json")
    assert step == plan_facts(result).estimate.total_peak_step
    # value ids are the input's: the run's space (of the input) says which of those live here it could move
    assert marks == expected_marks(plan_facts(result), spaces["storage"], step)
    assert "free" in marks.values() and "frozen" in marks.values()
    assert "scope <b id='scope'>storage</b>" in text


@pytest.mark.parametrize(("scope", "free"), [("storage", 9), ("kernels", 17), ("full", 43)])
def test_report_command_marks_the_scope_it_names(tmp_path, facts, spaces, scope, free):
    page = tmp_path / "r.html"
    assert runner.invoke(app, ["report", str(REFERENCE), "-o", str(page), "--scope", scope]).exit_code == 0
    text = page.read_text()
    step, marks = anatomy_marks(text)
    assert step == 47 and marks == expected_marks(facts, spaces[scope], 47)
    assert list(marks.values()).count("free") == free and f"scope <b id='scope'>{scope}</b>" in text


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
