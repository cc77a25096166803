"""Outputs keep the mode and owner of the file they replace (issue 35): `plan.outputs`.

A replaced file gives the new one its permission bits and (where the process may set them) its owner and group; a new
file follows the umask; a file nobody may write (no write bit, refused even for root, as these tests run) or a
directory nobody may write in is refused before any work, with the bad-output error (exit 2)."""

from __future__ import annotations

import os
import shutil
import stat
import threading
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from reference import REFERENCE

from ipuplan.cli import main
from ipuplan.errors import OutputError, PlanError
from ipuplan.plan import outputs
from ipuplan.plan.outputs import require_outputs, write_atomically

AS_ROOT = os.geteuid() == 0
STRANGER = 12345
"""A uid and gid no one on the test machine has."""


def run(*args: str) -> tuple[int, str, str]:
    """The real entry point in this process: exit code, stdout, stderr."""
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture()
def umask_027():
    """The process's umask is 027 for the test (then what it was)."""
    before = os.umask(0o027)
    yield
    os.umask(before)


@pytest.fixture(params=["unnamed", "named"])
def writer(request, monkeypatch):
    """Both ways a result is written: an unnamed file (`O_TMPFILE`) named when complete, and (where the file system
    has none) a hidden temporary file renamed over the target."""
    if request.param == "named":
        def no_unnamed(*args):
            raise outputs._NoUnnamedFiles

        monkeypatch.setattr(outputs, "_write_unnamed", no_unnamed)
    return request.param


def test_a_replaced_0600_file_stays_0600_and_leaves_no_temporary(tmp_path, writer, umask_027):
    target = tmp_path / "plan.json"
    target.write_text("old")
    target.chmod(0o600)
    write_atomically(target, "new")
    assert target.read_text() == "new" and mode(target) == 0o600
    assert entries(tmp_path) == {"plan.json"}


def test_a_replaced_file_keeps_wider_bits_too(tmp_path, writer, umask_027):
    target = tmp_path / "shared.json"
    target.write_text("old")
    target.chmod(0o664)  # the umask (027) would give 0640
    write_atomically(target, b"new")
    assert mode(target) == 0o664 and entries(tmp_path) == {"shared.json"}


def test_a_new_file_follows_the_umask(tmp_path, writer, umask_027):
    write_atomically(tmp_path / "new.json", "{}")
    assert mode(tmp_path / "new.json") == 0o640
    assert entries(tmp_path) == {"new.json"}


@pytest.mark.skipif(not AS_ROOT, reason="only root may give a file to another user")
def test_root_keeps_the_owner_and_group_of_the_replaced_file(tmp_path, writer):
    target = tmp_path / "theirs.json"
    target.write_text("old")
    os.chown(target, STRANGER, STRANGER)
    target.chmod(0o600)
    write_atomically(target, "new")
    status = target.stat()
    assert (status.st_uid, status.st_gid, mode(target)) == (STRANGER, STRANGER, 0o600)
    assert target.read_text() == "new" and entries(tmp_path) == {"theirs.json"}


def test_a_user_who_may_not_give_the_file_away_keeps_it_quietly(tmp_path, writer, monkeypatch, capfd):
    """Not root: a change of owner the system refuses is left out (the group alone is tried), with nothing said."""
    target = tmp_path / "theirs.json"
    target.write_text("old")
    target.chmod(0o640)
    existing = target.stat()
    tried = []

    def refused(descriptor, uid, gid):
        tried.append((uid, gid))
        raise PermissionError(1, "Operation not permitted")

    real_stat = os.stat

    def foreign(path, *args, **kwargs):  # the file belongs to someone else
        status = real_stat(path, *args, **kwargs)
        if Path(path) != target:
            return status
        return os.stat_result((*status[:4], STRANGER, STRANGER, *status[6:]))

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "fchown", refused)
    monkeypatch.setattr(os, "stat", foreign)
    write_atomically(target, "new")
    monkeypatch.undo()
    assert tried == [(STRANGER, STRANGER), (-1, STRANGER)]
    assert target.read_text() == "new" and mode(target) == 0o640
    assert (target.stat().st_uid, target.stat().st_gid) == (existing.st_uid, existing.st_gid)
    assert capfd.readouterr() == ("", "") and entries(tmp_path) == {"theirs.json"}


