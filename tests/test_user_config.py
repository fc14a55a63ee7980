"""The person's git configuration must not change what gitpub reads from git.

gitpub parses the output of the git it runs (trailers, tree listings, refs, status, push
reports) and has git check its own messages (``git interpret-trailers``). Every key below, set in
the user's ``~/.gitconfig``, changes the output of some git command for the person; with each
of them set (keys that cannot interfere share a run), a whole round — ``prepare``, ``push``,
``sync`` of a hand commit and of uncommitted content, ``status``, ``confirm`` —
must end as it does without (issue 21).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import Site, git
from test_delivery import article, prepare

from gitpub.proof import trailers

#: Configuration that changes some git output a person sees. Each run sets one key that bears
#: on how git reads a message (``core.commentChar``, ``commit.cleanup``, ``trailer.*``,
#: ``i18n.*``) — two values of one key, or two ``trailer.<token>.key`` aliases that could
#: shadow each other, never share a run — with keys of other kinds beside it: the keys that
#: shape listings, colours and reports (which gitpub's ``-z`` plumbing should never see), and
#: one more message key from another family. No key in a run undoes another's effect on git's
#: reading, so each key's failure still shows: a comment character or a cleanup hides lines
#: whatever the colours; an ``encoding`` header is in the raw commit whatever the trailers.
COLOURS = (("color.ui", "always"), ("color.diff", "always"), ("color.status", "always"),
           ("color.push", "always"), ("color.remote", "always"), ("color.advice", "always"))
LISTINGS = (("core.quotePath", "false"), ("diff.renames", "copies"),
            ("status.renames", "true"), ("status.showUntrackedFiles", "no"),
            ("diff.noprefix", "true"), ("core.precomposeUnicode", "true"))
LOGS = (("log.decorate", "full"), ("log.showSignature", "true"), ("format.pretty", "fuller"),
        ("core.abbrev", "4"), ("grep.patternType", "perl"))
REPORTS = (("core.abbrev", "no"), ("advice.pushNonFFCurrent", "false"),
           ("advice.statusHints", "false"), ("fetch.output", "compact"),
           ("fetch.prune", "true"), ("push.default", "nothing"))
HOSTILE: list[tuple[tuple[str, str], ...]] = [
    (("core.commentChar", ";"), ("i18n.commitEncoding", "ISO-8859-1"), *COLOURS),
    (("core.commentChar", "auto"), ("i18n.logOutputEncoding", "ISO-8859-1"), *LISTINGS),
    # every "Blog-…" line a comment to git
    (("core.commentChar", "B"), ("trailer.sign.key", "Signed-off-by"),
     ("core.ignoreCase", "true")),
    # the manifest paragraph's "gitpub-manifest v1" a comment
    (("core.commentChar", "g"), ("trailer.separators", ":="), *LOGS),
    (("core.commentString", "//"), ("trailer.where", "start"),
     ("trailer.ifExists", "replace"), ("trailer.ifMissing", "doNothing"), *REPORTS),
    # "job: x" read as "Blog-Job-Id: x"
    (("commit.cleanup", "scissors"), ("trailer.job.key", "Blog-Job-Id")),
    # our key written back as another
    (("commit.cleanup", "verbatim"), ("trailer.blog-job-id.key", "Job")),
]
#: No key set twice in a run (a second value would hide the first).
assert all(len({k for k, _ in c}) == len(c) for c in HOSTILE)


def plain_git(cwd: Path, *args: str, input: bytes | None = None) -> bytes:
    """The test's own readings: a git without the person's configuration."""
    return subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True,
                          check=True, env={**os.environ, "HOME": os.devnull,
                                           "XDG_CONFIG_HOME": os.devnull}).stdout


#: A person's message whose last paragraph git reads as trailers only when ``;`` starts a
#: comment (``core.commentChar``): without, one of its two lines is no trailer, so there is
#: no trailer block — and gitpub's proof must go where git without configuration finds it.
HAND_MESSAGE = ("Fix the welcome page\n\n"
                "B-sides: not a trailer of ours\n"
                "job: not a job id\n\n"
                "; a line some tools take for a comment\n"
                "Reviewed-by: Test Reviewer <reviewer@example.com>\n")


@pytest.mark.parametrize("config", HOSTILE,
                         ids=[",".join(f"{k}={v}" for k, v in c) for c in HOSTILE])
def test_a_whole_round_ends_the_same_under_the_users_git_config(
        site: Site, config: tuple[tuple[str, str], ...]) -> None:
    home = Path(site.env["HOME"])
    with (home / ".gitconfig").open("a") as f:
        for key, value in config:
            section, _, name = key.rpartition(".")
            head, _, sub = section.partition(".")
            f.write(f'[{head} "{sub}"]\n' if sub else f"[{head}]\n")
            f.write(f'\t{name} = "{value}"\n')
    for key, value in config:
        assert git(site.path, "config", "--global", key) == value + "\n"
    # prepare and push: a published job, its trailers as git reads them
    job = prepare(site, "config", "posts/café.md", article("café"))
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert plain_git(site.remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)",
                     "main").decode().split() == [job["job_id"]]
    # sync: a hand commit whose message has comment-like lines and a trailer, and an
    # uncommitted change of an article with a name that is not ASCII
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nFixed.\n")
    site.git("add", "posts/welcome.md")
    site.git("-c", "core.commentChar=#", "-c", "commit.cleanup=verbatim", "commit", "-q",
             "-F", "-", input=HAND_MESSAGE.encode())
    hand = site.git("rev-parse", "HEAD").strip()
    (site.path / "posts/naïve.md").write_text(article("naïve"))
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["published", "published"], r.out
    published = plain_git(site.remote, "cat-file", "commit", "main~1")
    assert HAND_MESSAGE.encode() + b"\ngitpub-manifest v1\n" in published, published
    last = plain_git(site.remote, "cat-file", "commit", "main")
    assert b"encoding" not in last.partition(b"\n\n")[0], last
    for commit in ("main", "main~1", "main~2"):
        message = plain_git(site.remote, "cat-file", "commit", commit).partition(b"\n\n")[2]
        found = trailers.read_pub_trailers(message, "Blog")
        assert found is not None, message
        # as a git without the person's configuration reads them: the same
        plain = plain_git(site.path, "interpret-trailers", "--parse", input=message)
        assert f"Blog-Job-Id: {found.job_id}\n".encode() in plain, plain
    assert (site.path / "posts/naïve.md").read_text() == article("naïve")
    assert site.git("status", "--porcelain", "-z") == ""
    assert hand != site.git("rev-parse", "HEAD").strip()  # the branch took the published one
    # status and confirm: nothing pending, every publication verified
    r = site.call("status", "--json")
    assert r.code == 0 and r.json()["jobs"] == [], r.out + r.err
    r = site.call("confirm", "--json")
    assert r.code == 0, r.out + r.err
