"""Edits to the same page (issue 24 point 2): two writers change one file; changes that do not
overlap merge three-way as ``git merge-file`` merges them and publish, overlapping ones stay a
CONFLICT, and another writer's change is never overwritten."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import Site, git
from test_delivery import other_writer, remote_job_ids

from gitpub.git.repo import Repository
from gitpub.verify.commit import verify_commit

PAGE = "posts/page.md"
LINES = ["---", "title: The page", "---", "", "# The page", "",
         "First paragraph.", "", "Middle paragraph.", "", "Last paragraph.", ""]


def page(*, eol: str = "\n", **changes: str) -> bytes:
    """The page with lines replaced (``first=``, ``middle=``, ``last=``: a paragraph's text)."""
    index = {"first": 6, "middle": 8, "last": 10}
    lines = list(LINES)
    for name, text in changes.items():
        lines[index[name]] = text
    return eol.join(lines).encode()


def start(site: Site, path: str, data: bytes) -> None:
    """Commit ``data`` at ``path`` and push it: the base both writers start from."""
    (site.path / path).parent.mkdir(parents=True, exist_ok=True)
    (site.path / path).write_bytes(data)
    site.git("add", path)
    site.git("commit", "-q", "-m", f"add {path}")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


def theirs(other: Path, path: str, data: bytes) -> str:
    """The other writer edits ``path`` and pushes: the remote moves past our snapshot."""
    git(other, "pull", "-q", "origin", "main")
    (other / path).write_bytes(data)
    git(other, "add", path)
    git(other, "commit", "-q", "-m", "their edit")
    git(other, "push", "-q", "origin", "HEAD:main")
    return git(other, "rev-parse", "HEAD").strip()


def prepare(site: Site, key: str, path: str, data: bytes, tmp_path: Path) -> str:
    source = tmp_path / f"{key}.src"
    source.write_bytes(data)
    r = site.call("prepare", "--json", "--key", key, "--to", path, str(source))
    assert r.code == 0, r.err
    job = r.json()
    assert job["state"] == "LOCAL_COMMITTED", job
    return str(job["job_id"])


def remote_blob(site: Site, rev: str, path: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", f"{rev}:{path}"], cwd=site.remote,
                          capture_output=True, check=True).stdout


def merge_file(base: bytes, ours: bytes, other: bytes, where: Path) -> tuple[int, bytes]:
    """What C git's ``git merge-file -p`` makes of the three versions."""
    where.mkdir(exist_ok=True)
    for name, data in (("ours", ours), ("base", base), ("theirs", other)):
        (where / name).write_bytes(data)
    proc = subprocess.run(["git", "merge-file", "-p", "ours", "base", "theirs"], cwd=where,
                          capture_output=True, check=False)
    return proc.returncode, proc.stdout


def manifest_of(site: Site, commit: str, paths: list[str]) -> bytes:
    """The canonical manifest recomputed from the published commit with git alone."""
    lines = []
    for path in sorted(paths, key=lambda p: p.encode()):
        mode, _kind, blob = site.git("ls-tree", commit, "--", path).split("\t")[0].split()
        data = subprocess.run(["git", "cat-file", "blob", blob], cwd=site.path,
                              capture_output=True, check=True).stdout
        lines.append(f"{mode} {hashlib.sha256(data).hexdigest()} {path}\n".encode())
    return b"gitpub-manifest v1\n" + b"".join(lines)


def trailer(site: Site, commit: str, key: str) -> str:
    return site.git("log", "-1", f"--format=%(trailers:key={key},valueonly)", commit).strip()


def push(site: Site) -> tuple[int, dict[str, object]]:
    r = site.call("push", "--json")
    jobs = r.json()["jobs"]
    assert len(jobs) == 1, r.out
    return r.code, jobs[0]


def test_non_overlapping_edits_to_one_page_merge_and_publish(site: Site,
                                                             tmp_path: Path) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(first="Our first paragraph."), tmp_path)
    their_commit = theirs(other, PAGE, page(last="Their last paragraph."))

    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    assert git(site.remote, "rev-parse", "main").strip() == published
    assert git(site.remote, "rev-parse", f"{published}^").strip() == their_commit
    both = page(first="Our first paragraph.", last="Their last paragraph.")
    assert remote_blob(site, "main", PAGE) == both
    rc, expected = merge_file(page(), page(first="Our first paragraph."),
                              page(last="Their last paragraph."), tmp_path / "merge")
    assert rc == 0 and expected == both  # exactly what git merge-file makes of it
    assert remote_job_ids(site) == [job_id]

    # the proof describes what was published: the merged file, not the job's first version
    site.git("fetch", "-q", "origin")
    manifest = manifest_of(site, published, [PAGE])
    assert trailer(site, published, "Blog-Manifest-Sha256") == \
        hashlib.sha256(manifest).hexdigest()
    with Repository.discover(site.path) as repo:
        verdict = verify_commit(repo, published, ["Blog"])
    assert verdict is not None and verdict.ok and verdict.job_id == job_id, verdict
    status = site.call("status", "--json", job_id).json()
    assert status["state"] == "PUBLISHED"
    log = site.call("log", job_id).out
    assert "merged three-way with the remote's changes: posts/page.md" in log
    # the checked-out branch followed the published commit; the working tree has both edits
    assert site.git("rev-parse", "main").strip() == published
    assert (site.path / PAGE).read_bytes() == both
    assert site.git("status", "--porcelain") == ""
    # nothing is published twice
    assert site.call("push").code == 0
    assert remote_job_ids(site) == [job_id]


