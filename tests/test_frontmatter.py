"""Front matter per format (YAML ---, TOML +++, JSON {) and the title a commit is named by.

The cases come from a real Hugo site: TOML and JSON titles, TOML/YAML comments inside the front
matter, shell comments in code blocks, and front matter that does not parse.
"""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml
from conftest import Site
from hypothesis import given
from hypothesis import strategies as st

from gitpub.pipeline.frontmatter import first_heading, problem, split, title


@pytest.mark.parametrize(("text", "expected"), [
    ("---\ntitle: YAML Title\n---\n# Heading\n", "YAML Title"),
    ("+++\ntitle = 'TOML Title'\ndate = 2024-01-01\n+++\n# Heading\n", "TOML Title"),
    ('{\n  "title": "JSON Title",\n  "weight": 3\n}\n# Heading\n', "JSON Title"),
    ("\ufeff+++\ntitle = \"BOM and TOML\"\n+++\n", "BOM and TOML"),
    ("---\ntitle: |\n  Two\n  lines\n---\n", "Two lines"),
])
def test_the_title_field_in_each_format(text: str, expected: str) -> None:
    assert title(text) == expected


@pytest.mark.parametrize("text", [
    "+++\n# Front matter comment: this line is a TOML comment.\ndraft = false\n+++\n\n"
    "Intro.\n\n## Real Heading\n",
    "---\n# Front matter comment: this line is a YAML comment.\ndraft: false\n---\n\n"
    "## Real Heading\n",
    '{"draft": false}\n\n## Real Heading\n',
    "Intro.\n\n```sh\n# Install the CLI\nbrew install hugo\n```\n\n## Real Heading\n",
    "Intro.\n\n~~~~\n# not a heading\n```\n# still code\n~~~~\n## Real Heading\n",
    "<!--\n# commented out\n-->\n## Real Heading\n",
    "    # indented code, not a heading\n\n## Real Heading ##\n",
    "#hashtag is not a heading\n\nReal Heading\n============\n",
])
def test_headings_only_outside_front_matter_code_and_comments(text: str) -> None:
    assert title(text) == "Real Heading"


def test_no_title_at_all() -> None:
    assert title("+++\n# comment\n+++\n```\n# code\n```\nplain text\n") is None
    assert title("") is None and first_heading("#\n") is None


def test_an_unclosed_fence_hides_the_rest() -> None:
    assert first_heading("```\n# inside\n") is None


@pytest.mark.parametrize(("text", "expected"), [
    ("---\ntitle: ok\nbad: [unclosed\n---\n", "not valid YAML at line"),
    ("---\n- a\n- b\n---\n", "not a mapping"),
    ("---\ntitle: x\n", "missing '---'"),
    ("+++\ntitle = \n+++\n", "not valid TOML"),
    ("+++\ndraft = false\ntitle = \n+++\n", "at line 3"),
    ("+++\ntitle = 'x'\n", "missing '+++'"),
    ('{"title": "x",}\n', "not valid JSON at line 1"),
    ('{\n  "title": "x"\n\n# Heading\n', "not valid JSON"),
])
def test_invalid_front_matter_is_named(text: str, expected: str) -> None:
    found = problem(text)
    assert found is not None and expected in found, found


@pytest.mark.parametrize("text", [
    "---\ntitle: ok\n---\n", "+++\ntitle = 'ok'\n+++\n", '{"title": "ok"}\n', "# No front matter\n",
    "{{< shortcode >}}\n", "{% include x %}\n", "---\n---\n",
])
def test_valid_or_absent_front_matter_passes(text: str) -> None:
    assert problem(text) is None


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_values = st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                          st.one_of(_text, st.integers(), st.booleans()), max_size=4)


@given(_values, _text)
def test_toml_and_json_front_matter_read_as_their_parsers_do(data: dict[str, object],
                                                             body: str) -> None:
    as_json = json.dumps(data)
    fm = split(as_json + "\n" + body)
    assert fm is not None and fm.closed and json.loads(fm.block) == data
    as_toml = "".join(f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}\n"
                      for k, v in data.items())
    try:
        expected = tomllib.loads(as_toml)
    except tomllib.TOMLDecodeError:
        return  # a JSON string escape TOML does not know: not what this property is about
    fm = split(f"+++\n{as_toml}+++\n{body}")
    assert fm is not None and tomllib.loads(fm.block) == expected


@given(_text)
def test_a_yaml_title_reads_as_yaml_does(value: str) -> None:
    text = f"---\ntitle: {json.dumps(value)}\n---\n"
    expected = " ".join(yaml.safe_load(text.split("---")[1])["title"].split())
    assert title(text) == (expected or None)


# -- through the pipeline: the gate and the commit subject ----------------------------------

def prepare(site: Site, key: str, text: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--key", key, "--to", "posts/hugo.md", "-", input=text)
    data: dict[str, object] = r.json()
    return data


@pytest.mark.parametrize(("text", "subject"), [
    ("+++\n# Front matter comment: this line is a TOML comment.\ntitle = 'Hugo Page'\n+++\n"
     "```sh\n# Install the CLI\n```\n", "Publish: Hugo Page"),
    ('{\n  "title": "JSON Page"\n}\n# Other\n', "Publish: JSON Page"),
    ("+++\n# comment\n+++\n```sh\n# Install the CLI\n```\n## Usage\n", "Publish: Usage"),
    ("+++\n# comment\n+++\n```sh\n# Install the CLI\n```\n", "Publish posts/hugo.md"),
])
def test_commit_subjects(site: Site, text: str, subject: str) -> None:
    data = prepare(site, "s-" + subject, text)
    assert data["state"] == "LOCAL_COMMITTED", data
    assert site.git("log", "-1", "--format=%s", str(data["local_commit"])).strip() == subject


@pytest.mark.parametrize(("text", "expected"), [
    ("+++\ntitle = \n+++\n# x\n", "posts/hugo.md: front matter is not valid TOML"),
    ('{"title": }\n# x\n', "posts/hugo.md: front matter is not valid JSON at line 1"),
    ("---\ntitle: [\n---\n# x\n", "posts/hugo.md: front matter is not valid YAML"),
])
def test_the_gate_checks_each_format(site: Site, text: str, expected: str) -> None:
    data = prepare(site, "g-" + expected, text)
    assert data["state"] == "REVIEW" and data["failure_code"] == "gate_failed"
    assert expected in str(data["failure_detail"])
