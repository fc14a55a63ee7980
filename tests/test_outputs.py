"""Every outcome says what to do next; one error format; `--json` is total and matches the
shipped schemas (``Result.json`` validates every output read in the whole suite)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import Site
from schemas import SCHEMAS, load, validate

from gitpub.core.states import TERMINAL, State
from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore

S = State
#: A legal path through the transition table from LOCAL_COMMITTED to each state.
PATHS: dict[State, tuple[State, ...]] = {
    S.LOCAL_COMMITTED: (),
    S.PUSHING: (S.PUSHING,),
    S.IN_REVIEW: (S.PUSHING, S.IN_REVIEW),
    S.RETRY_WAIT: (S.RETRY_WAIT,),
    S.FAILED: (S.FAILED,),
    S.REVIEW: (S.REVIEW,),
    S.CONFLICT: (S.CONFLICT,),
    S.RECHECK_CANDIDATES: (S.RECHECK_CANDIDATES,),
    S.PUBLISHED: (S.PUBLISHED,),
    S.SKIPPED: (S.SKIPPED,),
    S.RECEIVED: (S.FAILED, S.RECEIVED),
    S.PREPARING: (S.FAILED, S.RECEIVED, S.PREPARING),
    S.READY_TO_COMMIT: (S.FAILED, S.RECEIVED, S.PREPARING, S.READY_TO_COMMIT),
    S.LOCAL_COMMITTING: (S.FAILED, S.RECEIVED, S.PREPARING, S.READY_TO_COMMIT,
                         S.LOCAL_COMMITTING),
    S.RECOVERING: (S.FAILED, S.RECEIVED, S.PREPARING, S.READY_TO_COMMIT, S.LOCAL_COMMITTING,
                   S.RECOVERING),
}


def test_the_walk_covers_every_state() -> None:
    assert set(PATHS) == set(State)


def put_in(site: Site, job_id: str, path: tuple[State, ...]) -> None:
    with Repository.discover(site.path) as repo:
        store = JobStore(repo)
        job = store.load(job_id)
        assert job is not None
        for state in path:
            job = store.transition(job, job.record.evolve(
                state=state, next_retry_at=1e10 if state == S.RETRY_WAIT else None),
                phase="resolve", reason=f"test: walk to {state.value}", keep_lease=False)


@pytest.mark.parametrize("state", list(State), ids=lambda s: s.value)
def test_every_state_says_what_to_do_next(site: Site, state: State) -> None:
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    job_id = r.json()["job_id"]
    put_in(site, job_id, PATHS[state])
    shown = site.call("status", "--json", job_id).json()
    text = site.call("status", job_id).out
    assert shown["state"] == state.value
    if state in TERMINAL:
        assert shown["hint"] is None and "hint:" not in text
        return
    assert shown["hint"] and "`git pub " in shown["hint"], shown
    assert f"\nhint: {_timeless(shown['hint'])}" in _timeless(text)
    listed = site.call("status", "--json").json()["jobs"]
    assert _timeless(listed[0]["hint"]) == _timeless(shown["hint"])


def _timeless(text: str) -> str:
    """A hint with its relative time left out ("in 12s"): each call computes it anew."""
    return re.sub(r"\(in \d+s\)", "(in …)", text)


USAGE_ERRORS = [["prepar"], ["prepare", "-"], ["status", "--bogus"], ["resolve"],
                ["resolve", "x", "--retry", "--abandon"], ["push", "--dry-run", "extra-opt", "-z"]]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_in_gitpubs_format_and_json(site: Site, args: list[str]) -> None:
    r = site.run(*args)
    assert r.code == 2, (r.out, r.err)
    lines = r.err.splitlines()
    assert lines[0].startswith("git-pub: error: ") and lines[1].startswith("hint: "), r.err
    assert "Usage:" not in r.err and "Error:" not in r.err and "Traceback" not in r.err
    r = site.run(*args, "--json")
    assert r.code == 2
    data = r.json()
    assert data["exit"] == 2 and data["error"] and data["hint"]


def test_no_such_command_suggests_the_right_one(site: Site) -> None:
    r = site.run("prepar")
    assert r.err.splitlines()[0] == ("git-pub: error: No such command 'prepar'. "
                                     "Did you mean 'prepare'?")


def test_every_error_is_json_under_json(site: Site, tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    for args in (["-C", str(outside), "hooks", "install"], ["-C", str(outside), "status"],
                 ["status", "nosuchjob"]):
        r = site.run(*args, "--json")
        assert r.code == 2, (args, r.out, r.err)
        assert r.json()["hint"]
    r = site.run("-C", str(outside), "hooks", "install")
    assert r.err == (f"git-pub: error: not a git repository: {outside}\n"
                     "hint: run inside a git repository, or pass -C PATH\n")


@pytest.mark.slow
def test_version_and_demo_under_json(site: Site) -> None:
    assert site.run("--version", "--json").json()["version"]
    r = site.run("demo", "--json", timeout=120)
    assert r.code == 0, r.out + r.err
    report = r.json()
    assert report["ok"] and len(report["steps"]) == 6  # prepare x2, push x2, status, log
    assert report["steps"][4]["output"]["channels"][0]["status"] == "confirmed"
    for step in report["steps"]:
        words = step["command"].split()[2:]
        from schemas import schema_for

        name = schema_for(words, step["output"])
        assert name is not None, step
        validate(name, step["output"])


def test_every_command_has_a_schema_and_matches_it(site: Site) -> None:
    """One run of each command with --json; Result.json() validates each against its schema."""
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    job_id = r.json()["job_id"]
    for args in (["status"], ["status", job_id], ["log", job_id], ["push", "--dry-run"],
                 ["sync", "--dry-run"], ["push"], ["sync"], ["reconcile"],
                 ["confirm", "--no-push-notes"], ["hooks", "install"], ["hooks", "uninstall"],
                 ["init"], ["doctor"], ["metrics"], ["secrets", "baseline", "--dry-run"]):
        out = site.call(*args, "--json")
        data = out.json()
        assert data["schema_version"] == 1, args
    used = {p.name for p in SCHEMAS.glob("*.json")}
    assert used == {"confirm.json", "demo.json", "doctor.json", "error.json", "help.json",
                    "history.json", "hooks.json", "init.json", "job.json", "jobs.json",
                    "metrics.json", "plan.json", "secrets.json", "version.json"}
    for name in used:
        assert load(name)["properties"]["schema_version"] == {
            "const": 1, "description": "the version of these schemas"}


def test_job_objects_keep_the_contract_fields() -> None:
    job = json.loads((SCHEMAS / "job.json").read_text())
    for key in ("job_id", "idempotency_key", "state", "attempt", "local_commit",
                "remote_commit", "failure_code", "target_paths"):
        assert key in job["required"]
    jobs = load("jobs.json")
    assert "jobs" in jobs["required"]


def test_schemas_ship_with_the_package() -> None:
    import tomllib

    pyproject = tomllib.loads((SCHEMAS.parents[2] / "pyproject.toml").read_text())
    assert "schemas/*.json" in pyproject["tool"]["setuptools"]["package-data"]["gitpub.cli"]
