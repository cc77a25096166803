"""The output contract checked from outside the optimiser (`replan.against`, `ipuplan check NEW --against ORIG`):
the optimiser's own output passes in its scope; each illegal rewrite, built by hand from the reference plan, is
refused by the rule it breaks; a gather written as REPLAN.md says is accepted in scope program only."""

from __future__ import annotations

import json

import pytest
from reference import MODELS, REFERENCE, with_step, with_value
from typer.testing import CliRunner

import ipuplan
from ipuplan import Plan, load_plan, write_plan
from ipuplan.cli import app
from ipuplan.plan.layout import format_layout
from ipuplan.replan.against import (
    GATHER_OPERATION,
    KEPT_STEP_FIELDS,
    KEPT_VALUE_FIELDS,
    _change,
    _live_difference,
    against,
    alignment,
    step_violations,
    value_violations,
)
from ipuplan.replan.rewrite import with_derived_fields
from ipuplan.space.scopes import Scope, UnknownScope

RULES = ("structure", "insertion", "scope", "check")
runner = CliRunner()


@pytest.fixture(scope="module")
def optimized(reference_plan) -> dict[str, Plan]:
    """The optimiser's output per scope (about a second each with one worker)."""
    return {scope: ipuplan.optimize(reference_plan, workers=1, scope=scope).plan
            for scope in ("storage", "kernels", "full")}


def flat_layout(plan: Plan) -> str:
    """A flat RowMajor layout of a [1, 1, 1152] F16 value, as value 36 of the reference plan is laid out."""
    return plan.values[36].layout


def with_timeline(plan: Plan, values, steps) -> Plan:
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values, "steps": steps})})


def with_gather(plan: Plan, reading: int = 63, parameter: int = 28, written: tuple[int, ...] = (99,),
                layout: str | None = None) -> Plan:
    """Scope program's rewrite by hand: `parameter` stored flat, and gathered into its original layout (`layout`, when
    `plan` already stores it flat) by a Copy inserted right before `reading` (`written`: the values first live at the
    reading step); derived fields recomputed."""
    values, steps = list(plan.values), list(plan.steps)
    original = values[parameter]
    if layout is not None:
        original = original.model_copy(update={"layout": layout})
    values[parameter] = original.model_copy(update={"layout": flat_layout(plan)})
    new = len(values)
    read = steps[reading]
    name = f"operation {read.source} gather of {original.name.removesuffix(' (body argument)')} for step {reading + 1}"
    values.append(original.model_copy(update={"id": new, "root": new, "name": name, "group": name}))
    gather = read.model_copy(update={
        "operation": GATHER_OPERATION, "live": [v for v in read.live if v not in written] + [new],
        "scratch": read.scratch.model_copy(update={"standard": 0, "interleaved": 0})})
    moved = [step.model_copy(update={"index": step.index + 1}) for step in steps[reading:]]
    moved[0] = moved[0].model_copy(update={"live": [*read.live, new]})
    return with_derived_fields(with_timeline(plan, values, [*steps[:reading], gather, *moved]))


@pytest.fixture(scope="module")
def gathered(reference_plan) -> Plan:
    """Value 28 (vit.encoder.final_norm.scale) stored flat and gathered for the LayerNorm at step 63 (now 64)."""
    return with_gather(reference_plan)


def with_inserted(plan: Plan, value: int | None = None, step: int | None = None, **changes) -> Plan:
    """`plan` with one field of an inserted value or step changed, derived fields recomputed."""
    if value is not None:
        plan = with_value(plan, value, **changes)
    if step is not None:
        plan = with_step(plan, step, **changes)
    return with_derived_fields(plan)


def rules_of(lines: list[str]) -> list[str]:
    return [line.split(":", 1)[0] for line in lines]


@pytest.mark.parametrize("scope", ["storage", "kernels", "full"])
def test_the_optimisers_output_keeps_the_contract_of_its_scope(reference_plan, optimized, scope):
    assert against(reference_plan, optimized[scope], scope) == []


def test_a_wider_scopes_output_breaks_a_narrower_scope(reference_plan, optimized):
    lines = against(reference_plan, optimized["full"], "kernels")
    assert lines and set(rules_of(lines)) == {"scope"}
    assert ("scope: value 2 (vit.embedding.bias): layout changed where scope kernels does not allow it: frozen, "
            "read by Add at step 5") in lines


