from __future__ import annotations

import gc
import json
import random
import re

import pytest
from reference import ALL_PLANS, REFERENCE

from ipuplan import PlanError, dump_plan, load_plan, plan_from_json, write_plan
from ipuplan.plan.format import (
    _NOT_QUOTE_OR_BRACKET,
    MAX_DEPTH,
    MAX_PLAN_BYTES,
    FrozenList,
    Plan,
    _check_references,
    _check_step,
    _checked_timelines,
    _checked_value,
    _nests_too_deeply,
    _read_directly,
    _read_via_python,
    plan_bytes,
)


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_round_trip_is_byte_identical(path):
    plan = load_plan(path)
    assert dump_plan(plan).encode() == plan_bytes(plan) == path.read_bytes()


def test_reference_plan_shape(reference_plan):
    assert (len(reference_plan.values), len(reference_plan.steps)) == (176, 116)
    assert reference_plan.values[12].memory_class == "Ipu21Interleaved"


def test_unknown_keys_are_kept_verbatim(reference_raw):
    reference_raw["compiler_note"] = {"kept": [1, 2]}
    reference_raw["timeline"]["values"][3]["future_field"] = "x"
    text = json.dumps(reference_raw, separators=(",", ":"))
    assert dump_plan(plan_from_json(text)) == text


@pytest.mark.parametrize("kept", [1e-07, 1e16, {"deep": [1, [2.5]]}, 2**70, "\u2028é😀\x01\t\"\\/", None])
def test_unknown_fields_are_written_as_json_dumps_writes_them(reference_raw, kept):
    """Floats (`1e-07`) as Python writes them, and so every string, integer and null."""
    reference_raw["compiler_note"] = kept
    reference_raw["timeline"]["values"][3]["future_field"] = [kept]
    reference_raw["timeline"]["steps"][5]["usage"]["future_field"] = kept
    text = json.dumps(reference_raw, separators=(",", ":"), ensure_ascii=False)
    plan = plan_from_json(text)
    assert dump_plan(plan) == text and plan_bytes(plan) == text.encode()


def test_write_plan_is_atomic_and_exact(tmp_path, reference_plan):
    target = tmp_path / "out.json"
    write_plan(reference_plan, target)
    assert target.read_bytes() == REFERENCE.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def _error(raw: dict | str | bytes) -> PlanError:
    text = raw if isinstance(raw, (str, bytes)) else json.dumps(raw)
    with pytest.raises(PlanError) as caught:
        plan_from_json(text, source="bad.json")
    assert "\n" not in str(caught.value)
    return caught.value


def test_truncated_json_names_line_and_column():
    error = _error(REFERENCE.read_text()[:5000])
    assert str(error).startswith("bad.json: line 1 column ")
    assert "invalid JSON" in str(error)


def test_json_syntax_error_names_line_column_and_byte():
    error = _error('{"name": "\u00e9",\n "x": ]}')  # the two-byte e-acute makes byte and character offsets differ
    assert (error.location, error.message) == ("line 2 column 7 (byte 21)", "invalid JSON: Expecting value")


def test_bytes_that_are_not_utf8_name_the_byte():
    error = _error(b'{"version": 1,\n "model": "vit\xff"}')
    assert error.location == "line 2 column 15"
    assert error.message == "not UTF-8: invalid byte 0xff at byte offset 29"


def test_utf8_byte_order_mark_is_still_accepted():
    plan = plan_from_json(b"\xef\xbb\xbf" + REFERENCE.read_bytes())
    assert dump_plan(plan).encode() == REFERENCE.read_bytes()


@pytest.mark.parametrize(
    ("text", "location"),
    [
        ("[" * 100_000, "line 1 column 65 (byte 64)"),  # beyond the recursion limit of json.loads
        ('{"a":' * 65 + "1" + "}" * 65, "line 1 column 321 (byte 320)"),  # parses, but deeper than MAX_DEPTH
        ('["[[[\\\\", ' + "[" * 64 + "]" * 65, "line 1 column 74 (byte 73)"),  # brackets in strings do not count
    ],
)
def test_deep_nesting_names_the_byte_where_it_went_too_deep(text, location):
    error = _error(text)
    assert (error.location, error.message) == (location, f"JSON nested too deeply (more than {MAX_DEPTH} levels)")


