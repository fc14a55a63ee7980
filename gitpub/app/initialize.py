"""``git pub init``: a configuration that fits the repository it is written for.

The template (``config/default_config.yaml``) is written with three values read from the
repository instead of assumed: the remote (``origin``, or the only remote there is), the branch
(the remote's default branch: a Hugo site publishes to ``master``, a new GitHub repository to
``main``), and the article globs (where the repository's Markdown files are, when none of the
default globs matches any). What cannot be read is never guessed: no remote, or a remote whose
default branch cannot be told, stops with a usage error saying what to give.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gitpub.config.load import default_config_text, parse_config
from gitpub.config.model import DEFAULT_ARTICLES, DEFAULT_REMOTE
from gitpub.core.errors import CONFIG_FILE, ConfigError, GitpubError, UsageError
from gitpub.core.globs import matcher
from gitpub.git.remote import default_branch, remote_names
from gitpub.git.repo import Repository
from gitpub.hooks.install import install
from gitpub.runtime.repoconfig import load_repo_config
from gitpub.runtime.session import open_repository

MARKDOWN = ("*.md", "*.markdown", "*.mdx")


@dataclass(frozen=True)
class Initialized:
    config: Path
    created: bool
    hooks: tuple[str, ...]
    hooks_error: GitpubError | None
    remote: str | None = None  # what a new config names (None: an existing config was kept)
    branch: str | None = None
    articles: tuple[str, ...] = ()


def init(where: Path, remote: str | None = None, branch: str | None = None) -> Initialized:
    """Write ``.gitpub.yaml`` if absent (validate it if present) and install the hooks."""
    with open_repository(where, lambda message: None) as repo:
        if repo.work_tree is None:
            raise UsageError("git pub init needs a repository with a working tree")
        path = repo.work_tree / CONFIG_FILE
        created = not path.exists()
        chosen: tuple[str, str, tuple[str, ...]] | None = None
        if created:
            name = choose_remote(repo, remote)
            chosen = (name, branch or remote_default_branch(repo, name),
                      article_globs(repo))
            text = config_text(*chosen)
            checked(text)  # nothing is written that the next command would refuse
            path.write_text(text, encoding="utf-8")
        load_repo_config(repo)  # validate what is there
        work_tree = repo.work_tree
    try:
        hooks, error = tuple(state.path for state in install(work_tree)), None
    except UsageError as e:  # e.g. core.hooksPath points elsewhere: config is still written
        hooks, error = (), e
    if chosen is None:
        return Initialized(path, created, hooks, error)
    return Initialized(path, created, hooks, error, *chosen)


def checked(text: str) -> None:
    """Refuse a configuration ``init`` would write but no command could read (``--branch
    --json`` takes the option as the branch name): a usage error, nothing written."""
    try:
        parse_config(text)
    except ConfigError as e:
        raise UsageError(f"not writing {CONFIG_FILE}: {e.message}",
                         hint="give a valid name: `git pub init --branch NAME` (an option "
                              "right after --branch is taken as its value)") from None


def choose_remote(repo: Repository, asked: str | None) -> str:
    """The remote to publish to: the one asked for, else ``origin``, else the only one."""
    names = remote_names(repo)
    if asked is not None:
        if asked not in names:
            raise UsageError(f"no remote {asked!r} in this repository",
                             hint="`git remote -v` lists the remotes; add one with "
                                  "`git remote add NAME URL`")
        return asked
    if DEFAULT_REMOTE in names:
        return DEFAULT_REMOTE
    if len(names) == 1:
        return names[0]
    if not names:
        raise UsageError(
            "this repository has no remote to publish to",
            hint="add the repository you publish to first (`git remote add origin URL`), "
                 "then run `git pub init` again")
    raise UsageError(f"several remotes and none is {DEFAULT_REMOTE!r}: "
                     f"{', '.join(names)}", hint="name one: `git pub init --remote NAME`")


def remote_default_branch(repo: Repository, remote: str) -> str:
    branch = default_branch(repo, remote)
    if branch is None:
        raise UsageError(
            f"cannot tell the default branch of remote {remote!r} (it is empty, or unreachable "
            "and was never fetched)",
            hint="name the branch to publish to: `git pub init --branch NAME` (a branch that "
                 "does not exist yet is created by the first `git pub push --create-branch`)")
    return branch


def article_globs(repo: Repository) -> tuple[str, ...]:
    """The default article globs if they match a tracked file; else one ``DIR/**/*.md`` per
    top-level directory holding Markdown files; else the defaults (a site yet to be written)."""
    proc = repo.git("ls-files", "-z", "--", *MARKDOWN)
    paths = [p for p in proc.stdout.decode("utf-8", "replace").split("\0") if p]
    covered = matcher(DEFAULT_ARTICLES)
    if any(covered(p) for p in paths):
        return DEFAULT_ARTICLES
    tops = sorted({p.split("/", 1)[0] for p in paths if "/" in p and not p.startswith(".")})
    return tuple(f"{top}/**/*.md" for top in tops) or DEFAULT_ARTICLES


def config_text(remote: str, branch: str, articles: tuple[str, ...]) -> str:
    """The commented template with the repository's remote, branch and article globs."""
    text = default_config_text()
    text = _replace(text, r"^remote: .*$", f"remote: {_scalar(remote)}")
    text = _replace(text, r"^branch: .*$", f"branch: {_scalar(branch)}")
    listed = "".join(f"\n  - {json.dumps(glob)}" for glob in articles)
    return _replace(text, r"^articles:(?:\n  - .*)+$", "articles:" + listed)


def _scalar(value: str) -> str:
    """``value`` as YAML reads it back as that string: plain when that is safe, else quoted."""
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9._/-]*", value) and value.lower() not in (
        "y", "n", "yes", "no", "on", "off", "true", "false", "null")
    return value if plain else json.dumps(value)


def _replace(text: str, pattern: str, new: str) -> str:
    result, count = re.subn(pattern, lambda _m: new, text, count=1, flags=re.MULTILINE)
    assert count == 1, f"the config template lost its {pattern!r} line"
    return result
