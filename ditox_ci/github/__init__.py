"""The publish stage: the GitHub bot (sticky comment, check run or status, issues) over PyGithub.

`publisher.publish` is its entry; the package itself imports nothing, so that a command that only
reads the run's context (`context`, as `sweep` does) does not import PyGithub.
"""
