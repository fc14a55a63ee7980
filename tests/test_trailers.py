"""Our trailers must read back identically through C git (the oracle) and through our parser."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Site
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.git import trailers
from gitpub.git.trailers import PubTrailers, TrailerNames

HEX = "0123456789abcdef"
proofs = st.builds(
    PubTrailers,
    job_id=st.uuids().map(str),
    manifest_sha256=st.text(HEX, min_size=64, max_size=64),
    base_commit=st.one_of(st.none(), st.text(HEX, min_size=40, max_size=40)),
    writer_node=st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}",
                                                   fullmatch=True)),
    sync_id=st.one_of(st.none(), st.from_regex(r"[0-9a-f]{12}:[0-9a-f]{24}", fullmatch=True)),
)
# Bodies the way jobs write them (a manifest) and the way people write them (prose, lines
# that look like trailers, CJK, separators), never a paragraph we did not intend as trailers.
body_lines = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=60),
    st.sampled_from(["Signed-off-by: A <a@b>", "Key: value", "---", "# heading", "中文：内容",
                     "gitpub-manifest v1", "100644 " + "a" * 64 + " posts/x.md"]),
)
bodies = st.lists(body_lines, max_size=6).map(lambda ls: "\n".join(ls).encode())
prefixes = st.sampled_from(["Blog", "News", "X", "Site2"])


def git_parse(message: bytes, cwd: Path) -> list[str]:
    out = subprocess.run(["git", "interpret-trailers", "--parse"], input=message, cwd=cwd,
                         capture_output=True, check=True).stdout
    return out.decode().splitlines()


def expected(proof: PubTrailers, prefix: str) -> list[str]:
    names = TrailerNames.for_prefix(prefix)
    lines = [f"{names.job_id}: {proof.job_id}", f"{names.manifest}: {proof.manifest_sha256}"]
    if proof.base_commit:
        lines.append(f"{names.base}: {proof.base_commit}")
    if proof.writer_node:
        lines.append(f"{names.node}: {proof.writer_node}")
    if proof.sync_id:
        lines.append(f"{names.sync}: {proof.sync_id}")
    return lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proof=proofs, subject=st.text(max_size=80), body=bodies, prefix=prefixes)
def test_written_trailers_parse_identically_in_git_and_in_gitpub(
        tmp_path_factory: object, proof: PubTrailers, subject: str, body: bytes,
        prefix: str) -> None:
    message = trailers.format_message(subject, body, proof, prefix)
    assert git_parse(message, Path.cwd()) == expected(proof, prefix)
    assert trailers.read_pub_trailers(message, prefix) == proof


def test_git_log_reads_the_job_id_of_a_real_commit(site: Site) -> None:
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                  input="# T\n\nbody\n\nNot-A: trailer\n")
    commit = r.json()["local_commit"]
    out = site.git("log", "-1", "--format=%(trailers:key=Blog-Job-Id,valueonly)", commit)
    assert out.strip() == r.json()["job_id"]
    manifest = site.git("log", "-1", "--format=%(trailers:key=Blog-Manifest-Sha256,valueonly)",
                        commit)
    assert manifest.strip() == r.json()["manifest_sha256"]


def test_a_message_without_both_trailers_is_no_proof() -> None:
    assert trailers.read_pub_trailers(b"Subject\n\nBlog-Job-Id: x\n", "Blog") is None
    assert trailers.read_pub_trailers(b"Subject\n", "Blog") is None
