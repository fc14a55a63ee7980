"""Fixtures: template remotes (built once, cached under bench/.work/cache) and sites cloned
from them for each run.

A *template* is a bare repository holding branch ``main`` with a committed ``.gitpub.yaml``.
A *site* is what a writer node has: a bare ``remote.git`` cloned from the template (the shared
remote) and a working clone ``site`` of it with the remote-tracking branch fetched. Local clones
hard-link the object files, so a site costs little even for a 100,000-commit history; the
working tree checkout is the only real cost (50,000 files take a couple of seconds).

Synthetic histories are written with ``git fast-import`` from a stream generated here.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.common import CACHE, BenchError, Harness, corpus_bundle

#: Bump when a generator changes, so cached templates are rebuilt.
FIXTURE_VERSION = 1

STAMP = ".bench-fixture"
SYNTH_TIME = 1_700_000_000  # 2023-11-14: synthetic history is in the past
CJK = "".join(chr(c) for c in (0x4E2D, 0x6587, 0x5185, 0x5BB9, 0x53D1, 0x5E03, 0x6D4B, 0x8BD5))


def config_text(article_glob: str) -> str:
    return f'remote: origin\nbranch: main\narticles: ["{article_glob}"]\n'


def article(tag: str, i: int) -> bytes:
    """A small, gate-clean Markdown article (front matter, heading, some CJK text)."""
    title = f"Bench {tag} article {i}"
    body = "\n".join(f"Paragraph {p} of {title}: {CJK} plain words about publishing."
                     for p in range(6))
    return f"---\ntitle: {title}\ndate: 2026-11-30\n---\n\n# {title}\n\n{body}\n".encode()


def title_of(tag: str, i: int) -> str:
    return f"Bench {tag} article {i}"


# -- fast-import ---------------------------------------------------------------------------

def fast_import(h: Harness, git_dir: Path, stream: Iterator[bytes],
                extra: list[str] | None = None) -> None:
    """Feed ``stream`` to ``git fast-import`` in ``git_dir`` (``extra``: more options)."""
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done", *(extra or [])],
                            cwd=git_dir,
                            env=h.env, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    buf: list[bytes] = []
    size = 0
    try:
        for chunk in stream:
            buf.append(chunk)
            size += len(chunk)
            if size > 1 << 20:
                proc.stdin.write(b"".join(buf))
                buf, size = [], 0
        proc.stdin.write(b"".join(buf) + b"done\n")
        proc.stdin.close()
    except BrokenPipeError:
        pass
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.wait() != 0:
        raise BenchError(f"git fast-import failed: {err[-2000:]}")


def data_cmd(payload: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(payload), payload)


def commit_header(ref: str, when: int, message: str, who: bytes = b"Synth <synth@example.com>"
                   ) -> bytes:
    stamp = b"%s %d +0000\n" % (who, when)
    return (f"commit {ref}\n".encode() + b"author " + stamp + b"committer " + stamp
            + data_cmd(message.encode()))


def history_stream(commits: int, files: int) -> Iterator[bytes]:
    """``commits`` commits on main; the first writes the config, each commit then changes one
    of ``files`` small files (data/dNN/fNNNN.txt), round robin."""
    yield commit_header("refs/heads/main", SYNTH_TIME, "Initial import\n")
    yield b"M 100644 inline .gitpub.yaml\n" + data_cmd(config_text("posts/**/*.md").encode())
    yield b"M 100644 inline posts/welcome.md\n" + data_cmd(article("welcome", 0))
    for i in range(1, commits):
        f = i % files
        path = f"data/d{f // 100:02d}/f{f:04d}.txt"
        yield commit_header("refs/heads/main", SYNTH_TIME + i * 30, f"Update {path} ({i})\n")
        yield b"M 100644 inline " + path.encode() + b"\n" + data_cmd(
            f"revision {i} of file {f}\nsome stable second line\n".encode())


def wide_stream(files: int) -> Iterator[bytes]:
    """One commit with ``files`` files: a big docs site (docs/sNNN/pNNNNN.md, 250 per directory)."""
    yield commit_header("refs/heads/main", SYNTH_TIME, "Import a large site\n")
    yield b"M 100644 inline .gitpub.yaml\n" + data_cmd(config_text("docs/**/*.md").encode())
    for i in range(files - 1):
        path = f"docs/s{i // 250:03d}/p{i:05d}.md"
        yield b"M 100644 inline " + path.encode() + b"\n" + data_cmd(
            f"---\ntitle: Page {i}\n---\n\n# Page {i}\n\nText of page {i}.\n".encode())
    yield commit_header("refs/heads/main", SYNTH_TIME + 60, "Touch one page\n")
    yield b"M 100644 inline docs/index.md\n" + data_cmd(b"# Index\n")


# -- templates -----------------------------------------------------------------------------

def _cached(h: Harness, name: str, params: str, build: Callable[[Path], None]) -> Path:
    """A bare template repository, built by ``build`` into an empty bare repo once."""
    path = CACHE / name
    stamp = f"v{FIXTURE_VERSION} {params}"
    if (path / STAMP).is_file() and (path / STAMP).read_text() == stamp:
        return path
    if path.exists():
        shutil.rmtree(path)
    tmp = CACHE / f"{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    h.log(f"  building fixture {name} ({params}) …")
    build(tmp)
    h.git(tmp, "symbolic-ref", "HEAD", "refs/heads/main")
    (tmp / STAMP).write_text(stamp)
    tmp.rename(path)
    h.log(f"  built {name} in {time.perf_counter() - t0:.1f}s")
    return path


def _init_bare(h: Harness, path: Path) -> None:
    h.git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))


def corpus_template(h: Harness) -> Path:
    bundle = corpus_bundle()

    def build(tmp: Path) -> None:
        h.git(tmp.parent, "clone", "-q", "--bare", "-b", "main", str(bundle), str(tmp))
        h.git(tmp, "remote", "remove", "origin", check=False)

        def stream() -> Iterator[bytes]:
            yield commit_header("refs/heads/main", SYNTH_TIME + 10**7, "Add .gitpub.yaml\n",
                                 b"Bench Writer <bench@example.com>")
            yield b"from refs/heads/main^0\n"
            yield b"M 100644 inline .gitpub.yaml\n" + data_cmd(config_text("docs/**/*.md").encode())

        fast_import(h, tmp, stream())

    st = bundle.stat()
    return _cached(h, "corpus", f"{bundle} {st.st_size} {st.st_mtime_ns}", build)


def history_template(h: Harness, commits: int, files: int = 1000) -> Path:
    def build(tmp: Path) -> None:
        _init_bare(h, tmp)
        fast_import(h, tmp, history_stream(commits, files))

    return _cached(h, f"history-{commits}", f"commits={commits} files={files}", build)


def wide_template(h: Harness, files: int) -> Path:
    def build(tmp: Path) -> None:
        _init_bare(h, tmp)
        fast_import(h, tmp, wide_stream(files))

    return _cached(h, f"wide-{files}", f"files={files}", build)


# -- sites ---------------------------------------------------------------------------------

@dataclass
class Site:
    """A writer node: working clone ``path`` whose ``origin`` is the bare ``remote``."""

    path: Path
    remote: Path
    article_dir: str  # where the benchmark's articles go (matches the config's articles glob)


def make_remote(h: Harness, template: Path, dest: Path) -> Path:
    remote = dest / "remote.git"
    dest.mkdir(parents=True, exist_ok=True)
    h.git(dest, "clone", "-q", "--bare", str(template), str(remote))
    return remote


def make_site(h: Harness, template: Path, dest: Path, article_dir: str,
              remote: Path | None = None, name: str = "site") -> Site:
    """A fresh remote cloned from ``template`` (or the given shared ``remote``) and a working
    clone of it."""
    if remote is None:
        remote = make_remote(h, template, dest)
    path = dest / name
    h.git(dest, "clone", "-q", "-b", "main", str(remote), str(path))
    return Site(path, remote, article_dir)


def article_dir_for(template_kind: str) -> str:
    return {"corpus": "docs/bench", "wide": "docs/bench", "history": "posts/bench"}[
        template_kind]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
