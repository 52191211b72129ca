"""The publish stage: the GitHub bot (sticky comment, check run or status, issues) over PyGithub."""

from ditox_ci.github.context import GitHubContext
from ditox_ci.github.publisher import PublishOptions, PublishResult, publish
from ditox_ci.github.text import Texts

__all__ = ["GitHubContext", "PublishOptions", "PublishResult", "Texts", "publish"]
