"""Adapters: how a channel talks to its platform, behind one Protocol.

An adapter turns "send this payload for this intent" into one of three outcomes (``Sent``,
``NotSent``, ``Unknown``; see ``model``) and never raises for anything the platform or the
command does: an exception it cannot classify is ``Unknown`` (reference §6). ``reconcile``
looks for evidence of an earlier send whose outcome is unknown: a ``command`` channel runs its
``probe``; a ``webhook`` resends the same bytes with the same ``Idempotency-Key`` (the platform
answers with the original result). It returns None when the adapter has no way to look (a
command without a probe): then a person must.

The ``command`` protocol: ``send`` gets the frozen payload as JSON on stdin and
``GITPUB_INTENT_KEY``, ``GITPUB_CHANNEL``, ``GITPUB_ACCOUNT``, ``GITPUB_JOB_ID`` (also
``GITPUB_OPERATION``, ``GITPUB_PAYLOAD_SHA256``) in its environment; it exits 0 and prints one
JSON object: ``{"outcome":"sent","remote_id":…,"url":…}``, ``{"outcome":"not_sent",
"retryable":bool,"code":…}`` or ``{"outcome":"unknown","code":…}``. Anything else — a crash, a
non-zero exit, a timeout, other output (two JSON objects, a key given twice, output longer than
the 64 KiB the step runner keeps), a ``sent`` without an id or URL — is ``unknown``. Only a
command that could not be started at all is ``not_sent``. ``probe`` gets the same input and
answers ``{"outcome":"found","remote_id":…,"url":…}``, ``{"outcome":"not_found"}`` or
``{"outcome":"unknown"}``. Commands run with the pipeline's step runner (own process group,
timeout, private scratch directory).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gitpub.channels.model import NotSent, Outcome, Sent, Unknown
from gitpub.config.model import ChannelSpec, Command
from gitpub.core.sanitize import sanitize
from gitpub.runtime.steps import OUTPUT_LIMIT, Scratch, StepResult, run

CODE_LIMIT = 200


@dataclass(frozen=True)
class Intent:
    """What one send means: (job, channel, account, operation), named by ``key``."""

    key: str
    job_id: str
    channel: str
    account: str
    operation: str
    payload_sha256: str


class Adapter(Protocol):
    def send(self, payload: bytes, intent: Intent) -> Outcome:
        """Send ``payload`` once; classify what happened."""
        ...

    def reconcile(self, payload: bytes, intent: Intent) -> Outcome | None:
        """Look for evidence that an earlier send went out; None: no way to look."""
        ...


def code(text: object, default: str) -> str:
    """A platform's error code as we keep it: a sanitized one-liner."""
    if not isinstance(text, str) or not text.strip():
        return default
    return sanitize(" ".join(text.split()))[:CODE_LIMIT]


def _evidence(data: dict[str, Any]) -> tuple[str | None, str | None]:
    remote_id, url = data.get("remote_id"), data.get("url")
    if isinstance(remote_id, int) and not isinstance(remote_id, bool):
        remote_id = str(remote_id)
    return (sanitize(remote_id) if isinstance(remote_id, str) and remote_id else None,
            sanitize(url) if isinstance(url, str) and url else None)


def _one_object(result: StepResult) -> dict[str, Any] | Unknown:
    """The command's JSON answer, or why there is none (always unknown)."""
    if result.timed_out:
        return Unknown("timeout")
    if result.returncode != 0:
        return Unknown(f"exit_status_{result.returncode}")
    if len(result.stdout) >= OUTPUT_LIMIT:
        # The step runner keeps the *end* of a longer output: what was cut off may have been
        # another answer ("sent" first, then more): not exactly one outcome.
        return Unknown("output_too_long")
    try:
        data = json.loads(result.stdout.decode("utf-8"), object_pairs_hook=_unique_keys,
                          parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Unknown("unreadable_output")  # not JSON, two objects, a key said twice
    return data if isinstance(data, dict) else Unknown("unreadable_output")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each said once (``{"outcome":"sent","outcome":…}`` is no
    single answer)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("a key appears twice")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def send_outcome(result: StepResult) -> Outcome:
    """Classify a finished ``send`` command (exactly the protocol above)."""
    if result.start_error is not None:
        return NotSent(False, "cannot_run")  # it never ran: nothing can have gone out
    data = _one_object(result)
    if isinstance(data, Unknown):
        return data
    kind = data.get("outcome")
    if kind == "sent":
        remote_id, url = _evidence(data)
        if remote_id is None and url is None:
            return Unknown("sent_without_evidence")
        return Sent(remote_id, url, "send")
    if kind == "not_sent" and isinstance(data.get("retryable", False), bool):
        return NotSent(bool(data.get("retryable", False)), code(data.get("code"), "not_sent"))
    if kind == "unknown":
        return Unknown(code(data.get("code"), "unknown"))
    return Unknown("unreadable_output")


def probe_outcome(result: StepResult) -> Outcome:
    """Classify a finished ``probe``: found is evidence; anything else leaves it unknown."""
    if result.start_error is not None:
        return Unknown("probe_cannot_run")
    data = _one_object(result)
    if isinstance(data, Unknown):
        return Unknown(f"probe_{data.code}")
    if data.get("outcome") == "found":
        remote_id, url = _evidence(data)
        if remote_id is not None or url is not None:
            return Sent(remote_id, url, "probe")
        return Unknown("probe_found_without_evidence")
    if data.get("outcome") == "not_found":
        return Unknown("probe_not_found")
    return Unknown("probe_unknown")


class CommandAdapter:
    """The ``command`` kind: ``send`` and the optional ``probe``, as described above."""

    def __init__(self, spec: ChannelSpec, scratch_root: Path) -> None:
        assert spec.send is not None
        self.spec = spec
        self.scratch_root = scratch_root

    def _run(self, which: str, argv: tuple[str, ...], payload: bytes,
             intent: Intent) -> StepResult:
        command = Command(name=f"channel {self.spec.name} {which}", argv=argv,
                          timeout=self.spec.timeout)
        env = {"GITPUB_INTENT_KEY": intent.key, "GITPUB_CHANNEL": intent.channel,
               "GITPUB_ACCOUNT": intent.account, "GITPUB_JOB_ID": intent.job_id,
               "GITPUB_OPERATION": intent.operation,
               "GITPUB_PAYLOAD_SHA256": intent.payload_sha256}
        with Scratch(self.scratch_root, f"channel-{self.spec.name}") as scratch:
            return run(command, scratch, stdin=payload, env=env)

    def send(self, payload: bytes, intent: Intent) -> Outcome:
        assert self.spec.send is not None
        return send_outcome(self._run("send", self.spec.send, payload, intent))

    def reconcile(self, payload: bytes, intent: Intent) -> Outcome | None:
        if self.spec.probe is None:
            return None
        return probe_outcome(self._run("probe", self.spec.probe, payload, intent))