def test_the_unchanged_plan_keeps_every_scope(reference_plan):
    for scope in ("storage", "kernels", "full", "program"):
        assert against(reference_plan, reference_plan, scope) == []


def test_a_frozen_value_in_another_legal_layout_is_refused_by_its_scope(reference_plan, spaces):
    # value 28 (read by LayerNorm at step 63) may change its class in scope full only: a legal layout of it
    group = next(g for g in spaces["full"].free if 28 in g.members)
    other = next(c for c in group.candidates if c.layouts[group.members.index(28)].memory_class == "Ipu21Interleaved")
    moved = reference_plan
    for member, layout in zip(group.members, other.layouts):
        moved = with_value(moved, member, layout=format_layout(layout), memory_class=layout.memory_class)
    moved = with_derived_fields(moved)
    assert against(reference_plan, moved, "full") == []
    assert against(reference_plan, moved, "kernels") == [
        ("scope: value 28 (vit.encoder.final_norm.scale): layout changed where scope kernels does not allow it "
         "(class changed from 'Ipu21Standard' to 'Ipu21Interleaved'): frozen, read by LayerNorm at step 63")]


@pytest.mark.parametrize(("field", "changed", "line"), [
    ("name", "vit.position.renamed", "structure: value 3: name changed from 'vit.position' to 'vit.position.renamed'"),
    ("precision", "F32", "structure: value 3: precision changed from 'F16' to 'F32'"),
    ("storage_group", 4, "structure: value 3: storage_group changed from 3 to 4"),
    ("shape", [1, 730, 1152],
     ("structure: value 3: shape changed from [1, 729, 1152] to [1, 730, 1152] (only a Gemm's partials may change, "
      "and only their leading pK)")),
])
def test_a_changed_kept_value_field_is_refused(reference_plan, field, changed, line):
    lines = against(reference_plan, with_derived_fields(with_value(reference_plan, 3, **{field: changed})), "full")
    assert line in lines and rules_of(lines)[0] == "structure"


@pytest.mark.parametrize(("changes", "line"), [
    ({"source": 99}, "structure: step 5: source changed from 1 to 99"),
    ({"execution_count": 3}, "structure: step 5: execution_count changed from 1 to 3"),
    ({"operation": "Gelu"}, "structure: step 5: operation kind changed from 'Add' to 'Gelu'"),
    ({"live": list(range(3, 43)) + [45]}, "structure: step 5: live set changed (without 2)"),
    ({"live": [3, 2, *range(4, 43), 45]}, "structure: step 5: live set changed (in another order)"),
])
def test_a_changed_kept_step_field_is_refused(reference_plan, changes, line):
    assert line in against(reference_plan, with_derived_fields(with_step(reference_plan, 5, **changes)), "storage")


def test_the_top_level_keeps_its_keys_and_the_programs_names(reference_plan):
    renamed = reference_plan.model_copy(update={"scope": "finalist-6"})
    assert against(reference_plan, renamed) == ["structure: plan: scope changed from 'finalist-5' to 'finalist-6'"]
    extra = Plan.model_validate({**reference_plan.model_dump(by_alias=True), "compiler": "poplar"})
    assert against(reference_plan, extra) == [
        "structure: plan: top-level keys differ (unknown keys [] in the original, ['compiler'] here)"]


def test_a_value_added_outside_scope_program_is_refused(reference_plan):
    values = [*reference_plan.values, reference_plan.values[28].model_copy(update={"id": 176, "root": 176})]
    added = with_derived_fields(with_timeline(reference_plan, values, reference_plan.steps))
    for scope in ("storage", "kernels", "full"):
        assert against(reference_plan, added, scope) == [
            f"insertion: value 176: inserted, where scope {scope} inserts none (only scope program may)"]
    assert against(reference_plan, added, "program") == [
        ("insertion: value 176: inserted but never live (a gathered value is live from its gather through its reading "
         "step)")]


