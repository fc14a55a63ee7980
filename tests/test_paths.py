"""Which paths a job may write (``core.paths``, ``git.paths``), with C git as the oracle.

The table of ``.git`` spellings comes from git's own tests (``t/t1014-read-tree-confusing.sh``,
``t/t0060-path-utils.sh``) and from the rules of ``path.c`` (``is_ntfs_dotgit``), ``utf8.c``
(``is_hfs_dotgit``'s ignorable code points) and ``read-cache.c`` (``verify_path``). Each entry
is first shown to be refused by C git itself (``read-tree`` with ``core.protectNTFS`` and
``core.protectHFS``), then by gitpub — by its own rules, by dulwich's validators, and end to end
(``prepare`` exits 2 and stores nothing). A property test compares the rules with C git on
names drawn from the characters that make ``.git`` confusing.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Result, Site, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_delivery import commit_file, other_writer

from gitpub.config.model import Config, FontSpec
from gitpub.core import paths
from gitpub.git import paths as git_paths

ARTICLE = "# Hello\n\nA first article.\n"
IGNORABLE = sorted(paths.HFS_IGNORABLE)

#: Spellings of ``.git`` that C git refuses (t1014's list first, then verify_path's rules).
DOTGIT = [
    ".git", ".GIT", "\u200c.Git", ".gI\u200cT", ".GiT\u200c", "git~1", ".git. ",
    ".\\.GIT\\foobar", ".git\\foobar", ".git...:alternate-stream",
    # NTFS: trailing dots and spaces, short names, alternate data streams
    ".git ", ".git.", ".git...", ".git . .", "GIT~1", "Git~1", "git~1 .", "git~1...",
    ".git::$INDEX_ALLOCATION", ".Git::$DATA", "git~1:$DATA", ".git:", ".git:x",
    # HFS+: every ignorable code point, before, inside and after
    *[f".g{c}it" for c in IGNORABLE], *[f"{c}.git" for c in IGNORABLE[:4]],
    *[f".git{c}" for c in IGNORABLE[-4:]], "\u200c\u200d.g\ufeffi\u202et\u206f",
]
#: Names that look like ``.git`` but that git accepts (and so do gitpub's .git rules).
NOT_DOTGIT = [".gitx", ".git x", "git~2", "git ~1", ".git\u00a0", ".g\u0131t", "\uff0egit",
              ".git\u200b", "x.git", "..git", "git"]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch repository for asking C git. It holds the hostile trees the questions need,
    so it is deleted afterwards instead of being left for ``git fsck``."""
    path = tmp_path_factory.mktemp("oracle")
    git(path, "init", "-q")
    yield path
    shutil.rmtree(path)


def tree_with(repo: Path, name: str, as_tree: bool) -> str:
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"x\n").strip()
    inner = git(repo, "mktree", input=f"100644 blob {blob}\tfile\n".encode()).strip()
    line = f"040000 tree {inner}\t{name}\n" if as_tree else f"100644 blob {blob}\t{name}\n"
    return git(repo, "mktree", input=line.encode()).strip()


def git_refuses(repo: Path, name: str, as_tree: bool = False) -> bool:
    """C git's verdict: ``read-tree`` of a tree holding ``name``, both protections on, into a
    throwaway index."""
    tree = tree_with(repo, name, as_tree)
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / "oracle-index")}
    proc = subprocess.run(["git", "-c", "core.protectNTFS=true", "-c", "core.protectHFS=true",
                           "read-tree", tree], cwd=repo, capture_output=True, env=env)
    return proc.returncode != 0


def prepare(site: Site, *args: str, input: str = ARTICLE) -> Result:
    return site.call("prepare", "--json", *args, input=input)


def objects(site: Site) -> set[str]:
    out = site.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


def assert_refused_and_nothing_stored(site: Site, *args: str, input: str = ARTICLE) -> Result:
    """``prepare ARGS`` exits 2 and adds no ref under ``refs/pub`` and no object at all."""
    refs, before = site.git("for-each-ref", "refs/pub"), objects(site)
    r = prepare(site, "--key", "refused", *args, input=input)
    assert r.code == 2, (args, r.code, r.out, r.err)
    assert site.git("for-each-ref", "refs/pub") == refs, args
    assert objects(site) == before, args
    return r


