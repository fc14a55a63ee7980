"""What landed on main in session 30 under attack: the fetch that sets a corrupt loose object
aside (``store.fetchdir.fetch_refspecs``), sync's reading of the tracking branch's reflog,
``GitTooOld``, the moves of the typing branch and the tests the suite branch made faster.

Each test is a hole found by attacking them, kept closed: real git, real repositories, in
process where it can be.
"""

from __future__ import annotations

from conftest import Site
from test_damage import loose_object, prepare


def test_a_corrupt_commit_the_remote_does_not_have_is_not_set_aside(site: Site) -> None:
    """The person's own commit, not pushed yet, whose loose object is truncated: git's fetch
    for a push dies on it ("corrupt loose object"). It was moved into .git/pub/quarantine
    although the remote has no copy to fetch: the branch then named a missing object, the
    fetch failed all the same, and the error blamed the remote ("did not send all necessary
    objects"). A set-aside that the fetch made again does not heal is undone: the object is
    where it was, and git's own words about it are the error."""
    (site.path / "mine.txt").write_text("mine\n")
    site.git("add", "mine.txt")
    site.git("commit", "-qm", "mine")
    tip = site.git("rev-parse", "HEAD").strip()
    obj = loose_object(site, tip)
    sound = obj.read_bytes()
    obj.chmod(0o644)
    obj.write_bytes(sound[: len(sound) // 2])
    prepare(site, "k1", "posts/k1.md")
    try:
        r = site.call("push")
        assert r.code == 5, r.out + r.err
        assert obj.is_file(), r.out + r.err  # still where it was, as it was
        assert obj.read_bytes() == sound[: len(sound) // 2]
        said = r.out + r.err
        assert f"corrupt loose object '{tip}'" in said, said
        assert "did not send all necessary objects" not in said, said
    finally:  # the person's repair, for the fixture's fsck
        obj.parent.mkdir(exist_ok=True)
        obj.write_bytes(sound)