def test_overlapping_edits_stay_a_conflict_and_keep_theirs(site: Site, tmp_path: Path) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(middle="Our middle."), tmp_path)
    their_commit = theirs(other, PAGE, page(middle="Their middle."))

    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    assert job["failure_code"] == "target_changed"
    assert "posts/page.md: changed since the snapshot, and the changes overlap " \
           "(1 conflicting region): not merged" in str(job["failure_detail"])
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert remote_blob(site, "main", PAGE) == page(middle="Their middle.")
    assert remote_job_ids(site) == []
    # a retry while their change is still there: still a CONFLICT, still theirs
    r = site.call("resolve", job_id, "--retry", "--json")
    assert r.code == 4 and r.json()["jobs"][0]["state"] == "CONFLICT", r.out + r.err
    assert git(site.remote, "rev-parse", "main").strip() == their_commit


def test_a_third_writer_merges_again_onto_the_merged_page(site: Site, tmp_path: Path) -> None:
    """After a merge the job's compare-and-swap conditions are the remote's content and its
    merge base the remote's version: a later change of the page merges (or conflicts) again,
    against what was merged, never against the first snapshot."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    # the merge is recorded (PUSHING), then the process dies before its push
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushing-recorded"})
    assert r.code < 0 or r.code == 137, r.err
    assert site.call("status", "--json", job_id).json()["state"] == "PUSHING"
    third = other_writer(tmp_path, site, "third")
    third_commit = theirs(third, PAGE, page(middle="Third.", last="Theirs."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert git(site.remote, "rev-parse", f"{job['remote_commit']}^").strip() == third_commit
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", middle="Third.",
                                                   last="Theirs.")
    # and a fourth change overlapping what was merged is a conflict, not a silent merge
    assert remote_job_ids(site) == [job_id]


def test_binary_files_are_never_merged(site: Site, tmp_path: Path) -> None:
    site.write_config('publish: ["posts/**/*.md", "static/**"]\n')
    site.git("commit", "-q", "-am", "static files are published too")
    blob = bytes(range(256)) * 4
    start(site, "static/data.bin", blob)
    other = other_writer(tmp_path, site)
    ours = b"OURS" + blob[4:]
    job_id = prepare(site, "bin", "static/data.bin", ours, tmp_path)
    mine = blob[:-4] + b"MINE"
    their_commit = theirs(other, "static/data.bin", mine)
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    assert "binary content is never merged" in str(job["failure_detail"])
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert remote_blob(site, "main", "static/data.bin") == mine
    assert remote_job_ids(site) == [] and job_id


def test_crlf_pages_merge_with_their_line_endings(site: Site, tmp_path: Path) -> None:
    start(site, PAGE, page(eol="\r\n"))
    other = other_writer(tmp_path, site)
    prepare(site, "crlf", PAGE, page(eol="\r\n", first="Ours."), tmp_path)
    theirs(other, PAGE, page(eol="\r\n", last="Theirs."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == page(eol="\r\n", first="Ours.", last="Theirs.")


def test_crlf_against_lf_is_a_conflict(site: Site, tmp_path: Path) -> None:
    """A writer who turned every line ending changed every line: nothing merges."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    prepare(site, "crlf", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(eol="\r\n", last="Theirs."))
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    assert remote_blob(site, "main", PAGE) == page(eol="\r\n", last="Theirs.")


