"""Installing gitpub as a user would: the wheel, and a fresh environment without the test tools.

The wheel is built from a copy of the tracked source tree, as ``pip install .`` and
``pipx install .`` build it (``pip wheel --no-deps``; without build isolation when the test
environment has the build backend — the ``[test]`` extra brings it — so no registry is
needed). Its contents are checked: the package with its JSON Schemas, man page and completions
(also as data files for ``<prefix>/share``), and nothing of the tests, benchmarks or corpora.

It is then installed into a new virtual environment that has none of the test tools (nor pip:
this environment's pip installs into it with ``--python``). The runtime dependencies are taken
from this environment — each distribution the wheel's metadata requires, and what those
require, copied with its ``dist-info`` — so ``pip install --no-index`` resolves the wheel's
requirements against them, offline, and fails if the metadata asks for anything the runtime
closure lacks. ``git-pub --version`` and ``git-pub demo`` must then work.
"""

from __future__ import annotations

import email
import fcntl
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
#: The test tools: none of them may come with a user's install.
TEST_TOOLS = ("pytest", "hypothesis", "mypy", "ruff", "jsonschema", "importlinter",
              "prometheus_client", "xdist")


def _copy_source(dest: Path) -> None:
    """The tracked files of the source tree (what a checkout has), else the tree itself."""
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                          check=False)
    names = [n for n in proc.stdout.decode().split("\0") if n] if proc.returncode == 0 else []
    if not names:
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "__pycache__", "build", "dist", "*.egg-info"))
        return
    for name in names:
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _has_backend() -> bool:
    """Whether this environment can build the wheel itself (setuptools with bdist_wheel)."""
    try:
        major, minor = (int(x) for x in md.version("setuptools").split(".")[:2])
    except (md.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1)


