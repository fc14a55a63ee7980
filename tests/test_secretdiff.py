"""The secret scan reads the change: a finding the base version of a file already had, on lines
the job leaves as they were, is not the job's; everything the job adds or changes is scanned,
with the whole file as context.

The attacks a diff-based scan invites are each pinned here: a secret split across changed lines,
one on an unchanged line next to a changed one, one moved within the file or from another file,
a key block whose END line is removed, and one that became a finding through a change beside it.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from gitpub.core.allowlist import INHERITED, NO_RULES, keep, scan
from gitpub.core.sanitize import find_secrets, sanitize, secret_spans
from gitpub.core.secretdiff import NOTHING, Inherited, unchanged_runs

# Built by concatenation so this file does not itself look like a leaked credential.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's own documentation example
GHP = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BEGIN, END = "-----BEGIN RSA " + "PRIVATE KEY-----", "-----END RSA " + "PRIVATE KEY-----"
PAGE = f"# Credentials\n\nSet the key:\n\n    aws_access_key_id = {AWS}\n\nThen run teh command.\n"


def verdicts(old: str | None, new: str) -> list[tuple[int, str | None]]:
    """(line, what allowed it) of each finding of ``new`` against its base version ``old``."""
    return [(h.line, h.allowed_by) for h in scan(new, ("docs/a.md",), NO_RULES, "docs/a.md",
                                                 Inherited(old))]


def test_a_typo_fixed_on_a_page_with_an_example_key_brings_no_secret() -> None:
    assert verdicts(PAGE, PAGE.replace("teh", "the")) == [(5, INHERITED)]


def test_a_new_file_is_judged_whole() -> None:
    assert verdicts(None, PAGE) == [(5, None)]
    assert [(h.line, h.allowed_by) for h in scan(PAGE, ("a",), NO_RULES, "a", NOTHING)] == [
        (5, None)]


def test_a_secret_on_a_changed_line_is_the_jobs() -> None:
    new = PAGE.replace(AWS, "AKIA" + "QWERTYUIOPASDFGH")
    assert verdicts(PAGE, new) == [(5, None)]
    assert verdicts(PAGE, PAGE.replace("key_id = ", "key_id  = ")) == [(5, None)]  # same value


def test_a_secret_added_next_to_an_unchanged_one_is_the_jobs() -> None:
    new = PAGE.replace("Then run", f"Token: {GHP}\nThen run")
    assert verdicts(PAGE, new) == [(5, INHERITED), (7, None)]


def test_an_unchanged_secret_between_two_changed_lines_stays_inherited() -> None:
    new = PAGE.replace("Set the key:", "Set the key now:").replace("teh", "the")
    assert verdicts(PAGE, new) == [(5, INHERITED)]


def test_a_secret_split_across_two_changed_lines_is_the_jobs() -> None:
    old = f"# Keys\n\n{BEGIN}\nMIIEowIBAAKCAQEAxyz\n{END}\n\nText.\n"
    assert verdicts(old, old.replace("Text.", "More text.")) == [(3, INHERITED)]
    inside = old.replace("MIIEowIBAAKCAQEAxyz", "MIIEowIBAAKCAQEAabc\nMIIEsecondline")
    assert verdicts(old, inside) == [(3, None)]  # the block is the job's once a line of it is
    new_block = "# Keys\n\nText.\n" + f"{BEGIN}\nMIIEnewkeynewkey\n{END}\n"
    assert verdicts("# Keys\n\nText.\n", new_block) == [(4, None)]


def test_a_key_block_that_loses_its_end_line_is_the_jobs() -> None:
    old = f"{BEGIN}\nMIIEowIBAAKCAQEAxyz\n{END}\nMore text.\n"
    assert verdicts(old, old.replace(f"{END}\n", "")) == [(1, None)]
    assert verdicts(old, old + "And more.\n") == [(1, INHERITED)]


def test_a_block_that_only_became_a_finding_through_a_change_beside_it_is_the_jobs() -> None:
    """Base: one block from the first BEGIN to the only END. An END line added in the middle
    makes the lines after it a block of their own: every one of them unchanged, but the base had
    no finding there — so it is the job's."""
    old = f"{BEGIN}\nMIIEfirst\n{BEGIN}\nMIIEsecond\n{END}\n"
    new = f"{BEGIN}\nMIIEfirst\n{END}\n{BEGIN}\nMIIEsecond\n{END}\n"
    assert [(s, e) for s, e, _ in secret_spans(old)] == [(0, len(old) - 1)]
    assert verdicts(old, new) == [(1, None), (4, None)]


def test_a_secret_moved_within_the_file_is_the_jobs() -> None:
    lines = PAGE.splitlines(keepends=True)
    moved = "".join([*lines[:4], *lines[5:], lines[4]])
    assert verdicts(PAGE, moved) == [(7, None)]


def test_a_secret_copied_from_another_file_is_the_jobs() -> None:
    """Only the same path's base version counts: the gates give each file its own."""
    other = "# Other page\n\nNothing here.\n"
    assert verdicts(other, other + f"\n    aws_access_key_id = {AWS}\n") == [(5, None)]


def test_line_endings_count_as_changes() -> None:
    assert verdicts(PAGE, PAGE.replace("\n", "\r\n")) == [(5, None)]


def test_sanitize_keeps_inherited_findings_only() -> None:
    new = PAGE.replace("Then run", f"Token: {GHP}\nThen run")
    out = sanitize(new, keep(("docs/a.md",), NO_RULES, Inherited(PAGE)))
    assert AWS in out and GHP not in out and "[REDACTED:github-token]" in out
    assert [f.line for f in find_secrets(out)] == [5]


def test_unchanged_runs_pair_equal_lines() -> None:
    old, new = "a\nb\nc\nd\n", "a\nB\nc\nd\ne\n"
    assert unchanged_runs(old, new) == [(0, 2, 0), (4, 8, 4)]
    assert unchanged_runs(old, old) == [(0, 8, 0)]
    assert unchanged_runs("", "x\n") == []


LINES = [f"    aws_access_key_id = {AWS}\n", f"token: {GHP}\n", "prose\n", "\n", f"{BEGIN}\n",
         "MIIEbody\n", f"{END}\n", f"x {AWS} y\n"]


@given(st.lists(st.sampled_from(LINES), max_size=12), st.data())
def test_no_edit_gets_more_secrets_through_than_the_base_had(
        old_lines: list[str], data: st.DataObject) -> None:
    """Whatever the edit, each inherited finding is a finding of the base with the same value,
    and no value is inherited more often than the base has it (a copy of an existing secret is
    the job's); a file left as it was inherits every finding."""
    new_lines = list(old_lines)
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(new_lines)))
        if data.draw(st.booleans()) and at < len(new_lines):
            del new_lines[at]
        else:
            new_lines.insert(at, data.draw(st.sampled_from(LINES)))
    old, new = "".join(old_lines), "".join(new_lines)
    inherited = Inherited(old)
    in_base = Counter(old[s:e] for s, e, _ in secret_spans(old))
    through = Counter(new[s:e] for s, e, _ in secret_spans(new) if inherited.covers(new, s, e))
    assert through <= in_base
    assert all(Inherited(old).covers(old, s, e) for s, e, _ in secret_spans(old))
