"""The prepare pipeline end to end: snapshot, draft, judge, gates, the local content commit.

Real git repositories (the ``site`` fixture), real subprocesses for the draft/judge/gate
commands (small ``sh -c`` scripts written here). Commands run in-process via ``site.call``;
``site.run`` only where a separate ``git pub`` process matters.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, Site, spawn

# Fake credentials built at run time: the literal never sits in a file of the repository.
TOKEN = "ghp_" + "Zq7Xw2Pk" * 4 + "R9t3"
OTHER_TOKEN = "ghp_" + "Lm4Nb8Vc" * 4 + "K2j6"

ARTICLE = "# Hello\n\nA first article.\n"
WELCOME = "# Welcome\n\nThe first post.\n"  # posts/welcome.md in the site's base commit


# -- helpers -------------------------------------------------------------------------------

def prepare(site: Site, *args: str, input: str | bytes = b"") -> Result:
    return site.call("prepare", "--json", *args, input=input)


def ok(result: Result) -> dict[str, Any]:
    assert result.code == 0, (result.code, result.out, result.err)
    data: dict[str, Any] = result.json()
    return data


def review(result: Result) -> dict[str, Any]:
    assert result.code == 4, (result.code, result.out, result.err)
    data: dict[str, Any] = result.json()
    assert data["state"] == "REVIEW", data
    return data


def job_record(site: Site, job_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(site.git("show", f"refs/pub/jobs/{job_id}:job.json"))
    return data


def all_refs(site: Site) -> str:
    return site.git("for-each-ref", "--format=%(refname) %(objectname)")


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def git_bytes(site: Site, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=site.path, capture_output=True,
                          check=True).stdout


def leaks(site: Site, secret: str, *results: Result) -> list[str]:
    """Where ``secret`` shows up: in a command's output, or in which git objects."""
    places = [f"output of command {i}" for i, r in enumerate(results)
              if secret in r.out or secret in r.err]
    raw, needle, pos = site.all_objects_text(), secret.encode(), 0
    while pos < len(raw):  # the --batch format: "<sha> <type> <size>\n<content>\n"
        header_end = raw.index(b"\n", pos)
        sha, kind, size = raw[pos:header_end].split()
        body = raw[header_end + 1:header_end + 1 + int(size)]
        if needle in body:
            places.append(f"{kind.decode()} {sha.decode()}")
        pos = header_end + 1 + int(size) + 1
    return places


def yaml_str(text: str) -> str:
    """``text`` as a YAML scalar (JSON strings are YAML)."""
    return json.dumps(text)


def use_draft(site: Site, script: str, timeout: float = 10) -> None:
    site.write_config(f"draft: {{run: {yaml_str(script)}, timeout: {timeout}}}\n")


def use_judge(site: Site, script: str, timeout: float = 10) -> None:
    site.write_config(f"judge: {{run: {yaml_str(script)}, timeout: {timeout}}}\n")


def use_gate(site: Site, script: str) -> None:
    site.write_config(f"gates:\n  - {{name: check, run: {yaml_str(script)}, timeout: 10}}\n")


def scratch_left(site: Site) -> list[str]:
    root = site.path / ".git" / "pub" / "scratch"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def manifest_of(site: Site, commit: str, paths: list[str]) -> bytes:
    """The canonical manifest, recomputed from the commit's files with git alone, as the module
    docstring of gitpub/manifest.py documents it."""
    lines = []
    for path in sorted(paths, key=lambda p: p.encode()):
        mode, kind, blob = site.git("ls-tree", commit, "--", path).split("\t")[0].split()
        assert kind == "blob"
        content = git_bytes(site, "cat-file", "blob", blob)
        lines.append(f"{mode} {sha256(content)} {path}\n".encode())
    return b"gitpub-manifest v1\n" + b"".join(lines)


def message_of(site: Site, commit: str) -> bytes:
    raw = git_bytes(site, "cat-file", "commit", commit)
    return raw.split(b"\n\n", 1)[1]


def changed_paths(site: Site, old: str, new: str) -> dict[str, str]:
    out = site.git("diff-tree", "-r", "--no-commit-id", "--name-status", old, new)
    return {line.split("\t")[1]: line.split("\t")[0] for line in out.splitlines()}


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    """A file outside every scratch dir that a command appends a line to each time it runs."""
    return tmp_path / "runs.count"


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


# -- direct mode ---------------------------------------------------------------------------

