"""The git backend of issue 21 under attack: what the person's git configuration and
environment make git do, a repository changed by the person's own git while a command runs.

Each test is a hole found by attacking the backend (``git cat-file``, ``update-ref --stdin``,
the network segment, the checkout), kept closed: real git, real repositories, in process.
"""

from __future__ import annotations

from conftest import Site, git
from test_delivery import article, prepare


def test_a_remote_configured_as_a_mirror_still_takes_gitpubs_pushes(site: Site) -> None:
    """``remote.origin.mirror=true`` (a clone that mirrors itself to a backup, say) makes
    every ``git push origin <refspec>`` die: "--mirror can't be combined with refspecs".
    Each run spent an attempt on it and left the job waiting (exit 5), for good. gitpub's
    pushes name their refs exactly: they push those, never a mirror of every ref."""
    site.git("config", "remote.origin.mirror", "true")
    site.git("tag", "draft")  # a mirror push would send it; gitpub's must not
    job = prepare(site, "mirror", "posts/mirror.md", article("mirror"))
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out
    assert git(site.remote, "show", "main:posts/mirror.md") == article("mirror")
    assert git(site.remote, "for-each-ref", "refs/tags", "refs/remotes") == ""
    assert f"refs/pub/jobs/{job['job_id']}" in git(site.remote, "for-each-ref")
    checks = {c["name"]: c for c in site.call("doctor", "--json").json()["checks"]}
    assert checks["remote"]["status"] == "ok", checks["remote"]  # its push --dry-run too
