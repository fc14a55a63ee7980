"""The cache of the parsed ``.gitpub.yaml`` (``config.load``): keyed by the file's exact bytes,
never trusted beyond them, and never a different configuration than parsing gives.

Each test compares ``load_config`` with a cache directory against the plain parse of the file
(``reference``: read in text mode, as gitpub always read it, then parsed): the same Config, or
the same error, whether the cache is missing, fresh, stale, damaged or foreign.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config import FULL

from gitpub.config import load
from gitpub.config.load import CACHE_FILE, load_config, parse_config
from gitpub.config.model import Config
from gitpub.core.errors import CONFIG_FILE, ConfigError


def reference(root: Path) -> Config | str:
    """The configuration as gitpub read it before the cache: text mode, then the parse; an
    error as its message."""
    try:
        with open(root / CONFIG_FILE, encoding="utf-8-sig") as file:
            text = file.read()
    except UnicodeDecodeError as e:
        return f"{CONFIG_FILE}: not valid UTF-8 (byte {e.start})"
    try:
        return parse_config(text, CONFIG_FILE)
    except ConfigError as e:
        return e.message


def loaded(root: Path, cache_dir: Path | None) -> Config | str:
    try:
        return load_config(root, cache_dir)
    except ConfigError as e:
        return e.message


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """A working tree and its ``.git/pub``."""
    pub = tmp_path / ".git" / "pub"
    pub.mkdir(parents=True)
    return tmp_path, pub


def write(root: Path, data: bytes | str) -> None:
    (root / CONFIG_FILE).write_bytes(data.encode() if isinstance(data, str) else data)


def cached_record(pub: Path) -> dict[str, object]:
    record = json.loads((pub / CACHE_FILE).read_text(encoding="ascii"))
    assert isinstance(record, dict)
    return record


def test_a_parse_is_cached_and_the_cache_gives_the_same_config(site: tuple[Path, Path]) -> None:
    root, pub = site
    write(root, FULL)
    first = load_config(root, pub)
    assert first == reference(root)
    record = cached_record(pub)
    assert record["value"] == json.loads(json.dumps(record["value"]))
    assert load_config(root, pub) == first  # from the cache
    written = (pub / CACHE_FILE).read_text(encoding="ascii")
    assert written == json.dumps(record, separators=(",", ":")) + "\n"


def test_a_hit_reads_no_yaml(site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is used (not silently missed): with the YAML reader gone, the file's cached
    value still gives its Config; a changed file needs the reader again."""
    from gitpub.config import yamlread

    root, pub = site
    write(root, FULL)
    first = load_config(root, pub)

    def no_yaml(text: str, source: str) -> object:
        raise AssertionError("the YAML reader ran")

    monkeypatch.setattr(yamlread, "load_yaml", no_yaml)
    assert load_config(root, pub) == first
    write(root, FULL + "\n")
    with pytest.raises(AssertionError, match="the YAML reader ran"):
        load_config(root, pub)


def test_the_cache_is_keyed_by_the_exact_bytes(site: tuple[Path, Path]) -> None:
    root, pub = site
    write(root, "remote: upstream\n")
    assert load_config(root, pub).remote == "upstream"
    write(root, "remote: upstreaM\n")  # same size; the time stamps are not what counts
    assert load_config(root, pub).remote == "upstreaM"
    write(root, "remote: upstream\r\n")
    assert load_config(root, pub).remote == "upstream"
    assert cached_record(pub)["value"] == {"remote": "upstream"}


def test_without_a_pub_dir_nothing_is_written(tmp_path: Path) -> None:
    write(tmp_path, "branch: live\n")
    assert load_config(tmp_path, tmp_path / "absent").branch == "live"
    assert not (tmp_path / "absent").exists()
    assert load_config(tmp_path).branch == "live"  # and without a cache directory at all


def _damaged(record: dict[str, object], how: str) -> bytes:
    if how == "garbage":
        return b"\x00\xff not json"
    if how == "truncated":
        return json.dumps(record).encode()[:-7]
    if how == "empty":
        return b""
    if how == "a list":
        return b"[1, 2]"
    changed = dict(record)
    if how == "another value, same check":
        changed["value"] = {"remote": "evil"}
    elif how == "another file's key":
        changed["sha256"] = "0" * 64
    elif how == "another version":
        changed["version"] = 2
    elif how == "another gitpub":
        changed["gitpub"] = "0.0.0"
    elif how == "another format":
        changed["format"] = "something else"
    elif how == "an extra key":
        changed["extra"] = 1
    elif how == "a missing key":
        del changed["check"]
    elif how == "a string as the value":
        changed["value"] = "remote: upstream"
    elif how == "an infinite number":
        return json.dumps(record).replace('"value":{', '"value":{"x":Infinity,').encode()
    return json.dumps(changed).encode()