def test_merged_content_passes_the_gates_again(site: Site, tmp_path: Path) -> None:
    """A gate that passed each version alone but fails their merge keeps it off the remote:
    REVIEW, their version stays, nothing of ours is published."""
    script = ('for f in $GITPUB_FILES; do if grep -q Ours "$f" && grep -q Theirs "$f"; then '
              'echo "both in $f"; exit 1; fi; done')
    site.write_config(f"gates:\n  - {{name: check, run: {json.dumps(script)}, timeout: 10}}\n")
    site.git("commit", "-q", "-am", "a gate")
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    prepare(site, "gated", PAGE, page(first="Ours."), tmp_path)
    their_commit = theirs(other, PAGE, page(last="Theirs."))
    code, job = push(site)
    assert code == 4 and job["state"] == "REVIEW", job
    assert job["failure_code"] == "gate_failed"
    assert "the content merged with the remote's changes to posts/page.md" in \
        str(job["failure_detail"])
    assert "both in files/posts/page.md" in str(job["failure_detail"])
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert remote_job_ids(site) == []


def test_a_secret_the_other_writer_published_is_theirs_not_the_merges(
        site: Site, tmp_path: Path) -> None:
    """The merged content is scanned against the remote's version of the file (what it lands
    on): a secret the other writer already published is inherited, not brought by this job,
    so the merge publishes (the branch's business: ``git pub secrets baseline``); nothing of
    the value reaches gitpub's records or logs."""
    secret = "ghp_" + "a1B2" * 9
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "secret", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last=f"token: {secret}"))
    r = site.call("push", "--json")
    job = r.json()["jobs"][0]
    assert r.code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last=f"token: {secret}")
    assert remote_job_ids(site) == [job_id]
    assert secret not in r.out + r.err
    log = site.call("log", job_id)
    assert "unchanged from the base" in log.out  # the inherited finding, named, not shown
    assert secret not in log.out + log.err


def test_retry_merges_once_their_change_no_longer_overlaps(site: Site, tmp_path: Path) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(middle="Our middle."), tmp_path)
    theirs(other, PAGE, page(middle="Their middle."))
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    # they take their middle back and change the last paragraph instead
    their_commit = theirs(other, PAGE, page(last="Their last."))
    r = site.call("resolve", "--json", job_id, "--retry")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED", job
    assert git(site.remote, "rev-parse", f"{job['remote_commit']}^").strip() == their_commit
    assert remote_blob(site, "main", PAGE) == page(middle="Our middle.", last="Their last.")


# -- the remote already holds our change (issue 24.2's open question) -------------------------


def skipped_as_present(site: Site, their_commit: str, job_id: str) -> dict[str, object]:
    """Push: the job ends SKIPPED (already_on_remote, exit 0), nothing is pushed."""
    r = site.call("push", "--json")
    job = r.json()["jobs"][0]
    assert r.code == 0 and job["state"] == "SKIPPED", r.out + r.err
    assert job["failure_code"] == "already_on_remote", job
    assert job["remote_commit"] is None
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert remote_job_ids(site) == []
    # a second run has nothing to do: still no commit of the job anywhere
    assert site.call("push").code == 0
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert site.call("status", "--json", job_id).json()["state"] == "SKIPPED"
    return dict(job)


