"""What publishing loads: the modules ``prepare`` and ``push`` import, each in a fresh
interpreter (``-X importtime``'s list, ``test_startup.imported``). No timing is asserted here
(``bench/`` measures it); the sets are what keep a publish's start-up small.

A plain Markdown article (no front matter) in a site without fonts, channels or commands: its
``prepare`` loads no delivery code, no font code, no TOML or YAML parser (the configuration is
cached: ``config.load``) and not dulwich's index code (its path components cannot spell
``.git``: ``git.paths.cannot_be_refused``); its ``push`` loads none of the prepare pipeline.
Each is also shown to load what it needs when the content asks for it.

And where gitpub starts processes: the three places the import contract names, found by
reading the source (``os.posix_spawnp`` and its kin are no import the contract can see).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Site
from test_startup import imported

import gitpub
from gitpub.config.load import CACHE_FILE

PLAIN = "# A plain article\n\nNo front matter, {n}.\n"
YAML = "---\ntitle: With front matter {n}\n---\n\nText {n}.\n"
TOML = "+++\ntitle = 'With TOML front matter {n}'\n+++\n\nText {n}.\n"


def loads(site: Site, *args: str, text: str | None = None) -> set[str]:
    """The modules ``git pub ARGS`` imports, started anew (``text`` on its stdin)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gitpub", "-C",
                           str(site.path), *args, "--json"], env=site.env, capture_output=True,
                          input=None if text is None else text.encode(), timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return imported(proc.stderr.decode())


def prepared(site: Site, n: int, text: str, *extra: str) -> set[str]:
    return loads(site, "prepare", *extra, "--key", f"k{n}", "--to", f"posts/a{n}.md", "-",
                 text=text.format(n=n))


def under(names: set[str], *prefixes: str) -> set[str]:
    """The modules that are one of ``prefixes`` or inside one."""
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)}


def warmed(site: Site) -> Site:
    """A site where gitpub ran before (its ``.git/pub`` there, the configuration cached: the
    first command of a clone finds no ``.git/pub`` to cache it in)."""
    assert site.call("prepare", "--key", "warm", "--to", "posts/warm.md", "-",
                     input=PLAIN.format(n=0)).code == 0
    assert site.call("status").code == 0
    assert (site.path / ".git" / "pub" / CACHE_FILE).is_file()
    return site


def test_prepare_of_a_plain_article_loads_no_delivery_fonts_parsers_or_dulwich_index(
        site: Site) -> None:
    names = prepared(warmed(site), 1, PLAIN)
    assert "gitpub.pipeline.prepare" in names  # it did prepare
    assert under(names, "gitpub.delivery", "gitpub.app.common", "gitpub.forge") == set()
    assert under(names, "gitpub.fonts", "logging") == set()
    assert under(names, "tomllib", "yaml", "gitpub.config.yamlread") == set()
    assert under(names, "dulwich.index", "dulwich.object_store", "dulwich.pack", "ctypes") \
        == set()


def test_push_of_a_committed_job_loads_none_of_the_prepare_pipeline(site: Site) -> None:
    prepared(warmed(site), 1, PLAIN)
    names = loads(site, "push")
    assert "gitpub.delivery.deliver" in names  # it did deliver
    assert site.git("log", "-1", "--format=%s", "origin/main").strip() == \
        "Publish: A plain article"
    assert under(names, "gitpub.pipeline.prepare", "gitpub.pipeline.gates",
                 "gitpub.pipeline.request", "gitpub.core.allowlist", "gitpub.runtime.steps") \
        == set()
    assert under(names, "yaml", "tomllib", "gitpub.fonts", "logging", "dulwich.pack") == set()


def test_prepare_push_of_a_plain_article_loads_no_fonts_parsers_or_dulwich_index(
        site: Site) -> None:
    names = prepared(warmed(site), 1, PLAIN, "--push")
    assert "gitpub.delivery.deliver" in names
    assert under(names, "gitpub.fonts", "logging", "tomllib", "yaml", "dulwich.index",
                 "dulwich.pack") == set()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="no split on one core")
