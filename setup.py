"""Only the package list lives here; everything else is in pyproject.toml.

`templates/` stays at the top level (the project's layout) and ships as `ditox_ci.templates`
(pyproject's package-dir maps it); `[tool.setuptools.packages.find]` cannot add a mapped package
to the ones it finds, so the list is built here.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["ditox_ci", "ditox_ci.*"], exclude=["*.__pycache__"]),
        "ditox_ci.templates",
    ]
)
