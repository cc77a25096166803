"""Exchange prices kept across runs (`facts.price_store`): a kept price is the price, only what is not kept is priced,
and a store that cannot be used is only a store not used."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from reference import with_value
from test_pair_exchange import STEPS, _random_layout
from test_plan_exchange import HEADS_ALIGNED, RETILE, WHOLE_COPY

from ipuplan.facts import exchange_proxy, pair_exchange, plan_exchange, price_store
from ipuplan.facts.pair_exchange import matched_bytes, pair_bytes
from ipuplan.facts.plan_exchange import INNER, OUTER
from ipuplan.plan.operation import parse_operation


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """A store of the test's own, and no price remembered by the process."""
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "cache"))
    _forget()
    yield tmp_path / "cache" / price_store.FILE_NAME
    _forget()


def _forget() -> None:
    getattr(price_store.code_version, "cache_clear", lambda: None)()  # (a test may have replaced it)
    price_store._directory_for.cache_clear()  # (a test may replace `Path.home`)
    pair_exchange._distinct_pair_bytes.cache_clear()
    pair_exchange._distinct_matched_bytes.cache_clear()
    for cached in (exchange_proxy.kept_exchange_bytes, exchange_proxy.mapped_exchange_bytes):
        getattr(cached, "cache_clear", lambda: None)()  # (a test may have replaced it)
    price_store._read.clear()
    price_store._waiting.clear()
    for kept in price_store._opened.values():
        if kept is not None:
            kept.close()
    price_store._opened.clear()


def _layouts(seed: int, shape, count: int) -> tuple:
    rng = random.Random(seed)
    return tuple(_random_layout(rng, shape) for _ in range(count))


def _priced_by_the_store_only(monkeypatch):
    """Pricing here fails the test: every figure must come from the store."""
    def refused(*args, **kwargs):
        raise AssertionError("priced again")
    monkeypatch.setattr(pair_exchange, "_priced_pairs", refused)
    monkeypatch.setattr(pair_exchange, "_priced_matched", refused)


@pytest.mark.parametrize(("operation", "source_shape", "result_shape"), STEPS[:8])
def test_a_second_run_reads_every_price_it_kept(store, monkeypatch, operation, source_shape, result_shape):
    parsed = parse_operation(operation)
    sources, results = _layouts(1, source_shape, 6), _layouts(2, result_shape, 5)
    first = pair_bytes(parsed, source_shape, result_shape, 2, sources, results)
    diagonal = matched_bytes(parsed, source_shape, result_shape, 2, sources[:5], results)
    assert store.exists()
    _forget()
    _priced_by_the_store_only(monkeypatch)
    assert np.array_equal(pair_bytes(parsed, source_shape, result_shape, 2, sources, results), first)
    assert np.array_equal(matched_bytes(parsed, source_shape, result_shape, 2, sources[:5], results), diagonal)


@pytest.mark.parametrize(("operation", "source_shape", "result_shape"), [s for s in STEPS if "View" in s[0]][:3])
def test_whether_a_side_reads_alike_is_kept_too(store, monkeypatch, operation, source_shape, result_shape):
    parsed = parse_operation(operation)
    sides = tuple((source_shape, layout) for layout in _layouts(15, source_shape, 8))
    first = pair_exchange.alike_sides(parsed, sides, True)
    assert np.array_equal(first, [pair_exchange.reads_alike(parsed, *side, True) for side in sides])
    _forget()
    monkeypatch.setattr(pair_exchange, "reads_alike", lambda *a: pytest.fail("judged again"))
    assert np.array_equal(pair_exchange.alike_sides(parsed, sides, True), first)


def test_only_the_sources_with_a_pair_not_kept_are_priced(store, monkeypatch):
    parsed, shape = parse_operation(RETILE), (6, 10)
    sources, results = _layouts(3, shape, 7), _layouts(4, shape, 4)
    kept = pair_bytes(parsed, shape, shape, 2, sources[:4], results)
    _forget()
    priced = []
    original = pair_exchange._priced_pairs
    monkeypatch.setattr(pair_exchange, "_priced_pairs", lambda *a: priced.append(a[4]) or original(*a))
    both = pair_bytes(parsed, shape, shape, 2, sources, results)
    asked = list(priced)
    monkeypatch.setenv(price_store.CACHE_VARIABLE, "off")
    _forget()
    assert np.array_equal(both, pair_bytes(parsed, shape, shape, 2, sources, results))
    assert np.array_equal(both[:4], kept)
    assert asked and all(len(sources) <= 3 for sources in asked)  # the three new sources at most, not the kept four