def test_the_same_edit_made_by_another_writer_skips_the_job(site: Site, tmp_path: Path) -> None:
    """Someone applied exactly our edit: no false CONFLICT, no empty or duplicate commit."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "same", PAGE, page(first="The same fix."), tmp_path)
    their_commit = theirs(other, PAGE, page(first="The same fix."))
    job = skipped_as_present(site, their_commit, job_id)
    assert "already holds every file of this job" in str(job["failure_detail"])
    assert "already holds every file of this job" in site.call("log", job_id).out


def test_their_edit_containing_ours_skips_the_job(site: Site, tmp_path: Path) -> None:
    """They made our change and another one: the merge adds nothing of ours."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "within", PAGE, page(first="The fix."), tmp_path)
    their_commit = theirs(other, PAGE, page(first="The fix.", last="And theirs."))
    skipped_as_present(site, their_commit, job_id)
    assert remote_blob(site, "main", PAGE) == page(first="The fix.", last="And theirs.")


def test_a_new_page_created_elsewhere_with_our_content_skips_the_job(site: Site,
                                                                     tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "new", "posts/new.md", page(first="Brand new."), tmp_path)
    (other / "posts").mkdir(exist_ok=True)
    their_commit = theirs(other, "posts/new.md", page(first="Brand new."))
    skipped_as_present(site, their_commit, job_id)


def test_a_file_of_the_job_already_there_leaves_the_job(site: Site, tmp_path: Path) -> None:
    """Two files, one of them already on the remote as ours: the other is published alone,
    and the proof (manifest, trailers, the commit's change) names only what it writes."""
    start(site, "posts/a.md", page())
    start(site, "posts/b.md", page())
    other = other_writer(tmp_path, site)
    (tmp_path / "a.src").write_bytes(page(first="A, fixed."))
    (tmp_path / "b.src").write_bytes(page(first="B, fixed."))
    r = site.call("prepare", "--json", "--key", "two", "--to", "posts/a.md", "--to",
                  "posts/b.md", str(tmp_path / "a.src"), str(tmp_path / "b.src"))
    assert r.code == 0, r.out + r.err
    job_id = str(r.json()["job_id"])
    their_commit = theirs(other, "posts/a.md", page(first="A, fixed."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    assert git(site.remote, "rev-parse", f"{published}^").strip() == their_commit
    assert git(site.remote, "diff-tree", "--no-commit-id", "--name-only", "-r",
               published).split() == ["posts/b.md"]
    assert remote_blob(site, "main", "posts/a.md") == page(first="A, fixed.")
    assert remote_blob(site, "main", "posts/b.md") == page(first="B, fixed.")
    assert job["target_paths"] == ["posts/b.md"]
    site.git("fetch", "-q", "origin")
    assert trailer(site, published, "Blog-Manifest-Sha256") == \
        hashlib.sha256(manifest_of(site, published, ["posts/b.md"])).hexdigest()
    with Repository.discover(site.path) as repo:
        verdict = verify_commit(repo, published, ["Blog"])
    assert verdict is not None and verdict.ok and verdict.job_id == job_id, verdict
    assert "already on the remote as this job would leave them, so no longer written by it: " \
        "posts/a.md" in site.call("log", job_id).out
    assert remote_job_ids(site) == [job_id]


def test_retry_skips_a_conflict_once_theirs_became_ours(site: Site, tmp_path: Path) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(middle="Our middle."), tmp_path)
    theirs(other, PAGE, page(middle="Their middle."))
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    their_commit = theirs(other, PAGE, page(middle="Our middle."))  # they took ours
    r = site.call("resolve", "--json", job_id, "--retry")
    job = r.json()["jobs"][0]
    assert r.code == 0 and job["state"] == "SKIPPED", r.out + r.err
    assert job["failure_code"] == "already_on_remote"
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert remote_job_ids(site) == []


# -- more shapes of content --------------------------------------------------------------------

CJK = ["---", "title: 同一页面的两处修改", "---", "", "# 同一页面的两处修改", "",
       "开头的一段：旧的说法。", "", "中间的一段，谁都没有改。", "", "还有一段，保持原样。", "",
       "结尾的一段：旧的结论。", ""]


def cjk(top: str | None = None, bottom: str | None = None) -> bytes:
    lines = list(CJK)
    if top is not None:
        lines[6] = top
    if bottom is not None:
        lines[12] = bottom
    return "\n".join(lines).encode()


def test_cjk_page_edited_at_top_and_bottom_merges_and_passes_fsck(site: Site,
                                                                  tmp_path: Path) -> None:
    start(site, PAGE, cjk())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "cjk", PAGE, cjk(top="开头的一段：我们的新说法。"), tmp_path)
    their_commit = theirs(other, PAGE, cjk(bottom="结尾的一段：他们的新结论。"))
    before = site.call("status", "--json", job_id).json()
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    both = cjk(top="开头的一段：我们的新说法。", bottom="结尾的一段：他们的新结论。")
    assert remote_blob(site, "main", PAGE) == both
    assert git(site.remote, "rev-parse", f"{published}^").strip() == their_commit
    assert git(site.remote, "diff-tree", "--no-commit-id", "--name-only", "-r",
               published).split() == [PAGE]
    git(site.remote, "fsck", "--strict", "--no-dangling")
    site.git("fetch", "-q", "origin")
    site.git("fsck", "--strict", "--no-dangling")
    # the trailers, as git parses them, prove the merged content (not the job's first version)
    message = site.git("log", "-1", "--format=%B", published)
    parsed = dict(line.split(": ", 1) for line in
                  site.git("interpret-trailers", "--parse", input=message.encode())
                  .splitlines())
    manifest = hashlib.sha256(manifest_of(site, published, [PAGE])).hexdigest()
    assert parsed["Blog-Job-Id"] == job_id
    assert parsed["Blog-Manifest-Sha256"] == manifest
    assert manifest != before["manifest_sha256"]
    assert job["manifest_sha256"] == manifest