# -- .git in every spelling --------------------------------------------------------------------

@pytest.mark.parametrize("name", DOTGIT)
def test_c_git_refuses_every_spelling_in_the_table(oracle: Path, name: str) -> None:
    assert git_refuses(oracle, name) and git_refuses(oracle, name, as_tree=True)


@pytest.mark.parametrize("name", NOT_DOTGIT)
def test_c_git_accepts_the_lookalikes(oracle: Path, name: str) -> None:
    assert not git_refuses(oracle, name)
    assert not paths.is_dotgit(name)


@pytest.mark.parametrize("name", DOTGIT)
def test_every_spelling_is_refused_in_every_position(name: str) -> None:
    for path in (name, f"{name}/config", f"posts/{name}", f"posts/{name}/hooks/x.md"):
        assert git_paths.path_problem(path) is not None, path
        assert paths.structural_problem(path) is not None, path  # what a manifest may hold


@pytest.mark.parametrize("name", [n for n in DOTGIT if "\\" not in n])
def test_core_rules_and_dulwich_each_refuse_it_alone(name: str) -> None:
    assert paths.is_dotgit(name)
    assert git_paths.dulwich_refuses(name)


def test_dulwich_alone_misses_what_the_core_rules_add() -> None:
    """Why gitpub has rules of its own beyond dulwich's validators."""
    for path in ("a:b.md", "CON.md", "trailing.", "x" * 256, "a\x1bb", "\u202eevil.md"):
        assert not git_paths.dulwich_refuses(path), path
        assert git_paths.path_problem(path) is not None, path
    # a symbolic link named .gitmodules: mode-dependent, dulwich's validators take no mode
    assert not git_paths.dulwich_refuses(".gitmodules")
    assert paths.symlink_problem(".gitmodules") is not None


#: Characters that make a component look like ``.git`` to one of dulwich's validators, plus
#: letters whose NFD or lower case is or holds an ASCII letter (the Kelvin sign, a dotted I).
_CONFUSING = [".", " ", "g", "i", "t", "G", "I", "T", "~", "1", ":", "\\", "/", "x", "\u212a",
              "\u0130", "\u0131", "\u01f5", "\u1e6b", "\uff0e", "\udcff", *IGNORABLE]
_COMPONENTS = st.one_of(
    st.lists(st.sampled_from(_CONFUSING), max_size=9).map("".join),
    st.lists(st.one_of(st.sampled_from(_CONFUSING), st.text(max_size=3)), max_size=6).map("".join),
    st.sampled_from([*DOTGIT, *NOT_DOTGIT, ".", "..", "", " ", ". .", "git~1", "GIT~1 ."]),
    st.text(max_size=12),
)


def dulwich_validators_refuse(component: str) -> bool:
    from dulwich.index import validate_path_element_hfs, validate_path_element_ntfs

    raw = component.encode("utf-8", "surrogateescape")
    return not (validate_path_element_ntfs(raw) and validate_path_element_hfs(raw))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_COMPONENTS)
def test_the_pre_check_never_passes_what_dulwich_refuses(component: str) -> None:
    """``cannot_be_refused`` (which spares the commands dulwich's index code for ordinary names)
    says "fine" only where both of dulwich's validators accept; ``dulwich_refuses`` is theirs."""
    refused = dulwich_validators_refuse(component)
    if git_paths.cannot_be_refused(component):
        assert not refused, repr(component)
    assert git_paths.dulwich_refuses(component) == refused


def test_the_pre_check_spares_ordinary_names_and_knows_dulwichs_ignorables() -> None:
    from dulwich.index import HFS_IGNORABLE_CHARS

    assert {ord(c) for c in paths.HFS_IGNORABLE} == set(HFS_IGNORABLE_CHARS)
    for name in ("posts", "a-1.md", "2026", ".github-x", "README", ".well-known", "a b.",
                 ".htaccess", "x.GI T"):
        assert git_paths.cannot_be_refused(name) == ("git" not in name.lower()), name
    for name in ("", ".", "..", " ", ". .", ".git", "\u200c.git", "git~1", "\u212agit", "中文"):
        assert not git_paths.cannot_be_refused(name), name