def test_nesting_up_to_the_limit_still_loads(reference_raw):
    reference_raw["compiler_note"] = json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    text = json.dumps(reference_raw, separators=(",", ":"))
    assert dump_plan(plan_from_json(text)) == text
    reference_raw["compiler_note"] = [reference_raw["compiler_note"]]
    assert "nested too deeply" in _error(reference_raw).message


def test_number_too_long_for_python_is_a_plan_error():
    error = _error('{"version": ' + "1" * 5000 + "}")
    assert (error.location, error.message) == ("line 1 column 13 (byte 12)", "invalid JSON: number has too many digits")


def test_unknown_format_version_is_refused_before_the_fields(reference_raw):
    reference_raw["version"] = 2
    del reference_raw["scope"]  # a version-2 plan is not judged by version-1 fields
    error = _error(reference_raw)
    assert (error.location, error.message) == ("version", "unsupported format version 2 (ipuplan reads version 1)")


def test_value_listed_twice_in_a_live_set(reference_raw):
    live = reference_raw["timeline"]["steps"][9]["live"]
    live.insert(2, live[0])
    error = _error(reference_raw)
    assert (error.location, error.message) == (
        "timeline.steps[9].live[2]",
        f"value {live[0]} is listed twice in the live set",
    )


def test_not_an_object():
    assert "must be a JSON object" in str(_error("[1, 2]"))


@pytest.mark.parametrize(
    ("mutate", "location", "words"),
    [
        (lambda r: r["timeline"]["values"][7].update(shard_bytes=-5), "timeline.values[7].shard_bytes", "greater than"),
        (lambda r: r["timeline"]["values"][7].update(bytes=10**30), "timeline.values[7].bytes", "less than"),
        (lambda r: r["timeline"]["values"][7].update(shape="big"), "timeline.values[7].shape", "valid list"),
        (lambda r: r["timeline"]["values"][7].update(copies="1"), "timeline.values[7].copies", "valid integer"),
        (lambda r: r["timeline"]["steps"][4].pop("scratch"), "timeline.steps[4].scratch", "missing"),
        (lambda r: r.update(tile_count=0), "tile_count", "greater than"),
        (lambda r: r["timeline"]["steps"][9]["live"].append(500), "timeline.steps[9].live[", "does not exist"),
        (lambda r: r["timeline"]["steps"][9]["live"].append(46), "timeline.steps[9].live[", "alias of 45"),
        (lambda r: r["timeline"]["values"][5].update(root=900), "timeline.values[5].root", "does not exist"),
        (lambda r: r["timeline"]["values"][5].update(id=6), "timeline.values[5].id", "out of order"),
        (lambda r: r["timeline"]["values"][5].update(precision="F16 {"), "timeline.values[5].precision", "malformed"),
        (lambda r: r["timeline"]["values"][5].update(precision="Q7"), "timeline.values[5].precision", "unknown"),
        (lambda r: r["timeline"]["values"][5].update({"class": "Ipu21Interleaved"}), "timeline.values[5].class",
         "differs"),
        (lambda r: r["timeline"]["steps"][2].update(operation="Gemm { mode: }"), "timeline.steps[2].operation",
         "malformed"),
        (lambda r: r["timeline"]["steps"][25].update(operation="Copy { mapping: CoordinateMapping { offsets: [] } }"),
         "timeline.steps[25].operation", "Copy mapping without view"),
        (lambda r: r["timeline"]["steps"][13].update(operation="Sum { axis: x, staging: Complete }"),
         "timeline.steps[13].operation", "Sum axis must be an integer"),
    ],
)
def test_bad_input_names_file_and_location(reference_raw, mutate, location, words):
    mutate(reference_raw)
    message = str(_error(reference_raw))
    assert message.startswith(f"bad.json: {location}")
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "layout",
    [
        "Layout { order: RowMajor }",
        ("Layout { order: RowMajor, tiling: TensorTiling { tile_count: 1, replicas: 1, axes: [] }, "
         "memory_class: Ipu21Fast }"),
        ("Layout { order: RowMajor, tiling: TensorTiling { tile_count: 2, replicas: 1, axes: [AxisTiling { "
         "axis: FromEnd(1), partitions: 0, padding_groups: 1, block_size: 4, padding_multiple: 4, "
         "shard_padding_multiple: 1, padding: Zero, tile_stride: None }] }, memory_class: Ipu21Standard }"),
        "Layout {  order: RowMajor }",
    ],
)
def test_malformed_layout_is_rejected_with_value_id(reference_raw, layout):
    reference_raw["timeline"]["values"][12]["layout"] = layout
    assert str(_error(reference_raw)).startswith("bad.json: timeline.values[12].layout: malformed layout")


