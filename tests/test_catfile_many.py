"""``CatFile.infos`` (requests written together) answers as ``CatFile.info`` asked one by one,
and ``Repository.has_objects`` as ``has_object``: present, missing, and damaged objects (a loose
file git cannot unpack: then git's stderr tells it from a missing one) in any order, more of
them than one write carries."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from gitpub.git import catfile
from gitpub.git.catfile import CatFile, Unreadable
from gitpub.git.repo import Repository


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True,
                          check=True).stdout.decode().strip()


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, list[str], str, str]:
    """A repository, blobs that are there, an id that is not, and one whose loose file is
    garbage."""
    git(tmp_path, "init", "-q", str(tmp_path))
    present = [git(tmp_path, "hash-object", "-w", "--stdin", input=f"{i}\n".encode())
               for i in range(5)]
    missing = "1" * 40
    damaged = git(tmp_path, "hash-object", "-w", "--stdin", input=b"to be damaged\n")
    loose = tmp_path / ".git/objects" / damaged[:2] / damaged[2:]
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"garbage")[:5] + b"not zlib at all")
    return tmp_path, present, missing, damaged


def one_by_one(cat: CatFile, names: list[str]) -> list[object]:
    out: list[object] = []
    for name in names:
        try:
            out.append(cat.info(name))
        except Unreadable:
            out.append(Unreadable)
    return out


def test_infos_answer_as_info_one_by_one(scratch: tuple[Path, list[str], str, str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path, present, missing, _ = scratch
    monkeypatch.setattr(catfile, "_MANY", 3)  # more names than one write carries
    names = [present[0], missing, present[1], present[2], missing, present[3], present[4]]
    cat = CatFile(path / ".git", path)
    try:
        assert cat.infos(names) == one_by_one(cat, names)
        assert cat.infos([]) == []
    finally:
        cat.close()


@pytest.mark.parametrize("at", [0, 2, 4])
def test_a_damaged_object_among_them_is_unreadable_as_alone(
        scratch: tuple[Path, list[str], str, str], at: int) -> None:
    path, present, missing, damaged = scratch
    names = [present[0], missing, present[1], present[2]]
    names.insert(at, damaged)
    cat = CatFile(path / ".git", path)
    try:
        assert one_by_one(cat, [damaged]) == [Unreadable]
        with pytest.raises(Unreadable):
            cat.infos(names)
        assert cat.infos([n for n in names if n != damaged]) == \
            one_by_one(cat, [n for n in names if n != damaged])
    finally:
        cat.close()


@pytest.mark.parametrize("at", [None, 0, 3, 6])
def test_has_objects_answers_as_has_object(scratch: tuple[Path, list[str], str, str],
                                           at: int | None) -> None:
    path, present, missing, damaged = scratch
    names = [present[0], missing, *present[1:]]
    if at is not None:
        names.insert(at, damaged)
    with Repository.discover(path) as repo:
        expected = {n: repo.has_object(n) for n in names}
    assert not expected[missing] and expected.get(damaged, True)  # damaged: there, unreadable
    with Repository.discover(path) as repo:
        assert repo.has_objects(names) == expected
        assert repo.has_objects(reversed(names)) == expected  # some known now, asked again
