"""A repository's configuration, as every command reads it (``session``, ``ci``).

Kept apart from ``session`` (which also opens the job store and builds the pipeline's context):
``git pub confirm`` needs the configuration, not the job store.
"""

from __future__ import annotations

from gitpub.config.load import decode_config, load_config, parse_config
from gitpub.config.model import DEFAULT_BRANCH, Config
from gitpub.core.errors import CONFIG_FILE, ConfigError
from gitpub.git.repo import Repository


def load_repo_config(repo: Repository) -> Config:
    """The repository's configuration: ``.gitpub.yaml`` in the working tree (where a person
    edits it before committing it); in a repository without one (bare), the file committed on
    the configured branch (``bare_config``). No file at all is an error naming ``git pub
    init``: a repository not set up for gitpub is never published to a guessed branch."""
    if repo.work_tree is not None:
        if (repo.work_tree / CONFIG_FILE).exists() or (repo.work_tree / CONFIG_FILE).is_symlink():
            return load_config(repo.work_tree, repo.common_dir / "pub")
        if not repo.work_tree_implied:
            raise missing_config(f"{repo.work_tree}")
        # GIT_DIR without GIT_WORK_TREE: git's guess of the working tree (the start directory)
        # may not be the checkout; the committed file says what the repository is set up for,
        # and the commands that write say what is wrong with the guess
    return bare_config(repo)


def missing_config(where: str) -> ConfigError:
    return ConfigError(f"no {CONFIG_FILE} in {where}: this repository is not set up for gitpub "
                       "(gitpub would otherwise guess the remote and branch)",
                       hint=f"`git pub init` writes one (then commit and push {CONFIG_FILE}, so "
                            "every writer and CI read the same)", source=CONFIG_FILE)


def _config_at(repo: Repository, ref: str) -> Config:
    tip = repo.read_ref(ref)
    data = None if tip is None else repo.file_at(tip, CONFIG_FILE)
    if data is None:
        raise missing_config(f"{ref} of {repo.git_dir}")
    source = f"{CONFIG_FILE} (at {ref})"
    return parse_config(decode_config(data, source), source)


def bare_config(repo: Repository) -> Config:
    """A bare repository's configuration: the ``.gitpub.yaml`` committed at the tip of the
    branch HEAD names (``main`` if none); and if that file configures another ``branch``, the
    one at that branch's tip — which must name the same branch (else the configuration would
    depend on where it was read). A file in the git directory is never read."""
    head = repo.symbolic_head() or f"refs/heads/{DEFAULT_BRANCH}"
    config = _config_at(repo, head)
    configured = f"refs/heads/{config.branch}"
    if configured == head:
        return config
    again = _config_at(repo, configured)
    if again.branch != config.branch:
        raise ConfigError(
            f"{CONFIG_FILE}: the file on {head} says branch {config.branch!r}, the file on "
            f"{configured} says {again.branch!r}",
            hint="commit the same `branch:` on both, or point HEAD at the configured branch "
                 "(`git symbolic-ref HEAD refs/heads/<branch>`)", source=CONFIG_FILE)
    return again