def test_a_plan_that_is_no_rewrite_says_so_in_lines(reference_plan):
    unrolled = load_plan(MODELS / "vit-so400m-unroll3.json")
    lines = against(reference_plan, unrolled, "program")
    assert lines[0] == "structure: plan: scope changed from 'finalist-5' to 'finalist-5-unroll3'"
    assert lines[1].startswith("structure: steps: 348 where the original has 116, an inserted value first live at "
                               "steps 62, 116,")
    assert len(lines) < 30 and all(rule in RULES for rule in rules_of(lines))
    deeper = against(reference_plan, load_plan(MODELS / "vit-so400m-6layers.json"), "full")
    assert "structure: step 7: execution_count changed from 2 to 6" in deeper
    assert "insertion: values 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, ... (48 in all): inserted, where " \
           "scope full inserts none (only scope program may)" in deeper
    fewer = with_timeline(reference_plan, reference_plan.values[:-1], [
        step.model_copy(update={"live": [v for v in step.live if v != 175]}) for step in reference_plan.steps])
    assert "structure: values: 175 where the original has 176: value 175 missing" in against(reference_plan, fewer)


def test_a_stale_number_is_a_check_line_after_every_other_rule(reference_plan):
    broken = with_value(with_value(reference_plan, 20, bytes=30721), 3, name="renamed")
    lines = against(reference_plan, broken, "kernels")
    assert "check: value 20 (vit.encoder.layer0.mlp.up.weight): bytes is 30721, expected 30720" in lines
    assert rules_of(lines) == sorted(rules_of(lines), key=RULES.index) and rules_of(lines)[0] == "structure"


def test_a_gather_written_as_replan_says_is_accepted_in_scope_program_only(reference_plan, gathered):
    assert against(reference_plan, gathered, "program") == []
    # in scope full value 28 may change its class only: stored flat, it is a violation of its own
    assert against(reference_plan, gathered, "full") == [
        "insertion: value 176: inserted, where scope full inserts none (only scope program may)",
        ("insertion: step 63: inserted (an inserted value is first live there), where scope full inserts none "
         "(only scope program may)"),
        ("scope: value 28 (vit.encoder.final_norm.scale): tiling or order changed where the classes level changes "
         "only its memory class")]
    # value 28 is frozen in scope kernels: there its flat storage is a violation of its own
    assert "scope: value 28 (vit.encoder.final_norm.scale): layout changed where scope kernels does not allow it: " \
           "frozen, read by LayerNorm at step 63" in against(reference_plan, gathered, "kernels")


def test_a_gather_in_a_loop_body_gathers_the_body_argument(reference_plan):
    # steps 8 and 43, LayerNorms run twice, may read the layers' attention_norm.scale through body argument 49 (it
    # stays live past both): a gather before each
    values = list(reference_plan.values)
    for member in (4, 5):  # the layers change with their body argument
        values[member] = values[member].model_copy(update={"layout": flat_layout(reference_plan)})
    once = with_gather(with_timeline(reference_plan, values, reference_plan.steps), reading=8, parameter=49,
                       written=(62,))
    assert once.values[176].name == "operation 3 gather of vit.encoder.attention_norm.scale for step 9"
    assert against(reference_plan, once, "program") == [
        ("scope: value 4 (vit.encoder.layer0.attention_norm.scale): stored in another layout, but step 43 of the "
         "original, which may read it, read no copy gathered before (scope program gathers a stored parameter before "
         "every step that reads it)")]
    twice = with_gather(once, reading=44, parameter=49, written=(83,), layout=reference_plan.values[49].layout)
    assert twice.values[177].name == "operation 17 gather of vit.encoder.attention_norm.scale for step 45"
    assert against(reference_plan, twice, "program") == []


