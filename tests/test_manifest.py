from __future__ import annotations

import contextlib
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitpub.core.manifest import Manifest, ManifestError
from gitpub.core.paths import structural_problem

segment = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
                  min_size=1, max_size=12).filter(lambda s: structural_problem(s) is None)
paths = st.lists(segment, min_size=1, max_size=4).map("/".join)
files = st.dictionaries(paths, st.tuples(st.sampled_from([0o100644, 0o100755]), st.binary()),
                        max_size=8)


def test_documented_serialization() -> None:
    m = Manifest.build([("posts/b.md", 0o100644, b"b"), ("posts/a.md", 0o100755, b"a")])
    expected = (b"gitpub-manifest v1\n"
                b"100755 " + hashlib.sha256(b"a").hexdigest().encode() + b" posts/a.md\n"
                b"100644 " + hashlib.sha256(b"b").hexdigest().encode() + b" posts/b.md\n")
    assert m.serialize() == expected
    assert m.sha256() == hashlib.sha256(expected).hexdigest()


@given(files)
def test_round_trip_and_order_independence(fs: dict[str, tuple[int, bytes]]) -> None:
    triples = [(p, mode, data) for p, (mode, data) in fs.items()]
    m = Manifest.build(triples)
    assert Manifest.parse(m.serialize()) == m
    assert Manifest.build(reversed(triples)).sha256() == m.sha256()


@given(st.binary(max_size=300))
def test_parse_never_crashes(data: bytes) -> None:
    with contextlib.suppress(ManifestError):
        Manifest.parse(data)


@pytest.mark.parametrize("path", ["/abs", "a/../b", "a//b", "a/", ".git/config", "a\nb", "a\\b",
                                  ".git /x", "x/GIT~1/config", ".g\u200cit/hooks/x",
                                  "a\udcff.md"])
def test_bad_paths(path: str) -> None:
    with pytest.raises(ManifestError):
        Manifest.build([(path, 0o100644, b"")])


@pytest.mark.parametrize("path", [".gitmodules", "a/.GitAttributes", "GITMOD~1", ".mailmap."])
def test_a_symlink_may_not_be_a_file_git_reads(path: str) -> None:
    Manifest.build([(path, 0o100644, b"")])  # as a regular file it is a manifest entry
    with pytest.raises(ManifestError, match="symbolic link"):
        Manifest.build([(path, 0o120000, b"target")])


def test_non_canonical_is_rejected() -> None:
    m = Manifest.build([("a", 0o100644, b""), ("b", 0o100644, b"")]).serialize()
    lines = m.splitlines(keepends=True)
    with pytest.raises(ManifestError):
        Manifest.parse(lines[0] + lines[2] + lines[1])
