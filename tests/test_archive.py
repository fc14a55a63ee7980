"""Finished jobs folded into the archive (``refs/pub/archive``): on a git daemon remote, with
kills at every crash point of the fold, two clones folding at once, and keys found after.

At every step each job must be found — in its job ref or in the archive — and after the next
fold in the archive only, once; every repository passes ``git fsck --strict`` (the fixture).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from conftest import Site, git, set_up_once, spawn, wait_stopped
from netfaults import GitDaemon
from test_delivery import article, prepare, remote_job_ids
from test_shared import branch_tip, node

from gitpub.core.crashpoints import CRASH_POINTS

JOBS = "refs/pub/jobs/"
ARCHIVE = "refs/pub/archive"
FOLD = "archive_after: 1\n"
FOLD_POINTS = [p for p in CRASH_POINTS if p.startswith("fold.")]



def publish(site: Site, keys: list[str]) -> list[str]:
    ids = [str(prepare(site, k, f"posts/{k}.md", article(k))["job_id"]) for k in keys]
    r = site.call("push")
    assert r.code == 0, r.out + r.err
    return ids


def entry(job_id: str) -> str:
    return f"{job_id[0:2]}/{job_id[2:4]}/{job_id}"


def archived_state(site: Site, job_id: str) -> dict[str, object] | None:
    """The job's record in the remote's archive (None: no entry)."""
    out = git(site.remote, "show", f"{ARCHIVE}:{entry(job_id)}/job.json", check=False)
    if not out:
        return None
    data: dict[str, object] = json.loads(out)
    return data


def remote_refs(site: Site) -> dict[str, str]:
    out = git(site.remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/pub/")
    return dict(line.split()[::-1] for line in out.splitlines())  # sha -> name


def remote_job_refs(site: Site) -> list[str]:
    out = git(site.remote, "for-each-ref", "--format=%(refname)", JOBS)
    return [line.removeprefix(JOBS) for line in out.split()]


def assert_each_found(site: Site, ids: list[str]) -> None:
    """Every job in its remote job ref or in the remote's archive (both: a crash between the
    steps), and every job shown by this clone as PUBLISHED, with no network needed."""
    refs = set(remote_job_refs(site))
    url = site.git("remote", "get-url", "origin").strip()
    site.git("remote", "set-url", "origin", str(site.path / "no-such-remote"))  # offline
    try:
        for job_id in ids:
            assert job_id in refs or archived_state(site, job_id) is not None, job_id
            shown = site.call("status", "--json", job_id)
            assert shown.code == 0 and shown.json()["state"] == "PUBLISHED", \
                shown.out + shown.err
    finally:
        site.git("remote", "set-url", "origin", url)


def assert_folded(site: Site, ids: list[str], clones: list[Site]) -> None:
    """Every job in the archive only, PUBLISHED at its commit on the branch; no clone keeps a
    job ref of them; each published exactly once."""
    assert remote_job_refs(site) == []
    for job_id in ids:
        state = archived_state(site, job_id)
        assert state is not None and state["state"] == "PUBLISHED", (job_id, state)
        assert git(site.remote, "merge-base", "--is-ancestor", str(state["remote_commit"]),
                   "main", check=False) == ""
    assert sorted(remote_job_ids(site)) == sorted(ids), "each job on the branch exactly once"
    for clone in clones:
        assert clone.git("for-each-ref", JOBS).strip() == "", clone.path


@pytest.mark.slow
def test_reconcile_folds_finished_jobs_into_the_archive(site: Site, daemon: GitDaemon,
                                                        tmp_path: Path) -> None:
    ids = publish(site, ["a", "b", "c"])
    assert sorted(remote_job_refs(site)) == sorted(ids)
    site.write_config(FOLD)
    trace = tmp_path / "packets"
    r = site.run_here("reconcile", env={"GIT_TRACE_PACKET": str(trace)})
    assert r.code == 0, r.out + r.err
    assert "3 finished job(s) folded" in r.err
    assert_folded(site, ids, [site])
    # one push moved the archive and deleted the three job refs, atomically
    pushes = [line for line in trace.read_text("utf-8", "replace").splitlines()
              if "push> " in line and "refs/pub/" in line]
    assert any("atomic" in line for line in pushes), pushes
    assert len(pushes) == 4 and all(any(i in line for line in pushes) for i in ids), pushes
    assert "refs/pub/remote/origin/archive" in site.git("for-each-ref", "refs/pub/remote/")
    # the archive keeps every job's history: log, status and the events work here
    log = site.call("log", "--json", ids[0]).json()
    assert [e["to"] for e in log["events"]][-1] == "PUBLISHED"
    # a fold with nothing new does nothing (no push)
    before = git(site.remote, "rev-parse", ARCHIVE).strip()
    r = site.run_here("reconcile")
    assert r.code == 0 and "folded" not in r.err, r.err
    assert git(site.remote, "rev-parse", ARCHIVE).strip() == before


@pytest.mark.slow
def test_fold_waits_for_archive_after_and_unfinished_jobs_stay(site: Site, daemon: GitDaemon,
                                                               tmp_path: Path) -> None:
    site.write_config("archive_after: 3\n")
    done = publish(site, ["a", "b"])
    assert site.run_here("reconcile").code == 0
    assert git(site.remote, "rev-parse", "-q", "--verify", ARCHIVE, check=False) == "", \
        "two finished jobs: not due"
    conflict = str(prepare(site, "edit", "posts/welcome.md", "# Welcome\n\nMine.\n")["job_id"])
    b = node(site, tmp_path, "node-b")
    (b.path / "posts/welcome.md").write_text("# Welcome\n\nTheirs.\n")
    b.git("commit", "-qam", "their edit")
    b.git("push", "-q", "origin", "HEAD:main")
    r = site.run_here("push")  # three job refs now (two finished): due, folded by the push itself
    assert r.code == 4, r.out + r.err  # the CONFLICT needs a person
    assert "2 finished job(s) folded" in r.err, r.err
    done += publish(site, ["c"])
    r = site.run_here("reconcile")
    assert r.code == 4, r.out + r.err  # the CONFLICT still needs a person
    # c alone is one finished ref: not due again; the unfinished job keeps its ref
    assert sorted(remote_job_refs(site)) == sorted([conflict, done[2]])
    assert sorted(site.git("for-each-ref", "--format=%(refname)", JOBS).split()) == \
        sorted([JOBS + conflict, JOBS + done[2]])
    for job_id in done[:2]:
        assert archived_state(site, job_id) is not None
    assert archived_state(site, conflict) is None


@pytest.mark.slow
@pytest.mark.parametrize("point", FOLD_POINTS)
def test_a_fold_killed_at_each_point_loses_nothing(site: Site, daemon: GitDaemon,
                                                   point: str) -> None:
    """SIGKILL at every crash point of the fold: each job is still found (ref, archive, or
    both), and the next fold leaves each in the archive once."""
    # three published jobs (made once per test process and copied in), then the fold's remote
    ids = set_up_once(site, "archive-fold", lambda t, d: publish(t, ["a", "b", "c"]))
    if point == "fold.archive-pushed":
        git(site.remote, "config", "receive.advertiseAtomic", "false")
    site.write_config(FOLD)
    r = site.run("reconcile", env={"GITPUB_CRASH_AT": point})
    assert r.code == -signal.SIGKILL, r.out + r.err
    assert_each_found(site, ids)
    if point in ("fold.pushed", "fold.noted"):
        assert remote_job_refs(site) == [], "the remote was done in one atomic push"
        assert site.git("for-each-ref", JOBS).strip(), "its job refs are still here"
    if point == "fold.archive-pushed":
        assert sorted(remote_job_refs(site)) == sorted(ids), "archive first, then the refs"
        assert all(archived_state(site, i) is not None for i in ids), "both, for now"
    tip = branch_tip(site)
    r = site.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert branch_tip(site) == tip
    assert_folded(site, ids, [site])
    assert_each_found(site, ids)


@pytest.mark.slow
def test_two_clones_folding_at_once_lose_nothing(site: Site, daemon: GitDaemon,
                                                 tmp_path: Path) -> None:
    """A builds its archive commit and is frozen before its push; B folds everything
    (A's published jobs too, from the remote's refs); resumed, A's compare-and-swap on the
    archive fails, it fetches again and only prunes its own refs. Then both fold again at
    once. Every job of both ends in the archive, once."""
    b = node(site, tmp_path, "node-b", FOLD)
    ids = publish(site, ["a1", "a2"])
    ids += publish(b, ["b1", "b2"])
    site.write_config(FOLD)
    a = spawn(site, "reconcile", env={"GITPUB_PAUSE_AT": "fold.written"})
    try:
        wait_stopped(a.pid)
        r = b.run_here("reconcile")
        assert r.code == 0, r.out + r.err
        assert remote_job_refs(site) == []
        won = git(site.remote, "rev-parse", ARCHIVE).strip()
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=300)
    assert a.returncode == 0, out + err
    assert git(site.remote, "rev-parse", f"{ARCHIVE}~1").strip() == won or \
        git(site.remote, "rev-parse", ARCHIVE).strip() == won, "A built on B's archive"
    ids += publish(site, ["a3"])
    ids += publish(b, ["b3"])
    procs = [spawn(n, "reconcile") for n in (site, b)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, out + err
    for n in (site, b):  # a loser of the last race prunes on its next run
        assert n.run_here("reconcile").code == 0
    assert_folded(site, ids, [site, b])
    for n in (site, b):
        assert_each_found(n, ids)


@pytest.mark.slow
def test_a_key_whose_job_was_archived_is_still_found(site: Site, daemon: GitDaemon,
                                                     tmp_path: Path) -> None:
    b = node(site, tmp_path, "node-b")  # clones from before the publication
    c = node(site, tmp_path, "node-c")
    (job_id,) = publish(site, ["k"])
    site.write_config(FOLD)
    assert site.run_here("reconcile").code == 0
    assert site.git("for-each-ref", JOBS).strip() == ""
    tip = branch_tip(site)
    # here: found offline in the fetched archive
    same = site.call("prepare", "--json", "--key", "k", "--to", "posts/k.md", "-",
                     input=article("k"))
    assert same.code == 0, same.err
    assert same.json()["job_id"] == job_id and same.json()["created"] is False
    assert same.json()["state"] == "PUBLISHED"
    other = site.call("prepare", "--key", "k", "--to", "posts/k.md", "-", input=article("x"))
    assert other.code == 3, other.err
    assert site.call("push", job_id).code == 0
    assert branch_tip(site) == tip and site.git("for-each-ref", JOBS).strip() == ""
    # a clone that never fetched the store: prepare cannot know (offline); delivery finds it
    assert prepare(b, "k", "posts/k.md", article("k"))["job_id"] == job_id
    r = b.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED" and branch_tip(site) == tip
    prepare(c, "k", "posts/k.md", article("other"))
    r = c.call("push", "--json")
    assert r.code == 3, r.out + r.err
    assert r.json()["jobs"][0]["failure_code"] == "key_reused" and branch_tip(site) == tip
    assert remote_job_refs(site) == []
    # B's adopted copy of the archived job is pruned by B's next fold
    b.write_config(FOLD)
    assert b.run_here("reconcile").code == 0
    assert b.git("for-each-ref", JOBS).strip() == ""


@pytest.mark.slow
def test_status_log_resolve_of_an_archived_job_on_any_clone(site: Site, daemon: GitDaemon,
                                                            tmp_path: Path) -> None:
    (job_id,) = publish(site, ["k"])
    site.write_config(FOLD)
    assert site.run_here("reconcile").code == 0
    b = node(site, tmp_path, "node-b")  # never had the job; fetches the store when asked
    shown = b.run_here("status", "--json", job_id[:8])
    assert shown.code == 0 and json.loads(shown.out)["state"] == "PUBLISHED", shown.err
    history = b.call("log", "--json", job_id)
    assert history.code == 0 and history.json()["events"][-1]["to"] == "PUBLISHED"
    r = b.call("resolve", job_id, "--abandon")
    assert r.code == 2 and "PUBLISHED" in r.err, r.err
    assert b.git("for-each-ref", JOBS).strip() == "", "nothing adopted for a finished job"
    assert remote_job_refs(site) == []


@pytest.mark.slow
def test_a_remote_that_refuses_the_archive_keeps_the_job_refs(site: Site, daemon: GitDaemon
                                                              ) -> None:
    ids = publish(site, ["a", "b"])
    hook = site.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n  [ \"$ref\" = refs/pub/archive ] "
                    "&& { echo 'no archive here' >&2; exit 1; }\ndone\nexit 0\n")
    hook.chmod(0o755)
    site.write_config(FOLD)
    r = site.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert "refuses the fold's push" in r.err, r.err
    assert sorted(remote_job_refs(site)) == sorted(ids)
    assert git(site.remote, "rev-parse", "-q", "--verify", ARCHIVE, check=False) == ""
    assert_each_found(site, ids)


# -- a damaged remote archive (issue 23 point 6) ------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("damage", ["blob", "tree", "unknown format"])
def test_a_damaged_remote_archive_jams_nothing_and_is_kept(site: Site, tmp_path: Path,
                                                          damage: str) -> None:
    """Someone points the remote's ``refs/pub/archive`` at something that is no archive: every
    clone still prepares and pushes other jobs, finds archived ones, keeps the last good archive
    (so no gc loses the records), doctor reports it, and ``doctor --fix`` puts the last good
    archive back by compare-and-swap."""
    site.write_config(FOLD)
    site.git("commit", "-qam", "fold at once")
    site.git("push", "-q", "origin", "main")
    folded = publish(site, ["a", "b"])
    assert site.call("reconcile").code == 0
    good = git(site.remote, "rev-parse", ARCHIVE).strip()
    assert archived_state(site, folded[0]) is not None
    if damage == "blob":
        bad = git(site.remote, "hash-object", "-w", "--stdin", input=b"not an archive\n")
    elif damage == "tree":
        bad = git(site.remote, "rev-parse", f"{good}^{{tree}}")
    else:
        tree = git(site.remote, "mktree", input=b"")
        bad = git(site.remote, "commit-tree", tree.strip(), "-m", "no FORMAT")
    git(site.remote, "update-ref", ARCHIVE, bad.strip())
    other = node(site, tmp_path, "other")
    for clone in (site, other):
        job = prepare(clone, f"after-{clone.path.name}", f"posts/after-{clone.path.name}.md",
                      article(clone.path.name))
        r = clone.call("push", str(job["job_id"]))
        assert r.code == 0, r.out + r.err
        assert "refs/pub/archive" in r.err and "is no archive" in r.err, r.err
        if clone is other:
            continue  # a new clone never saw a good archive: only the remote had it
        shown = clone.call("status", "--json", folded[0])
        assert shown.code == 0 and shown.json()["state"] == "PUBLISHED", shown.out
        again = prepare(clone, "a", "posts/a.md", article("a"))  # the key is found
        assert again["job_id"] == folded[0] and again["state"] == "PUBLISHED"
    assert site.git("rev-parse", f"refs/pub/remote/origin/{ARCHIVE.split('/')[-1]}").strip() \
        == good  # the last good archive is kept here: its records stay reachable
    r = site.call("doctor", "--json")
    check = next(c for c in r.json()["checks"] if c["name"] == "remote archive")
    assert check["status"] == "fail" and check["safe_fix"], check
    r = site.call("doctor", "--fix", "--json")
    assert git(site.remote, "rev-parse", ARCHIVE).strip() == good
    assert site.call("reconcile").code == 0


# -- folding in the ordinary flow (issue 23 point 8) --------------------------------------------

@pytest.mark.slow
def test_push_and_prepare_push_fold_without_reconcile(site: Site) -> None:
    """Nobody runs ``reconcile``: finished job refs are folded by the publishing commands
    themselves once ``archive_after`` of them piled up, so the store stays small."""
    site.write_config("archive_after: 3\n")
    site.git("commit", "-qam", "fold after three")
    site.git("push", "-q", "origin", "main")
    ids = []
    for i in range(8):
        if i % 2:
            job = prepare(site, f"k{i}", f"posts/k{i}.md", article(i))
            r = site.call("push", "--json", str(job["job_id"]))
        else:
            r = site.call("prepare", "--json", "--push", "--key", f"k{i}", "--to",
                          f"posts/k{i}.md", "-", input=article(i))
        assert r.code == 0, r.out + r.err
        ids.append(str(r.json()["job_id"] if "job_id" in r.json()
                       else r.json()["jobs"][0]["job_id"]))
        assert len(remote_job_refs(site)) <= 3, (i, remote_job_refs(site))
        assert len(site.job_refs()) <= 3, (i, site.job_refs())
    assert sum(archived_state(site, j) is not None for j in ids) >= 5
    assert_each_found(site, ids)


# -- a store an older gitpub left unfolded: many finished job refs ----------------------------

def finished_copies(site: Site, count: int) -> list[str]:
    """``count`` more PUBLISHED jobs, copies of one published for real (its tree, another
    record), written in one ``git fast-import`` as loose job refs here and pushed: what an
    older gitpub, which did not fold, left behind."""
    from gitpub.core.record import parse_record
    from gitpub.store.jobs import job_id_for_key

    seed = publish(site, ["seed"])[0]
    ref = JOBS + seed
    record = parse_record(site.git("show", f"{ref}:job.json").encode())
    message = site.git("log", "-1", "--format=%B", ref)
    entries = [line.split(None, 3) for line in site.git("ls-tree", ref).splitlines()]
    ids, chunks = [], []
    for k in range(count):
        job_id = job_id_for_key(f"old-{k}")
        ids.append(job_id)
        data = record.evolve(job_id=job_id, idempotency_key=f"old-{k}").to_json()
        chunks += [f"commit {JOBS}{job_id}\ncommitter gitpub <gitpub@localhost> "
                   f"{1_700_000_000 + k} +0000\ndata {len(message.encode())}\n{message}\n"
                   .encode()]
        chunks += [f"M {mode} {sha} {name}\n".encode() for mode, _, sha, name in entries
                   if name != "job.json"]
        chunks += [f"M 100644 inline job.json\ndata {len(data)}\n".encode(), data, b"\n"]
    site.git("fast-import", "--quiet", input=b"".join(chunks))
    site.git("push", "-q", "origin", f"{JOBS}*:{JOBS}*")
    return [seed, *ids]


def archived_ids(site: Site) -> set[str]:
    out = git(site.remote, "ls-tree", "-r", "-d", "--name-only", ARCHIVE, check=False)
    return {p.split("/")[2] for p in out.splitlines() if p.count("/") == 2}


@pytest.mark.slow
def test_a_fold_of_many_job_refs_is_batched(site: Site, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold of many finished job refs costs git processes per batch, not per job: one push
    and one ref transaction here for each ``FOLD_LIMIT`` jobs, and no git names a job but
    those (counted with the counting git of ``test_procs``; never timed)."""
    from test_procs import starts

    from gitpub.delivery import fold

    ids = finished_copies(site, 99)
    site.write_config("archive_after: 64\n")
    monkeypatch.setattr(fold, "FOLD_LIMIT", 40)
    real = git(site.path, "--exec-path").strip() + "/git"
    bindir, log = tmp_path / "counting-bin", tmp_path / "git-starts.log"
    bindir.mkdir()
    (bindir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" '
                                '"$@"\n')
    (bindir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    log.touch()
    r = site.call("reconcile")
    assert r.code == 0, r.out + r.err
    assert "100 finished job(s) folded, 100 job ref(s) deleted on the remote, 100 here" \
        in r.err, r.err
    assert "archive: 40 of 100 finished job(s) folded so far" in r.err, r.err
    ran = starts(log)
    naming = [line for line in ran if any(i in line for i in ids)]
    assert len(naming) == 3 and all(line.startswith("push ") for line in naming), naming
    transactions = [line for line in ran if "update-ref" in line and "--stdin" in line]
    assert len(transactions) <= 3 + 6, ran  # one per batch, and the command's own few
    assert len(ran) < 60, ran  # the fold of 100 jobs: about 20 git processes, plus the rest
    assert archived_ids(site) == set(ids)
    assert remote_job_refs(site) == [] and site.job_refs() == {}


@pytest.mark.slow
def test_a_publish_takes_on_a_bounded_fold_and_reconcile_the_rest(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """A publish over a store an older gitpub left unfolded folds a bounded number of jobs
    (``fold.flow_limit``: here 30) and says how many are left; the next publish goes on;
    ``reconcile`` folds the rest. Each job is in its ref or in the archive all along, and an
    archived job still reads as PUBLISHED."""
    from gitpub.delivery import fold

    ids = finished_copies(site, 69)
    site.write_config("archive_after: 10\n")
    monkeypatch.setattr(fold, "FLOW_BUDGET", 0)
    monkeypatch.setattr(fold, "FLOW_LEAST", 30)

    def publish_one(key: str) -> str:
        ids.append(str(prepare(site, key, f"posts/{key}.md", article(key))["job_id"]))
        r = site.call("push")
        assert r.code == 0, r.out + r.err
        held = archived_ids(site) | set(remote_job_refs(site))
        assert set(ids) <= held, set(ids) - held  # each job in its ref or in the archive
        return r.err

    said = publish_one("new1")
    assert len(archived_ids(site)) == 30, said
    assert "archive: 30 finished job(s) folded" in said, said
    assert "archive: 41 more finished job ref(s) left for the next runs; `git pub reconcile` " \
           "folds them all" in said, said
    said = publish_one("new2")
    assert len(archived_ids(site)) == 60 and "archive: 12 more finished job ref(s) left" \
        in said, said
    r = site.call("reconcile")
    assert r.code == 0, r.out + r.err
    assert "12 finished job(s) folded" in r.err and "left" not in r.err, r.err
    assert archived_ids(site) == set(ids)
    assert remote_job_refs(site) == [] and site.job_refs() == {}
    shown = site.call("status", "--json", ids[5])
    assert shown.code == 0 and shown.json()["state"] == "PUBLISHED", shown.out + shown.err


def test_a_publish_folds_fewer_jobs_the_more_refs_each_costs() -> None:
    """``flow_limit``: a store that folds as it goes is folded whole; one of 10,000 refs a few
    dozen jobs a publish, never fewer than ``FLOW_LEAST``."""
    from gitpub.delivery.fold import FLOW_LEAST, FOLD_LIMIT, flow_limit

    def refs(n: int) -> dict[str, str]:
        return {f"{i:08x}": "0" * 40 for i in range(n)}

    assert flow_limit(refs(64), {}, refs(64)) == FOLD_LIMIT
    assert flow_limit(refs(10_000), {}, refs(10_000)) == 24
    assert flow_limit(refs(100_000), {}, refs(100_000)) == FLOW_LEAST
