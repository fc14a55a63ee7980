"""``config.source`` and the configuration built on first use (``app.repoconfig.config_source``).

A command builds its configuration only when it first uses it, when the cache holds the data of
this very file as validated by this same validator; everything else is read and validated at
once, as before. The faults: a cache left by another validator, a cache forged with data the
validator refuses, a file changed after it was cached, a validator module that is not stamped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Site

from gitpub.app import repoconfig
from gitpub.app.repoconfig import config_source, load_repo_config
from gitpub.config import source
from gitpub.config.model import ConfigError
from gitpub.git.repo import Repository

RICH = """\
remote: origin
branch: main
articles: ["posts/**/*.md"]
content: ["static/**"]
node: test-node
trailer_prefix: My-Site
retry: {max_attempts: 2, backoff_base: 1.5}
gates:
  - name: lint
    run: [make, lint]
fonts:
  - {source: fonts/Sans.ttf, output: static/sans.woff2, text: ["posts/**/*.md"]}
site: {url: "https://example.com", path: "/{slug}/", live: {match: title}}
channels:
  - {name: feed, kind: command, account: me, send: [cat], rate: 10/hour}
  - {name: hook, kind: webhook, account: me, url: "https://example.com/hook"}
"""


def cache_entry(site: Site) -> dict[str, object]:
    entry = source.read_cache(site.path / ".git" / "pub")
    assert entry is not None
    return entry


def write_entry(site: Site, entry: dict[str, object]) -> None:
    (site.path / ".git" / "pub" / source.CACHE_NAME).write_text(json.dumps(entry))


def test_the_configuration_built_later_is_the_configuration(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    (site.path / ".gitpub.yaml").write_text(RICH)
    with Repository.discover(site.path) as repo:
        first = load_repo_config(repo)  # the full way: caches the validated data
        assert cache_entry(site)["validator"] == source.validator_stamp()

        def full_way(repo: Repository) -> None:
            raise AssertionError("the trusted cache was not used")

        monkeypatch.setattr(repoconfig, "load_repo_config", full_way)
        later = config_source(repo)
        assert later() == first and later() is later()  # built once


def test_a_cache_of_another_validator_is_validated_again_and_stamped(site: Site) -> None:
    site.run("status")
    entry = cache_entry(site)
    write_entry(site, {**entry, "validator": "an older gitpub"})
    text = (site.path / ".gitpub.yaml").read_text()
    assert source.validated_data(text, site.path / ".git" / "pub") == (False, None)
    with Repository.discover(site.path) as repo:
        config_source(repo)
    assert cache_entry(site)["validator"] == source.validator_stamp()  # trusted again
    write_entry(site, {**entry, "validator": "an older gitpub", "data": {"retry": "x"}})
    with Repository.discover(site.path) as repo, pytest.raises(ConfigError):
        config_source(repo)  # not trusted: validated at once, refused at once
    r = site.call("status")
    assert r.code == 2 and "retry" in r.err


def test_forged_data_is_refused_when_the_configuration_is_used(site: Site) -> None:
    """The cache is derived data: data that did not pass the validator can only be there by
    hand. It is validated where it is built — at first use, not at the start."""
    site.run("status")
    write_entry(site, {**cache_entry(site), "data": {"retry": {"max_attempts": "three"}}})
    with Repository.discover(site.path) as repo:
        later = config_source(repo)
        with pytest.raises(ConfigError, match="max_attempts"):
            later()


def test_a_changed_file_is_read_the_full_way(site: Site) -> None:
    site.run("status")
    site.write_config("retry: {max_attempts: three}\n")
    with Repository.discover(site.path) as repo, pytest.raises(ConfigError):
        config_source(repo)


def test_no_stamp_no_trust(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.run("status")
    monkeypatch.setattr(source, "VALIDATOR", (*source.VALIDATOR, "config/gone.py"))
    assert source.validator_stamp() is None
    text = (site.path / ".gitpub.yaml").read_text()
    assert source.validated_data(text, site.path / ".git" / "pub") == (False, None)


def test_the_stamp_covers_every_module_the_validator_runs(tmp_path: Path) -> None:
    """A module that decides whether data is valid, left out of ``VALIDATOR``, would let a
    changed rule pass a cache the old rule wrote."""
    (tmp_path / ".gitpub.yaml").write_text(RICH)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gitpub.config.load import load_config, parse_config\n"
        f"root = Path({str(tmp_path)!r})\n"
        "load_config(root, root / 'cache'); load_config(root, root / 'cache')\n"
        f"parse_config({RICH!r})\n"
        "for bad in ('retry: x', 'node: ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8', 'a: [',\n"
        "            'channels: [{name: x}]', 'site: {url: 1}', 'fonts: [{source: 1}]'):\n"
        "    try:\n"
        "        parse_config(bad)\n"
        "    except Exception:\n"
        "        pass\n"
        "print('\\n'.join(sorted(m.__file__ for n, m in sys.modules.items()\n"
        "                        if n.startswith('gitpub') and getattr(m, '__file__', None))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    package = ROOT / "gitpub"
    used = {Path(f).relative_to(package).as_posix() for f in out.split()}
    used = {u for u in used if not u.endswith("__init__.py")}
    assert used <= set(source.VALIDATOR), used - set(source.VALIDATOR)
    assert "config/schema.py" in used and "core/sanitize.py" in used