@pytest.mark.parametrize("name", [".", "..", *DOTGIT])
def test_prepare_refuses_every_spelling_and_stores_nothing(site: Site, name: str) -> None:
    site.write_config('publish: ["**"]\n')  # the scope would allow anything: the path rule acts
    for path in (f"{name}/x.md", f"posts/{name}"):  # as a directory, and at the end (t1014)
        error = assert_refused_and_nothing_stored(site, "--to", path, "-").json()["error"]
        assert any(w in error for w in (".git", "backslash", "normal form", "space or a dot"))


@pytest.mark.parametrize("path", [".git /x", ".git./x", ".git...", "git~1/config", "GIT~1/x",
                                  ".git::$INDEX_ALLOCATION/x", ".git\u200c/config"])
def test_the_spellings_of_the_report_are_refused(site: Site, path: str) -> None:
    site.write_config('publish: ["**"]\n')
    assert_refused_and_nothing_stored(site, "--to", path, "-")


confusing = st.text(st.sampled_from([".", "g", "G", "i", "I", "t", "T", "~", "1", "2", " ", ":",
                                     "$", "x", "\\", *IGNORABLE[:3], "\u00e9"]),
                    min_size=1, max_size=9)
prefixed = st.tuples(st.sampled_from(["", ".git", ".GiT", "git~1", "GIT~1", ".g\u200ci"]),
                     confusing).map("".join)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=prefixed)
def test_property_git_refuses_implies_gitpub_refuses(oracle: Path, name: str) -> None:
    if name in (".", ".."):
        return
    refused = git_refuses(oracle, name)
    if refused:
        assert git_paths.path_problem(name) is not None
        assert git_paths.path_problem(f"posts/{name}/x.md") is not None
    if "\\" not in name:  # git also splits at backslashes on NTFS; gitpub refuses them outright
        assert paths.is_dotgit(name) == refused, name


@settings(max_examples=2000, deadline=None)
@given(name=st.one_of(prefixed, confusing, st.text(max_size=12)))
def test_property_the_ascii_shortcut_answers_as_both_rules(name: str) -> None:
    """``is_dotgit`` answers an ASCII name that starts with neither ``.`` nor ``git~1`` at
    once: exactly what the NTFS and HFS+ rules answer."""
    assert paths.is_dotgit(name) == (paths.is_ntfs_dotgit(name) or
                                      paths.is_hfs_dot(name, "git")), name


# -- other paths no clone can use --------------------------------------------------------------

@pytest.mark.parametrize(("path", "why"), [
    ("posts/" + "a" * 253 + ".md", "255 bytes"),
    ("posts/" + "\u00e9" * 127 + ".md", "255 bytes"),  # 256 bytes in UTF-8
    ("/".join(["d" * 200] * 21) + ".md", "4096 bytes"),
    ("posts/a\tb.md", "control character"),
    ("posts/a\x1b[31mred.md", "control character"),
    ("posts/a\x85.md", "control character"),
    ("posts/\u202eevil.md", "direction-changing"),
    ("posts/a\u200b.md", "invisible"),
    ("posts/a\\b.md", "backslash"),
    ("posts/a:b.md", "Windows"),
    ("posts/what?.md", "Windows"),
    ("posts/con.md", "reserved"),
    ("posts/LPT1.md", "reserved"),
    ("posts/dir./a.md", "space or a dot"),
    ("posts/a.md ", "space or a dot"),
    ("posts/./a.md", "normal form"),
    ("posts//a.md", "normal form"),
])
def test_paths_no_clone_can_use_are_refused(site: Site, path: str, why: str) -> None:
    site.write_config('publish: ["**"]\n')
    r = assert_refused_and_nothing_stored(site, "--to", path, "-")
    assert why in r.json()["error"], r.json()