@pytest.mark.parametrize(("mutate", "line"), [
    (lambda g: with_inserted(g, value=176, layout=g.values[28].layout),
     "insertion: value 176: layout differs from what it should be, as the original value 28 it gathers"),
    (lambda g: with_inserted(g, value=176, name="operation 25 gather of vit.encoder.final_norm.scale for step 63"),
     ("insertion: value 176: name is 'operation 25 gather of vit.encoder.final_norm.scale for step 63', expected "
      "'operation 25 gather of vit.encoder.final_norm.scale for step 64'")),
    (lambda g: with_inserted(g, value=176, root=28),
     "insertion: value 176: root is 28, a gathered value is its own root"),
    (lambda g: with_inserted(g, value=176, copies=2),
     "insertion: value 176: copies is 2, expected 1, as the original value 28 it gathers"),
    (lambda g: with_inserted(g, value=176, storage_group=999),
     ("insertion: value 176: gathers nothing: the original plan holds no value of storage group 999 at step 63, "
      "which reads it")),
    (lambda g: with_inserted(g, step=63, source=24),
     "insertion: step 63 (gather of value 176): source is 24, expected 25 (its reading step 64's)"),
    (lambda g: with_inserted(g, step=63, operation=GATHER_OPERATION.replace("true", "false")),
     ("insertion: step 63 (gather of value 176): operation is 'Copy { mapping: CoordinateMapping { offsets: [], view: "
      "None }, reuse_local: false }', a gather is 'Copy { mapping: CoordinateMapping { offsets: [], view: None }, "
      "reuse_local: true }'")),
    (lambda g: with_inserted(g, step=63, live=[*g.steps[63].live[:-1], 99, 176]),
     ("insertion: step 63 (gather of value 176): live set is not step 64's original one without what that step "
      "writes, with the values gathered for it so far (with 99 too)")),
    (lambda g: with_inserted(g, step=65, live=[*g.steps[65].live, 176]),
     "insertion: value 176: live at steps 63, 64, 65, expected steps 63, 64 (its gather through its reading step)"),
    (lambda g: with_inserted(g, step=64, live=[176, *g.steps[64].live[:-1]]),
     ("insertion: step 64: live set is not its original one with the values gathered for it appended (in another "
      "order)")),
])
def test_a_gather_written_otherwise_is_refused(reference_plan, gathered, mutate, line):
    lines = against(reference_plan, mutate(gathered), "program")
    assert line in lines


def test_the_contract_knows_the_scopes_and_program_only(reference_plan):
    with pytest.raises(UnknownScope):
        against(reference_plan, reference_plan, "everything")


@pytest.mark.skipif("program" not in {s.value for s in Scope}, reason="the optimiser has no scope program yet")
def test_the_optimisers_gathers_keep_the_contract_of_scope_program(reference_plan):
    result = ipuplan.optimize(reference_plan, workers=1, scope="program")
    assert len(result.plan.values) > len(reference_plan.values)
    assert against(reference_plan, result.plan, "program") == []
    # in scope full the parameters may change their class only, and nothing is inserted
    lines = against(reference_plan, result.plan, "full")
    assert rules_of(lines)[:2] == ["insertion", "insertion"] and set(rules_of(lines[2:])) == {"scope"}
    assert all("tiling or order changed where the classes level changes only its memory class" in line
               for line in lines[2:])


def test_check_against_exit_codes(tmp_path, reference_plan, optimized):
    new = tmp_path / "full.json"
    write_plan(optimized["full"], new)
    result = runner.invoke(app, ["check", str(new), "--against", str(REFERENCE)])
    assert result.exit_code == 0
    assert f"{new}: consistent: 176 values, 116 steps checked against {REFERENCE} (scope full)" in result.stdout
    result = runner.invoke(app, ["check", str(new), "--against", str(REFERENCE), "--scope", "kernels"])
    assert result.exit_code == 1
    assert (f"{new}: scope: value 2 (vit.embedding.bias): layout changed where scope kernels does not allow it: "
            "frozen, read by Add at step 5") in result.stdout.splitlines()
    missing = tmp_path / "missing.json"
    result = runner.invoke(app, ["check", str(new), "--against", str(missing)])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        f"error: {missing}: cannot read: No such file or directory"]
    assert runner.invoke(app, ["check", str(new), "--scope", "kernels"]).exit_code == 2


def test_check_against_json_carries_the_contract(tmp_path, gathered):
    new = tmp_path / "gathered.json"
    write_plan(gathered, new)
    result = runner.invoke(app, ["check", str(new), "--against", str(REFERENCE), "--scope", "program", "--json"])
    summary = json.loads(result.stdout)
    assert result.exit_code == 0 and summary["contract"] == [] and summary["status"] == "consistent"
    result = runner.invoke(app, ["check", str(new), "--against", str(REFERENCE), "--json"])
    summary = json.loads(result.stdout)
    assert result.exit_code == 1 and summary["status"] == "mismatches" and summary["scope"] == "full"
    assert summary["mismatches"] == [] and len(summary["contract"]) == 3  # two insertions, value 28 stored flat