def test_unknown_operation_kind_is_kept(reference_raw):
    reference_raw["timeline"]["steps"][41]["operation"] = "FancyFusedThing { lanes: 4 }"
    text = json.dumps(reference_raw, separators=(",", ":"))
    plan = plan_from_json(text)
    assert plan.steps[41].parsed_operation.kind == "FancyFusedThing"
    assert not plan.steps[41].parsed_operation.is_known
    assert dump_plan(plan) == text


def test_missing_file():
    with pytest.raises(PlanError, match="cannot read"):
        load_plan("/nonexistent/plan.json")


def test_layout_axis_outside_the_shape_is_rejected(reference_raw):
    reference_raw["timeline"]["values"][1]["shape"] = [588]
    message = str(_error(reference_raw))
    assert message.startswith("bad.json: timeline.values[1].layout: layout axis FromEnd(2) does not exist in a rank-1")


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_direct_read_equals_the_read_through_python(path):
    direct, via_python = _read_directly(path.read_bytes()), _read_via_python(path.read_bytes())
    assert direct == via_python and dump_plan(direct) == dump_plan(via_python)


def test_a_nan_loads_as_json_loads_reads_it(reference_raw):
    reference_raw["compiler_note"] = float("nan")
    plan = plan_from_json(json.dumps(reference_raw, separators=(",", ":"), ensure_ascii=False))
    assert plan.model_extra["compiler_note"] != plan.model_extra["compiler_note"]  # NaN, as json.loads reads it


@pytest.mark.parametrize(("where", "ascii_only"), [("name", True), ("future_field", False), ("\udcff key", True)])
def test_a_lone_surrogate_is_refused_where_it_is_read(reference_raw, where, ascii_only):
    """json.loads reads `"\\ud800"`, which no UTF-8 file can hold: accepted, the plan failed only when written."""
    reference_raw["timeline"]["values"][3][where] = "a\ud800"
    error = _error(json.dumps(reference_raw, ensure_ascii=ascii_only))
    assert error.location == f"timeline.values[3].{where}" and "lone surrogate" in error.message


def test_a_valid_plan_of_another_version_is_refused_as_before(reference_raw):
    reference_raw["version"] = 2
    text = json.dumps(reference_raw)
    assert _read_directly(text) is None
    with pytest.raises(PlanError, match="unsupported format version 2"):
        plan_from_json(text)


def _edit_gemm(raw: dict, pattern: str, replacement: str) -> None:
    """The first Gemm's operation string with `pattern` replaced."""
    step = next(step for step in raw["timeline"]["steps"] if step["operation"].startswith("Gemm {"))
    step["operation"] = re.sub(pattern, replacement, step["operation"], count=1)