def test_a_page_without_a_final_newline_merges_without_one(site: Site, tmp_path: Path) -> None:
    base = page()[:-1]  # "... Last paragraph." and no line break after it
    assert not base.endswith(b"\n")
    start(site, PAGE, base)
    other = other_writer(tmp_path, site)
    prepare(site, "nonl", PAGE, page(first="Ours.")[:-1], tmp_path)
    theirs(other, PAGE, page(last="Their last words.")[:-1])
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last="Their last words.")[:-1]


def test_a_secret_our_side_brings_into_the_merge_goes_to_review(site: Site,
                                                                tmp_path: Path) -> None:
    """Our version passed its gates under the allowlist of its base; the other writer revoked
    that rule while editing the page elsewhere. The merged content is judged as what lands on
    the remote tip: our secret is new there and no longer allowed → REVIEW, theirs kept."""
    secret = "ghp_" + "Z9y8" * 9
    (site.path / ".gitpub-allowlist").write_text("posts/** re:ghp_[A-Za-z0-9]{36}\n")
    site.git("add", ".gitpub-allowlist")
    site.git("commit", "-q", "-m", "an example token is allowed")
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    prepare(site, "ours", PAGE, page(first=f"token: {secret}"), tmp_path)
    git(other, "pull", "-q", "origin", "main")
    git(other, "rm", "-q", ".gitpub-allowlist")
    their_commit = theirs(other, PAGE, page(last="Theirs, and no more example tokens."))
    r = site.call("push", "--json")
    job = r.json()["jobs"][0]
    assert r.code == 4 and job["state"] == "REVIEW", r.out + r.err
    assert job["failure_code"] == "secret_in_content"
    assert "the content merged with the remote's changes to posts/page.md" in \
        str(job["failure_detail"])
    assert secret not in r.out + r.err
    assert git(site.remote, "rev-parse", "main").strip() == their_commit
    assert secret.encode() not in remote_blob(site, "main", PAGE)
    assert remote_job_ids(site) == []
    # the way out: the page as a person fixed it; it merges with theirs again, and publishes
    job_id = str(job["job_id"])
    hint = site.call("status", "--json", job_id).json()["hint"]
    assert f"`git pub resolve {job_id[:13]} --retry --from FILE`" in str(hint), hint
    fixed = tmp_path / "fixed.md"
    fixed.write_bytes(page(first="The example token was revoked."))
    r = site.call("resolve", "--json", job_id, "--retry", "--from", str(fixed), "--push")
    job = r.json()["jobs"][0]
    assert r.code == 0 and job["state"] == "PUBLISHED", r.out + r.err
    assert remote_blob(site, "main", PAGE) == page(first="The example token was revoked.",
                                                   last="Theirs, and no more example tokens.")
    assert remote_job_ids(site) == [job_id]