def test_the_optimiser_refuses_its_own_rewrite_that_breaks_the_contract(reference_plan, facts, spaces):
    """`rewrite` runs `against` with the run's space: a class-level choice that re-tiles passes `check` (value 34,
    a MAP-head residual, stored flat is a legal layout) and is refused by the contract, never written."""
    from dataclasses import replace

    from ipuplan.replan.rewrite import IllegalRewrite, rewrite

    space = spaces["full"]
    group = next(g for g in space.free if g.kind == "class" and g.members == (34,))
    flat = replace(reference_plan.values[36].parsed_layout, memory_class=reference_plan.values[34].memory_class)
    bogus = replace(group.candidates[1], layouts=(flat,))
    broken = replace(space, free=(replace(group, candidates=(group.candidates[0], bogus)),), frozen=())
    with pytest.raises(IllegalRewrite, match="scope: value 34 .* tiling or order changed where the classes level"):
        rewrite(facts, broken, (1,), facts.budgets)



def _steps_as_they_were(before: Plan, after: Plan, aligned) -> list[str]:
    """`step_violations` as it was, every field of every copied step compared (the quick tests must agree)."""
    found, count = [], len(before.values)
    for old, position in zip(before.steps, aligned.new_index):
        new = after.steps[position]
        if old is new:
            continue
        where = f"step {position}" + (f" (step {old.index} of the original)" if position != old.index else "")
        found += [f"{where}: {field} {_change(getattr(old, field), getattr(new, field))}"
                  for field in KEPT_STEP_FIELDS if getattr(old, field) != getattr(new, field)]
        kinds = old.parsed_operation.kind, new.parsed_operation.kind
        if kinds[0] != kinds[1]:
            found.append(f"{where}: operation kind {_change(*kinds)}")
        kept_live = [value for value in new.live if value < count]
        if kept_live != old.live:
            found.append(f"{where}: live set changed ({_live_difference(kept_live, old.live)})")
    return found


def _values_as_they_were(before: Plan, after: Plan) -> list[str]:
    return [f"value {old.id}: {field} {_change(getattr(old, field), getattr(new, field))}"
            for old, new in zip(before.values, after.values) if old is not new
            for field in KEPT_VALUE_FIELDS if getattr(old, field) != getattr(new, field)]


def _first_live_as_it_was(before: Plan, after: Plan) -> dict[int, int]:
    first_live: dict[int, int] = {}
    for position, step in enumerate(after.steps):
        for value in step.live:
            if value >= len(before.values):
                first_live.setdefault(value, position)
    return first_live


@pytest.mark.parametrize("rewrite", [
    lambda p, g: with_step(p, 12, source=3, live=[*p.steps[12].live[1:], 500]),
    lambda p, g: with_step(p, 12, execution_count=7, operation=p.steps[13].operation),
    lambda p, g: with_step(p, 20, operation=p.steps[20].operation.replace("1", "2", 1), live=p.steps[20].live[::-1]),
    lambda p, g: with_step(with_step(p, 5, live=[*p.steps[5].live, 176]), 9, live=[176, *p.steps[9].live]),
    lambda p, g: with_value(with_value(p, 30, name="renamed", copies=2), 31, root=0),
    lambda p, g: g,
    lambda p, g: with_derived_fields(p.model_copy(update={"budget_bytes": 1})),
])
def test_the_quick_structure_rules_find_what_comparing_every_field_finds(reference_plan, facts, gathered, rewrite):
    after = rewrite(reference_plan, gathered)
    aligned = alignment(reference_plan, after)
    assert aligned.first_live == _first_live_as_it_was(reference_plan, after)
    steps = step_violations(reference_plan, after, aligned)
    assert [line for line in steps if "index is" not in line] == _steps_as_they_were(reference_plan, after, aligned)
    values = value_violations(reference_plan, after, facts.live.born_at)
    assert [line for line in values if ": shape " not in line] == _values_as_they_were(reference_plan, after)