def test_direct_one_article_makes_a_content_commit_with_trailers(site: Site) -> None:
    data = ok(prepare(site, "--key", "k-one", "--to", "posts/hello.md", "-", input=ARTICLE))
    for field in ("job_id", "idempotency_key", "state", "attempt", "local_commit",
                  "remote_commit", "failure_code", "target_paths"):
        assert field in data, field
    assert data["state"] == "LOCAL_COMMITTED"
    assert data["idempotency_key"] == "k-one"
    assert data["target_paths"] == ["posts/hello.md"]
    assert data["attempt"] == 0 and data["remote_commit"] is None
    assert data["failure_code"] is None and data["created"] is True

    commit = data["local_commit"]
    base = site.git("rev-parse", "origin/main").strip()
    assert site.git("cat-file", "-t", commit).strip() == "commit"
    assert site.git("show", f"{commit}:posts/hello.md") == ARTICLE
    assert site.git("rev-list", "--parents", "-n1", commit).split() == [commit, base]
    assert changed_paths(site, base, commit) == {"posts/hello.md": "A"}
    assert site.git("log", "-1", "--format=%s", commit).strip() == "Publish: Hello"

    message = message_of(site, commit)
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=message,
                            capture_output=True, check=True, cwd=site.path).stdout.decode()
    trailers = [tuple(line.split(": ", 1)) for line in parsed.splitlines()]
    manifest_hash = data["manifest_sha256"]
    assert trailers == [
        ("Blog-Job-Id", data["job_id"]),
        ("Blog-Manifest-Sha256", manifest_hash),
        ("Blog-Base-Commit", base),
        ("Blog-Writer-Node", "test-node"),
    ]
    value = site.git("log", "-1", "--format=%(trailers:key=Blog-Job-Id,valueonly)", commit)
    assert value.strip() == data["job_id"]

    # The manifest paragraph in the body is the canonical manifest; the trailer is its hash.
    recomputed = manifest_of(site, commit, ["posts/hello.md"])
    paragraphs = [p + b"\n" for p in message.split(b"\n\n")]
    assert recomputed in paragraphs
    assert sha256(recomputed) == manifest_hash
    # The job record agrees, and the job's ref keeps the commit alive.
    record = job_record(site, data["job_id"])
    assert record["manifest_sha256"] == manifest_hash
    assert record["local_commit"] == commit
    site.git("merge-base", "--is-ancestor", commit, f"refs/pub/jobs/{data['job_id']}")
    assert scratch_left(site) == []


def test_trailer_prefix_renames_the_trailers(site: Site) -> None:
    site.write_config("trailer_prefix: News\n")
    data = ok(prepare(site, "--key", "k-news", "--to", "posts/hello.md", "-", input=ARTICLE))
    message = message_of(site, data["local_commit"])
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=message,
                            capture_output=True, check=True).stdout.decode()
    keys = [line.split(":", 1)[0] for line in parsed.splitlines()]
    assert keys == ["News-Job-Id", "News-Manifest-Sha256", "News-Base-Commit",
                    "News-Writer-Node"]
    assert b"Blog-" not in message
    value = site.git("log", "-1", "--format=%(trailers:key=News-Manifest-Sha256,valueonly)",
                     data["local_commit"])
    assert value.strip() == data["manifest_sha256"]


