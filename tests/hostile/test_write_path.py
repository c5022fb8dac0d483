"""`ncclx migrate --write` never loses what a user wrote (issue 18): an edit made while it
runs, owner and mode, NUL bytes, coding declarations, a full or read-only filesystem."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe

from .conftest import run_bounded, run_python_bounded
from .test_migrate import FIXED, REDUNDANT

# The real CLI, with the scanner wrapped so that the file is edited after ncclx read it and
# before it writes it back: the one moment the test cannot otherwise reach.
_EDIT_WHILE_SCANNING = """
import os, sys
from ncclx_migrate._migrate import _runner
scan = _runner.process_text
def scan_then_edit(path, text, options):
    result = scan(path, text, options)
    st = os.stat(path)
    with open(path, "r+b") as fh:
        data = fh.read()
        fh.seek(0)
        if sys.argv[1] == "append":
            fh.write(data + b"# added while ncclx ran\\n")
        else:  # same size, same mtime: only the bytes tell
            fh.write(data.replace(b"pg", b"gp", 1))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return result
_runner.process_text = scan_then_edit
from ncclx_migrate._cli import cli
cli(["migrate", "--write", "-j", "1", "--format", "json", *sys.argv[2:]], prog_name="ncclx")
"""


@pytest.mark.parametrize("edit", ["append", "same-size"])
def test_an_edit_made_while_the_run_goes_is_kept(tmp_path: Path, edit: str) -> None:
    (tmp_path / "a.py").write_text(REDUNDANT)
    (tmp_path / "b.py").write_text(REDUNDANT)
    proc = run_python_bounded(_EDIT_WHILE_SCANNING, edit, "a.py", "b.py", cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = {e["path"]: e["message"] for e in json.loads(proc.stdout)["errors"]}
    assert set(errors) == {"a.py", "b.py"}
    assert "changed on disk after ncclx read it" in errors["a.py"]
    edited = (tmp_path / "a.py").read_text()
    assert edited == (REDUNDANT + "# added while ncclx ran\n" if edit == "append" else REDUNDANT.replace("pg", "gp", 1))
    assert not list(tmp_path.glob(".ncclx-*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file another owner")
def test_owner_group_and_mode_are_kept(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(REDUNDANT)
    os.chown(f, 1234, 2345)
    os.chmod(f, 0o2751)
    proc = run_bounded("migrate", "--write", "m.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = f.stat()
    assert f.read_text() == FIXED
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)) == (1234, 2345, oct(0o2751))


def test_a_nul_byte_anywhere_in_python_is_an_error_and_the_file_stays(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    data = (REDUNDANT + "x = 1\n" * 2000 + "# \0\n").encode()  # the NUL is past the first 8 KB
    f.write_bytes(data)
    proc = run_bounded("migrate", "--write", "m.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"m.py: error: contains a NUL byte (offset {data.index(0)}), which Python refuses to compile" in proc.stdout
    assert f.read_bytes() == data


def test_a_coding_declaration_is_read_and_written_in_its_encoding(tmp_path: Path) -> None:
    head = "# -*- coding: latin-1 -*-\n# Café, façade\n"
    f = tmp_path / "m.py"
    f.write_bytes((head + REDUNDANT).encode("latin-1"))
    proc = run_bounded("migrate", "--write", "m.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f.read_bytes() == (head + FIXED).encode("latin-1")
    # stdin too: the fixed text comes back in the declared encoding.
    piped = subprocess.run([ncclx_exe(), "migrate", "--write", "-q", "-"], input=(head + REDUNDANT).encode("latin-1"),
                           capture_output=True, timeout=60)
    assert piped.stdout == (head + FIXED).encode("latin-1"), piped.stderr


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (root only), unmounted whatever the test does."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs to fill up or make read-only needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True,
                       capture_output=True, timeout=10)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)


def _fill(d: Path) -> None:
    """Take every free byte of the filesystem of ``d``."""
    with open(d / "filler", "wb", buffering=0) as fh:
        try:
            while fh.write(b"\0" * 4096):
                pass
        except OSError:
            pass


def _failed_write(mnt: Path, why: str) -> None:
    proc = run_bounded("migrate", "--write", "m.py", cwd=mnt)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"m.py: error: cannot write: {why}" in proc.stdout
    assert "running it again" not in proc.stdout  # a second run fails the same way
    assert (mnt / "m.py").read_text() == REDUNDANT
    assert not list(mnt.glob(".ncclx-*"))


def test_a_full_disk_leaves_the_file_and_no_temporary(small_fs: Path) -> None:
    (small_fs / "m.py").write_text(REDUNDANT)
    _fill(small_fs)
    _failed_write(small_fs, "No space left on device")


def test_a_read_only_mount_leaves_the_file(small_fs: Path) -> None:
    (small_fs / "m.py").write_text(REDUNDANT)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True, capture_output=True, timeout=10)
    _failed_write(small_fs, "Read-only file system")


def test_positions_after_a_failed_write_are_in_the_file_on_disk(small_fs: Path) -> None:
    """The fixes add lines above a finding they leave (NCX110 ``name()``): after a write that
    fails, that finding is placed where it is in the file as it is, as a report places it, not
    in the fixed text that was never written (issue 37)."""
    source = Path(__file__).parents[1] / "fixtures" / "python" / "ncx110_isinstance.in.py"
    (small_fs / "m.py").write_text(source.read_text())
    report = run_bounded("migrate", "--format", "json", "m.py", cwd=small_fs)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True, capture_output=True, timeout=10)
    proc = run_bounded("migrate", "--write", "--format", "json", "m.py", cwd=small_fs)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    got = json.loads(proc.stdout)
    assert [e["message"] for e in got["errors"]] == ["cannot write: Read-only file system"]
    on_disk = (small_fs / "m.py").read_text().splitlines()
    where = [(f["line"], f["column"], f["code"], f["applied"]) for f in got["findings"]]
    assert where == [(f["line"], f["column"], f["code"], False) for f in json.loads(report.stdout)["findings"]]
    left = [f for f in got["findings"] if f["fix"] == "none"]
    assert [(f["line"], on_disk[f["line"] - 1].strip()) for f in left] == [(19, 'return backend.name() == "nccl"')]
    text = run_bounded("migrate", "--write", "m.py", cwd=small_fs)
    assert "m.py:19:12: NCX110 name() is" in text.stdout, text.stdout