def test_confirm_of_a_short_history_loads_no_pack_reader(site: Site) -> None:
    """``confirm`` walks a whole history (its first run) in two halves only when the packs
    hold ``git.walk.SPLIT_OBJECTS`` objects or more, which C git says (``git count-objects
    -v``): a short history never loads dulwich's pack code. The other side, in a process of
    its own (the machine's load said to be nil: under load nothing is tried): a threshold it
    meets loads it, and a split point comes of it."""
    prepared(warmed(site), 1, PLAIN, "--push")
    site.git("fetch", "-q", "origin")
    site.git("repack", "-adq")
    names = loads(site, "confirm")
    assert "gitpub.verify.confirm" in names  # it did confirm
    assert under(names, "dulwich.pack", "dulwich.object_format") == set()
    script = (
        "import sys; from pathlib import Path\n"
        "from gitpub.git import walk as W; from gitpub.git.repo import Repository\n"
        "W._load = lambda: 0.0\n"
        "with Repository.discover(Path(sys.argv[1])) as r:\n"
        "    tip = r.read_ref('refs/remotes/origin/main')\n"
        "    assert W.split_point(r, tip) is None and 'dulwich.pack' not in sys.modules\n"
        "    W.SPLIT_OBJECTS = 1\n"
        "    assert W.split_point(r, tip) is not None and 'dulwich.pack' in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", script, str(site.path)], env=site.env,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]


def test_front_matter_loads_its_parser_and_a_changed_configuration_is_parsed(
        site: Site) -> None:
    """The other side: what the content or the configuration asks for is loaded."""
    warmed(site)
    with_yaml = prepared(site, 1, YAML)
    assert "yaml" in with_yaml and "tomllib" not in with_yaml
    with_toml = prepared(site, 2, TOML)
    assert "tomllib" in with_toml and "yaml" not in with_toml
    config = site.path / ".gitpub.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "# changed\n", encoding="utf-8")
    assert "yaml" in prepared(site, 3, PLAIN)  # the cache is keyed by the file's bytes
    assert "yaml" not in prepared(site, 4, PLAIN)  # and the new bytes are cached
    suspicious = loads(site, "prepare", "--key", "k5", "--to", "posts/git-tips.md", "-",
                       text=PLAIN.format(n=5))
    assert "dulwich.index" in suspicious  # a component that might spell .git: dulwich judges


def pushed_subject(site: Site) -> str:
    return site.git("log", "-1", "--format=%s", "origin/main").strip()


def test_push_of_front_matter_takes_the_subject_prepare_gave_it(site: Site) -> None:
    """The commit's subject comes from the articles' titles; push takes it from the job's
    local commit (``pipeline.commit.rebuild_commit``) instead of parsing the front matter
    again: no YAML parser, whether the remote stayed put or moved meanwhile (a rebase)."""
    warmed(site)
    prepared(site, 1, YAML)
    names = loads(site, "push")
    assert "gitpub.delivery.deliver" in names
    assert under(names, "yaml", "gitpub.config.yamlread") == set()
    assert pushed_subject(site) == "Publish: With front matter 1"
    prepared(site, 2, YAML)
    tip = site.git("rev-parse", "origin/main").strip()
    moved = site.git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "meanwhile").strip()
    site.git("push", "-q", "origin", f"{moved}:refs/heads/main")
    names = loads(site, "push")
    assert under(names, "yaml", "gitpub.config.yamlread") == set()
    assert pushed_subject(site) == "Publish: With front matter 2"
    assert site.git("rev-parse", "origin/main^").strip() == moved  # built anew onto it