def test_multi_file_job_lands_in_one_commit(site: Site, tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text("# One\n")
    (tmp_path / "two.md").write_text("# Two\n")
    bundle = tmp_path / "bundle"
    (bundle / "img").mkdir(parents=True)
    (bundle / "index.md").write_text("# Bundle\n\n![x](img/x.png)\n")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary"
    (bundle / "img" / "x.png").write_bytes(png)
    site.write_config('content: ["posts/**"]\n')  # the bundle's image is an asset
    data = ok(prepare(site, "--key", "multi",
                      "--to", "posts/one.md", str(tmp_path / "one.md"),
                      "--to", "posts/two.md", str(tmp_path / "two.md"),
                      "--to", "posts/bundle/", str(bundle)))
    expected = ["posts/one.md", "posts/two.md", "posts/bundle/img/x.png",
                "posts/bundle/index.md"]
    assert sorted(data["target_paths"]) == sorted(expected)
    commit = data["local_commit"]
    base = site.git("rev-parse", "origin/main").strip()
    assert site.git("rev-list", "--parents", "-n1", commit).split() == [commit, base]
    assert changed_paths(site, base, commit) == {p: "A" for p in expected}
    assert git_bytes(site, "show", f"{commit}:posts/bundle/img/x.png") == png
    assert sha256(manifest_of(site, commit, expected)) == data["manifest_sha256"]


def test_update_of_an_existing_path_records_the_base_hash(site: Site) -> None:
    new_text = "# Welcome\n\nThe first post, revised.\n"
    data = ok(prepare(site, "--key", "upd", "--to", "posts/welcome.md", "-", input=new_text))
    record = job_record(site, data["job_id"])
    assert record["targets"] == [
        {"path": "posts/welcome.md", "op": "update", "base_sha256": sha256(WELCOME),
         "base_mode": None}]
    assert record["base_commit"] == site.git("rev-parse", "origin/main").strip()
    commit = data["local_commit"]
    assert site.git("show", f"{commit}:posts/welcome.md") == new_text
    assert changed_paths(site, "origin/main", commit) == {"posts/welcome.md": "M"}

    fresh = ok(prepare(site, "--key", "new", "--to", "posts/fresh.md", "-", input=ARTICLE))
    assert job_record(site, fresh["job_id"])["targets"] == [
        {"path": "posts/fresh.md", "op": "new", "base_sha256": None, "base_mode": None}]


def test_prepare_never_touches_the_working_tree_index_or_branch(site: Site) -> None:
    (site.path / "notes.txt").write_text("untracked\n")
    (site.path / "posts" / "welcome.md").write_text(WELCOME + "local edit\n")
    site.git("add", "posts/welcome.md")
    (site.path / "posts" / "welcome.md").write_text(WELCOME + "another edit\n")
    index = site.path / ".git" / "index"
    before = (site.git("status", "--porcelain", "--untracked-files=all"), index.read_bytes(),
              site.git("rev-parse", "HEAD", "refs/heads/main"),
              sorted(p.relative_to(site.path).as_posix() for p in site.path.rglob("*")
                     if ".git" not in p.parts))
    data = ok(prepare(site, "--key", "wt", "--to", "posts/hello.md", "-", input=ARTICLE))
    ok(prepare(site, "--key", "wt2", "--to", "posts/welcome.md", "-", input="# W2\n"))
    after = (site.git("status", "--porcelain", "--untracked-files=all"), index.read_bytes(),
             site.git("rev-parse", "HEAD", "refs/heads/main"),
             sorted(p.relative_to(site.path).as_posix() for p in site.path.rglob("*")
                    if ".git" not in p.parts))
    assert after == before
    assert not (site.path / "posts" / "hello.md").exists()
    assert data["state"] == "LOCAL_COMMITTED"


# -- idempotency ---------------------------------------------------------------------------

def test_same_key_same_content_finds_the_same_job(site: Site) -> None:
    first = ok(prepare(site, "--key", "k", "--to", "posts/hello.md", "-", input=ARTICLE))
    refs = all_refs(site)
    again = ok(prepare(site, "--key", "k", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert again["job_id"] == first["job_id"] and again["created"] is False
    assert again["local_commit"] == first["local_commit"]
    assert all_refs(site) == refs


def test_same_key_different_content_is_refused(site: Site) -> None:
    ok(prepare(site, "--key", "k", "--to", "posts/hello.md", "-", input=ARTICLE))
    refs = all_refs(site)
    objects = site.git("count-objects", "-v")
    r = prepare(site, "--key", "k", "--to", "posts/hello.md", "-", input=ARTICLE + "more\n")
    assert r.code == 3, (r.out, r.err)
    assert "'k'" in r.err
    r = prepare(site, "--key", "k", "--to", "posts/other.md", "-", input=ARTICLE)
    assert r.code == 3, (r.out, r.err)
    assert all_refs(site) == refs
    assert site.git("count-objects", "-v") == objects


def test_derived_key_depends_on_content_and_target(site: Site) -> None:
    first = ok(prepare(site, "--to", "posts/hello.md", "-", input=ARTICLE))
    assert first["idempotency_key"].startswith("auto-")
    again = ok(prepare(site, "--to", "posts/hello.md", "-", input=ARTICLE))
    assert again["job_id"] == first["job_id"] and again["created"] is False
    elsewhere = ok(prepare(site, "--to", "posts/hello-2.md", "-", input=ARTICLE))
    assert elsewhere["job_id"] != first["job_id"] and elsewhere["created"] is True
    changed = ok(prepare(site, "--to", "posts/hello.md", "-", input=ARTICLE + "x\n"))
    assert changed["job_id"] not in (first["job_id"], elsewhere["job_id"])
    assert len(site.job_refs()) == 3


def test_equal_content_under_a_new_key_is_a_new_job(site: Site) -> None:
    first = ok(prepare(site, "--key", "k1", "--to", "posts/hello.md", "-", input=ARTICLE))
    second = ok(prepare(site, "--key", "k2", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert second["created"] is True
    assert second["job_id"] != first["job_id"]
    assert len(site.job_refs()) == 2


def test_same_key_from_a_separate_process(site: Site) -> None:
    first = ok(prepare(site, "--key", "kp", "--to", "posts/hello.md", "-", input=ARTICLE))
    r = site.run("prepare", "--json", "--key", "kp", "--to", "posts/hello.md", "-",
                 input=ARTICLE)
    assert r.code == 0, r.err
    assert r.json()["job_id"] == first["job_id"] and r.json()["created"] is False
    r = site.run("prepare", "--json", "--key", "kp", "--to", "posts/hello.md", "-",
                 input="# Different\n")
    assert r.code == 3, r.err


# -- draft ---------------------------------------------------------------------------------

def test_draft_writes_the_article_from_the_source(site: Site, tmp_path: Path) -> None:
    use_draft(site, 'mkdir -p "$GITPUB_OUTPUT/posts" && '
                    '{ printf "# Drafted\\n\\n"; cat "$GITPUB_SOURCE"; } '
                    '> "$GITPUB_OUTPUT/posts/hello.md"')
    src = tmp_path / "notes.txt"
    src.write_text("raw notes\n")
    data = ok(prepare(site, "--key", "d1", "--to", "posts/hello.md", str(src)))
    assert data["state"] == "LOCAL_COMMITTED"
    drafted = site.git("show", f"{data['local_commit']}:posts/hello.md")
    assert drafted == "# Drafted\n\nraw notes\n"
    assert site.git("log", "-1", "--format=%s", data["local_commit"]).strip() == \
        "Publish: Drafted"
    assert scratch_left(site) == []


def test_draft_leaving_a_file_in_its_cwd_goes_to_review(site: Site) -> None:
    use_draft(site, 'mkdir -p "$GITPUB_OUTPUT/posts" && cat "$GITPUB_SOURCE" '
                    '> "$GITPUB_OUTPUT/posts/hello.md" && echo scratch > notes.tmp')
    data = review(prepare(site, "--key", "d2", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "temp_file_leak"
    assert "notes.tmp" in data["failure_detail"]
    assert data["local_commit"] is None
    assert scratch_left(site) == []


def test_draft_leaving_a_file_in_tmpdir_goes_to_review(site: Site) -> None:
    use_draft(site, 'mkdir -p "$GITPUB_OUTPUT/posts" && cat "$GITPUB_SOURCE" '
                    '> "$GITPUB_OUTPUT/posts/hello.md" && echo cache > "$TMPDIR/model.cache"')
    data = review(prepare(site, "--key", "d3", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "temp_file_leak"
    assert "tmp/model.cache" in data["failure_detail"]


def test_draft_that_writes_no_target_goes_to_review(site: Site) -> None:
    use_draft(site, 'mkdir -p "$GITPUB_OUTPUT/posts" && cat "$GITPUB_SOURCE" '
                    '> "$GITPUB_OUTPUT/posts/hello.md"')
    data = review(prepare(site, "--key", "d4", "--to", "posts/hello.md", "--to",
                          "posts/second.md", "-", input=ARTICLE))
    assert data["failure_code"] == "draft_incomplete"
    assert "posts/second.md" in data["failure_detail"]


def test_draft_that_fails_goes_to_review_with_its_output(site: Site) -> None:
    use_draft(site, "echo 'model quota exceeded' >&2; exit 1")
    data = review(prepare(site, "--key", "d5", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "draft_failed"
    assert "model quota exceeded" in data["failure_detail"]
    assert "exit status 1" in data["failure_detail"]


def test_draft_failure_output_is_sanitized(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TOKEN", TOKEN)
    use_draft(site, 'echo "request failed: Authorization: Bearer $FAKE_TOKEN" >&2; exit 1')
    r = prepare(site, "--key", "d6", "--to", "posts/hello.md", "-", input=ARTICLE)
    data = review(r)
    assert "request failed" in data["failure_detail"]
    log = site.call("log", "--json", data["job_id"])
    assert log.code == 0
    assert leaks(site, TOKEN, r, log) == []


def test_draft_failure_output_is_sanitized_before_it_is_truncated(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long output whose cut falls inside a token must not leave the token's remains."""
    from gitpub.runtime.steps import OUTPUT_LIMIT

    monkeypatch.setenv("FAKE_TOKEN", TOKEN)
    # The first OUTPUT_LIMIT bytes of stdout end 8 characters before the end of the token.
    pad = OUTPUT_LIMIT - len(TOKEN) + 7
    use_draft(site, f'head -c {pad} /dev/zero | tr "\\0" x; printf " %s" "$FAKE_TOKEN"; exit 1')
    r = prepare(site, "--key", "d6b", "--to", "posts/hello.md", "-", input=ARTICLE)
    review(r)
    leaked = TOKEN[:-8]  # "ghp_" and 28 of its 36 secret characters
    assert leaks(site, leaked, r) == []


def test_drafted_secret_goes_to_review_and_is_not_stored(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TOKEN", TOKEN)
    use_draft(site, 'mkdir -p "$GITPUB_OUTPUT/posts" && '
                    '{ cat "$GITPUB_SOURCE"; echo "token: $FAKE_TOKEN"; } '
                    '> "$GITPUB_OUTPUT/posts/hello.md"')
    r = prepare(site, "--key", "d7", "--to", "posts/hello.md", "-", input=ARTICLE)
    data = review(r)
    assert data["failure_code"] == "secret_in_content"
    assert "posts/hello.md:4" in data["failure_detail"]
    assert leaks(site, TOKEN, r) == []


def test_draft_without_a_draft_command_is_direct(site: Site) -> None:
    data = ok(prepare(site, "--key", "d8", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert job_record(site, data["job_id"])["phases"]["draft"] == "direct"


# -- the dedup judge -----------------------------------------------------------------------

def test_judge_skip_ends_the_job_skipped(site: Site) -> None:
    use_judge(site, "echo SKIP")
    data = ok(prepare(site, "--key", "j1", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["state"] == "SKIPPED" and data["local_commit"] is None
    again = ok(prepare(site, "--key", "j1", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert again["state"] == "SKIPPED" and again["created"] is False


def test_judge_keep_continues_and_sees_the_candidate(site: Site, tmp_path: Path) -> None:
    seen = tmp_path / "judge-input.json"
    use_judge(site, f'cat > "{seen}"; echo KEEP')
    data = ok(prepare(site, "--key", "j2", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["state"] == "LOCAL_COMMITTED"
    payload = json.loads(seen.read_text())
    assert payload["job_id"] == data["job_id"]
    assert payload["base_commit"] == site.git("rev-parse", "origin/main").strip()
    assert payload["candidates"] == [{"path": "posts/hello.md", "content": ARTICLE}]
    assert job_record(site, data["job_id"])["phases"]["judge"] == "KEEP"


@pytest.mark.parametrize("script", [
    "echo UPDATE",
    "true",
    "echo KEEP; exit 2",
    "echo 'KEEP, probably'",
])
def test_judge_without_a_clear_answer_fails_closed(site: Site, script: str) -> None:
    use_judge(site, script)
    data = review(prepare(site, "--key", "j3", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "judge_undecided"
    assert data["local_commit"] is None


def test_judge_timeout_fails_closed(site: Site) -> None:
    site.write_config('judge: {run: "sleep 5", timeout: 0.5}\n')
    data = review(prepare(site, "--key", "j4", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "judge_undecided"
    assert "timed out" in data["failure_detail"]
    assert scratch_left(site) == []


# -- gates ---------------------------------------------------------------------------------

def test_failing_gate_goes_to_review_with_its_output(site: Site) -> None:
    use_gate(site, 'for f in $GITPUB_FILES; do echo "spelling: teh in $f"; done; exit 1')
    data = review(prepare(site, "--key", "g1", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "gate_failed"
    assert "gate check" in data["failure_detail"]
    assert "spelling: teh in files/posts/hello.md" in data["failure_detail"]
    assert scratch_left(site) == []


def test_passing_gate_sees_the_files(site: Site, tmp_path: Path) -> None:
    seen = tmp_path / "gate-saw.md"
    use_gate(site, f'cat files/posts/hello.md > "{seen}"')
    ok(prepare(site, "--key", "g2", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert seen.read_text() == ARTICLE


def test_gate_that_modifies_a_file_goes_to_review(site: Site) -> None:
    use_gate(site, "echo 'autofixed' >> files/posts/hello.md")
    data = review(prepare(site, "--key", "g3", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert data["failure_code"] == "gate_failed"
    assert "files/posts/hello.md (modified)" in data["failure_detail"]


def test_non_utf8_article_goes_to_review(site: Site) -> None:
    data = review(prepare(site, "--key", "g4", "--to", "posts/hello.md", "-",
                          input=b"# Caf\xe9\n\nLatin-1, not UTF-8.\n"))
    assert data["failure_code"] == "gate_failed"
    assert "posts/hello.md: not valid UTF-8" in data["failure_detail"]


@pytest.mark.parametrize(("text", "problem"), [
    ("---\ntitle: Hello\n\n# Hello\n", "not closed"),
    ("---\ntitle: [unclosed\n---\n# Hello\n", "not valid YAML"),
    ("---\n- a\n- b\n---\n# Hello\n", "not a mapping"),
])
def test_bad_front_matter_goes_to_review(site: Site, text: str, problem: str) -> None:
    data = review(prepare(site, "--key", "g5", "--to", "posts/hello.md", "-", input=text))
    assert data["failure_code"] == "gate_failed"
    assert problem in data["failure_detail"]


def test_valid_front_matter_passes_and_names_the_commit(site: Site) -> None:
    text = "---\ntitle: Front Matter Title\ntags: [a, b]\n---\n\n# Heading\n\nBody.\n"
    data = ok(prepare(site, "--key", "g6", "--to", "posts/hello.md", "-", input=text))
    assert data["state"] == "LOCAL_COMMITTED"
    subject = site.git("log", "-1", "--format=%s", data["local_commit"]).strip()
    assert subject == "Publish: Front Matter Title"


def test_secret_in_the_source_goes_to_review_and_is_stored_nowhere(site: Site) -> None:
    text = f"# Leaky\n\nMy config:\n\ngithub_token = {TOKEN}\n"
    r = prepare(site, "--key", "g7", "--to", "posts/hello.md", "-", input=text)
    data = review(r)
    assert data["failure_code"] == "secret_in_source"
    assert "secret" in data["failure_detail"]
    status = site.call("status", "--json", data["job_id"])
    assert leaks(site, TOKEN, r, status) == []
    assert leaks(site, "My config:") != []  # the instrument works: the sanitized source is kept


def test_secret_in_a_source_file_with_a_draft_is_stored_nowhere(
        site: Site, tmp_path: Path, counter: Path) -> None:
    use_draft(site, f'echo run >> "{counter}"; exit 1')
    src = tmp_path / "notes.txt"
    src.write_text(f"aws notes\npassword: {OTHER_TOKEN}\n")
    r = prepare(site, "--key", "g8", "--to", "posts/hello.md", str(src))
    data = review(r)
    assert data["failure_code"] == "secret_in_source"
    assert runs(counter) == 0  # a secret source never reaches a draft command
    assert leaks(site, OTHER_TOKEN, r) == []


# -- resuming ------------------------------------------------------------------------------

def test_rerun_of_a_review_job_does_not_draft_again(site: Site, counter: Path) -> None:
    use_draft(site, f'echo run >> "{counter}"; echo "no model" >&2; exit 1')
    first = review(prepare(site, "--key", "r1", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert runs(counter) == 1
    refs = all_refs(site)
    again = review(prepare(site, "--key", "r1", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert again["job_id"] == first["job_id"] and again["created"] is False
    assert again["failure_code"] == first["failure_code"] == "draft_failed"
    r = site.run_here("prepare", "--json", "--key", "r1", "--to", "posts/hello.md", "-",
                      input=ARTICLE)
    assert r.code == 4 and r.json()["job_id"] == first["job_id"]
    assert runs(counter) == 1
    assert all_refs(site) == refs


def test_rerun_after_the_draft_does_not_draft_again(site: Site, counter: Path) -> None:
    use_draft(site, f'echo run >> "{counter}"; mkdir -p "$GITPUB_OUTPUT/posts"; '
                    'cat "$GITPUB_SOURCE" > "$GITPUB_OUTPUT/posts/hello.md"')
    first = ok(prepare(site, "--key", "r2", "--to", "posts/hello.md", "-", input=ARTICLE))
    again = ok(prepare(site, "--key", "r2", "--to", "posts/hello.md", "-", input=ARTICLE))
    assert again["local_commit"] == first["local_commit"]
    assert runs(counter) == 1


def test_the_event_history_records_each_phase(site: Site) -> None:
    data = ok(prepare(site, "--key", "h1", "--to", "posts/hello.md", "-", input=ARTICLE))
    subjects = site.git("log", "--first-parent", "--format=%s",
                        f"refs/pub/jobs/{data['job_id']}").splitlines()
    states = [s.split(":", 1)[0] for s in reversed(subjects)]
    # the once-per-job history search records its own event, in the state it ran in
    distinct = [st for i, st in enumerate(states) if i == 0 or states[i - 1] != st]
    assert distinct == ["RECEIVED", "PREPARING", "READY_TO_COMMIT", "LOCAL_COMMITTING",
                        "LOCAL_COMMITTED"]
    assert len(states) == len(distinct) + 1


def test_usage_errors_change_nothing(site: Site, tmp_path: Path) -> None:
    refs = all_refs(site)
    for args in (["--to", "../escape.md", "-"],
                 ["--to", "posts/a.md", "--to", "posts/a.md", "-", "-"],
                 ["--to", "posts/a.md", "--to", "posts/b.md", "-"],
                 ["--to", "posts/dir/", "-"],
                 ["--to", "posts/a.md", str(tmp_path / "missing.md")]):
        r = prepare(site, "--key", "u", *args, input=ARTICLE)
        assert r.code == 2, (args, r.out, r.err)
    assert all_refs(site) == refs
    assert os.listdir(site.path / "posts") == ["welcome.md"]




def test_prepare_needs_no_network(site: Site) -> None:
    site.git("remote", "set-url", "origin", str(site.path.parent / "unreachable.git"))
    data = ok(prepare(site, "--key", "net", "--to", "posts/hello.md", "-", input=ARTICLE))
    record = job_record(site, data["job_id"])
    assert record["base_ref"] == "refs/remotes/origin/main"
    assert record["base_commit"] == site.git("rev-parse", "origin/main").strip()


def test_concurrent_prepares_of_one_key_make_one_job(site: Site) -> None:
    args = ["prepare", "--json", "--key", "race", "--to", "posts/hello.md", "-"]
    procs = [spawn(site, *args, input=ARTICLE.encode()) for _ in range(3)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    results = [json.loads(out) for out, _err in outs]
    assert len({r["job_id"] for r in results}) == 1
    assert len({r["local_commit"] for r in results}) == 1
    assert sorted(r["created"] for r in results) == [False, False, True]
    assert len(site.job_refs()) == 1


# -- targets that do not fit the base ------------------------------------------------------

def test_target_that_is_a_directory_in_the_base_is_a_conflict(site: Site) -> None:
    site.write_config('content: ["posts"]\n')  # in the write scope: only the base blocks it
    r = prepare(site, "--key", "t1", "--to", "posts", "-", input=ARTICLE)
    assert r.code == 4, (r.code, r.out, r.err)
    data = r.json()
    assert data["state"] == "CONFLICT"
    assert data["failure_code"] == "target_blocked"


def test_target_below_a_file_in_the_base_needs_a_person(site: Site) -> None:
    r = prepare(site, "--key", "t2", "--to", "posts/welcome.md/extra.md", "-", input=ARTICLE)
    assert r.code == 4, (r.code, r.out, r.err)
    assert r.json()["state"] in ("CONFLICT", "REVIEW")
    assert r.json()["local_commit"] is None


def test_stdin_cannot_be_two_sources(site: Site) -> None:
    r = prepare(site, "--key", "t3", "--to", "posts/a.md", "-", "--to", "posts/b.md", "-",
                input=ARTICLE)
    assert r.code == 2, ("the second '-' silently read an empty stdin", r.out)
    assert site.job_refs() == {}


def test_secret_in_a_source_file_name_is_not_stored(site: Site, tmp_path: Path) -> None:
    src = tmp_path / f"{TOKEN}.md"
    src.write_text(f"# Notes\n\npassword: {OTHER_TOKEN}\n")
    r = prepare(site, "--key", "t4", "--to", "posts/hello.md", str(src))
    assert review(r)["failure_code"] == "secret_in_source"
    assert leaks(site, TOKEN, r) == []