def test_a_component_of_255_bytes_is_fine(site: Site) -> None:
    name = "posts/" + "a" * 252 + ".md"
    r = prepare(site, "--key", "long", "--to", name, "-")
    assert r.code == 0, r.err


def test_non_utf8_target_is_refused(site: Site) -> None:
    site.write_config('publish: ["**"]\n')
    before = objects(site)
    r = site.run("prepare", "--key", "bytes", "--to", "posts/caf\udce9.md", "-", input=ARTICLE)
    assert r.code == 2, r.err
    assert "UTF-8" in r.err
    assert site.git("for-each-ref", "refs/pub") == "" and objects(site) == before


# -- submodules and case -----------------------------------------------------------------------

def add_gitlink(site: Site, path: str) -> None:
    """A commit on the remote whose tree has a submodule (a gitlink) at ``path``."""
    head = site.git("rev-parse", "HEAD").strip()
    site.git("update-index", "--add", "--cacheinfo", f"160000,{head},{path}")
    site.git("commit", "-q", "-m", "Add a submodule")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


@pytest.mark.parametrize("target", ["posts/theme/x.md", "posts/theme/a/b.md", "posts/theme"])
def test_a_target_in_a_submodule_is_refused(site: Site, target: str) -> None:
    add_gitlink(site, "posts/theme")
    site.write_config('publish: ["**"]\n')
    r = assert_refused_and_nothing_stored(site, "--to", target, "-")
    assert "'posts/theme' is a submodule" in r.json()["error"]


def review_detail(r: Result) -> str:
    assert r.code == 4, (r.code, r.out, r.err)
    data = r.json()
    assert (data["state"], data["failure_code"]) == ("REVIEW", "case_collision"), data
    assert data["local_commit"] is None
    return str(data["failure_detail"])


def test_two_targets_that_differ_only_in_case_go_to_review(site: Site, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / "b.md").write_text("# B\n")
    detail = review_detail(prepare(site, "--key", "case", "--to", "posts/Hello.md",
                                   str(tmp_path / "a.md"), "--to", "posts/hello.md",
                                   str(tmp_path / "b.md")))
    assert "posts/Hello.md" in detail and "posts/hello.md" in detail


def test_a_target_that_differs_from_the_base_only_in_case_goes_to_review(site: Site) -> None:
    detail = review_detail(prepare(site, "--key", "case2", "--to", "posts/Welcome.md", "-"))
    assert "posts/Welcome.md" in detail and "posts/welcome.md" in detail


def test_a_directory_spelled_differently_from_the_base_goes_to_review(site: Site) -> None:
    site.write_config('publish: ["**"]\n')
    detail = review_detail(prepare(site, "--key", "case3", "--to", "POSTS/new.md", "-"))
    assert "POSTS/new.md" in detail and "posts" in detail


def test_unicode_normalisation_twins_go_to_review(site: Site, tmp_path: Path) -> None:
    nfc, nfd = "posts/caf\u00e9.md", "posts/cafe\u0301.md"  # one file on macOS
    (tmp_path / "a.md").write_text("# A\n")
    detail = review_detail(prepare(site, "--key", "nf", "--to", nfc, "-", "--to", nfd,
                                   str(tmp_path / "a.md")))
    assert nfc in detail and nfd in detail
    first = prepare(site, "--key", "nfc", "--to", nfc, "-")
    assert first.code == 0, first.err
    site.git("push", "-q", "origin", f"{first.json()['local_commit']}:refs/heads/main")
    site.git("fetch", "-q", "origin")
    detail = review_detail(prepare(site, "--key", "nfd", "--to", nfd, "-", input="# Other\n"))
    assert nfc in detail and nfd in detail