def test_prices_differ_by_step_reading_and_element_size(store):
    parsed, shape = parse_operation(RETILE), (6, 10)
    sources, results = _layouts(5, shape, 4), _layouts(6, shape, 4)
    two = pair_bytes(parsed, shape, shape, 2, sources, results)
    _forget()
    four = pair_bytes(parsed, shape, shape, 4, sources, results)
    assert np.array_equal(four, 2 * two) and two.any()


def test_a_store_that_is_no_database_is_left_alone(store):
    store.parent.mkdir(parents=True)
    store.write_bytes(b"this is not SQLite" * 100)
    parsed, shape = parse_operation(RETILE), (6, 10)
    sources, results = _layouts(7, shape, 3), _layouts(8, shape, 3)
    found = pair_bytes(parsed, shape, shape, 2, sources, results)
    _forget()
    assert np.array_equal(pair_bytes(parsed, shape, shape, 2, sources, results), found)
    assert store.read_bytes().startswith(b"this is not SQLite")


def test_a_store_where_nothing_can_be_written_prices_everything(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("a file where a folder should be")
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(blocked / "cache"))
    _forget()
    parsed, shape = parse_operation(RETILE), (6, 10)
    assert pair_bytes(parsed, shape, shape, 2, *[_layouts(9 + k, shape, 3) for k in range(2)]).shape == (3, 3)
    assert price_store.opened() is None
    _forget()


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(price_store.CACHE_VARIABLE, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _forget()
    parsed, shape = parse_operation(RETILE), (6, 10)
    pair_bytes(parsed, shape, shape, 2, *[_layouts(11 + k, shape, 3) for k in range(2)])
    assert price_store.opened() is None and not any(tmp_path.iterdir())
    _forget()


def test_a_store_past_its_size_starts_afresh(store, monkeypatch):
    parsed, shape = parse_operation(RETILE), (6, 10)
    pair_bytes(parsed, shape, shape, 2, *[_layouts(13 + k, shape, 3) for k in range(2)])
    _forget()
    monkeypatch.setattr(price_store, "MAX_STORE_BYTES", 1)
    fresh = price_store.opened()
    assert fresh.known(price_store.step_key(parsed.text, shape, shape, 2, OUTER)) == {}


def test_the_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(price_store.CACHE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert price_store.store_directory() == tmp_path / "ipuplan"


def test_the_folder_follows_every_variable_it_reads_and_asks_home_once(monkeypatch, tmp_path):
    """Worked out once per environment (`opened` asks at every price), yet a changed variable is a changed folder."""
    monkeypatch.delenv(price_store.CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    price_store._directory_for.cache_clear()
    asked = []
    monkeypatch.setattr(price_store.Path, "home", lambda: asked.append(1) or Path(os.environ["HOME"]))
    for home in ("a", "b"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        assert [price_store.store_directory() for _ in range(3)] == [tmp_path / home / ".cache" / "ipuplan"] * 3
    assert len(asked) == 2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert price_store.store_directory() == tmp_path / "xdg" / "ipuplan"
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "chosen"))
    assert price_store.store_directory() == tmp_path / "chosen"
    monkeypatch.setenv(price_store.CACHE_VARIABLE, " Off ")
    assert price_store.store_directory() is None
    monkeypatch.delenv(price_store.CACHE_VARIABLE)
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert price_store.store_directory() == tmp_path / "b" / ".cache" / "ipuplan" and len(asked) == 2
    price_store._directory_for.cache_clear()


def _both_readings():
    """Every step of `STEPS`, views read both ways, and a crop with the shapes of its slice: steps that share shapes,
    and layouts, but not their prices."""
    return [(parse_operation(op), source, result, reading) for op, source, result in [*STEPS, (WHOLE_COPY, (7, 12),
                                                                                               (6, 10))]
            for reading in ((OUTER, INNER) if "View" in op else (OUTER,))]


def test_one_store_keeps_every_steps_prices_apart(store, monkeypatch):
    """A key without the operation, a shape or the reading would read one step's prices for another."""
    def every(steps):
        return [pair_bytes(parsed, source, result, 2, _layouts(17, source, 4), _layouts(18, result, 3), reading)
                for parsed, source, result, reading in steps]
    steps = _both_readings()
    kept = every(steps)
    monkeypatch.setenv(price_store.CACHE_VARIABLE, "off")
    _forget()
    fresh = every(steps)
    assert all(np.array_equal(a, b) for a, b in zip(kept, fresh))
    assert len({a.tobytes() for a in fresh}) > len(steps) // 2  # the steps do price apart


def test_a_store_that_fails_once_opened_is_left_and_everything_priced(store):
    import sqlite3
    parsed, shape = parse_operation(RETILE), (6, 10)
    sources, results = _layouts(19, shape, 3), _layouts(20, shape, 3)
    assert price_store.opened() is not None
    with sqlite3.connect(store) as other:
        other.execute("DROP TABLE prices")
    found = pair_bytes(parsed, shape, shape, 2, sources, results)
    assert price_store.opened() is None  # off for the rest of the process
    _forget()
    price_store._opened[str(store.parent)] = None
    assert np.array_equal(found, pair_bytes(parsed, shape, shape, 2, sources, results))


def test_prices_kept_by_other_code_are_not_read(store, monkeypatch):
    parsed, shape = parse_operation(RETILE), (6, 10)
    sources, results = _layouts(21, shape, 3), _layouts(22, shape, 3)
    pair_bytes(parsed, shape, shape, 2, sources, results)
    _forget()
    monkeypatch.setattr(price_store, "code_version", lambda: "another build")
    priced = []
    original = pair_exchange._priced_pairs
    monkeypatch.setattr(pair_exchange, "_priced_pairs", lambda *a: priced.append(a) or original(*a))
    pair_bytes(parsed, shape, shape, 2, sources, results)
    assert priced


def test_no_home_folder_means_no_store(monkeypatch):
    monkeypatch.delenv(price_store.CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(price_store.Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home")))
    _forget()
    assert price_store.opened() is None
    _forget()


def test_a_second_optimize_reads_the_prices_the_first_kept_and_writes_the_same_plan(tmp_path):
    """End to end, as a user runs it twice (fresh processes: no price remembered in memory)."""
    import json
    import os
    import subprocess
    import sys

    from reference import REFERENCE

    def run(output):
        done = subprocess.run([sys.executable, "-m", "ipuplan", "optimize", str(REFERENCE), "-o", str(output),
                               "--json", "--workers", "1"], capture_output=True, text=True, check=True,
                              env={**os.environ, price_store.CACHE_VARIABLE: str(tmp_path / "cache")})
        return json.loads(done.stdout)

    first, second = run(tmp_path / "a.json"), run(tmp_path / "b.json")
    assert first["exchange_prices"]["kept"] > 0 and second["exchange_prices"]["kept"] == 0
    assert second["exchange_prices"]["read"] >= first["exchange_prices"]["kept"]
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert first["exchange_bytes_after"] == second["exchange_bytes_after"] == second["model_exchange_bytes_after"]


def test_the_proxy_s_prices_are_kept_and_a_second_space_reads_them_all(store, monkeypatch):
    from reference import REFERENCE

    from ipuplan import load_plan
    from ipuplan.facts.plan_facts import plan_facts
    from ipuplan.space.scopes import candidate_space

    def exchanges(space):
        return [[candidate.exchange_bytes for candidate in group.candidates] for group in space.free]

    facts = plan_facts(load_plan(REFERENCE))
    kept_before = price_store.counts()["kept"]
    first = exchanges(candidate_space(facts))
    kept = price_store.counts()["kept"] - kept_before
    _forget()
    monkeypatch.setattr(exchange_proxy, "mapped_exchange_bytes", lambda *a: pytest.fail("a kept price priced again"))
    before = price_store.counts()["read"]
    assert exchanges(candidate_space(facts)) == first
    assert kept > 0 and price_store.counts()["read"] - before == kept
    assert not price_store._read  # read once a space, not held for the rest of the process


def test_without_a_store_the_proxy_prices_everything_and_keeps_nothing(tmp_path, monkeypatch):
    from reference import REFERENCE

    from ipuplan import load_plan
    from ipuplan.facts.plan_facts import plan_facts
    from ipuplan.space.scopes import candidate_space

    monkeypatch.setenv(price_store.CACHE_VARIABLE, "off")
    _forget()
    space = candidate_space(plan_facts(load_plan(REFERENCE)))
    assert any(candidate.exchange_bytes for group in space.free for candidate in group.candidates)
    assert not price_store._waiting and not any(tmp_path.iterdir())


def test_a_python_without_sqlite_prices_everything(store, monkeypatch):
    monkeypatch.setattr(price_store, "sqlite3", None)
    parsed, shape = parse_operation(RETILE), (6, 10)
    found = pair_bytes(parsed, shape, shape, 2, _layouts(23, shape, 3), _layouts(24, shape, 3))
    assert found.shape == (3, 3) and price_store.opened() is None and not store.exists()


def test_the_tool_imports_and_prices_without_the_sqlite3_module(tmp_path):
    import subprocess
    import sys
    code = ("import sys; sys.modules['sqlite3'] = None\n"  # what `import sqlite3` meets where Python was built without
            "from ipuplan.facts import exchange_proxy, pair_exchange, price_store\n"
            "assert price_store.sqlite3 is None and price_store.opened() is None\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={"IPUPLAN_CACHE_DIR": str(tmp_path), "PATH": ""})
    assert not any(tmp_path.iterdir())


def _counted_with(monkeypatch, plan, asked: list) -> plan_exchange.PlanExchange:
    """`plan`'s exchange, fresh from this process's caches, with every step `both_readings` prices listed in `asked`."""
    real = plan_exchange.both_readings

    def listed(operation, *args):
        asked.append(operation.text)
        return real(operation, *args)
    plan_exchange.step_bytes.cache_clear()
    price_store._read.clear()
    monkeypatch.setattr(plan_exchange, "both_readings", listed)
    return plan_exchange.plan_exchange(plan)


def test_a_plans_exchange_counted_again_reads_each_step_the_first_count_kept(store, monkeypatch, reference_plan):
    # a view whose readings differ keeps both figures (step 19); the count is the same, figure by figure
    plan = with_value(reference_plan, 71, layout=HEADS_ALIGNED)
    first, again = [], []
    counted = _counted_with(monkeypatch, plan, first)
    assert counted.other_readings and len(first) > 20
    assert _counted_with(monkeypatch, plan, again) == counted
    assert again == []
    assert store.exists()


def test_a_layout_written_otherwise_is_priced_not_read(store, monkeypatch, reference_plan):
    _counted_with(monkeypatch, reference_plan, [])
    changed, asked = with_value(reference_plan, 71, layout=HEADS_ALIGNED), []
    assert _counted_with(monkeypatch, changed, asked) == plan_exchange.plan_exchange(changed)
    assert 0 < len(asked) <= 4  # the steps that read or write value 71, and only those


def test_a_step_that_cannot_be_priced_is_asked_each_time(store, monkeypatch, reference_plan):
    plan = with_value(reference_plan, 71, shape=[1 << 25, 1, 1])  # past what one step may enumerate
    first, again = [], []
    counted = _counted_with(monkeypatch, plan, first)
    assert counted.unpriced
    assert _counted_with(monkeypatch, plan, again) == counted
    assert 0 < len(again) < len(first)


def test_no_store_no_price_kept_and_the_same_count(monkeypatch, reference_plan):
    monkeypatch.setenv(price_store.CACHE_VARIABLE, "off")
    _forget()
    asked = []
    assert _counted_with(monkeypatch, reference_plan, asked).total == 699_219_304
    assert _counted_with(monkeypatch, reference_plan, asked).total == 699_219_304
    assert len(asked) > 40  # every step priced twice: nothing kept
