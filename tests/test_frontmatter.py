"""Front matter per format (YAML ---, TOML +++, JSON {) and the title a commit is named by.

The cases come from a real Hugo site: TOML and JSON titles, TOML/YAML comments inside the front
matter, shell comments in code blocks, and front matter that does not parse.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from conftest import Site
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitpub.config.load import StrictLoader
from gitpub.pipeline.frontmatter import atx_heading, first_heading, problem, split, title


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
    try:
        parsed = yaml.load(text.split("---")[1], StrictLoader)
    except yaml.YAMLError:  # (libyaml refuses surrogate escapes): the gate says so
        assert problem(text) is not None and title(text) is None
        return
    expected = " ".join(parsed["title"].split())
    assert title(text) == (expected or None) and problem(text) is None


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


# -- YAML semantics, bounded nesting, linear headings (attack repros r19, r12, r11) ---------

@pytest.mark.parametrize("line", ["title: null", "title: ~", "title:", "title: 2024",
                                  "title: true"])
def test_a_yaml_title_that_is_not_a_string_is_no_title(line: str) -> None:
    assert title(f"---\n{line}\n---\n\n# The Heading\n") == "The Heading"


def test_a_title_line_inside_a_quoted_scalar_is_not_the_title() -> None:
    text = '---\nsummary: "a quoted\ntitle: Not the title\nscalar"\ntitle: Real title\n---\n# H\n'
    assert title(text) == "Real title"


def test_a_second_title_key_is_refused_not_guessed() -> None:
    text = "---\ntitle: First\ntitle: Second\n---\n# H\n"
    found = problem(text)
    assert found is not None and "duplicate key" in found and "line 3" in found, found


def test_a_billion_laughs_front_matter_is_refused_before_it_expands() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    found = problem("---\n" + "\n".join(lines) + "\n---\n")
    assert found is not None and "too many values" in found, found


def _nested(fmt: str, depth: int) -> str:
    deep = "[" * depth + "]" * depth
    return {"json": f'{{"title": "x", "a": {deep}}}\n# H\n',
            "yaml": f"---\ntitle: x\na: {deep}\n---\n# H\n",
            "toml": f'+++\ntitle = "x"\na = {deep}\n+++\n# H\n'}[fmt]


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
@pytest.mark.parametrize("depth", [150, 100_000])
def test_deep_nesting_is_a_problem_not_a_recursion_error(fmt: str, depth: int) -> None:
    assert problem(_nested(fmt, depth)) == (
        "front matter is nested too deeply (more than 100 levels)")
    assert title(_nested(fmt, depth)) in ("H", None)  # (and no RecursionError)


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_nesting_up_to_the_bound_is_fine(fmt: str) -> None:
    assert problem(_nested(fmt, 98)) is None and title(_nested(fmt, 98)) == "x"


def test_deep_front_matter_goes_to_review_through_prepare(site: Site) -> None:
    data = prepare(site, "deep", _nested("json", 100_000))
    assert data["state"] == "REVIEW" and "nested too deeply" in str(data["failure_detail"])


#: CommonMark's ATX heading as a (backtracking) regular expression: the oracle for short lines.
#: The text is optional *lazily* (``??``): in ``# #`` the second ``#`` is the closing sequence,
#: an empty heading (CommonMark's ``### ###``), not the text "#".
_ATX_ORACLE = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*")


@settings(max_examples=2000)
@example("# #")
@example("### ###")
@example("# x #")
@given(st.text(st.sampled_from(" \t#xé"), max_size=14))
def test_atx_headings_read_as_commonmark_says(line: str) -> None:
    found = _ATX_ORACLE.fullmatch(line)
    expected = found.group(1).strip() if found and found.group(1) else None
    assert atx_heading(line) == (expected or None)


def test_a_heading_with_a_huge_run_of_spaces_is_read_in_linear_time() -> None:
    """The old heading regex backtracked quadratically: 10,000 spaces took 9 s, so 200,000
    would take an hour. Under a CPU limit of 30 s (generous: the linear reader needs
    milliseconds) the child is killed if reading is anything but linear."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_CPU, (30, 30));"
            "from gitpub.pipeline.frontmatter import title;"
            "t = '# Title' + ' ' * 200_000 + 'x\\n\\nBody.\\n';"
            "assert title(t) == 'Title' + ' ' * 200_000 + 'x';"
            "assert title('---\\ntitle: x\\n---\\n' + t) == 'x';"
            "assert title('#' + ' ' * 200_000 + '#' * 200_000 + ' x') is not None")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-500:]