def test_a_case_twin_pushed_after_the_snapshot_is_a_conflict_at_rebase(site: Site,
                                                                       tmp_path: Path) -> None:
    """t19: our job (posts/Hello.md) was prepared against a base without a twin; meanwhile
    another clone publishes posts/hello.md. The rebase finds it: CONFLICT, nothing pushed."""
    ours = prepare(site, "--key", "ka", "--to", "posts/Hello.md", "-", input="# A\n")
    assert ours.code == 0 and ours.json()["state"] == "LOCAL_COMMITTED", ours.err
    commit_file(other_writer(tmp_path, site), "posts/hello.md", "# B\n", "B")
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "CONFLICT" and job["failure_code"] == "target_changed", job
    assert "posts/hello.md now exists, which differs only in case" in job["failure_detail"]
    listed = git(site.remote, "ls-tree", "-r", "--name-only", "main").split()
    assert "posts/Hello.md" not in listed and "posts/hello.md" in listed


def test_the_case_rule_is_the_one_in_core() -> None:
    assert paths.case_twins(["a/B.md", "a/b.md", "c.md"]) == [("a/B.md", "a/b.md")]
    assert paths.case_twins(["Posts/a.md", "posts/b.md"]) == [("Posts/a.md", "posts/b.md")]
    assert paths.case_twins(["posts/a.md", "posts/b.md", "posts/c/a.md"]) == []
    assert paths.case_key("Stra\u00dfe") == paths.case_key("STRASSE")


# -- steering paths and the write scope --------------------------------------------------------

STEERING = [".gitpub.yaml", ".github/workflows/evil.yml", ".gitlab-ci.yml", ".gitmodules",
            ".gitattributes", ".githooks/pre-commit", ".gitignore", "posts/.gitattributes",
            ".GitHub/workflows/x.yml", ".git\u200chub/workflows/x.yml",
            "GITHUB~1/workflows/x.yml", "GITMOD~1", "gi7eba~1", ".mailmap", "MAILMA~1",
            ".circleci/config.yml", "Jenkinsfile", ".travis.yml", ".pre-commit-config.yaml",
            "posts/.github/x.md", ".gitea/workflows/x.yml", ".forgejo/workflows/x.yml",
            # the gaps an attack found (t10): other CI services, owners, hosting, builds,
            # editors and bots — each runs or decides something when the file changes
            ".drone.yaml", ".woodpecker/build.yml", ".woodpecker.yaml", ".cirrus.yml",
            "appveyor.yml", ".appveyor.yml", ".semaphore/semaphore.yml", "bitrise.yml",
            "codemagic.yaml", ".readthedocs.yaml", ".azure-pipelines/ci.yml",
            "azure-pipelines.yaml", "Jenkinsfile.release", ".buildkite/pipeline.yml",
            "CODEOWNERS", "docs/CODEOWNERS", "netlify.toml", "vercel.json", ".vercel/project.json",
            "package.json", ".npmrc", ".yarnrc.yml", "Makefile", "GNUmakefile", ".lfsconfig",
            ".devcontainer/devcontainer.json", ".devcontainer.json", ".vscode/tasks.json",
            ".envrc", "renovate.json", ".renovaterc.json", "Makefile.", "PACKAGE.JSON",
            "netlify.toml "]
NOT_STEERING = ["posts/git.md", "posts/github.md", "posts/a.git.md", "docs/Jenkinsfile",
                "posts/.circleci/x.md", "gitpub.md", "posts/git~x.md", "static/gi/x.css",
                "posts/package.json", "static/Makefile", "posts/CODEOWNERS.md",
                "docs/netlify.toml", "posts/vercel.json.md", "posts/.vscode/x.md"]


@pytest.mark.parametrize("path", STEERING)
def test_steering_paths(path: str) -> None:
    assert paths.is_steering(path)


@pytest.mark.parametrize("path", NOT_STEERING)
def test_not_steering_paths(path: str) -> None:
    assert not paths.is_steering(path)


def in_table_by_fnmatch(parts: list[str]) -> bool:
    """``paths._in_table`` as first written: every component of every entry by fnmatch."""
    folded = [paths._fold(p).rstrip(". ") for p in parts]
    for entry in paths.STEERING:
        components, below = entry.rstrip("/").split("/"), entry.endswith("/")
        if len(folded) < len(components) or (len(folded) > len(components) and not below):
            continue
        if all(fnmatch.fnmatchcase(f, c) for f, c in zip(folded, components, strict=False)):
            return True
    return False


