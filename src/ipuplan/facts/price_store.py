"""Exchange prices kept across runs (issue 34): the bytes a step sends for a pair of layouts, by content.

A run prices every pair of candidate layouts of the steps alive at the peak (`pair_exchange`), and each candidate's
proxy against its movers' other sides (`exchange_proxy.kept_exchange_bytes`: a step "proxy" per shape and element
size); the next run of the same plan, or of another finalist scope with the same layer shapes, prices the same pairs
again. Each price is kept
in a SQLite file under `IPUPLAN_CACHE_DIR` (default `$XDG_CACHE_HOME/ipuplan`, else `~/.cache/ipuplan`; `off` or an
empty value keeps nothing), keyed by hashes of the step's content (its operation, shapes, element size and reading),
of each side's placement (`format_layout`) and of the code that prices (`code_version`), never by object.

A store is a cache, never a source of truth: a file that cannot be opened, read or written is left alone and the
run prices everything itself; the written plan's exchange is still counted by the definition
(`plan_exchange.step_bytes`), which no stored price reaches. A store past `MAX_STORE_BYTES` when opened is emptied.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from hashlib import blake2b
from pathlib import Path

import numpy as np

from ipuplan.plan.forked import in_a_copy
from ipuplan.plan.layout import Layout, format_layout

try:
    import sqlite3
except ImportError:  # a Python built without it: no store, every price computed
    sqlite3 = None

CACHE_VARIABLE = "IPUPLAN_CACHE_DIR"
OFF = "off"
DIRECTORY_VARIABLES = (CACHE_VARIABLE, "XDG_CACHE_HOME", "HOME")
"""What `store_directory` reads of the environment (`HOME` through `Path.home`)."""
MAX_STORE_BYTES = 256 << 20
FILE_NAME = "exchange-prices.sqlite"
PRICING_SOURCES = ("facts/pair_exchange.py", "facts/plan_exchange.py", "facts/exchange_proxy.py", "plan/layout.py",
                   "plan/operation.py", "plan/debug_syntax.py")
"""The code a price depends on, in the package: a change to any of it (a fix, an upgrade) makes every key new."""
STORE_ERRORS = (OSError, ValueError, *(() if sqlite3 is None else (sqlite3.Error,)))
"""What a store may raise that only means it cannot be used."""


def store_directory() -> Path | None:
    """Where prices are kept (None: `IPUPLAN_CACHE_DIR=off`, or empty, or no home folder to put them in)."""
    return _directory_for(*(os.environ.get(name) for name in DIRECTORY_VARIABLES))


@lru_cache(maxsize=16)
def _directory_for(chosen: str | None, base: str | None, home: str | None) -> Path | None:
    """`store_directory` for these values of `DIRECTORY_VARIABLES`, worked out once: `opened` asks at every price
    (1,515 times a run of the reference plan), and `Path.home` reads the password file where `HOME` is unset. `home`
    is only part of the key."""
    if chosen is not None:
        return None if chosen.strip().lower() in (OFF, "") else Path(chosen)
    if base:
        return Path(base) / "ipuplan"
    try:
        return Path.home() / ".cache" / "ipuplan"
    except RuntimeError:  # no home folder known (no HOME, no passwd entry)
        return None


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of `PRICING_SOURCES` (read once a process; one that cannot be read counts by its name)."""
    digest, package = blake2b(digest_size=8), Path(__file__).resolve().parent.parent
    for name in PRICING_SOURCES:
        try:
            digest.update(package.joinpath(name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()


def _hash(text: str) -> int:
    """A signed 64-bit hash of `text` (SQLite's integer)."""
    return int.from_bytes(blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little",
                          signed=True)


def step_key(operation: str, source_shape: tuple[int, ...], result_shape: tuple[int, ...], element_size: int,
             reading: str) -> int:
    """What of a step decides its prices, with the code that prices it, hashed."""
    return _hash(f"{code_version()}|{operation}|{source_shape}|{result_shape}|{element_size}|{reading}")


def text_key(text: str) -> int:
    """A layout's text as written, hashed (a plan's steps: the same layout written alike has one key)."""
    return _hash(text)


@lru_cache(maxsize=8192)
def layout_key(layout: Layout) -> int:
    """A layout's text, hashed (callers pass one layout per placement)."""
    return _hash(format_layout(layout))


class PriceStore:
    """One SQLite file of (step, source, result) -> bytes. Every failure turns the store off for the process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = os.getpid()
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=2.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a price lost to a power cut is priced again
        self._db.execute(f"PRAGMA journal_size_limit={8 << 20}")
        self._db.execute("CREATE TABLE IF NOT EXISTS prices (step INTEGER, source INTEGER, result INTEGER, "
                         "bytes INTEGER NOT NULL, PRIMARY KEY (step, source, result)) WITHOUT ROWID")
        if self._bytes() > MAX_STORE_BYTES and not in_a_copy():  # a forked copy leaves it to the run it serves
            self._emptied()

    def _bytes(self) -> int:
        (pages,), (size,) = (self._db.execute(f"PRAGMA {name}").fetchone() for name in ("page_count", "page_size"))
        return pages * size

    def _emptied(self) -> None:
        """Every price dropped, within SQLite (a file removed beside another process's connection would pair its
        journal with a new database)."""
        self._write("DELETE FROM prices", [()])
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.execute("VACUUM")

    def _write(self, statement: str, rows: list[tuple]) -> None:
        """`statement` once per row, in one transaction (a transaction per row took 0.35 s for 20k prices)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(statement, rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def known(self, step: int) -> dict[tuple[int, int], int]:
        """Every price kept for `step`, by (source key, result key)."""
        with self._lock:
            rows = self._db.execute("SELECT source, result, bytes FROM prices WHERE step = ?", (step,)).fetchall()
        return {(source, result): sent for source, result, sent in rows if isinstance(sent, int) and sent >= 0}

    def keep(self, step: int, prices: list[tuple[int, int, int]]) -> None:
        """Keep (source key, result key, bytes) prices of `step`."""
        self._write("INSERT OR REPLACE INTO prices VALUES (?, ?, ?, ?)",
                    [(step, source, result, sent) for source, result, sent in prices])

    def close(self) -> None:
        self._db.close()


_counted = {"read": 0, "kept": 0}
"""Prices this process read from a store and kept in one (`counts`)."""


def counts() -> dict[str, int]:
    """How many prices this process has read from a store and kept in one so far: a caller that wants a run's own
    takes the difference (`optimize --json`'s `exchange_prices`)."""
    return dict(_counted)


def add_counts(counted: dict[str, int]) -> None:
    """Count prices another process read and kept for this one (a forked copy that priced part of a run)."""
    for name, count in counted.items():
        _counted[name] += count


_opened: dict[str, PriceStore | None] = {}
_inherited: list[PriceStore] = []
"""Stores a forked process found open: kept, never used nor closed (SQLite's connections must not cross a fork)."""


def opened() -> PriceStore | None:
    """The process's store for the current `store_directory` (None: off, or it failed once)."""
    directory = store_directory()
    if directory is None or sqlite3 is None:
        return None
    key = str(directory)
    store = _opened.get(key, False)
    if store is not False and (store is None or store.pid == os.getpid()):
        return store
    if store:  # opened by the process this one was forked from
        _inherited.append(store)
    try:
        _opened[key] = PriceStore(directory / FILE_NAME)
    except STORE_ERRORS:
        _opened[key] = None
    return _opened[key]


def failed(store: PriceStore) -> None:
    """Turn `store` off for the rest of the process (its file could not be read or written)."""
    for key, kept in list(_opened.items()):
        if kept is store:
            _opened[key] = None
    try:
        store.close()
    except STORE_ERRORS:
        pass


def _known(store: PriceStore, step: int) -> dict[tuple[int, int], int] | None:
    """Every price `store` keeps for `step` (None: it failed, and is off from now on)."""
    try:
        return store.known(step)
    except STORE_ERRORS:
        failed(store)
        return None


def prices_of(step: int, pairs: list[tuple[int, int]]) -> list[int] | None:
    """The kept price of every pair (source key, result key) of `step`, -1 for one not kept; None: no store."""
    store = opened()
    known = None if store is None else _known(store, step)
    if known is None:
        return None
    found = [known.get(pair, -1) for pair in pairs]
    _counted["read"] += sum(price >= 0 for price in found)
    return found


def keeps_all(step: int, pairs: list[tuple[int, int]]) -> bool:
    """Whether the store keeps a price for every pair (source key, result key) of `step` (none counted as read: a
    question about the store, not a use of its prices)."""
    store = opened()
    known = None if store is None else _known(store, step)
    return known is not None and all(pair in known for pair in pairs)


def kept_or_priced(step: int, keys: list[tuple[int, int]], price: Callable[[list[int]], Sequence[int]]) -> np.ndarray:
    """Per key (source key, result key) of `step`, its kept price; the others priced by `price(their positions)` and
    kept (every key priced so where no store is open)."""
    stored = prices_of(step, keys)
    found = np.array([-1] * len(keys) if stored is None else stored, dtype=np.int64)
    missing = np.flatnonzero(found < 0)
    if len(missing):
        found[missing] = price(missing.tolist())
        keep_prices(step, [(*keys[k], int(found[k])) for k in missing.tolist()])
    return found


def keep_prices(step: int, prices: list[tuple[int, int, int]]) -> None:
    """Keep (source key, result key, bytes) prices of `step`, where a store is open."""
    store = opened()
    if store is None or not prices:
        return
    try:
        store.keep(step, prices)
    except STORE_ERRORS:
        failed(store)
        return
    _counted["kept"] += len(prices)


_read: dict[tuple[Path, int], dict[tuple[int, int], int]] = {}
"""Per (store file, step), the prices the store holds, read once until the next `flush` (`kept_price`)."""
_waiting: dict[int, list[tuple[int, int, int]]] = {}
"""Per step, prices to keep at the next `flush`."""


def kept_price(step: int, pair: tuple[int, int]) -> int | None:
    """The price kept for `pair` (source key, result key) of `step` (None: none kept, or no store): for prices asked one
    at a time, each step's read from the store once until the next `flush` (a query per price took longer than most
    prices)."""
    store = opened()
    if store is None:
        return None
    where = (store.path, step)
    if where not in _read:
        known = _known(store, step)
        if known is None:
            return None
        _read[where] = known
    found = _read[where].get(pair)
    if found is not None:
        _counted["read"] += 1
    return found


def keep_later(step: int, pair: tuple[int, int], price: int) -> None:
    """Keep `price` at the next `flush`, where a store is open (one transaction for many prices asked one at a
    time)."""
    if opened() is not None:
        _waiting.setdefault(step, []).append((*pair, price))


def flush() -> None:
    """Keep every price `keep_later` was given (in the store open now), and forget the prices read: a process that
    runs plan after plan (the library in a compiler's pipeline) holds no store's worth of them."""
    waiting = list(_waiting.items())
    _waiting.clear()
    _read.clear()
    for step, prices in waiting:
        keep_prices(step, prices)