@pytest.mark.parametrize("how", [
    "garbage", "truncated", "empty", "a list", "another value, same check",
    "another file's key", "another version", "another gitpub", "another format", "an extra key",
    "a missing key", "a string as the value", "an infinite number"])
def test_a_damaged_or_foreign_cache_is_ignored_and_replaced(site: tuple[Path, Path],
                                                              how: str) -> None:
    root, pub = site
    write(root, "remote: upstream\nbranch: live\n")
    load_config(root, pub)
    good = cached_record(pub)
    (pub / CACHE_FILE).write_bytes(_damaged(good, how))
    assert load_config(root, pub) == reference(root)
    assert cached_record(pub) == good  # parsed again, and written again


def test_a_cache_for_other_bytes_is_never_used(site: tuple[Path, Path]) -> None:
    """A well-formed record (the right check) for another file: the file's own bytes decide."""
    root, pub = site
    write(root, "remote: other\n")
    load_config(root, pub)
    foreign = (pub / CACHE_FILE).read_bytes()
    write(root, "remote: upstream\n")
    (pub / CACHE_FILE).write_bytes(foreign)
    assert load_config(root, pub).remote == "upstream"


def test_an_unreadable_cache_is_ignored(site: tuple[Path, Path]) -> None:
    root, pub = site
    write(root, "remote: upstream\n")
    (pub / CACHE_FILE).mkdir()
    assert load_config(root, pub).remote == "upstream"


def test_a_link_at_the_temporary_name_is_not_followed(site: tuple[Path, Path]) -> None:
    """The cache is written through a new file: a symbolic link found at its temporary name
    (another user's trap in a shared ``.git/pub``, a leftover) is replaced, never written
    through."""
    import os

    root, pub = site
    victim = root / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    os.symlink(victim, pub / f"{CACHE_FILE}.{os.getpid()}.tmp")
    write(root, "remote: upstream\n")
    assert load_config(root, pub).remote == "upstream"
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert cached_record(pub)["value"] == {"remote": "upstream"}


def test_an_oversized_cache_file_is_not_read(site: tuple[Path, Path]) -> None:
    """A cache file far larger than any this writes (padding after a valid record) is not
    read whole, and is replaced."""
    root, pub = site
    write(root, "remote: upstream\n")
    load_config(root, pub)
    good = (pub / CACHE_FILE).read_bytes()
    (pub / CACHE_FILE).write_bytes(good.rstrip(b"\n") + b" " * (2 << 20) + b"\n")
    assert load_config(root, pub).remote == "upstream"
    assert (pub / CACHE_FILE).read_bytes() == good


def test_an_invalid_file_is_never_cached(site: tuple[Path, Path]) -> None:
    root, pub = site
    for text in ("retry: {max_attempts: three}\n", "a: [\n", "remote: \xff\n"):
        write(root, text.encode("latin-1"))
        assert loaded(root, pub) == reference(root)
        assert isinstance(reference(root), str)
        assert not (pub / CACHE_FILE).exists()


@pytest.mark.parametrize("value", [
    datetime.date(2026, 1, 1), {1: "a"}, {"a": {2.5: "b"}}, [b"x"], {"a", "b"}, ("a",),
    float("inf"), float("nan"), {"a": [float("-inf")]}, object()])
def test_only_values_json_gives_back_exactly_are_cached(value: object) -> None:
    assert load._as_json(value) is None


def test_json_exact_values_are_cached_exactly() -> None:
    value = {"a": [1, 1.0, -0.0, 1e300, True, None, "\ud800", "é", {"": []}], "b": 10**30}
    text = load._as_json(value)
    assert text is not None
    back = json.loads(text)
    assert back == value
    assert [type(x) for x in back["a"]] == [type(x) for x in value["a"]]  # type: ignore[index]


_BYTES = st.lists(st.sampled_from([
    b"remote: upstream", b"branch: live", b"\n", b"\r", b"\r\n", b"\xef\xbb\xbf", b"\xff",
    b"  ", b"# \xc3\xa9", b"articles: ['a/*.md']", b"node: n1", b"'", b'"', b"\xe4\xb8\xad",
    b"retry: {max_attempts: 3}", b"a: &x [1]\n", b"b: *x", b"\t", b":", b"- ",
]), max_size=10).map(b"".join)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_BYTES)
def test_any_file_reads_as_it_always_did(site: tuple[Path, Path], data: bytes) -> None:
    """Whatever the bytes (BOM, CR, CRLF, invalid UTF-8, invalid YAML): the same Config or the
    same error as the text-mode read and parse, with the cache missing, written, or used."""
    root, pub = site
    write(root, data)
    (pub / CACHE_FILE).unlink(missing_ok=True)
    expected = reference(root)
    assert loaded(root, None) == expected
    assert loaded(root, pub) == expected  # a miss (written when valid)
    assert loaded(root, pub) == expected  # a hit