def test_a_local_commit_that_is_not_the_jobs_gives_no_subject(site: Site) -> None:
    """The subject is taken only from a local commit that is, byte for byte but its subject,
    what the job's record and artifacts make: any other (here one without the proof) leaves
    the title to be read from the article."""
    from gitpub.git.repo import Repository
    from gitpub.pipeline.commit import build_commit, read_artifacts, rebuild_commit
    from gitpub.store.jobs import JobStore

    result = site.call("prepare", "--key", "k1", "--to", "posts/a1.md", "-", "--json",
                       input=YAML.format(n=1))
    assert result.code == 0, result.err
    job_id = result.json()["job_id"]
    with Repository.discover(site.path) as repo:
        store = JobStore(repo)
        job = store.load(job_id)
        assert job is not None and job.record.local_commit is not None
        record, artifacts = job.record, read_artifacts(store, job)
        base = record.base_commit
        assert rebuild_commit(repo, record, artifacts, base, "Blog") == record.local_commit
        tree = repo.commit(record.local_commit).tree
        forged = site.git("commit-tree", tree, "-p", str(base), "-m", "Publish: Forged").strip()
        other = record._replace(local_commit=forged)
        rebuilt = rebuild_commit(repo, other, artifacts, base, "Blog")
        assert rebuilt == build_commit(repo, other, artifacts, base, "Blog")
        assert repo.commit(rebuilt).message.split(b"\n")[0] == b"Publish: With front matter 1"


# -- where processes are started ----------------------------------------------------------------

#: Every way the standard library starts a process, as ``os`` spells it (``os.posix_spawnp``,
#: ``os.execv``, …): the import contract sees ``subprocess`` only.
OS_STARTS = ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "exec",
             "spawn")
#: Modules that start processes whichever function they call.
PROCESS_MODULES = ("subprocess", "multiprocessing", "pty", "concurrent.futures.process")

#: The three places gitpub starts processes (the import contract's, in pyproject.toml):
#: C git in ``git.run``, the pipeline's and channels' commands in ``runtime.steps``, and the
#: hooks' stdlib-only fast path (``hooks.fast``), which may not import either (~18 and ~39 ms
#: on every commit, ``python -S -X importtime``): git through ``os.posix_spawnp``
#: (``subprocess`` where there is none) and an earlier hook (``<hook>.legacy``) through
#: ``subprocess``.
PROCESS_PLACES = {
    "gitpub.git.run": {"subprocess"},
    "gitpub.runtime.steps": {"subprocess"},
    "gitpub.hooks.fast": {"subprocess", "os.posix_spawnp"},
}


def _starts(tree: ast.AST) -> set[str]:
    """How the module ``tree`` can start a process: the process modules it imports, the
    ``os`` functions it names (``os.x`` or ``from os import x``)."""
    def starts_one(name: str) -> bool:
        return any(name == s or (s in ("exec", "spawn") and name.startswith(s))
                   for s in OS_STARTS)

    def is_process_module(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in PROCESS_MODULES)

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if is_process_module(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if is_process_module(node.module):
                found.add(node.module)
            elif node.module == "os":
                found |= {f"os.{a.name}" for a in node.names if starts_one(a.name)}
            elif node.module in ("asyncio", "concurrent.futures"):
                found |= {f"{node.module}.{a.name}" for a in node.names
                          if "subprocess" in a.name or a.name == "ProcessPoolExecutor"}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and starts_one(node.attr):
                found.add(f"os.{node.attr}")
            elif node.value.id == "asyncio" and "subprocess" in node.attr:
                found.add(f"asyncio.{node.attr}")
    return found


def test_processes_are_started_in_three_places_only() -> None:
    """Exactly the places ``PROCESS_PLACES`` names, and each in exactly the ways it names: a
    new place, or a place that no longer starts processes, means the contract and
    docs/development.md must say so."""
    root = Path(gitpub.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("gitpub", *path.relative_to(root).with_suffix("").parts))
        starts = _starts(ast.parse(path.read_bytes(), str(path)))
        if starts:
            found[module.removesuffix(".__init__")] = starts
    assert found == PROCESS_PLACES


def test_the_process_finder_sees_each_spelling() -> None:
    source = """
import os, subprocess as sp
from os import execvp, posix_spawn
from multiprocessing import Process
import asyncio
from concurrent.futures import ProcessPoolExecutor
os.system("x"); os.fork(); os.spawnlp(0, "x"); os.kill(1, 0); os.getpid()
asyncio.create_subprocess_exec("x")
"""
    assert _starts(ast.parse(source)) == {
        "subprocess", "os.execvp", "os.posix_spawn", "multiprocessing", "os.system", "os.fork",
        "os.spawnlp", "asyncio.create_subprocess_exec", "concurrent.futures.ProcessPoolExecutor"}