@pytest.mark.parametrize("point", ["merge.gated", "delivery.pushing-recorded",
                                   "delivery.pushed", "delivery.published-recorded"])
def test_killed_between_merge_and_push_publishes_exactly_once(site: Site, tmp_path: Path,
                                                              point: str) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "crash", PAGE, page(first="Ours."), tmp_path)
    their_commit = theirs(other, PAGE, page(last="Theirs."))
    r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == -9, f"expected SIGKILL at {point}: {r.out}{r.err}"
    r = site.run("push", "--json")
    assert r.code == 0, r.out + r.err
    job = site.call("status", "--json", job_id).json()
    assert job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    assert git(site.remote, "rev-parse", "main").strip() == published
    assert git(site.remote, "rev-parse", f"{published}^").strip() == their_commit
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last="Theirs.")
    assert remote_job_ids(site) == [job_id]
    site.git("fetch", "-q", "origin")
    assert trailer(site, published, "Blog-Manifest-Sha256") == \
        hashlib.sha256(manifest_of(site, published, [PAGE])).hexdigest()
    assert site.run("push").code == 0
    assert remote_job_ids(site) == [job_id]


def test_a_merge_delivered_through_review_publishes_the_merged_page(site: Site,
                                                                    tmp_path: Path) -> None:
    """``delivery.mode: pull_request``: the merged page goes to the review branch with its new
    manifest recorded, and the hand merge of that branch is the job's publication."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    site.write_config("delivery:\n  mode: pull_request\n  forge: branch\n  compare_url: "
                      "'https://forge.example/example/blog/compare/{base}...{head}'\n")
    site.git("commit", "-q", "-am", "through review")
    site.git("push", "-q", "origin", "main")
    job_id = prepare(site, "reviewed", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    r = site.call("push", "--json")
    assert r.code == 5, r.out + r.err
    data = site.call("status", "--json", job_id).json()
    assert data["state"] == "IN_REVIEW", data
    branch = f"origin/gitpub/{job_id}"
    git(other, "fetch", "-q", "origin")
    assert git(other, "show", f"{branch}:{PAGE}").encode() == page(first="Ours.",
                                                                     last="Theirs.")
    git(other, "merge", "-q", "--ff-only", branch)
    git(other, "push", "-q", "origin", "HEAD:main")
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    data = site.call("status", "--json", job_id).json()
    assert data["state"] == "PUBLISHED", data
    published = str(data["remote_commit"])
    site.git("fetch", "-q", "origin")
    assert trailer(site, published, "Blog-Manifest-Sha256") == \
        hashlib.sha256(manifest_of(site, published, [PAGE])).hexdigest()
    assert remote_job_ids(site) == [job_id]


def test_a_merged_executable_page_keeps_its_mode_across_rounds(site: Site,
                                                                tmp_path: Path) -> None:
    """The merged file is stored in the job's state with the job's mode: after a crash between
    recording the merge and pushing it, the next round reads its artifacts back (verified
    against the new manifest, mode included) and publishes the file executable."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    site.write_config("draft: 'mkdir -p \"$GITPUB_OUTPUT/posts\" && cp \"$GITPUB_SOURCE\" "
                      "\"$GITPUB_OUTPUT/posts/page.md\" && chmod +x "
                      "\"$GITPUB_OUTPUT/posts/page.md\"'\n")
    site.git("commit", "-q", "-am", "a draft that makes the page executable")
    site.git("push", "-q", "origin", "main")
    job_id = prepare(site, "exec", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushing-recorded"})
    assert r.code == -9, r.out + r.err
    r = site.run("push", "--json")
    assert r.code == 0, r.out + r.err
    job = site.call("status", "--json", job_id).json()
    assert job["state"] == "PUBLISHED", job
    assert git(site.remote, "ls-tree", "main", "--", PAGE).split()[0] == "100755"
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last="Theirs.")
    assert remote_job_ids(site) == [job_id]
