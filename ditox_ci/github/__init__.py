"""The publish stage: the GitHub bot (sticky comment, check run or status, issues) over PyGithub."""

from ditox_ci.github.context import GitHubContext
from ditox_ci.github.publisher import Publisher, PublishOptions, PublishResult
from ditox_ci.github.text import Texts

__all__ = ["GitHubContext", "PublishOptions", "PublishResult", "Publisher", "Texts"]
