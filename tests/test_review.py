"""Delivery through review (``delivery.mode: pull_request``, ``gitpub.delivery.review``).

Against a real HTTP stand-in of each forge (``forgekit.ForgeServer``) over the site's bare
remote, with every merge made by real git there: the job's commit goes to its review branch
and one request is opened; the job rests IN_REVIEW until the request is merged — by a merge
commit, a rebase or a squash under the forge's own message, each recognised by content — or
closed (REVIEW). A crash after the branch push or after the request was opened never opens a
second request. The token reaches the forge in its header and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Site, git
from forgekit import REPOSITORY, ForgeServer
from netfaults import GitDaemon
from test_delivery import article, commit_file, other_writer, prepare

from gitpub.git.repo import Repository

TOKEN = "tok-Review-7Hq2xZ91-forge"  # recognised by no rule: only the scrubbing hides it
TOKEN_ENV = "GITPUB_TEST_FORGE_TOKEN"


def review_config(forge: ForgeServer | None, kind: str = "github") -> str:
    if forge is None:
        return ("delivery:\n  mode: pull_request\n  forge: branch\n"
                "  compare_url: 'https://forge.example/example/blog/compare/{base}...{head}'\n")
    return (f"delivery:\n  mode: pull_request\n  forge: {kind}\n  repository: {REPOSITORY}\n"
            f"  api: {forge.api}\n  token_env: {TOKEN_ENV}\n")


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    return TOKEN


@pytest.fixture(params=["github", "gitlab", "gitea"])
def forge(request: pytest.FixtureRequest, site: Site, token: str) -> Iterator[ForgeServer]:
    with ForgeServer(request.param, site.remote, token) as server:
        site.write_config(review_config(server, request.param))
        yield server


def status(site: Site, job_id: str) -> dict[str, object]:
    r = site.call("status", "--json", job_id)
    data: dict[str, object] = r.json()
    return data


def remote_main(site: Site) -> str:
    return git(site.remote, "rev-parse", "main").strip()


def no_token_anywhere(site: Site, forge: ForgeServer | None, *outputs: str) -> None:
    for text in outputs:
        assert TOKEN not in text
    assert TOKEN.encode() not in site.all_objects_text()
    remote_objects = git(site.remote, "cat-file", "--batch-all-objects", "--batch",
                         "--unordered")
    assert TOKEN not in remote_objects
    refs = git(site.path, "for-each-ref") + git(site.remote, "for-each-ref")
    assert TOKEN not in refs
    if forge is not None:
        assert TOKEN not in forge.texts()
    for repo in (site.path / ".git", site.remote):  # logs, config, gitpub's own files
        for f in repo.rglob("*"):
            if f.is_file() and "objects" not in f.relative_to(repo).parts:
                assert TOKEN.encode() not in f.read_bytes(), f


def to_review(site: Site, key: str = "k1", path: str = "posts/hello.md",
              text: str | None = None) -> tuple[str, dict[str, object]]:
    job_id = str(prepare(site, key, path, text or article("hello"))["job_id"])
    before = remote_main(site)
    r = site.call("push", "--json")
    assert r.code == 5, r.out + r.err  # not merged yet: run again later
    assert remote_main(site) == before, "nothing reaches the branch before the review"
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    return job_id, data


def test_push_opens_one_request_and_a_merge_commit_publishes(site: Site,
                                                             forge: ForgeServer) -> None:
    job_id, data = to_review(site)
    review = data["review"]
    assert isinstance(review, dict)
    branch = f"gitpub/{job_id}"
    assert review["branch"] == branch and review["base"] == "main"
    assert review["number"] == 1
    assert review["url"] == f"https://forge.example/{REPOSITORY}/pull/1"
    head = git(site.remote, "rev-parse", f"refs/heads/{branch}").strip()
    assert review["head"] == head == data["local_commit"]
    assert git(site.remote, "show", f"{head}:posts/hello.md") == article("hello")
    assert forge.created() == 1
    pr = forge.requests[0]
    assert (pr.branch, pr.base) == (branch, "main")
    assert job_id in pr.body and pr.title
    # the remote's job store says IN_REVIEW too (the state went with the branch)
    record = json.loads(git(site.remote, "show", f"refs/pub/jobs/{job_id}:job.json"))
    assert record["state"] == "IN_REVIEW" and record["format"] == 2

    r = site.call("push", "--json")  # not merged yet: looked at, nothing opened again
    assert r.code == 5, r.out + r.err
    assert forge.created() == 1
    assert status(site, job_id)["state"] == "IN_REVIEW"

    forge.merge(1, "merge")
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "PUBLISHED"
    assert data["remote_commit"] == head  # the job's own commit, below the merge commit
    assert forge.created() == 1
    assert git(site.remote, "show", "main:posts/hello.md") == article("hello")
    log = site.call("log", "--json", job_id)
    assert log.code == 0
    assert "https://forge.example/example/blog/pull/1" in log.out
    no_token_anywhere(site, forge, r.out, r.err, log.out)


def test_a_squash_under_the_forges_message_is_proven_by_content(site: Site,
                                                                 forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    other = other_writer(Path(site.path).parent, site)
    commit_file(other, "posts/theirs.md", article("theirs"), "their post")  # main moves on
    squash = forge.merge(1, "squash", message="Add hello (#1)")
    assert "Job-Id" not in git(site.remote, "log", "-1", "--format=%B", squash)
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "PUBLISHED"
    assert data["remote_commit"] == squash
    log = site.call("log", job_id)
    assert "merged through review, without its trailers" in log.out
    no_token_anywhere(site, forge, r.out, r.err)


def test_a_squash_with_a_reviewers_edit_is_not_the_jobs_publication(
        site: Site, forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    forge.merge(1, "squash", edit=("posts/hello.md", article("hello, edited")))
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "REVIEW"
    assert data["failure_code"] == "review_merged_other"


def test_a_request_closed_unmerged_stops_in_review(site: Site, forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    forge.close(1)
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "REVIEW"
    assert data["failure_code"] == "review_closed"
    assert "closed without a merge" in str(data["failure_detail"])
    assert forge.created() == 1
    assert git(site.remote, "show", "main:posts/welcome.md")  # main untouched
    assert git(site.remote, "ls-tree", "main", "posts/hello.md") == ""


def test_branch_only_prints_the_compare_url_and_a_merge_publishes(site: Site) -> None:
    site.write_config(review_config(None))
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.call("push")
    assert r.code == 5, r.out + r.err
    url = f"https://forge.example/example/blog/compare/main...gitpub/{job_id}"
    assert url in r.err
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    assert isinstance(data["review"], dict) and data["review"]["url"] == url
    shown = site.call("status")
    assert "IN_REVIEW" in shown.out and url in shown.out
    # a person merges the branch by hand (a fast-forward)
    other = other_writer(Path(site.path).parent, site)
    git(other, "fetch", "-q", "origin")
    git(other, "merge", "-q", "--ff-only", f"origin/gitpub/{job_id}")
    git(other, "push", "-q", "origin", "HEAD:main")
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert status(site, job_id)["state"] == "PUBLISHED"


def test_a_missing_token_stops_before_anything_is_pushed(
        site: Site, forge: ForgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV)
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.call("push")
    assert r.code == 2, r.out + r.err
    assert TOKEN_ENV in r.err
    assert git(site.remote, "for-each-ref", "refs/heads/gitpub/") == ""
    assert forge.calls == []
    assert status(site, job_id)["state"] == "LOCAL_COMMITTED"


@pytest.mark.slow
@pytest.mark.parametrize("point", ["review.pushing-recorded", "review.pushed",
                                   "review.request-opened"])
def test_a_crash_never_opens_a_second_request(site: Site, forge: ForgeServer,
                                              point: str) -> None:
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.run("push", env={"GITPUB_CRASH_AT": point, TOKEN_ENV: TOKEN})
    assert r.code == -9, r.out + r.err
    r = site.run_here("reconcile", env={TOKEN_ENV: TOKEN})
    assert r.code == 5, r.out + r.err
    r = site.run_here("push", env={TOKEN_ENV: TOKEN})
    assert r.code == 5, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    assert isinstance(data["review"], dict) and data["review"]["number"] == 1
    assert forge.created() == 1
    assert len(forge.requests) == 1
    forge.merge(1, "squash")
    r = site.run_here("push", env={TOKEN_ENV: TOKEN})
    assert r.code == 0, r.out + r.err
    assert status(site, job_id)["state"] == "PUBLISHED"
    no_token_anywhere(site, forge, r.out, r.err)


def test_a_rebase_merge_onto_a_moved_branch_publishes(site: Site, forge: ForgeServer) -> None:
    job_id, data = to_review(site)
    other = other_writer(Path(site.path).parent, site)
    commit_file(other, "posts/theirs.md", article("theirs"), "their post")  # main moves on
    tip = forge.merge(1, "rebase")
    assert tip != data["local_commit"]  # a new commit: the forge replayed it
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    shown = status(site, job_id)
    assert shown["state"] == "PUBLISHED"
    assert shown["remote_commit"] == tip  # the rebased copy, proven by its trailers
    assert git(site.remote, "show", "main:posts/theirs.md") == article("theirs")


def test_metrics_and_the_status_list_show_the_jobs_in_review(site: Site,
                                                             forge: ForgeServer) -> None:
    from test_metrics import samples

    job_id, _ = to_review(site)
    m = samples(site.call("metrics").out)
    assert m["gitpub_in_review", ()] == 1
    assert m["gitpub_oldest_in_review_age_seconds", ()] >= 0
    assert m["gitpub_pending_jobs", ()] == 0  # nothing for automation to do
    listed = site.call("status", "--json").json()["jobs"]
    assert [(j["job_id"], j["state"]) for j in listed] == [(job_id, "IN_REVIEW")]
    assert listed[0]["review"]["url"] == f"https://forge.example/{REPOSITORY}/pull/1"
    text = site.call("status", job_id).out
    assert f"request:   https://forge.example/{REPOSITORY}/pull/1" in text
    forge.merge(1, "merge")
    assert site.call("push").code == 0
    assert samples(site.call("metrics").out)["gitpub_in_review", ()] == 0


@pytest.mark.slow
@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_confirm_accepts_a_squash_by_content_and_a_merge_waiting_to_be_recorded(
        site: Site, forge: ForgeServer, tmp_path: Path) -> None:
    from test_confirm import ci_clone

    job_id, _ = to_review(site)
    forge.merge(1, "merge")  # the job's commit is on the branch; its record says IN_REVIEW
    r = ci_clone(site, tmp_path, "ci0").run("confirm", "--json")
    assert r.code == 0, r.out + r.err
    assert any(f"pending: job {job_id}" in line for line in r.json()["remarks"]), r.out
    assert site.call("push").code == 0

    second, _ = to_review(site, "k2", "posts/second.md", article("second"))
    squash = forge.merge(2, "squash", message="Second post (#2)")
    assert site.call("push").code == 0
    assert status(site, second)["remote_commit"] == squash
    r = ci_clone(site, tmp_path, "ci1").run("confirm", "--json")
    assert r.code == 0, r.out + r.err


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_confirm_refuses_a_reviewed_record_naming_other_content(
        site: Site, forge: ForgeServer, tmp_path: Path) -> None:
    from test_confirm import ci_clone
    from test_store_check import JOBS, attacker, forged_state, root_commit

    job_id, _ = to_review(site)
    forge.merge(1, "squash")
    assert site.call("push").code == 0
    assert ci_clone(site, tmp_path, "ci0").run("confirm").code == 0
    evil = attacker(site, tmp_path)
    wrong = root_commit(site)  # on the branch, claims nothing, holds other files
    with Repository.discover(evil) as repo:
        forged = forged_state(repo, git(evil, "rev-parse", JOBS + job_id).strip(),
                              remote_commit=wrong)
    git(evil, "push", "-q", "-f", "origin", f"{forged}:{JOBS}{job_id}")
    r = ci_clone(site, tmp_path, "ci1").run("confirm", "--json")
    assert r.code == 1, r.out + r.err
    assert r.json()["bad"] == [wrong], r.out
    (bad,) = [c for c in r.json()["commits"] if not c["ok"]]
    assert "is not its publication by content" in bad["problems"][0], bad


def test_an_unknown_outcome_of_the_create_is_found_by_the_next_run(
        site: Site, forge: ForgeServer) -> None:
    forge.script = ["POST:500"]  # the request is opened, the answer says 500
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.call("push")
    assert r.code == 5, r.out + r.err
    assert "the next run asks again" in r.err
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    assert isinstance(data["review"], dict) and data["review"]["number"] is None
    r2 = site.call("push")
    assert r2.code == 5, r2.out + r2.err
    data = status(site, job_id)
    assert isinstance(data["review"], dict) and data["review"]["number"] == 1
    assert forge.created() == 1 and len(forge.requests) == 1
    no_token_anywhere(site, forge, r.out, r.err, r2.out, r2.err)


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_a_refused_request_goes_to_review_and_a_refused_token_stops(
        site: Site, forge: ForgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    forge.script = ["POST:422"]
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    data = status(site, job_id)
    assert (data["state"], data["failure_code"]) == ("REVIEW", "review_refused")
    assert "[REDACTED:forge-token]" in str(data["failure_detail"])
    no_token_anywhere(site, forge, r.out, r.err)

    monkeypatch.setenv(TOKEN_ENV, "tok-not-the-right-one-55")
    second = str(prepare(site, "k2", "posts/two.md", article("two"))["job_id"])
    r = site.call("push")
    assert r.code == 2, r.out + r.err
    assert "refused to open its request" in r.err and "tok-not-the-right-one-55" not in r.err
    assert status(site, second)["state"] == "IN_REVIEW"  # its branch is pushed: opened later
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert site.call("push").code == 5
    review = status(site, second)["review"]
    assert isinstance(review, dict) and review["number"] == 2


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_one_run_checks_at_most_checks_per_run_requests(site: Site,
                                                        forge: ForgeServer) -> None:
    site.write_config(review_config(forge) + "  checks_per_run: 1\n")
    first, _ = to_review(site, "k1", "posts/one.md", article("one"))
    second, _ = to_review(site, "k2", "posts/two.md", article("two"))
    forge.merge(1, "merge")
    forge.merge(2, "merge")
    r = site.call("push")
    assert r.code == 5, r.out + r.err
    assert "delivery.checks_per_run" in r.err
    states = sorted(str(status(site, j)["state"]) for j in (first, second))
    assert states == ["IN_REVIEW", "PUBLISHED"]
    assert site.call("push").code == 0
    assert {status(site, j)["state"] for j in (first, second)} == {"PUBLISHED"}


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_abandon_waits_for_the_request_to_be_closed(site: Site, forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    r = site.call("resolve", job_id, "--abandon")
    assert r.code == 2, r.out + r.err
    assert f"https://forge.example/{REPOSITORY}/pull/1 is open" in r.err
    assert status(site, job_id)["state"] == "IN_REVIEW"
    forge.close(1)
    r = site.call("resolve", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    data = status(site, job_id)
    assert (data["state"], data["failure_code"]) == ("SKIPPED", "abandoned")


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_abandon_of_a_merged_request_records_its_publication(site: Site,
                                                             forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    squash = forge.merge(1, "squash")
    r = site.call("resolve", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    assert "not abandoned" in r.out + r.err
    data = status(site, job_id)
    assert (data["state"], data["remote_commit"]) == ("PUBLISHED", squash)


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_dry_run_says_where_a_reviewed_job_goes(site: Site, forge: ForgeServer) -> None:
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    r = site.call("push", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert f"to the review branch gitpub/{job_id} and open a request" in r.out
    assert forge.calls == []
    assert site.call("push").code == 5
    r = site.call("push", "--dry-run", "--json")
    (step,) = r.json()["jobs"]
    assert step["action"] == "wait" and "/pull/1" in step["detail"]


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_resolve_retry_after_a_closed_request_opens_a_new_one(site: Site,
                                                             forge: ForgeServer) -> None:
    job_id, _ = to_review(site)
    forge.close(1)
    assert site.call("push").code == 4
    r = site.call("resolve", job_id, "--retry", "--push")
    assert r.code == 5, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    assert isinstance(data["review"], dict) and data["review"]["number"] == 2
    assert forge.created() == 2
    forge.merge(2, "squash")
    assert site.call("push").code == 0
    assert status(site, job_id)["state"] == "PUBLISHED"


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_the_review_branch_push_passes_gitpubs_own_pre_push_hook(site: Site,
                                                                 forge: ForgeServer) -> None:
    assert site.call("hooks", "install").code == 0
    job_id, data = to_review(site)
    assert data["local_commit"] == git(site.remote, "rev-parse", f"gitpub/{job_id}").strip()
    forge.merge(1, "squash")
    assert site.call("push").code == 0
    assert status(site, job_id)["state"] == "PUBLISHED"


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_doctor_checks_the_forges_token(site: Site, forge: ForgeServer,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    checks = {c["name"]: c for c in site.call("doctor", "--json").json()["checks"]}
    assert checks["review"]["status"] == "ok" and TOKEN_ENV in checks["review"]["message"]
    monkeypatch.delenv(TOKEN_ENV)
    r = site.call("doctor", "--json")
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert checks["review"]["status"] == "fail" and TOKEN_ENV in checks["review"]["fix"]
    assert forge.calls == []


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_another_clone_records_the_squash_and_this_one_adopts_it(
        site: Site, forge: ForgeServer, tmp_path: Path) -> None:
    job_id, _ = to_review(site)
    squash = forge.merge(1, "squash")
    path = other_writer(tmp_path, site, "reviewer")
    other = Site(path, site.remote, site.env)
    other.write_config(review_config(forge))
    r = other.call("push", job_id)  # found in the remote's job store, checked there
    assert r.code == 0, r.out + r.err
    assert status(other, job_id)["remote_commit"] == squash
    record = json.loads(git(site.remote, "show", f"refs/pub/jobs/{job_id}:job.json"))
    assert (record["state"], record["remote_commit"]) == ("PUBLISHED", squash)
    r = site.call("reconcile")  # this clone adopts the remote's record: proven by content
    assert r.code == 0, r.out + r.err
    assert "is not the job's publication" not in r.err
    data = status(site, job_id)
    assert (data["state"], data["remote_commit"]) == ("PUBLISHED", squash)
    assert forge.created() == 1


@pytest.mark.slow
@pytest.mark.parametrize("forge", ["github"], indirect=True)
@pytest.mark.parametrize("point", [None, "shared.pushing-pushed", "shared.content-pushed"])
def test_without_atomic_push_a_crash_after_the_branch_push_goes_on_from_there(
        site: Site, daemon: GitDaemon, forge: ForgeServer, point: str | None) -> None:
    git(site.remote, "config", "receive.advertiseAtomic", "false")
    job_id = str(prepare(site, "k1", "posts/hello.md", article("hello"))["job_id"])
    if point is not None:
        r = site.run("push", env={"GITPUB_CRASH_AT": point, TOKEN_ENV: TOKEN})
        assert r.code == -9, r.out + r.err
        pushed = git(site.remote, "for-each-ref", "--format=%(objectname)", "refs/heads/gitpub/")
        assert bool(pushed.strip()) == (point == "shared.content-pushed")
    r = site.run_here("push", env={TOKEN_ENV: TOKEN})
    assert r.code == 5, r.out + r.err
    data = status(site, job_id)
    assert data["state"] == "IN_REVIEW"
    head = git(site.remote, "rev-parse", f"refs/heads/gitpub/{job_id}").strip()
    assert isinstance(data["review"], dict) and data["review"]["head"] == head
    assert forge.created() == 1
    record = json.loads(git(site.remote, "show", f"refs/pub/jobs/{job_id}:job.json"))
    assert record["state"] == "IN_REVIEW"
    forge.merge(1, "rebase")
    assert site.run_here("push", env={TOKEN_ENV: TOKEN}).code == 0
    record = json.loads(git(site.remote, "show", f"refs/pub/jobs/{job_id}:job.json"))
    assert record["state"] == "PUBLISHED"


@pytest.mark.parametrize("forge", ["gitea"], indirect=True)
def test_prepare_push_goes_to_review_and_sync_checks_it(site: Site, forge: ForgeServer) -> None:
    r = site.call("prepare", "--json", "--push", "--key", "k1", "--to", "posts/hello.md", "-",
                  input=article("hello"))
    assert r.code == 5, r.out + r.err
    data = r.json()
    assert data["state"] == "IN_REVIEW" and data["review"]["number"] == 1
    forge.merge(1, "merge")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert status(site, str(data["job_id"]))["state"] == "PUBLISHED"


@pytest.mark.parametrize("forge", ["github"], indirect=True)
def test_a_reviewers_commit_merged_with_the_branch_leaves_the_jobs_commit_the_proof(
        site: Site, forge: ForgeServer, tmp_path: Path) -> None:
    job_id, data = to_review(site)
    reviewer = other_writer(tmp_path, site, "reviewer")
    git(reviewer, "checkout", "-q", f"gitpub/{job_id}")
    (reviewer / "posts" / "hello.md").write_text(article("hello, reviewed"))
    git(reviewer, "commit", "-q", "-am", "review: wording")
    git(reviewer, "push", "-q", "origin", f"HEAD:gitpub/{job_id}")
    main = remote_main(site)
    merge = forge.merge(1, "merge")
    assert git(site.remote, "rev-parse", f"{merge}^1").strip() == main
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    shown = status(site, job_id)
    assert (shown["state"], shown["remote_commit"]) == ("PUBLISHED", data["local_commit"])
    assert git(site.remote, "show", "main:posts/hello.md") == article("hello, reviewed")
