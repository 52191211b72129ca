"""The tables users read are checked against what they describe: docs/action.md's inputs and outputs
against action.yml, and the README's exit codes against the error tree."""

import re

import yaml

from ditox_ci import errors
from tests.helpers import ROOT


def _table_names(markdown: str, heading: str) -> set[str]:
    """The backquoted names in the first column of the table under `heading`."""
    section = markdown[markdown.index(heading) + len(heading) :]
    names: set[str] = set()
    for line in section.splitlines():
        if names and not line.startswith("|"):
            break
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([a-z_]+)`", first_cell))
    return names


def test_every_action_input_and_output_is_documented_and_nothing_else():
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    docs = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    assert _table_names(docs, "### Inputs") == set(action["inputs"])
    assert _table_names(docs, "### Outputs") == set(action["outputs"])


def test_the_readme_names_every_exit_code_and_no_other():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = readme[readme.index("**Exit codes**") :].split("\n\n")[0]
    documented = {int(code) for code in re.findall(r"`(\d+)`", line)}
    fatal = {cls.exit_code for cls in _subclasses(errors.FatalError)}
    defined = {errors.EXIT_OK, errors.EXIT_NEW_FINDINGS, errors.InternalError.exit_code} | fatal
    defined |= set(errors.EXIT_INTERRUPTED)
    assert documented == defined


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def _input_rows(markdown: str) -> dict[str, tuple[str, str]]:
    """input name → (its default cell, its meaning cell), from docs/action.md's inputs table."""
    section = markdown[markdown.index("### Inputs") :]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines()[2:]:
        if rows and not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            # a default written as code is a literal; in words ("all cores") it describes the tool's
            defaults = re.findall(r"`([^`]*)`", cells[1]) or [""]
            for name, default in zip(re.findall(r"`([a-z_]+)`", cells[0]), defaults * 2, strict=False):
                rows[name] = (default, cells[2])
    return rows


def test_the_docs_give_each_input_the_default_action_yml_gives_it():
    """Where the docs write a default as code, it is action.yml's; and the two agree on what the
    inputs that change what runs do (they once disagreed on whether `passes` replaces `configs`)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"]
    rows = _input_rows((ROOT / "docs" / "action.md").read_text(encoding="utf-8"))
    written_as_code = {name: default for name, (default, _) in rows.items() if default and default[0] != "$"}
    mismatched = {
        name: (default, str(action[name].get("default", "")))
        for name, default in written_as_code.items()
        if re.fullmatch(r"[\w.-]+", default) and default != str(action[name].get("default", ""))
    }
    assert not mismatched, mismatched
    for name, words in (("passes", "instead of the default configs"), ("passes", "in addition to them")):
        assert words in action[name]["description"] and words in rows[name][1], name