table_parts = st.lists(st.one_of(
    st.sampled_from([c for e in paths.STEERING for c in e.rstrip("/").split("/")]),
    st.sampled_from(["docs", "posts", "x.md", "Makefile", "PACKAGE.JSON", ".drone.yaml",
                     "jenkinsfileX", ".yarnrc.yml", "a[b]", "*", "?", "netlify.toml "]),
    st.text(alphabet="ab.*?[]-~ ", max_size=6)), min_size=1, max_size=3)


@settings(max_examples=1500, deadline=None)
@given(parts=table_parts)
def test_property_steering_table_answers_as_fnmatch(parts: list[str]) -> None:
    """A table component without ``*?[`` is compared as it is: the same answers as fnmatch."""
    assert paths._in_table(parts) == in_table_by_fnmatch(parts), parts


REPORTED = [".github/workflows/evil.yml", ".gitpub.yaml", ".gitmodules", ".githooks/pre-commit",
            ".gitlab-ci.yml", ".gitattributes"]


@pytest.mark.parametrize("path", REPORTED)
def test_default_configuration_refuses_each_steering_path(site: Site, path: str) -> None:
    text = "[submodule \"x\"]\n\tpath = x\n\turl = --upload-pack=touch$IFS/tmp/pwned\n"
    r = assert_refused_and_nothing_stored(site, "--to", path, "-", input=text)
    assert path in r.json()["error"]


@pytest.mark.parametrize("path", REPORTED)
def test_steering_paths_are_refused_even_when_a_glob_matches(site: Site, path: str) -> None:
    site.write_config('publish: ["**", ".*", ".*/**"]\ncontent: ["**"]\n')
    r = assert_refused_and_nothing_stored(site, "--to", path, "-")
    assert "steers git, CI or gitpub" in r.json()["error"]


def test_a_steering_path_named_exactly_may_be_published(site: Site) -> None:
    site.write_config('publish: ["posts/**", ".github/CODEOWNERS"]\n')
    r = prepare(site, "--key", "owners", "--to", ".github/CODEOWNERS", "-", input="* @me\n")
    assert r.code == 0, r.err
    assert r.json()["state"] == "LOCAL_COMMITTED"
    assert_refused_and_nothing_stored(site, "--to", ".github/workflows/x.yml", "-")


def test_paths_outside_the_scope_are_refused(site: Site) -> None:
    r = assert_refused_and_nothing_stored(site, "--to", "static/site.css", "-")
    assert "outside the write scope" in r.json()["error"]
    assert "hint" in r.json()


def test_the_scope_defaults_to_articles_content_and_font_outputs() -> None:
    font = FontSpec("fonts/full.ttf", ".github/sub.woff2", ("posts/**/*.md",))
    config = Config(articles=("posts/**/*.md",), content=("static/**", ".gitattributes"),
                    fonts=(font,), node="n")
    allowed = ["posts/a.md", "posts/x/y.md", "static/img/a.png", ".gitattributes",
               ".github/sub.woff2"]
    refused = ["posts/a.png", "about.md", ".gitmodules", "static/.github/x", ".gitpub.yaml"]
    assert [p for p in allowed if config.scope_problem(p)] == []
    assert [p for p in refused if config.scope_problem(p) is None] == []


def test_publish_replaces_the_default_scope() -> None:
    config = Config(publish=("posts/agent/**",), node="n")
    assert config.scope_problem("posts/agent/a.md") is None
    assert config.scope_problem("posts/a.md") is not None  # an article, but not in publish


def test_every_repository_left_passes_fsck(site: Site) -> None:
    """The fixture runs ``git fsck --strict`` on the site and its remote; this publishes a
    file next to the refused ones to show the remote stays clean with real content too."""
    r = site.call("prepare", "--push", "--json", "--key", "clean", "--to", "posts/ok.md", "-",
                  input=ARTICLE)
    assert r.code == 0, r.err
    assert git(site.remote, "cat-file", "-t", "main:posts/ok.md").strip() == "blob"
