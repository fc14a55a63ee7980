"""Refs as C git reads and moves them: ``for-each-ref`` to read, ``update-ref --stdin`` to move.

Every ref gitpub reads or moves goes through C git, so whatever ref storage the repository has
(loose files and ``packed-refs``, reftable where git supports it), gitpub reads what git reads
and moves refs as git moves them:

- **Reads are exact.** A ref is read with ``git for-each-ref`` and its full name, never through
  git's revision parser, which would take ``refs/tags/refs/pub/jobs/<id>`` (a tag anyone can
  have a clone fetch) for a job ref that does not exist. A ref git calls broken (an empty or
  garbage loose file, a crash symptom) is named on stderr (``ignoring broken ref``): it is
  corruption, reported, never taken for "no ref".
- **Moves are compare-and-swap transactions.** ``start``, every ``update``/``create``/
  ``delete`` with the value we expect, ``prepare`` (git takes every lock and checks every
  value), ``commit``: all or nothing. A value that moved is ``False`` (someone else won);
  a lock another process holds is ``FileLocked`` (``Repository`` waits, healing a stale
  lock: ``git.locks``). git fsyncs the ref files (``core.fsync`` with ``reference``); the
  directory entries are fsynced here, which git does not do.
- **The reflog is git's**: written where ``core.logAllRefUpdates`` says, by git.
- **Mirrors of a remote are read once per command.** Refs under ``mirror_prefixes`` (the
  caller's: remote-tracking refs) are copies of another repository's refs, never the truth
  about anything: every move on the remote is a compare-and-swap there, and every move of them
  here one too. So a value read (or listed) is kept for the rest of the command, and so is a
  value this process wrote under compare-and-swap; a transaction that fails, and any git this
  repository runs that may move refs (``fetch``, ``push``: ``mirror_git``), forget them all.
  A copy kept may be older than one another process (a concurrent fetch) wrote meanwhile —
  exactly what a fresh read just before that fetch would have seen — and a decision taken on
  it is checked by the remote's compare-and-swap (``--force-with-lease``, a fast-forward) or by
  the local one, which then fails and forgets it.
- **So are gitpub's own listings, where a command asks** (``local_prefixes``: the publishing
  commands' job refs, active and distribution index, listed once at their start). Every move
  of those refs is a compare-and-swap here too, so a kept value another process of this clone
  has moved since makes the next compare-and-swap on it fail (and forget it): never pass. A
  read that decides a race is fresh (``read_refs``: the job's ref after the fetch, before its
  claim). They are forgotten with the mirrors, except after a ``push`` or ``fetch``, which
  move remote-tracking refs only.

A test may kill the process while git holds the transaction's locks (``git.ref-locked``:
after ``prepare``): git is killed first, leaving exactly the locks a power cut leaves.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, TryLaterError
from gitpub.core.files import fsync_dir
from gitpub.git.locks import FileLocked
from gitpub.git.objects import ObjectFormat
from gitpub.git.run import DEFAULT_TIMEOUT, CompletedProcess, Popen, popen_git, run_git

T = TypeVar("T")

_FORMAT = "--format=%(objectname) %(refname)"
_BROKEN = re.compile(r"^warning: ignoring (?:broken ref|dangling symref) (\S+)", re.M)
#: Seconds a ref transaction may take before git is killed (its locks then stale).
TRANSACTION_TIMEOUT = DEFAULT_TIMEOUT
_LOCKED = re.compile(r"Unable to create '(.+)\.lock': File exists")


#: The ``old`` of a deletion that holds whatever the ref holds, or nothing (git's ``delete``
#: without an old value): for derived refs only (an index entry that goes with a state).
ANY_VALUE = "any"


class RefUpdate(NamedTuple):
    """``ref`` from ``old`` (None: must not exist) to ``new`` (None: deleted; then ``old`` may
    be ``ANY_VALUE``)."""

    ref: str
    new: str | None
    old: str | None


class RefAccess:
    """Ref reads and moves, for ``Repository`` (which provides the attributes below)."""

    object_format: ObjectFormat
    common_dir: Path
    git_dir: Path
    #: Prefixes (ending with ``/``) of the refs that mirror a remote's (see the module).
    mirror_prefixes: tuple[str, ...] = ()
    #: Prefixes (ending with ``/``) of this repository's own refs kept as the mirrors are, in
    #: a command that asks (see the module).
    local_prefixes: tuple[str, ...] = ()
    #: Kept refs known in this command: name -> value (None: there is none).
    _kept_known: dict[str, str | None]
    #: Kept refs git called broken when they were listed.
    _kept_broken: set[str]
    #: Kept prefixes listed in full: a name below one that is not known is absent.
    _kept_listed: set[str]
    #: The value of every ref read by name in this command, kept or not, as last read or
    #: written: for what no decision rests on (``seen``).
    _seen: dict[str, str | None]

    #: The ``git update-ref --stdin`` that serves this command's unlogged transactions.
    _session: _Session | None = None

    def git(self, *args: str, timeout: float | None = None, input: bytes | None = None
            ) -> CompletedProcess[bytes]:
        raise NotImplementedError

    def config(self) -> dict[str, str]:
        raise NotImplementedError

    def _while_locked(self, action: Callable[[], T], what: str,
                      done: Callable[[], bool] | None = None) -> T | None:
        raise NotImplementedError

    # -- reading ---------------------------------------------------------------------------

    def _for_each_ref(self, *patterns: str) -> tuple[dict[str, str], list[str]]:
        return for_each_ref(self.git_dir, *patterns)

    def read_ref(self, name: str) -> str | None:
        """The object id a ref points at, ``None`` if absent; a broken ref raises, and so does
        a symbolic ref that leads nowhere (gitpub writes none: ``for-each-ref`` skips it
        silently, ``symbolic-ref`` names it). A kept ref (``mirror_prefixes``,
        ``local_prefixes``) is read once per command (see the module)."""
        if not self._is_kept(name):
            return self._read_ref(name)
        if name in self._kept_broken:
            raise broken_ref(self.common_dir, name)
        if name in self._kept_known:
            return self._kept_known[name]
        if self._below_listed(name) and not self._may_be_symbolic(name):
            return None  # listed in full, and no file stands there
        value = self._read_ref(name)
        self._kept_known[name] = value
        return value

    def _read_ref(self, name: str) -> str | None:
        return self.read_refs([name])[name]

    def read_refs(self, names: Sequence[str], also: Sequence[str] = ()
                  ) -> dict[str, str | None]:
        """``read_ref`` of each of ``names`` (full names) in one ``git for-each-ref``, always
        asking git (a read that decides a race: ``git.refs``): name → object id (None:
        absent). A broken ref among them raises, as ``read_ref`` does (``read_together`` reads
        leniently, prefixes too). ``also``: prefixes (ending with ``/``) listed in the same
        ``for-each-ref``, leniently, for what is kept of them (``list_refs``)."""
        found, broken = self._for_each_ref(*names, *also)
        self._remember(also, found, broken)
        out: dict[str, str | None] = {}
        for name in names:
            if name in broken:
                raise broken_ref(self.common_dir, name)
            if name not in found and self._may_be_symbolic(name) and \
                    self.git("symbolic-ref", "-q", "--no-recurse", name).returncode == 0:
                raise broken_ref(self.common_dir, name, "a symbolic ref that leads nowhere")
            out[name] = self._seen[name] = found.get(name)
            if self._is_kept(name):  # a fresh read replaces what was kept (git.refs)
                self._kept_known[name] = out[name]
                self._kept_broken.discard(name)
        return out

    def read_ref_now(self, name: str) -> str | None:
        """``name``'s value as it is now (a read that decides a race): the value kept for the
        command, confirmed by git — a ``verify`` through the command's ``update-ref`` session,
        which costs no process of its own — or, when none is kept or it moved (then
        everything kept is forgotten, as after any swap that fails), read afresh
        (``read_refs``)."""
        if self._is_kept(name) and name not in self._kept_broken and (
                name in self._kept_known or
                (self._below_listed(name) and not self._may_be_symbolic(name))):
            value = self._kept_known.get(name)
            if self._verified(name, value):
                self._kept_known[name] = self._seen[name] = value  # confirmed: kept
                return value
        return self.read_refs([name])[name]

    def _verified(self, name: str, value: str | None) -> bool:
        """Whether ``name`` holds ``value`` (None: no such ref), by git's ``verify`` (it takes
        the ref's lock, writes nothing) in the command's ``update-ref`` session."""
        _check_name(name)
        lines = ["start", f"verify {name} {value or self.object_format.zero}", "prepare"]
        check = [RefUpdate(name, value, value)]
        try:
            done = self._while_locked(lambda: self._in_session(check, lines), f"ref {name}")
        except CorruptStateError:
            done = False  # damaged, say: the fresh read says what
        except BaseException:
            self.forget_refs()
            raise
        if not done:
            self.forget_refs()
        return bool(done)

    def seen(self, names: Sequence[str]) -> dict[str, str | None]:
        """The values of those of ``names`` this command read by name (or wrote), kept refs or
        not, as it last did: for what no decision rests on (the refs a fetch negotiates with),
        since any of them may have moved since. The others are left out."""
        return {n: self._seen[n] for n in names if n in self._seen}

    def _may_be_symbolic(self, name: str) -> bool:
        """Whether a ref ``for-each-ref`` did not list may be a symbolic ref (only then is
        ``git symbolic-ref`` asked). With git's files backend a symbolic ref is a loose file
        (``packed-refs`` holds none): where no file stands at the ref's path, in the common or
        this worktree's directory, there is none. Any other ref storage (``reftable``): git
        is asked."""
        if (self.common_dir / "reftable").exists():
            return True
        return any(os.path.lexists(base / name) for base in {self.common_dir, self.git_dir})

    def list_refs(self, prefix: str) -> dict[str, str]:
        """Refs under ``prefix`` (which ends with ``/``), keyed by the rest of their name;
        broken ones left out (``ref_names`` lists them)."""
        if self._is_kept(prefix) and self._below_listed(prefix):
            return {name[len(prefix):]: sha for name, sha in self._kept_known.items()
                    if sha is not None and name.startswith(prefix)}
        found, broken = self._for_each_ref(prefix)
        self._remember([prefix], found, broken)
        return {name[len(prefix):]: sha for name, sha in found.items()
                if name.startswith(prefix)}

    def read_together(self, patterns: Sequence[str], *, fresh: bool = False
                      ) -> dict[str, str]:
        """Refs read together, in one ``for-each-ref``: each pattern a full name or a prefix
        ending with ``/``; the readable refs they match (full name -> id: broken ones and a
        symbolic ref that leads nowhere left out, as ``current_value`` leaves them). What it
        reads of the kept refs is kept for the command (``read_ref``, ``list_refs``); when
        every pattern is kept already, no git is asked, unless ``fresh`` (a read that decides
        what no compare-and-swap on these refs checks: a fold's listings)."""
        if not patterns:
            return {}
        kept = None if fresh else self._kept_reading(patterns)
        if kept is not None:
            return kept
        found, broken = for_each_ref(self.git_dir, *patterns)
        self._remember([p for p in patterns if p.endswith("/")], found, broken)
        for pattern in patterns:
            if pattern.endswith("/"):
                continue
            self._seen[pattern] = found.get(pattern)
            if not self._is_kept(pattern):
                continue
            self._kept_broken.discard(pattern)
            if pattern in found:
                self._kept_known[pattern] = found[pattern]
            elif pattern in broken:
                self._kept_broken.add(pattern)
            elif not self._may_be_symbolic(pattern):
                self._kept_known[pattern] = None
            else:
                self._kept_known.pop(pattern, None)  # git is asked at the next read
        return found

    def _kept_reading(self, patterns: Sequence[str]) -> dict[str, str] | None:
        """What ``read_together`` reads of ``patterns``, from the refs kept; None unless every
        pattern is kept (a name known, or below a prefix listed in full)."""
        out: dict[str, str] = {}
        for pattern in patterns:
            if not self._is_kept(pattern):
                return None
            if pattern.endswith("/"):
                if not self._below_listed(pattern):
                    return None
                out.update((n, v) for n, v in self._kept_known.items()
                           if v is not None and n.startswith(pattern))
            elif pattern in self._kept_broken:
                continue  # left out, as git's listing leaves it out
            elif pattern in self._kept_known:
                value = self._kept_known[pattern]
                if value is not None:
                    out[pattern] = value
            elif not self._below_listed(pattern) or self._may_be_symbolic(pattern):
                return None
        return out

    def _remember(self, prefixes: Sequence[str], found: Mapping[str, str],
                  broken: Sequence[str]) -> None:
        """Keep what a listing of ``prefixes`` (each ending with ``/``) found of the kept
        refs: it replaces whatever was known below each (a fresh read is never older)."""
        for prefix in prefixes:
            if not self._is_kept(prefix):
                continue
            for name in [n for n in self._kept_known if n.startswith(prefix)]:
                del self._kept_known[name]
            self._kept_broken = {n for n in self._kept_broken if not n.startswith(prefix)}
            self._kept_known.update((n, v) for n, v in found.items() if n.startswith(prefix))
            self._kept_broken.update(n for n in broken if n.startswith(prefix))
            self._kept_listed.add(prefix)

    def _is_kept(self, name: str) -> bool:
        return any(name.startswith(p) for p in (*self.mirror_prefixes, *self.local_prefixes))

    def _below_listed(self, name: str) -> bool:
        return any(name.startswith(p) for p in self._kept_listed)

    def forget_mirrors(self, below: Sequence[str] | None = None) -> None:
        """Forget the mirror refs known (``below``: only those whose names start with one of
        these): the next read asks git (after a fetch or a push, which move remote-tracking
        refs). The local refs kept stay (``forget_refs``)."""
        if not hasattr(self, "_kept_known"):
            self.forget_refs()
            return
        gone = tuple(p for p in (self.mirror_prefixes if below is None else below) if p)
        if not gone:
            return

        def overlaps(prefix: str) -> bool:  # a listing below or above what may have moved
            return prefix.startswith(gone) or any(g.startswith(prefix) for g in gone)

        self._kept_known = {n: v for n, v in self._kept_known.items() if not n.startswith(gone)}
        self._kept_broken = {n for n in self._kept_broken if not n.startswith(gone)}
        self._kept_listed = {p for p in self._kept_listed if not overlaps(p)}
        self._seen = {n: v for n, v in self._seen.items() if not n.startswith(gone)}

    def forget_refs(self) -> None:
        """Forget every ref kept, mirror or local: the next read asks git (after a
        transaction that failed, a git that may have moved any ref, a program of the
        person's)."""
        self._kept_known = {}
        self._kept_broken = set()
        self._kept_listed = set()
        self._seen = {}

    def ref_names(self, prefix: str) -> list[str]:
        """The names under ``prefix`` (ending with ``/``) of every ref, *including* broken
        ones: a damaged ref must be reported, never be taken for no ref. git names the ones it
        calls broken; a loose symbolic ref that leads nowhere it skips without a word, so the
        loose files below the prefix are listed too."""
        found, broken = self._for_each_ref(prefix)
        names = {n[len(prefix):] for n in [*found, *broken] if n.startswith(prefix)}
        top = self.common_dir / prefix
        for dirpath, _dirs, files in os.walk(top):
            rel = Path(dirpath).relative_to(top)
            names.update((rel / f).as_posix() for f in files if not f.endswith(".lock"))
        return sorted(names)

    def symbolic_target(self, name: str) -> str | None:
        """The ref the symbolic ref ``name`` points at (``git symbolic-ref``), None when
        ``name`` is no symbolic ref. With the files backend a symbolic ref is a loose file
        holding ``ref: <target>`` and nothing else (git writes it so, and never packs one):
        read there, without starting a git; anything else in the file is git's to read."""
        if not (self.common_dir / "reftable").is_dir():
            try:
                text = (self.common_dir / name).read_bytes().decode("utf-8")
            except FileNotFoundError:
                return None
            except (OSError, UnicodeDecodeError):
                text = ""
            target = text.removeprefix("ref: ").removesuffix("\n")
            if text.startswith("ref: refs/") and text.endswith("\n") and \
                    not any(c.isspace() for c in target):
                return target
        proc = self.git("symbolic-ref", "--quiet", name)
        found = proc.stdout.decode("utf-8", "replace").strip()
        return found if proc.returncode == 0 and found else None

    def symbolic_head(self) -> str | None:
        """The ref HEAD points at (``refs/heads/…``), with or without a working tree; None when
        HEAD is detached."""
        proc = self.git("symbolic-ref", "-q", "HEAD")
        if proc.returncode != 0:
            return None
        return proc.stdout.decode("utf-8", "surrogateescape").strip() or None

    # -- moving ----------------------------------------------------------------------------

    def cas_ref(self, name: str, old: str | None, new: str, message: str = "gitpub") -> bool:
        """Move ``name`` from ``old`` (``None``: must not exist) to ``new``; False if it
        holds another value."""
        return self.update_refs([RefUpdate(name, new, old)], message)

    def delete_ref(self, name: str, old: str) -> bool:
        """Delete ``name`` if it is ``old``; False if it holds another value (or none)."""
        return self.update_refs([RefUpdate(name, None, old)], "gitpub: delete")

    def update_refs(self, updates: Sequence[RefUpdate], message: str = "gitpub") -> bool:
        """Apply all of ``updates`` or none (one ref transaction); whether they were applied
        (False: a ref did not hold its expected value). Waits while another process holds a
        lock (see ``Repository._while_locked``)."""
        if not updates:
            return True
        for u in updates:
            _check_name(u.ref)
        what = "ref " + ", ".join(u.ref for u in updates)
        try:
            done = self._while_locked(lambda: self._transaction(updates, message), what)
        except BaseException:
            self.forget_refs()
            raise
        if not done:
            self.forget_refs()  # a value moved: ask git again
        else:
            for u in updates:  # what we just wrote, under compare-and-swap
                self._seen[u.ref] = u.new
                if self._is_kept(u.ref):
                    self._kept_known[u.ref] = u.new
                    self._kept_broken.discard(u.ref)
        if done:  # files backend: the entries are durable (each directory once)
            for parent in dict.fromkeys(_existing_parent(self.common_dir / u.ref)
                                        for u in updates):
                with contextlib.suppress(OSError):
                    fsync_dir(parent)
        return bool(done)

    def _transaction(self, updates: Sequence[RefUpdate], message: str) -> bool:
        lines = self._lines(updates)
        if self._unlogged(updates):
            return self._in_session(updates, lines)
        with tempfile.TemporaryFile(prefix="gitpub-update-ref-") as err_file:
            proc = popen_git(["-c", "core.fsync=reference", "update-ref", "--no-deref",
                              "--stdin", "-m", " ".join(message.split())],
                             git_dir=self.git_dir, cwd=self.git_dir, stderr=err_file)
            # a transaction that does not end (a hung reference-transaction hook or file
            # system) is killed: its locks stay, stale, for the lock policy to heal
            fired = threading.Event()

            def give_up() -> None:
                fired.set()
                proc.kill()

            watchdog = threading.Timer(TRANSACTION_TIMEOUT, give_up)
            watchdog.start()
            try:
                out = self._converse(proc, lines)
            except BaseException:
                _end(proc)  # cut short, perhaps prepared: git aborts it (its locks go)
                raise
            finally:
                watchdog.cancel()
            err_file.seek(0)
            said = err_file.read().decode("utf-8", "surrogateescape")
        if out == _ALL_OK and proc.returncode == 0:
            return True
        if fired.is_set():
            raise _hung(updates)
        if proc.returncode is not None and proc.returncode < 0:
            raise _killed(updates, -proc.returncode)
        return self._refused(said)

    def _unlogged(self, updates: Sequence[RefUpdate]) -> bool:
        """Whether git writes no reflog for any of ``updates`` (then the transaction's message
        is not written anywhere, and it may go through the command's one ``update-ref``
        session): refs under ``refs/pub/`` (no reflog by git's default rule), unless
        ``core.logAllRefUpdates`` is ``always`` or the ref has a reflog already."""
        if not all(u.ref.startswith("refs/pub/") for u in updates):
            return False
        if self.config().get("core.logallrefupdates", "").lower() == "always":
            return False
        return not any(os.path.lexists(self.common_dir / "logs" / u.ref) for u in updates)

    def _in_session(self, updates: Sequence[RefUpdate], lines: list[str]) -> bool:
        """``_transaction`` through the command's long-lived ``git update-ref --stdin`` (one
        process for all of them, git 2.27's repeated ``start``): the same transaction, the
        same answers, the same crash point; a transaction git refuses ends the session (git
        exits on it), and the next one starts another. A session that died between two
        transactions (nothing of this one was sent) is started again once."""
        # one transaction at a time through this repository's session (setdefault: atomic)
        with vars(self).setdefault("_session_lock", threading.Lock()):
            return self._session_round(updates, lines)

    def _session_round(self, updates: Sequence[RefUpdate], lines: list[str]) -> bool:
        for attempt in range(2):
            session = self._session
            if session is None or session.proc.poll() is not None:
                if session is not None:
                    session.close()
                session = self._session = _Session(self.git_dir)
            try:
                sent, out = session.transaction(lines)
            except BaseException:
                # cut short (a fault, ^C), perhaps with the transaction prepared: its end
                # of input makes git abort it (its locks go) and exit; the next starts afresh
                self._session = None
                session.close()
                raise
            if out == _ALL_OK:
                return True
            self._session = None
            said = session.close()
            if session.fired.is_set():
                raise _hung(updates)
            if not sent and attempt == 0:
                continue  # it had died meanwhile: nothing was asked of it
            code = session.proc.returncode
            if code is not None and code < 0:
                raise _killed(updates, -code)
            return self._refused(said)
        raise AssertionError("unreachable")

    def close_refs(self) -> None:
        """End the command's ``update-ref`` session (with the repository)."""
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _lines(self, updates: Sequence[RefUpdate]) -> list[str]:
        zero = self.object_format.zero
        lines = ["start"]
        for u in updates:
            if u.new is None:
                lines.append(f"delete {u.ref}" if u.old == ANY_VALUE
                             else f"delete {u.ref} {u.old or zero}")
            elif u.old is None:
                lines.append(f"create {u.ref} {u.new}")
            else:
                lines.append(f"update {u.ref} {u.new} {u.old}")
        lines.append("prepare")
        return lines

    @staticmethod
    def _converse(proc: Popen[bytes], lines: list[str]) -> bytes:
        """Send the transaction up to ``prepare``, wait for git's two answers, then ``commit``
        (a crash point between); what git wrote on stdout."""
        assert proc.stdin is not None and proc.stdout is not None
        answers: list[bytes] = []
        try:
            proc.stdin.write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
            proc.stdin.flush()
            answers = [proc.stdout.readline() for _ in range(2)]
            prepared = answers == [b"start: ok\n", b"prepare: ok\n"]
            if prepared:
                crash_point("git.ref-locked", before=proc.kill)
        except BrokenPipeError:
            prepared = False
        out, _ = proc.communicate(b"commit\n" if prepared else None)
        return b"".join(answers) + (out or b"")

    def _refused(self, said: str) -> bool:
        """Why git refused a transaction: False for a value that moved; ``FileLocked`` for a
        lock another process holds; ``CorruptStateError`` for anything else."""
        locked = _LOCKED.search(said)
        if locked:
            raise FileLocked(locked.group(1), locked.group(1) + ".lock")
        if any(s in said for s in ("but expected", "reference already exists",
                                   "reference is missing")):
            return False
        from gitpub.core.sanitize import sanitize

        detail = " ".join(said.replace("fatal: ", "").split())[:300]
        hint = ("restore it from `git reflog` or a backup, or delete it"
                if "reference broken" in said
                else "a reference-transaction hook refused it (`git config core.hooksPath`, "
                     "else .git/hooks): what it said is above"
                if "aborted by hook" in said
                else "`git for-each-ref` and `git fsck` show what is in the way")
        raise CorruptStateError(sanitize(f"git refused to move a ref: {detail}"), hint=hint)


_ALL_OK = b"start: ok\nprepare: ok\ncommit: ok\n"


def _hung(updates: Sequence[RefUpdate]) -> TryLaterError:
    from gitpub.core.sanitize import sanitize

    return TryLaterError(
        sanitize(f"git update-ref did not finish in {TRANSACTION_TIMEOUT:g} seconds "
                 f"({', '.join(u.ref for u in updates)}): killed, its refs as they "
                 "were or all moved"),
        hint="a reference-transaction hook or the file system hangs; run the command "
             "again when git answers (it reads where the refs stand)")


def _killed(updates: Sequence[RefUpdate], signal: int) -> TryLaterError:
    """``git update-ref`` killed from outside (a signal: the OOM killer, a person) while it
    moved ``updates``: no refusal of git's, no damage; the refs are as they were or all moved,
    and a lock it held stays, stale, for the lock policy to heal."""
    from gitpub.core.sanitize import sanitize

    return TryLaterError(
        sanitize(f"git update-ref was killed (signal {signal}) while it moved "
                 f"{', '.join(u.ref for u in updates)}: its refs as they were or all moved"),
        hint="something on this machine kills git (memory?); run the command again (it "
             "reads where the refs stand)")


class _Session:
    """One ``git update-ref --stdin`` serving a command's transactions in turn (its reflog
    message is never written: ``RefAccess._unlogged``). git's stderr goes to a temporary file
    (read when git refuses a transaction: it exits then)."""

    def __init__(self, git_dir: Path) -> None:
        self.err: IO[bytes] = tempfile.TemporaryFile(prefix="gitpub-update-ref-")  # noqa: SIM115
        self.proc = popen_git(["-c", "core.fsync=reference", "update-ref", "--no-deref",
                               "--stdin", "-m", "gitpub"],
                              git_dir=git_dir, cwd=git_dir, stderr=self.err)
        self.fired = threading.Event()  # the watchdog killed it

    def transaction(self, lines: list[str]) -> tuple[bool, bytes]:
        """(whether anything reached git, what it answered): ``start``… ``prepare``, its two
        answers, the crash point, ``commit`` and its answer. A transaction that does not end
        (a hung hook or file system) is killed: its locks stay, stale, for the lock policy."""
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None

        def give_up() -> None:
            self.fired.set()
            proc.kill()

        watchdog = threading.Timer(TRANSACTION_TIMEOUT, give_up)
        watchdog.start()
        answers: list[bytes] = []
        try:
            try:
                proc.stdin.write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
                proc.stdin.flush()
            except BrokenPipeError:
                return False, b""
            answers = [proc.stdout.readline() for _ in range(2)]
            if answers == [b"start: ok\n", b"prepare: ok\n"]:
                crash_point("git.ref-locked", before=proc.kill)
                try:
                    proc.stdin.write(b"commit\n")
                    proc.stdin.flush()
                except BrokenPipeError:
                    return True, b"".join(answers)
                answers.append(proc.stdout.readline())
        finally:
            watchdog.cancel()
        return True, b"".join(answers)

    def close(self) -> str:
        """End the process (its stdin closed: git ends, or has ended); what it said."""
        _end(self.proc)
        self.err.seek(0)
        said = self.err.read().decode("utf-8", "surrogateescape")
        self.err.close()
        return said


def _end(proc: Popen[bytes]) -> None:
    """End an ``update-ref --stdin``: its end of input (git aborts a transaction it has not
    committed, its locks go, and exits); killed if it does not end in time."""
    with contextlib.suppress(OSError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(timeout=TRANSACTION_TIMEOUT)
    except Exception:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def for_each_ref(git_dir: Path, *patterns: str) -> tuple[dict[str, str], list[str]]:
    """(name -> id of every readable ref of the repository at ``git_dir`` matching one of
    ``patterns`` (each a full name, or a prefix ending in ``/``), names git calls broken)."""
    proc = run_git(["for-each-ref", _FORMAT, "--", *patterns], cwd=git_dir, git_dir=git_dir)
    said = proc.stderr.decode("utf-8", "surrogateescape")
    if proc.returncode != 0:
        from gitpub.core.sanitize import sanitize

        raise CorruptStateError(sanitize(f"git cannot list the refs {' '.join(patterns)}: "
                                         f"{' '.join(said.split())[:200]}"),
                                hint="`git for-each-ref` shows what is wrong")
    found = {}
    for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        sha, _, name = line.partition(" ")
        found[name] = sha
    return found, _BROKEN.findall(said)


def broken_ref(common_dir: Path, name: str, why: str = "git calls it broken"
               ) -> CorruptStateError:
    return CorruptStateError(f"ref {name} is corrupt ({why})",
                             hint=f"inspect {common_dir / name}; restore it from `git reflog` "
                                  "or a backup")


def corrupt_packed_refs(common_dir: Path, what: str) -> CorruptStateError:
    """The error for a ``packed-refs`` file git refuses (``fatal: unexpected line``): git
    refuses the whole repository then, ``git pack-refs`` included, so the only repair is by
    hand."""
    path = common_dir / "packed-refs"
    return CorruptStateError(
        f"{path} is corrupt ({what}): git itself refuses this repository until it is "
        "repaired", hint=f"keep a copy of {path}, then delete or correct the bad line (each "
                         "line is `<object id> <ref name>`, or `^<object id>` after one); "
                         "`git status` works again when it is right")


def _check_name(name: str) -> None:
    parts = name.split("/")
    if parts[0] != "refs" or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a ref name gitpub writes: {name!r}")


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not parent.is_dir():
        parent = parent.parent
    return parent
