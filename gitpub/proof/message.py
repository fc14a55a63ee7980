"""A person's commit message with gitpub's proof added, exactly as git will read it.

``git pub sync`` delivers a hand commit with its own message. The proof of publication must
travel in the commit itself — the remote branch's history is what PUBLISHED is defined by, and a
note would not be pushed or fetched with the branch — so the message gets the manifest paragraph
and the proof trailers (``<prefix>-Job-Id``, …) *added*, the person's text left byte for byte:

- a message without a trailer block: ``<message>\\n\\n<manifest>\\n<trailers>``;
- a message that ends with a trailer block (``Signed-off-by: …``, as git sees it): the manifest
  paragraph goes before that block and the proof trailers are appended to it, so the person's
  trailers stay trailers (what ``git interpret-trailers --trailer`` would do to them).

Whether a message ends with a trailer block is git's decision (``git interpret-trailers
--parse``), and the result is checked against git before it is used: git must read back the
person's trailers followed by ours — with and without the ``---`` patch divider, as
``interpret-trailers --parse`` and ``git log --format=%(trailers)`` do — and gitpub's reader must
find the proof. A message on which they would disagree (a ``---`` line, say) is refused with the
reason, never rewritten.

git answers these questions as git itself reads messages, with no configuration at all
(``git.run.run_plain``): a person's ``core.commentChar`` (``;``, ``auto``, a letter), their
``trailer.separators`` or ``trailer.<token>.key`` would make their git read the message
otherwise — every message refused, or another one accepted — while gitpub's own reader
(``proof.trailers``) and every CI's git read it without them.
"""

from __future__ import annotations

from gitpub.core.manifest import HEADERS
from gitpub.git.run import GitKilled, GitTimeout, run_plain
from gitpub.proof import trailers


class ProofMessageError(ValueError):
    """The message cannot carry gitpub's proof so that git reads it back unchanged."""


#: git 2.39 loops forever on a scissors line after a ``---`` line; such a message is refused
#: before git sees it, and git gets a timeout all the same.
_CUT = b"# ------------------------ >8 ------------------------"
_PARSE_TIMEOUT = 20.0


#: git's answers in this process: (message, divider) -> the trailers it printed. git with no
#: configuration answers from the message alone, so an answer stays true (the newest kept).
_PARSED: dict[tuple[bytes, bool], bytes] = {}


def _parse(message: bytes, *, divider: bool) -> bytes:
    key = (message, divider)
    if key in _PARSED:
        return _PARSED[key]
    args = ["interpret-trailers", "--parse", *([] if divider else ["--no-divider"])]
    try:  # as git reads it, not as the person's configuration makes their git read it
        proc = run_plain(args, input=message, timeout=_PARSE_TIMEOUT)
    except GitKilled:
        raise  # killed from outside: no reading of the message at all (exit 5, run again)
    except GitTimeout:
        raise ProofMessageError("git interpret-trailers did not finish reading the "
                                "message") from None
    if proc.returncode != 0:
        raise ProofMessageError("git interpret-trailers could not read the message")
    if len(_PARSED) >= 64:
        _PARSED.clear()
    _PARSED[key] = proc.stdout
    return proc.stdout


def with_proof(message: bytes, manifest: bytes, proof: trailers.PubTrailers,
               prefix: str) -> bytes:
    """``message`` with ``manifest`` (a serialized manifest) and the proof trailers added."""
    lines = message.split(b"\n")
    if any(line + b"\n" in HEADERS for line in lines):
        raise ProofMessageError("the message already holds a gitpub manifest line")
    if any(line.startswith(_CUT) for line in lines):
        raise ProofMessageError("the message has a scissors line, where git stops reading it")
    ours = b"".join(f"{k}: {v}\n".encode() for k, v in trailers.proof_pairs(proof, prefix))
    theirs = _parse(message, divider=True)
    text = message.rstrip(b"\n")
    if theirs:
        head, sep, block = text.rpartition(b"\n\n")
        if not sep:
            raise ProofMessageError("git sees trailers in a one-paragraph message")
        composed = head + b"\n\n" + manifest + b"\n" + block + b"\n" + ours
    else:
        composed = text + b"\n\n" + manifest + b"\n" + ours
    for divider in (True, False):
        if _parse(composed, divider=divider) != theirs + ours:
            raise ProofMessageError(
                "git would not read the trailers back as written (the message has a line "
                "starting with '---', comment lines, or trailers git reads differently)")
    found = trailers.read_pub_trailers(composed, prefix)
    if found is None or (found.job_id, found.manifest_sha256) != (proof.job_id,
                                                                  proof.manifest_sha256):
        raise ProofMessageError("gitpub's trailer reader does not find the proof it added")
    return composed