def _pip_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHON", "GIT_", "GITPUB_", "VIRTUAL_ENV"))}
    return {**env, "HOME": str(home), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1", "PIP_NO_CACHE_DIR": "1"}


def _build_wheel(base: Path) -> Path:
    src, out = base / "src", base / "dist"
    src.mkdir()
    _copy_source(src)
    # without the backend here, pip fetches it into an isolated build environment (PyPI)
    offline = ["--no-build-isolation"] if _has_backend() else []
    args = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), *offline,
            str(src)]
    proc = subprocess.run(args, capture_output=True, env=_pip_env(base), check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    (built,) = out.glob("gitpub-*.whl")
    return built


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once per test run: the xdist workers of one run share the parent of
    their base temporary directories, and the first to take the lock builds it there."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's own directory, never an earlier run's
    with (shared / "gitpub-wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "gitpub-wheel"
        if not done.is_dir():
            base = Path(tempfile.mkdtemp(prefix="gitpub-wheel-", dir=shared))
            _build_wheel(base)
            base.rename(done)
        (built,) = (done / "dist").glob("gitpub-*.whl")
        return built


def test_the_wheel_holds_the_package_and_nothing_of_the_tests(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    version = md.version("gitpub")
    data = f"gitpub-{version}.data/data/"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"gitpub", f"gitpub-{version}.dist-info", f"gitpub-{version}.data"}, tops
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gitpub").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped <= set(names), sorted(shipped - set(names))
    schemas = {f"gitpub/cli/schemas/{p.name}" for p in (ROOT / "gitpub/cli/schemas").glob("*")}
    assert schemas and schemas <= set(names)
    for name in ("gitpub/py.typed", "gitpub/config/default_config.yaml",
                 "gitpub/man/git-pub.1", "gitpub/completion/git-pub",
                 "gitpub/completion/_git-pub", f"{data}share/man/man1/git-pub.1",
                 f"{data}share/bash-completion/completions/git-pub",
                 f"{data}share/zsh/site-functions/_git-pub",
                 f"{data}share/gitpub/hooks/pre-push", f"{data}share/gitpub/hooks/post-commit"):
        assert name in names, name
    for name in names:
        parts = name.lower().split("/")
        assert not {"tests", "bench", "corpus", "__pycache__", ".ci"} & set(parts), name
        assert not parts[-1].startswith("test_") and not parts[-1].endswith(".pyc"), name
    meta = email.message_from_bytes(
        zipfile.ZipFile(wheel).read(f"gitpub-{version}.dist-info/METADATA"))
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.name.lower().replace("_", "-") in {"pytest", "hypothesis", "mypy", "ruff",
                                                  "jsonschema", "import-linter"}:
            assert req.marker is not None and "test" in str(req.marker), line
    entry = zipfile.ZipFile(wheel).read(f"gitpub-{version}.dist-info/entry_points.txt")
    assert b"git-pub = gitpub.cli.entry:main" in entry


def _runtime_closure(wheel: Path) -> list[md.Distribution]:
    """The distributions the wheel requires (no extra), and theirs, as installed here."""
    version = md.version("gitpub")
    meta = email.message_from_bytes(
        zipfile.ZipFile(wheel).read(f"gitpub-{version}.dist-info/METADATA"))
    todo = [(Requirement(r), "") for r in meta.get_all("Requires-Dist") or []]
    found: dict[str, md.Distribution] = {}
    seen: dict[str, set[str]] = {}
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = req.name.lower().replace("_", "-")
        dist = md.distribution(req.name)
        assert dist.version in req.specifier, f"{req} but {dist.version} is installed here"
        new = ({""} | set(req.extras)) - seen.get(key, set())
        if not new:
            continue
        seen.setdefault(key, set()).update(new)
        found[key] = dist
        todo += [(Requirement(line), e) for line in dist.requires or [] for e in sorted(new)]
    return list(found.values())


def _copy_installed(dist: md.Distribution, site: Path) -> None:
    """A distribution's files (those inside site-packages) with its dist-info, as pip left
    them: an installed distribution of the new environment."""
    base = Path(str(dist.locate_file("")))
    for file in dist.files or []:
        if ".." in file.parts or "__pycache__" in file.parts:
            continue  # scripts in bin/ and byte code: not needed to run
        source = base / file
        if source.is_file():
            (site / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, site / file)


def test_a_user_install_runs_without_the_test_tools(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "user-venv"
    home = tmp_path / "home"
    home.mkdir()
    env = _pip_env(home)
    # a venv without pip of its own (seeding pip is most of a venv's cost): this environment's
    # pip installs into it (``--python``), resolving against what the new environment holds
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   env=env, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, check=True, env=env).stdout.decode().strip())
    assert site != Path(sysconfig.get_paths()["purelib"])
    closure = _runtime_closure(wheel)
    assert {d.metadata["Name"].lower() for d in closure} >= {"dulwich", "click", "pyyaml",
                                                             "fonttools", "brotli", "httpx"}
    for dist in closure:
        _copy_installed(dist, site)
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-index", "-q", str(wheel)], capture_output=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    for tool in TEST_TOOLS:
        probe = subprocess.run([str(python), "-c", f"import {tool}"], capture_output=True,
                               env=env)
        assert probe.returncode != 0, f"{tool} came with the install"
    git_pub = venv / "bin" / "git-pub"
    run_env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": str(home / ".config")}
    where = subprocess.run([str(python), "-c", "import gitpub; print(gitpub.__file__)"],
                           capture_output=True, check=True, env=run_env, cwd=tmp_path)
    assert where.stdout.decode().startswith(str(site)), where.stdout
    version = subprocess.run([str(git_pub), "--version"], capture_output=True, env=run_env,
                             cwd=tmp_path, timeout=60)
    assert version.returncode == 0, version.stderr.decode()
    assert version.stdout.decode().strip() == f"git-pub {md.version('gitpub')}"
    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    demo = subprocess.run([str(git_pub), "demo"], capture_output=True, env=run_env,
                          cwd=demo_dir, timeout=300)
    assert demo.returncode == 0, demo.stdout.decode() + demo.stderr.decode()
    assert "Blog-Job-Id:" in demo.stdout.decode(), demo.stdout.decode()
    assert (venv / "share/man/man1/git-pub.1").is_file()
