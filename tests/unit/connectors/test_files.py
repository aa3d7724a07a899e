"""The path guard of file sources (`connectors.open_source`), on real files in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors import SourceMissing, SourceRefused, SourceTooLarge, open_source
from dag.errors import InputDataError


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "a.csv").write_bytes(b"id,name\n1,x\n")
    (d / "sub" / "b.json").write_bytes(b"[]")
    return d


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "secret.csv").write_bytes(b"secret\n")
    return o


def test_reads_a_file_and_a_nested_file(data_dir: Path) -> None:
    with open_source(data_dir, "a.csv") as f:
        assert f.read() == b"id,name\n1,x\n"
        f.seek(3)
        assert f.read(4) == b"name"
    with open_source(data_dir, "sub/b.json") as f:
        assert f.read() == b"[]"
    with open_source(data_dir, "./sub//b.json") as f:
        assert f.read() == b"[]"


def test_symlink_inside_the_data_dir_is_followed(data_dir: Path) -> None:
    (data_dir / "alias.csv").symlink_to("a.csv")
    (data_dir / "subalias").symlink_to(data_dir / "sub", target_is_directory=True)
    with open_source(data_dir, "alias.csv") as f:
        assert f.read().startswith(b"id,name")
    with open_source(data_dir, "subalias/b.json") as f:
        assert f.read() == b"[]"


def test_data_dir_given_through_a_symlink(tmp_path: Path, data_dir: Path) -> None:
    link = tmp_path / "data-link"
    link.symlink_to(data_dir, target_is_directory=True)
    with open_source(link, "a.csv") as f:
        assert f.read(2) == b"id"


@pytest.mark.parametrize("rel", ["", "   "])
def test_empty_path_refused(data_dir: Path, rel: str) -> None:
    with pytest.raises(SourceRefused, match="empty"):
        open_source(data_dir, rel)


def test_absolute_path_refused_even_inside(data_dir: Path) -> None:
    with pytest.raises(SourceRefused, match="absolute") as exc:
        open_source(data_dir, str(data_dir / "a.csv"))
    assert str(data_dir / "a.csv") in str(exc.value)


@pytest.mark.parametrize("rel", ["../outside/secret.csv", "sub/../a.csv", "..", "sub\\..\\a.csv"])
def test_dotdot_segment_refused(data_dir: Path, rel: str) -> None:
    with pytest.raises(SourceRefused, match=r"'\.\.'"):
        open_source(data_dir, rel)


def test_nul_byte_refused(data_dir: Path) -> None:
    with pytest.raises(SourceRefused, match="NUL"):
        open_source(data_dir, "a.csv\x00.txt")


def test_symlink_to_a_file_outside_refused(data_dir: Path, outside: Path) -> None:
    (data_dir / "leak.csv").symlink_to(outside / "secret.csv")
    with pytest.raises(SourceRefused, match="leaves the data directory") as exc:
        open_source(data_dir, "leak.csv")
    assert "leak.csv" in str(exc.value)


def test_symlinked_directory_leading_outside_refused(data_dir: Path, outside: Path) -> None:
    (data_dir / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SourceRefused, match="leaves the data directory"):
        open_source(data_dir, "out/secret.csv")


def test_symlink_to_a_device_outside_refused(data_dir: Path) -> None:
    (data_dir / "null.csv").symlink_to("/dev/null")
    with pytest.raises(SourceRefused, match="leaves the data directory"):
        open_source(data_dir, "null.csv")


def test_dangling_symlinks(data_dir: Path, outside: Path) -> None:
    (data_dir / "gone-out.csv").symlink_to(outside / "nothing.csv")
    (data_dir / "gone-in.csv").symlink_to("nothing.csv")
    with pytest.raises(SourceRefused, match="leaves the data directory"):
        open_source(data_dir, "gone-out.csv")
    with pytest.raises(SourceMissing):
        open_source(data_dir, "gone-in.csv")


def test_sibling_with_a_common_prefix_is_outside(tmp_path: Path, data_dir: Path) -> None:
    sibling = tmp_path / "data2"
    sibling.mkdir()
    (sibling / "x.csv").write_bytes(b"x")
    (data_dir / "x.csv").symlink_to(sibling / "x.csv")
    with pytest.raises(SourceRefused, match="leaves the data directory"):
        open_source(data_dir, "x.csv")


@pytest.mark.parametrize("rel", ["sub", ".", "sub/"])
def test_directory_refused(data_dir: Path, rel: str) -> None:
    with pytest.raises(SourceRefused, match=r"not a|directory"):
        open_source(data_dir, rel)


@pytest.mark.timeout(10)
def test_fifo_refused_without_blocking(data_dir: Path) -> None:
    os.mkfifo(data_dir / "pipe.csv")
    with pytest.raises(SourceRefused, match="not a regular file") as exc:
        open_source(data_dir, "pipe.csv")
    assert "pipe.csv" in str(exc.value)


def test_missing_file(data_dir: Path) -> None:
    with pytest.raises(SourceMissing, match="does not exist") as exc:
        open_source(data_dir, "nope.csv")
    assert "nope.csv" in str(exc.value)
    with pytest.raises(SourceMissing):
        open_source(data_dir, "nodir/nope.csv")


def test_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(SourceMissing):
        open_source(tmp_path / "no-such-dir", "a.csv")


def test_file_over_the_cap_refused(data_dir: Path) -> None:
    big = data_dir / "big.csv"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024 + 1)  # sparse: no 50 MiB actually written
    with pytest.raises(SourceTooLarge, match="52428801 bytes") as exc:
        open_source(data_dir, "big.csv")
    assert "big.csv" in str(exc.value)


def test_file_exactly_at_the_cap_is_read(data_dir: Path) -> None:
    (data_dir / "edge.csv").write_bytes(b"x" * 10)
    with open_source(data_dir, "edge.csv", max_bytes=10) as f:
        assert len(f.read()) == 10
    with pytest.raises(SourceTooLarge):
        open_source(data_dir, "edge.csv", max_bytes=9)


def test_refusals_are_input_data_errors_and_not_retried() -> None:
    for cls in (SourceRefused, SourceMissing, SourceTooLarge):
        assert issubclass(cls, InputDataError)


def test_no_descriptor_leaks_on_refusal(data_dir: Path) -> None:
    (data_dir / "edge.csv").write_bytes(b"x" * 10)
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises(SourceTooLarge):
            open_source(data_dir, "edge.csv", max_bytes=1)
    assert len(os.listdir("/proc/self/fd")) == fds


def test_hard_linked_file_is_refused_and_says_why(data_dir: Path, outside: Path) -> None:
    # A hard link made inside the data directory to a file outside it passes every path
    # check: the directory entry is inside, and so is the descriptor's path.
    os.link(outside / "secret.csv", data_dir / "leak.csv")
    with pytest.raises(SourceRefused, match="hard links") as info:
        open_source(data_dir, "leak.csv")
    assert isinstance(info.value, InputDataError)
    # Both names of a linked pair are refused, even the one inside.
    os.link(data_dir / "a.csv", data_dir / "twin.csv")
    with pytest.raises(SourceRefused, match="2 hard links"):
        open_source(data_dir, "a.csv")


def test_over_long_path_is_an_input_data_error_not_a_retry(data_dir: Path) -> None:
    # The relative-path rule refuses it before the file system is asked (ENAMETOOLONG).
    with pytest.raises(SourceRefused, match="at most 255 bytes") as info:
        open_source(data_dir, "x" * 300 + ".csv")
    assert isinstance(info.value, InputDataError)
