"""Pins (`replan.pins`): values kept as they are by name glob, from `--freeze` and a pin file; frozen by request in
the run, with its fingerprint changed; a glob that names nothing or a pin file that cannot be read is one line."""

from __future__ import annotations

import json

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.errors import PlanError
from ipuplan.facts.check import check
from ipuplan.replan.pins import Keep, Pins, read_pin_file, resolve_pins
from ipuplan.replan.pipeline import optimize
from ipuplan.space.types import Freeze

runner = CliRunner()


def test_pins_freeze_by_request_and_fingerprints_compare_runs(tmp_path):
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"vit.map.mlp.*.weight": "class"}))
    args = ["optimize", str(REFERENCE), "--workers", "1", "--json", "--force", "--freeze", "vit.encoder.layer0.mlp.*"]
    first = json.loads(runner.invoke(app, [*args, "-o", str(tmp_path / "a.json")]).stdout)
    again = json.loads(runner.invoke(app, [*args, "-o", str(tmp_path / "b.json")]).stdout)
    pinned = json.loads(runner.invoke(app, [*args, "-o", str(tmp_path / "c.json"), "--pin-file", str(pins)]).stdout)
    plan = load_plan(REFERENCE)
    names = {v.id: v.name for v in plan.values}
    by_request = {v for f in pinned["frozen"] if f["rule"] == Freeze.BY_REQUEST.name.lower() for v in f["values"]}
    assert set(pinned["pinned"]["layout"]) == {v for v in names if names[v].startswith("vit.encoder.layer0.mlp.")}
    assert pinned["pinned"]["class"] == [39, 41]  # frozen whole until a level can keep only the class
    assert set(pinned["pinned"]["layout"]) | set(pinned["pinned"]["class"]) <= by_request
    assert not by_request.intersection(pinned["changed_value_ids"])
    assert (first["model_fingerprint"], first["solution_fingerprint"]) == (again["model_fingerprint"],
                                                                           again["solution_fingerprint"])
    assert pinned["model_fingerprint"] != first["model_fingerprint"]
    assert check(load_plan(tmp_path / "c.json")) == []


@pytest.mark.parametrize(("pin", "words"), [("--freeze", "matches no value name"), ("--pin-file", "cannot read")])
def test_a_pin_that_names_nothing_is_one_line_exit_2(tmp_path, pin, words):
    value = "no.such.value*" if pin == "--freeze" else str(tmp_path / "missing.json")
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), pin, value])
    errors = [line for line in result.stderr.splitlines() if not line.startswith("  ")]  # the rest: progress
    assert result.exit_code == 2 and len(errors) == 1 and words in errors[0] == result.stderr.splitlines()[-1]


def test_a_pin_file_must_say_layout_or_class(tmp_path, reference_plan):
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"vit.*": "tiling"}))
    with pytest.raises(PlanError, match="choose layout or class"):
        optimize(reference_plan, scope="kernels", pin_file=pins)


def names_matching(plan, prefix: str) -> frozenset[int]:
    return frozenset(v.id for v in plan.values if v.name.startswith(prefix))


def test_globs_name_values_and_a_layout_pin_wins_over_a_class_pin(tmp_path, reference_plan):
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"vit.encoder.layer0.mlp.*": "class", "vit.map.mlp.*.weight": "class"}))
    assert read_pin_file(pins) == {"vit.encoder.layer0.mlp.*": Keep.CLASS, "vit.map.mlp.*.weight": Keep.CLASS}
    found = resolve_pins(reference_plan, ("vit.encoder.layer0.mlp.*",), pins)
    layer0, head = names_matching(reference_plan, "vit.encoder.layer0.mlp."), names_matching(reference_plan,
                                                                                             "vit.map.mlp.")
    assert found.layout == layer0 and layer0  # pinned both ways: the whole layout stays
    assert found.memory_class == {v for v in head if reference_plan.values[v].name.endswith(".weight")}
    assert found.frozen == found.layout | found.memory_class and found
    assert not Pins() and not resolve_pins(reference_plan)


def test_globs_are_case_sensitive_and_one_that_matches_nothing_is_an_error(reference_plan):
    with pytest.raises(PlanError, match=r"^--freeze: pin 'VIT\.\*' matches no value name$"):
        resolve_pins(reference_plan, ("VIT.*",))


@pytest.mark.parametrize(("content", "words"), [("[1, 2]", "a pin file is one JSON object"),
                                                ("{", "invalid JSON")])
def test_a_pin_file_that_is_no_object_of_globs_names_the_file(tmp_path, content, words):
    pins = tmp_path / "pins.json"
    pins.write_text(content)
    with pytest.raises(PlanError) as raised:
        read_pin_file(pins)
    assert str(raised.value).startswith(f"{pins}: ") and words in str(raised.value)
