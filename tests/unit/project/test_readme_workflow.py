"""The docs copy-paste workflow is examples/pr.yml itself, so the two cannot drift apart."""

from tests.helpers import ROOT


def test_the_readme_shows_examples_pr_yml_verbatim():
    readme = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Copy-paste workflow for onnx/optimizer") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("\n```\n")]
    assert block + "\n" == (ROOT / "examples" / "pr.yml").read_text(encoding="utf-8")