def test_root_whose_change_of_owner_fails_writes_nothing(tmp_path, writer, monkeypatch):
    target = tmp_path / "theirs.json"
    target.write_text("old")
    real_stat = os.stat

    def foreign(path, *args, **kwargs):
        status = real_stat(path, *args, **kwargs)
        return os.stat_result((*status[:4], STRANGER, STRANGER, *status[6:])) if Path(path) == target else status

    def refused(descriptor, uid, gid):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "fchown", refused)
    monkeypatch.setattr(os, "stat", foreign)
    with pytest.raises(OutputError, match="cannot write: Operation not permitted"):
        write_atomically(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and entries(tmp_path) == {"theirs.json"}


def test_a_read_only_file_is_refused_even_for_root(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    target.chmod(0o444)
    with pytest.raises(PlanError, match="-o: cannot replace it: it is read-only \\(mode 0444\\)") as caught:
        require_outputs({"-o": target}, inputs=(), force=True)
    assert caught.value.exit_code == 2
    with pytest.raises(OutputError, match="cannot write: it is read-only"):  # and again at the write itself
        write_atomically(target, "new")
    assert target.read_text() == "old" and mode(target) == 0o444 and entries(tmp_path) == {"plan.json"}


def test_a_directory_nobody_may_write_in_is_refused_even_for_root(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "plan.json").write_text("old")
    folder.chmod(0o555)
    try:
        for target in (folder / "plan.json", folder / "new.json"):
            with pytest.raises(PlanError, match="cannot write in directory .*locked: it is read-only \\(mode 0555\\)"):
                require_outputs({"-o": target}, inputs=(), force=True)
    finally:
        folder.chmod(0o755)
    assert entries(folder) == {"plan.json"}


def test_in_place_on_a_read_only_plan_is_refused_before_any_work(tmp_path):
    plan = tmp_path / "plan.json"
    shutil.copyfile(REFERENCE, plan)
    plan.chmod(0o444)
    before = plan.read_bytes()
    code, _, stderr = run("optimize", str(plan), "--in-place", "--workers", "1")
    assert code == 2
    assert stderr.splitlines() == [f"error: {plan}: -o: cannot replace it: it is read-only (mode 0444)"], stderr
    assert plan.read_bytes() == before and mode(plan) == 0o444 and entries(tmp_path) == {"plan.json"}


def test_forced_output_keeps_its_0600(tmp_path, umask_027):
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0o600)
    code, _, stderr = run("synth", str(REFERENCE), "-o", str(out), "--force")
    assert code == 0, stderr
    assert mode(out) == 0o600 and out.read_text() != "old" and entries(tmp_path) == {"out.json"}


@pytest.mark.skipif(not AS_ROOT, reason="only root may give a file to another user")
def test_in_place_keeps_the_plan_owner_and_mode(tmp_path):
    plan = tmp_path / "plan.json"
    shutil.copyfile(REFERENCE, plan)
    os.chown(plan, STRANGER, STRANGER)
    plan.chmod(0o600)
    code, _, stderr = run("optimize", str(plan), "--in-place", "--workers", "1", "--time-limit", "2",
                          "--scope", "storage")
    assert code == 0, stderr
    status = plan.stat()
    assert (status.st_uid, status.st_gid, mode(plan)) == (STRANGER, STRANGER, 0o600)
    assert plan.read_bytes() != REFERENCE.read_bytes() and entries(tmp_path) == {"plan.json"}


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    """`-o /dev/null` or a named pipe: replacing it would put a regular file where the device or pipe was."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert require_outputs({"-o": fifo}, inputs=(), force=True) is None
    write_atomically(fifo, "through")
    reader.join(timeout=10)
    assert received == [b"through"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and entries(tmp_path) == {"pipe"}
