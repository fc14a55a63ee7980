"""Promise 1 for prepare and the local commit: SIGKILL at every named crash point, then rerun.

Each test kills ``git pub prepare`` at one point (``GITPUB_CRASH_AT``), reruns it, and checks
that the job ends exactly where an uninterrupted run ends: LOCAL_COMMITTED, one content commit,
the same tree, phases that were recorded before the crash not run again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Site

from gitpub.core.crashpoints import CRASH_POINTS

ARTICLE = "---\ntitle: Crash test\n---\n\n# Crash test\n\n崩溃之后再来一次。\n"
LOCAL_POINTS = [p for p in CRASH_POINTS if p.startswith(("prepare.", "commit."))]


def configure(site: Site, tmp_path: Path) -> Path:
    """Draft and judge commands that count their runs in files outside the scratch dir."""
    counter = tmp_path / "counts"
    counter.mkdir()
    site.write_config(
        f"draft: 'echo x >> {counter}/draft && mkdir -p \"$GITPUB_OUTPUT/posts\" && "
        "cp \"$GITPUB_SOURCE\" \"$GITPUB_OUTPUT/posts/a.md\"'\n"
        f"judge: 'echo x >> {counter}/judge; cat > /dev/null; echo KEEP'\n")
    return counter


def prepare(site: Site, env: dict[str, str] | None = None) -> tuple[int, str]:
    r = site.run("prepare", "--json", "--key", "crash-key", "--to", "posts/a.md", "-",
                 input=ARTICLE, env=env)
    return r.code, r.out + r.err


def runs(counter: Path, name: str) -> int:
    path = counter / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def content_commits(site: Site) -> list[str]:
    """Commits the job's history keeps alive besides its own chain (its content commits)."""
    (ref,) = site.job_refs()
    out = site.git("rev-list", "--first-parent", "--parents", ref)
    extra: list[str] = []
    for line in out.splitlines():
        extra.extend(line.split()[2:])
    return extra


def test_every_crash_point_is_on_the_path(site: Site, tmp_path: Path) -> None:
    configure(site, tmp_path)
    trace = tmp_path / "trace"
    code, out = prepare(site, {"GITPUB_CRASH_TRACE": str(trace)})
    assert code == 0, out
    hit = trace.read_text().split()
    missing = [p for p in LOCAL_POINTS if p not in hit]
    assert not missing, f"crash points never reached: {missing}"


@pytest.mark.parametrize("point", LOCAL_POINTS)
def test_kill_then_rerun_ends_like_an_uninterrupted_run(
        site: Site, tmp_path: Path, point: str) -> None:
    counter = configure(site, tmp_path)
    code, out = prepare(site, {"GITPUB_CRASH_AT": point})
    assert code == -9, f"expected SIGKILL at {point}: {out}"
    code, out = prepare(site)
    assert code == 0, out
    state = site.run("status", "--json", site.run("status", "--all", "--json").json()
                     ["jobs"][0]["job_id"]).json()
    assert state["state"] == "LOCAL_COMMITTED"
    commits = content_commits(site)
    assert commits == [state["local_commit"]], "exactly one content commit"
    assert site.git("show", f"{commits[0]}:posts/a.md") == ARTICLE
    assert site.git("rev-parse", f"{commits[0]}^") == site.git("rev-parse", "origin/main")
    after_draft = LOCAL_POINTS.index(point) >= LOCAL_POINTS.index("prepare.draft-recorded")
    after_judge = LOCAL_POINTS.index(point) >= LOCAL_POINTS.index("prepare.judge-recorded")
    assert runs(counter, "draft") == (1 if after_draft else 2 if point == "prepare.draft-ran"
                                      else 1)
    assert runs(counter, "judge") <= (1 if after_judge else 2)
    assert len(site.job_refs()) == 1


@pytest.mark.slow
def test_repeated_kills_at_successive_points(site: Site, tmp_path: Path) -> None:
    """One job killed at every point in turn still ends with one commit, drafted once."""
    counter = configure(site, tmp_path)
    for point in LOCAL_POINTS:
        code, out = prepare(site, {"GITPUB_CRASH_AT": point})
        assert code in (-9, 0), out
    code, out = prepare(site)
    assert code == 0, out
    assert len(content_commits(site)) == 1
    assert runs(counter, "draft") <= 2


def test_crash_inside_commit_goes_through_recovering(site: Site, tmp_path: Path) -> None:
    configure(site, tmp_path)
    code, _ = prepare(site, {"GITPUB_CRASH_AT": "commit.objects-written"})
    assert code == -9
    code, out = prepare(site)
    assert code == 0, out
    (ref,) = site.job_refs()
    log = site.run("log", "--json", ref.rsplit("/", 1)[1]).json()["events"]
    states = [e["to"] for e in log]
    assert states[-3:] == ["RECOVERING", "LOCAL_COMMITTING", "LOCAL_COMMITTED"]