@pytest.mark.parametrize(
    ("mutate", "location", "words"),
    [
        (lambda r: r["timeline"]["values"][84]["shape"].__setitem__(0, 2**48), "timeline.values[84].shape[0]",
         "less than or equal to 1099511627776"),
        (lambda r: r["timeline"]["values"][84].update(shape=[2**40] * 3), "timeline.values[84].shape", "elements"),
        (lambda r: r["timeline"]["values"][84].update(copies=2**47), "timeline.values[84].copies", "bytes per tile"),
        (lambda r: r["timeline"]["values"][84].update(layout=r["timeline"]["values"][84]["layout"].replace(
            "padding_multiple: 384,", f"padding_multiple: {2**60},")), "timeline.values[84].layout", "largest shard"),
        (lambda r: r["timeline"]["steps"][10]["scratch"].update(standard=2**48), "timeline.steps[10].scratch.standard",
         "bytes of scratch"),
        (lambda r: r["timeline"]["values"][84].update(layout="Layout { order: " + "Some(" * 5000 + "X" + ")" * 5000
                                                      + " }"), "timeline.values[84].layout", "nested more than"),
        (lambda r: _edit_gemm(r, r"inner_block: \d+", "inner_block: big"), "timeline.steps[", "inner_block must be an"),
        (lambda r: _edit_gemm(r, r"inner_block: \d+", "inner_block: 0"), "timeline.steps[", "at least 1"),
        (lambda r: _edit_gemm(r, r"multiply: F8F143 \{[^}]*\}", "multiply: Q9"), "timeline.steps[",
         "unknown precision"),
        (lambda r: r["timeline"].update(steps=[]), "timeline.steps", "at least 1 item"),
        (lambda r: r.update(tile_count=2**30), "tile_count", "less than or equal"),
    ],
)
def test_numbers_are_bounded_where_they_are_read(reference_raw, mutate, location, words):
    """Issue 21: each of these loaded (or crashed later: CP-SAT refused the model, an OverflowError, a 10-line
    pydantic message, a RecursionError, an argmax of nothing); each is now one line naming the field."""
    mutate(reference_raw)
    message = str(_error(reference_raw))
    assert message.startswith(f"bad.json: {location}") and words in message, message


def _copy_state(model) -> tuple:
    return (type(model), model.__dict__, model.__pydantic_extra__, model.__pydantic_fields_set__,
            model.__pydantic_private__)


@pytest.mark.parametrize("update", [None, {}, {"name": "renamed"}, {"future_field": [1]}, {"shape": [2, 3]},
                                    {"name": "x", "future_field": 2, "bytes": 7}])
def test_a_copy_is_the_one_pydantic_makes(reference_raw, update):
    """`model_copy` makes a shallow copy itself (pydantic's generic one costs twice as much): the same fields, extra
    fields and fields set as pydantic's, the lists it is given frozen, and nothing shared that a copy could change."""
    from pydantic import BaseModel

    reference_raw["timeline"]["values"][3]["kept"] = {"a": 1}
    value = plan_from_json(json.dumps(reference_raw)).values[3]
    frozen_update = None if update is None else {
        k: FrozenList(v) if k == "shape" else v for k, v in update.items()}
    ours, theirs = value.model_copy(update=update), BaseModel.model_copy(value, update=frozen_update)
    assert _copy_state(ours) == _copy_state(theirs) and ours.model_dump() == theirs.model_dump()
    assert ours is not value and ours.__dict__ is not value.__dict__
    assert ours.__pydantic_extra__ is not value.__pydantic_extra__
    assert ours.__pydantic_fields_set__ is not value.__pydantic_fields_set__
    assert type(ours.shape) is FrozenList
    for model in (value.model_copy(), value):  # the original untouched
        assert model.name == value.name


def _walked(plan) -> None:
    """`_check_references` as it was: every value and step checked field by field (the quick pass must agree)."""
    count, total = len(plan.values), 0
    for position, value in enumerate(plan.values):
        total += _checked_value(value, position, count)
    if total > MAX_PLAN_BYTES:
        raise PlanError("too many bytes", location="timeline.values")
    aliases = frozenset(value.id for value in plan.values if value.is_alias)
    for position, step in enumerate(plan.steps):
        _check_step(plan.values, aliases, step, position)


def _outcome(check, plan) -> str | None:
    try:
        check(plan)
    except PlanError as error:
        return str(error)
    return None


def _live_mutations(seed: int):
    """A few live sets of the reference plan given ids past the end, aliases and repeats, at random slots."""
    chosen = random.Random(seed)

    def mutate(raw):
        for step in chosen.sample(raw["timeline"]["steps"], 3):
            for _ in range(chosen.randint(1, 2)):
                step["live"].insert(chosen.randint(0, len(step["live"])), chosen.choice(
                    [chosen.randrange(176, 180), 46, *step["live"][:1]]))
    return mutate


