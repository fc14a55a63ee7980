"""The configuration facts the authenticated ledger vouches for (``verify.facts``), attacked.

A run with CI's key records, under the ledger's MAC, what the ``.gitpub.yaml`` at its
checked-through point says (remote, branch, trailer prefix, ``confirm_unrecorded``), keyed by
the file's blob id and the validator's digest; the next run uses them instead of PyYAML. Each
test breaks one condition — the MAC, the validator, the guess of the remote made before the
ledger is read, the file itself — and ``confirm`` must check exactly what it checks when it
parses the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BASE_CONFIG, Site, git
from test_confirm import KEY, attacker_clone, ci_clone, publish, remote_notes
from test_confirm_gate import forged_notes_commit

from gitpub.config import load as config_load
from gitpub.config.model import Config
from gitpub.git.notes import build_notes_commit
from gitpub.git.repo import Repository
from gitpub.verify import facts as F
from gitpub.verify import ledger as L
from gitpub.verify.facts import guess_remote_branch, validator_digest

JOBS = "refs/pub/jobs/"


def lose_record(site: Site) -> str:
    """Publish one more job and delete its record on the remote: an unrecorded job commit,
    BAD unless the configuration at the range's start says ``confirm_unrecorded: report``."""
    before = set(site.job_refs())
    (commit,) = publish(site, 1, start=len(before) + 10)
    (ref,) = set(site.job_refs()) - before
    git(site.remote, "update-ref", "-d", ref)
    return commit


