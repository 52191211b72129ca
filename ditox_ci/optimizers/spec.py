"""What an optimizer spec names, decided in one place for `--optimizer`, `--base-optimizer`, the
Action's `optimizer`/`base_optimizer` inputs and `ditox-ci reduce`.

The forms, first match wins:

- `builtin`: a built-in optimizer's name (`onnxoptimizer`, `onnxsim`, …), used as installed;
- `wheel`: a `.whl` file;
- `import`: `pkg.module:function` or `path/to/file.py:function`, loaded as it is;
- `source`: a folder with `pyproject.toml` or `setup.py` (an optimizer's checkout);
- `requirement`: what pip resolves to one release or build: `onnxoptimizer==0.4.1`, `onnxoptimizer>=0.4`,
  `git+https://…`, `name @ url`; a bare name that is not a built-in is refused (a typo of one
  would install whatever PyPI serves under it).

A wheel, a checkout or a requirement is installed by `ditox_ci.optimizers.install` into a folder
of its own; a spec that names a file or folder that is not there is refused here, saying so.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers import OPTIMIZERS

INSTALLED_KINDS = ("wheel", "source", "requirement")
_FUNCTION = re.compile(r"^[A-Za-z_]\w*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# name-version(-build)?-python-abi-platform.whl
_WHEEL_NAME = re.compile(r"^[^-]+-[^-]+(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_VCS_URL = re.compile(r"^(git|hg|svn|bzr)\+[a-z]+://", re.I)


@dataclass(frozen=True)
class OptimizerSpec:
    text: str
    kind: str

    @property
    def installed(self) -> bool:
        """Whether ditox-ci installs it (into a folder of its own) before loading it."""
        return self.kind in INSTALLED_KINDS

    @property
    def a_release(self) -> bool:
        """Whether it names a release an index serves (a built-in name, `onnxoptimizer==0.4.1`),
        which pip installs again by its name and version; a wheel, a checkout or a URL is a build
        whose version need not be any release's (a nightly's wheel of main says 0.4.2 too)."""
        direct = "://" in self.text or "@" in self.text or _VCS_URL.match(self.text)
        return self.kind in ("builtin", "requirement") and not direct


def _builtin_names() -> tuple[str, ...]:
    return tuple(OPTIMIZERS)


def _home_expanded(path: str) -> str:
    """`path` with a leading `~` expanded and otherwise as written: `./onnxoptimizer` must stay a
    path (as `onnxoptimizer` it is the built-in, and pip takes a bare `my-opt` from PyPI)."""
    return str(Path(path).expanduser()) if path.startswith("~") else path


def _looks_like_a_path(text: str) -> bool:
    return "/" in text or text.startswith((".", "~")) or text.endswith((".py", ".whl"))


def parse_spec(text: str, flag: str = "--optimizer") -> OptimizerSpec:
    """The kind of `text`, or an OptimizerLoadError (exit 5) that says what is wrong with it; the
    spec's `text` is what to load or install: stripped, a path's `~` expanded."""
    text = text.strip()
    if not text:
        raise OptimizerLoadError(f"{flag}: empty; name one of {', '.join(_builtin_names())} or a build")
    if text in _builtin_names():
        return OptimizerSpec(text, "builtin")
    if _VCS_URL.match(text):
        return OptimizerSpec(text, "requirement")
    if text.endswith(".whl") and "://" not in text:
        path = Path(text).expanduser()
        if not path.is_file():
            raise OptimizerLoadError(f"{flag} {text}: no such wheel file (in {Path.cwd()})")
        if not _WHEEL_NAME.match(path.name):
            raise OptimizerLoadError(
                f"{flag} {text}: not a wheel file name (name-version-python-abi-platform.whl); "
                "pip refuses a renamed wheel"
            )
        return OptimizerSpec(_home_expanded(text), "wheel")
    module, colon, function = text.rpartition(":")
    if colon and "://" not in text and _FUNCTION.match(function):
        if module.endswith(".py"):
            if not Path(module).expanduser().is_file():
                raise OptimizerLoadError(f"{flag} {text}: no such file {module} (in {Path.cwd()})")
            return OptimizerSpec(f"{_home_expanded(module)}:{function}", "import")
        if _MODULE.match(module):
            return OptimizerSpec(text, "import")
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / "pyproject.toml").is_file() or (path / "setup.py").is_file():
            return OptimizerSpec(_home_expanded(text), "source")
        raise OptimizerLoadError(
            f"{flag} {text}: a folder without pyproject.toml or setup.py is not a source checkout"
        )
    if _looks_like_a_path(text) and "://" not in text and not path.exists():
        raise OptimizerLoadError(f"{flag} {text}: no such file or folder (in {Path.cwd()})")
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        raise OptimizerLoadError(
            f"{flag} {text}: not an optimizer spec; give a built-in name ({', '.join(_builtin_names())}), "
            "a wheel, a source checkout, pkg.module:function, file.py:function or a pip requirement"
        ) from None
    if not (requirement.specifier or requirement.url):
        # a bare name pip would resolve on PyPI: a typo of a built-in (`onnxsimm`) would install and
        # run whatever is published under it, and a module path (`pkg.opt`) some unrelated package
        close = difflib.get_close_matches(text, _builtin_names(), n=1)
        raise OptimizerLoadError(
            f"{flag} {text}: not a built-in optimizer{f' (did you mean {close[0]}?)' if close else ''}; "
            f"to install a release of {requirement.name} from PyPI name its version "
            f"({requirement.name}==X.Y), or give an import path pkg.module:function"
        )
    return OptimizerSpec(text, "requirement")