@pytest.mark.parametrize("mutate", [
    lambda r: None,
    lambda r: r["timeline"]["steps"][9]["live"].extend([46, 500]),  # an alias before an id past the end
    lambda r: r["timeline"]["steps"][9]["live"].extend([500, 46]),
    lambda r: r["timeline"]["steps"][9]["live"].extend([46, 46]),  # an alias listed twice: the alias is named
    lambda r: r["timeline"]["steps"][9].update(index=3, operation="Gemm { mode: }"),  # the index is named first
    lambda r: r["timeline"]["steps"][9]["scratch"].update(interleaved=2**41),
    lambda r: (r["timeline"]["steps"][9]["scratch"].update(standard=2**41),
               r["timeline"]["steps"][4]["live"].append(4000)),  # the earlier step is named
    lambda r: r["timeline"]["values"][5].update(root=900, precision="Q7"),
    lambda r: r["timeline"]["values"][5].update(precision="Q7", copies=2**47),
    lambda r: r["timeline"]["values"][84].update(copies=2**47),
    lambda r: r["timeline"]["values"][84].update(shape=[2**40] * 3),
    lambda r: (r["timeline"]["values"][100].update(id=7), r["timeline"]["steps"][0]["live"].append(999)),
    *(_live_mutations(seed) for seed in range(20)),
])
def test_the_quick_reference_check_finds_what_the_field_by_field_walk_finds(reference_raw, mutate):
    mutate(reference_raw)
    plan = _read_directly(json.dumps(reference_raw))  # validated, its references not yet checked
    assert _outcome(_check_references, plan) == _outcome(_walked, plan)


def _peeled(data: bytes) -> bool:
    """`_nests_too_deeply` as it was: the innermost bracket pairs peeled once per allowed level."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(data.translate(None, _NOT_QUOTE_OR_BRACKET).replace(b'""', b"").split(b'"')[::2])
    for _ in range(MAX_DEPTH):
        if not brackets:
            return False
        brackets = re.sub(rb"\[\]|\{\}", b"", brackets)
    return bool(brackets)


def _nested(chosen: random.Random, depth: int) -> object:
    """JSON `depth` levels deep, its strings holding brackets, quotes and backslashes."""
    text = "".join(chosen.choice('[]{}"\\ab') for _ in range(chosen.randint(0, 6)))
    if depth == 0:
        return chosen.choice([text, 1, []])
    inner = [_nested(chosen, depth - 1), *(_nested(chosen, chosen.randint(0, min(depth - 1, 3)))
                                           for _ in range(chosen.randint(0, 2)))]
    return chosen.choice([inner, {text: inner[0], "x": inner[1:]}])


@pytest.mark.parametrize("seed", range(40))
def test_nesting_is_measured_as_peeling_measured_it(seed):
    chosen = random.Random(seed)
    data = json.dumps(_nested(chosen, chosen.randint(MAX_DEPTH - 3, MAX_DEPTH + 1)), ensure_ascii=False).encode()
    assert _nests_too_deeply(data) == _peeled(data)


def test_a_loaded_plan_is_its_own_snapshot_without_a_second_walk(monkeypatch, reference_raw):
    plan = load_plan(REFERENCE)
    walks = []
    monkeypatch.setattr(Plan, "_unknown_live_id", lambda self: walks.append(self))
    assert plan.snapshot() is plan and walks == []
    budgets = plan.model_copy(update={"budget_bytes": 1})  # the checked timeline kept
    assert budgets.snapshot() is budgets and walks == []
    steps = list(plan.steps)
    steps[7] = steps[7].model_copy(update={"live": [*steps[7].live, 500]})
    changed = plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"steps": steps})})
    changed.snapshot()
    assert walks == [changed]  # another timeline: walked
    monkeypatch.undo()
    with pytest.raises(PlanError, match="value id 500 does not exist"):
        changed.snapshot()
    reference_raw["timeline"]["steps"][7]["live"].append(500)
    with pytest.raises(PlanError, match="value id 500 does not exist"):
        Plan.model_validate(reference_raw).snapshot()  # validated, never checked


def test_a_checked_timeline_is_forgotten_with_it():
    plan = load_plan(REFERENCE)
    key = id(plan.timeline)
    assert key in _checked_timelines
    del plan
    gc.collect()
    assert key not in _checked_timelines