def ledger_message(repo: Path) -> list[str]:
    """The ledger lines of the remote's newest notes commit (fetched into ``repo``)."""
    git(repo, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    body = git(repo, "log", "-1", "--format=%B", "refs/notes/pub")
    return [ln for ln in body.splitlines() if ln.startswith("Gitpub-")]


def test_a_run_records_the_facts_and_the_next_one_uses_them(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0", depth=None).run("confirm").code == 0
    lines = ledger_message(attacker_clone(site, tmp_path, "reader"))
    (line,) = [ln for ln in lines if ln.startswith(L.FACTS)]
    blob = git(site.remote, "rev-parse", "main:.gitpub.yaml").strip()
    assert F.parse_facts_line(line[len(L.FACTS):]) == (
        blob, validator_digest(), F.facts_of(site_config(site)))
    assert "Gitpub-Confirm-Ledger: v3" in lines
    publish(site, 1, start=1)
    ci = ci_clone(site, tmp_path, "ci1", depth=None)
    parsed: list[str] = []
    original = config_load._load_yaml
    monkeypatch.setattr(config_load, "_load_yaml",
                        lambda text, source: parsed.append(source) or original(text, source))
    monkeypatch.setenv("GITPUB_CONFIRM_KEY", KEY)
    r = ci.call("confirm", "--json")
    assert r.code == 0 and r.json()["checked"] == 1, r.out + r.err
    assert parsed == []  # the working tree's file and the start's: vouched for, not parsed


def site_config(site: Site) -> Config:
    return config_load.load_config(site.path)


def test_forged_facts_are_not_believed(site: Site, tmp_path: Path) -> None:
    """Someone who can push the notes copies the authentic ledger with its facts changed to
    ``confirm_unrecorded: report``: its MAC no longer verifies, the run reads the authentic
    ledger below it, and a job commit without a record stays BAD."""
    publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run("confirm").code == 0
    evil = attacker_clone(site, tmp_path)
    lines = [ln.replace('"confirm_unrecorded": "bad"', '"confirm_unrecorded": "report"')
             for ln in ledger_message(evil)]
    assert any('"report"' in ln for ln in lines)
    forged = forged_notes_commit(evil, lines)
    git(evil, "push", "-q", "origin", f"{forged}:refs/notes/pub")
    commit = lose_record(site)
    r = ci_clone(site, tmp_path, "ci1").run("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [commit], r.out + r.err
    assert "has no record in the remote's job store" in r.out
    assert any("without a valid MAC were ignored" in m for m in r.json()["remarks"])


def authentic_ledger_with(site: Site, tmp_path: Path, line: str) -> None:
    """As a key holder: a notes commit on the remote's notes whose authentic ledger (the last
    one's, MAC valid) carries ``line`` as its facts."""
    clone = attacker_clone(site, tmp_path, "keyholder")
    git(clone, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    key = L.Key(KEY.encode())
    with Repository.discover(clone) as repo:
        tip = repo.read_ref("refs/notes/pub")
        memory = L.read_memory(repo, tip, key)
        assert memory.found
        ledger = L.Ledger(memory.ledger.points, memory.ledger.open_bad,
                          memory.ledger.accepted, memory.ledger.prefixes, (line,))
        new = build_notes_commit(repo, tip, {}, lambda tree: ledger.message("facts", key, tree),
                                 allow_empty=True)
    assert new is not None
    git(clone, "push", "-q", "origin", f"{new}:refs/notes/pub")


@pytest.mark.parametrize("same_validator", [True, False])
def test_facts_of_another_validator_are_not_believed(site: Site, tmp_path: Path,
                                                     same_validator: bool) -> None:
    """An authentic line that says ``report`` for this very file: believed only when it was
    written for this validator (which shows that the memo, not the file, answered); for
    another validator the file is parsed and says ``bad``."""
    publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run("confirm").code == 0
    blob = git(site.remote, "rev-parse", "main:.gitpub.yaml").strip()
    digest = validator_digest()
    lying = F.facts_of(site_config(site))._replace(confirm_unrecorded="report")
    authentic_ledger_with(site, tmp_path, F.facts_line(
        blob, digest if same_validator else "0" * 64, lying))
    commit = lose_record(site)
    r = ci_clone(site, tmp_path, "ci1").run("confirm", "--json")
    if same_validator:
        assert r.code == 0 and any(m.startswith(f"unrecorded: {commit}")
                                   for m in r.json()["remarks"]), r.out + r.err
    else:
        assert r.code == 1 and r.json()["bad"] == [commit], r.out + r.err


def test_a_wrong_guess_of_the_remote_fetches_again(site: Site, tmp_path: Path) -> None:
    """``remote : upstream`` (a space before the colon) is YAML for ``remote: upstream``, but
    the guess made without PyYAML reads the default ``origin``: the facts, once settled, name
    ``upstream``, and the run fetches from it — what it checks is what the file says."""
    publish(site, 1)
    (site.path / ".gitpub.yaml").write_text(BASE_CONFIG.replace("remote: ", "remote : upstream #"))
    assert guess_remote_branch((site.path / ".gitpub.yaml").read_text()) == ("origin", "main")
    assert site_config(site).remote == "upstream"
    site.git("commit", "-qam", "config: the remote is called upstream")
    site.git("push", "-q", "origin", "main")
    for name in ("ci0", "ci1"):  # parsed, then vouched for
        ci = ci_clone(site, tmp_path, name, depth=None)
        git(ci.path, "remote", "rename", "origin", "upstream")
        r = ci.run("confirm", "--json")
        assert r.code == 0, r.out + r.err
        assert git(ci.path, "rev-parse", "refs/remotes/upstream/main").strip() == r.json()["tip"]
        assert r.json()["notes_pushed"] == (name == "ci0")
    assert "gitpub-confirm: checked-through" in remote_notes(site, r.json()["tip"])


def test_a_file_the_guess_misreads_is_refused_as_ever(site: Site, tmp_path: Path) -> None:
    """``branch:main`` is no mapping entry in YAML (the guess reads one): the file is invalid,
    and confirm says so with the key exactly as without it."""
    publish(site, 1)
    (site.path / ".gitpub.yaml").write_text("remote: origin\nbranch:main\n")
    site.git("commit", "-qam", "config: broken")
    site.git("push", "-q", "origin", "main")
    ci = ci_clone(site, tmp_path, "ci", depth=None)
    keyed = ci.run("confirm")
    keyless = ci.run("confirm", env={"GITPUB_CONFIRM_KEY": ""})
    assert keyed.code == keyless.code == 2, keyed.out + keyed.err
    assert keyed.err == keyless.err and "invalid YAML" in keyed.err


def test_the_defaults_are_configs() -> None:
    assert F.facts_of(Config()) == F.DEFAULTS


@pytest.mark.parametrize(("text", "guess"), [
    ("", ("origin", "main")), ("remote: up\nbranch: trunk # the main one\n", ("up", "trunk")),
    ("articles: ['x']\nbranch: a/b-c.d\n", ("origin", "a/b-c.d")),
    ("  branch: nested\n", ("origin", "main")), ("branch: 'quoted'\n", None),
    ("branch: a\nbranch: b\n", None), ("---\nbranch: x\n", None), ("{branch: x}\n", None),
    ("branch: &a x\n", None), ("branch:\n", None), ("\tbranch: x\n", None),
    ("? branch\n: x\n", None), ("branch: ü\n", None), ("remote: --upload-pack\n", None),
    ("remote: a/b\n", None), ("branch: a..b\n", None), ("branch: x.lock\n", None),
    ("remote: .hidden\n", None), ("branch: /x\n", None)])
def test_the_guess_reads_only_plain_lines(text: str, guess: tuple[str, str] | None) -> None:
    assert guess_remote_branch(text) == guess
