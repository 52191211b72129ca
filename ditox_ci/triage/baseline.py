"""The baseline: known limitations, declared once in a reviewed YAML file, that do not block a PR.

An entry matches a finding when every field it sets matches (kind, passes, model glob, message
regex, fingerprint). An entry accepts only what it says: with `kind` only a finding each of whose
verdicts it names (a retyped and invalid result needs both `interface-change` and
`invalid-model`), without it every kind but those that are never by design unless named
(optimizer crash, timeout and error), and with
`passes` only findings whose culprit passes it covers, every one of them. The shipped default
(`ditox_ci/data/baseline-default.yml`) covers passes the optimizer documents as not
meaning-preserving; a user baseline is layered on top of it unless it says
`include_default: false`.

```yaml
version: 1
entries:
  - id: my-known-bug
    optimizer: onnxoptimizer           # the optimizer it is about (glob); omitted = onnxoptimizer
    kind: output-mismatch              # one kind or a list; omitted = any but crash/timeout/error
    passes: [fuse_bn_into_conv]        # covers every culprit pass of the finding
    model: "onnx-node:test_batchnorm*" # fnmatch glob on the model id
    message: "shape mismatch"          # regex searched in the evidence message
    reason: why this is expected or accepted
    issue: https://github.com/onnx/optimizer/issues/123
    expires: 2027-06-30                # after this date the entry no longer applies
```
"""

from __future__ import annotations

import datetime as dt
import difflib
import fnmatch
import itertools
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ditox_ci.control import PASSES_PREFIX, SINGLE_PREFIX
from ditox_ci.errors import ConfigError, InternalError, UsageError
from ditox_ci.report.kinds import FINDING_KINDS, FIXED, NAMED_ONLY_KINDS, ModelStatus, yaml_value
from ditox_ci.report.model import Finding, Report, write_text_atomic
from ditox_ci.safeload import parse_yaml, read_text
from ditox_ci.safewrite import written_or_input_error

BASELINE_VERSION = 1
DEFAULT_BASELINE = Path(__file__).resolve().parents[1] / "data" / "baseline-default.yml"
# what an entry that names no optimizer is about: the file format's, whatever the commands' default
ENTRY_OPTIMIZER = "onnxoptimizer"


def optimizer_baseline(optimizer: str) -> Path | None:
    """Where a built-in optimizer other than onnxoptimizer keeps the known limitations it ships;
    None for an import path, which ships none."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", optimizer):
        return None
    return DEFAULT_BASELINE.with_name(f"baseline-{optimizer}.yml")


_ENTRY_KEYS = (
    "id",
    "optimizer",
    "kind",
    "passes",
    "model",
    "message",
    "fingerprint",
    "reason",
    "issue",
    "expires",
)
_FILE_KEYS = ("version", "include_default", "entries")


def finding_passes(finding: Finding) -> tuple[str, ...]:
    """The passes a finding is pinned on: the culprit's, else those its config ran alone; none for
    the optimizer's shared code, whichever pass's config showed it."""
    if finding.culprit.scope == "shared":
        return ()
    if finding.culprit.passes:
        return finding.culprit.passes
    for prefix in (SINGLE_PREFIX, PASSES_PREFIX):
        if finding.config.startswith(prefix):
            return tuple(p for p in finding.config.removeprefix(prefix).split(",") if p)
    return ()


@dataclass(frozen=True)
class BaselineEntry:
    id: str
    reason: str
    kinds: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    model: str = "*"
    message: str | None = None
    fingerprint: str | None = None
    issue: str | None = None
    expires: dt.date | None = None
    origin: str = field(default="", compare=False)
    # from a file ditox-ci ships: documented behaviour a corpus may never show, so matching nothing
    # does not make it stale (the user cannot remove it anyway)
    shipped: bool = field(default=False, compare=False)
    # fnmatch glob on the optimizer's name (report.optimizer.name): pass names mean nothing alone
    optimizer: str = ENTRY_OPTIMIZER

    def about(self, optimizer: str) -> bool:
        return fnmatch.fnmatchcase(optimizer, self.optimizer)

    def matches(self, finding: Finding) -> bool:
        if self.fingerprint and finding.fingerprint != self.fingerprint:
            return False
        # every verdict of the finding: an entry for a by-design retyping does not hide an
        # invalid model written beside it
        if not self._accepts(finding.verdicts):
            return False
        if self.passes:
            culprits = set(finding_passes(finding))
            if not culprits or not culprits <= set(self.passes):
                return False
        if not fnmatch.fnmatchcase(finding.model, self.model):
            return False
        return not (self.message and not re.search(self.message, finding.message))

    def _accepts(self, verdicts: Iterable[str]) -> bool:
        """Whether the entry's kinds take all of `verdicts` (none named: any but NAMED_ONLY_KINDS)."""
        if self.kinds:
            return all(kind in self.kinds for kind in verdicts)
        return not any(kind in NAMED_ONLY_KINDS for kind in verdicts)

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and self.expires < today

    def in_scope(self, report: Report) -> bool:
        """Could this report have produced a match? Only then does 'no match' mean stale.

        A shard, a `--models` subset or a sweep without single-pass configs would otherwise
        flag every entry outside its reach as fixed.
        """
        checked_models = [m.id for m in report.models if m.status == ModelStatus.OK]
        if not any(fnmatch.fnmatchcase(model, self.model) for model in checked_models):
            return False
        if self.passes:
            covered = {p for p, c in report.coverage.items() if c.get("models_checked", 0) > 0}
            return bool(covered & set(self.passes))
        return True

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id}
        if self.optimizer != ENTRY_OPTIMIZER:
            data["optimizer"] = self.optimizer
        if self.kinds:
            data["kind"] = yaml_value(self.kinds[0] if len(self.kinds) == 1 else list(self.kinds))
        if self.passes:
            data["passes"] = list(self.passes)
        if self.model != "*":
            data["model"] = self.model
        for key in ("message", "fingerprint"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        data["reason"] = self.reason
        if self.issue:
            data["issue"] = self.issue
        if self.expires:
            data["expires"] = self.expires.isoformat()
        return data

    @classmethod
    def from_yaml(cls, data: Any, where: str) -> BaselineEntry:
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a mapping with at least 'id' and 'reason'")
        unknown = sorted(set(map(str, data)) - set(_ENTRY_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key '{unknown[0]}' (known keys: {', '.join(_ENTRY_KEYS)})")
        if not str(data.get("id") or "").strip():
            raise ConfigError(f"{where}: 'id' is required; name the entry (ids are unique)")
        if not str(data.get("reason") or "").strip():
            raise ConfigError(f"{where}: 'reason' is required; say why this is expected")
        for key in ("model", "optimizer", "message", "fingerprint", "issue"):
            if isinstance(data.get(key), (list, dict)):  # str() of it is a glob that matches nothing
                raise ConfigError(f"{where}: '{key}' must be one string, got {data[key]!r}")
        kinds = _string_list(data.get("kind"), f"{where}: kind")
        bad = [k for k in kinds if k not in FINDING_KINDS]
        if bad:
            hint = _did_you_mean(bad[0], FINDING_KINDS)
            raise ConfigError(f"{where}: unknown kind '{bad[0]}'{hint} (kinds: {', '.join(FINDING_KINDS)})")
        message = data.get("message")
        if message is not None:
            try:
                re.compile(str(message))
            except re.error as exc:
                raise ConfigError(f"{where}: 'message' is not a valid regex ({exc})") from None
        return cls(
            id=str(data["id"]),
            reason=str(data["reason"]).strip(),
            kinds=kinds,
            passes=_string_list(data.get("passes"), f"{where}: passes"),
            model=str(data.get("model") or "*"),
            message=None if message is None else str(message),
            fingerprint=str(data["fingerprint"]) if data.get("fingerprint") else None,
            issue=str(data["issue"]) if data.get("issue") else None,
            expires=_date(data.get("expires"), f"{where}: expires"),
            origin=where.split(" entry")[0],
            optimizer=str(data.get("optimizer") or ENTRY_OPTIMIZER),
        )


def _did_you_mean(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def check_entry_passes(baseline: Baseline, optimizer: str, passes: Collection[str]) -> None:
    """An entry of the user's that names a pass `optimizer` does not have (`passes`) would never
    match, and the finding it was written for would stay new: a ConfigError (exit 3) before any
    sweep. An opaque optimizer (no pass names) is not checked."""
    for entry in baseline.entries if passes else ():
        unknown = [name for name in entry.passes if name not in passes]
        if unknown and not entry.shipped:
            raise ConfigError(
                f"baseline {entry.origin} entry {entry.id}: {optimizer} has no pass "
                f"'{unknown[0]}'{_did_you_mean(unknown[0], passes)}"
            )


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where} must be a string or a list of strings, got {value!r}")


def _date(value: Any, where: str) -> dt.date | None:
    if isinstance(value, dt.datetime):  # `2026-06-30 12:00:00`: the day is what expires
        return value.date()
    if value is None or isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{where} must be a date like 2026-06-30, got {value!r}") from None


@dataclass(frozen=True)
class Baseline:
    entries: tuple[BaselineEntry, ...] = ()
    sources: tuple[str, ...] = ()

    def match(self, finding: Finding, today: dt.date) -> BaselineEntry | None:
        """The first unexpired entry matching `finding`."""
        return next((e for e in self.entries if not e.expired(today) and e.matches(finding)), None)

    def expired_match(self, finding: Finding, today: dt.date) -> BaselineEntry | None:
        return next((e for e in self.entries if e.expired(today) and e.matches(finding)), None)

    def __add__(self, other: Baseline) -> Baseline:
        return Baseline(self.entries + other.entries, self.sources + other.sources)


def parse_baseline(text: str, origin: str) -> tuple[Baseline, bool]:
    """One baseline file, and whether it wants the shipped default layered under it."""
    data = parse_yaml(text, f"baseline {origin}", ConfigError)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"baseline {origin} must be a mapping with an 'entries' list")
    unknown = sorted(set(map(str, data)) - set(_FILE_KEYS))
    if unknown:
        raise ConfigError(
            f"baseline {origin}: unknown key '{unknown[0]}' (known keys: {', '.join(_FILE_KEYS)})"
        )
    version = data.get("version", BASELINE_VERSION)
    if version != BASELINE_VERSION:
        raise ConfigError(f"baseline {origin} has version {version!r}; this ditox-ci reads version 1")
    raw_entries = data.get("entries") or []
    if not isinstance(raw_entries, list):
        raise ConfigError(f"baseline {origin}: 'entries' must be a list")
    entries = tuple(
        BaselineEntry.from_yaml(raw, f"baseline {origin} entry {i + 1}") for i, raw in enumerate(raw_entries)
    )
    ids = [e.id for e in entries]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ConfigError(f"baseline {origin}: id '{duplicate}' is used twice; ids must be unique")
    include_default = data.get("include_default", True)
    if not isinstance(include_default, bool):  # bool("false") is True
        got = f"got {include_default!r}"
        raise ConfigError(f"baseline {origin}: 'include_default' must be true or false, {got}")
    return Baseline(entries, (origin,)), include_default


def read_baseline_file(path: Path) -> tuple[Baseline, bool]:
    fix = "create it with `ditox-ci baseline init` (docs/action.md) or fix the path"
    text = read_text(path, "baseline", fix)
    return parse_baseline(text, str(path))


def load_baseline(path: Path | None, optimizer: str = ENTRY_OPTIMIZER) -> Baseline:
    """The shipped default (and the optimizer's own shipped file, if any), with the user's
    baseline (if any) layered on top; only the entries about `optimizer` are kept."""
    default, _ = read_baseline_file(DEFAULT_BASELINE)
    own_file = optimizer_baseline(optimizer)
    if own_file is not None and own_file.is_file():
        own = read_baseline_file(own_file)[0]
        # every entry of an optimizer's own file is about that optimizer
        default = default + Baseline(tuple(replace(e, optimizer=optimizer) for e in own.entries), own.sources)
    default = Baseline(tuple(replace(e, shipped=True) for e in default.entries), default.sources)
    layered = default
    if path is not None:
        user, include_default = read_baseline_file(path)
        layered = default + user if include_default else user
    entries = tuple(entry for entry in layered.entries if entry.about(optimizer))
    return Baseline(entries, layered.sources)


def accepted_entry(
    finding: Finding,
    reason: str,
    expires: dt.date | None,
    optimizer: str = ENTRY_OPTIMIZER,
    taken: Collection[str] = (),
) -> BaselineEntry:
    """An entry that accepts exactly this finding (by fingerprint, on its model) and says where it
    came from, with an id none of `taken` has: the same bug on another model, or an expired entry
    renewed, gets `accepted-<fingerprint>-2` and so on."""
    passes = finding_passes(finding)
    stem = f"accepted-{finding.fingerprint[:12]}"
    number = next(n for n in itertools.count(1) if (stem if n == 1 else f"{stem}-{n}") not in taken)
    return BaselineEntry(
        id=stem if number == 1 else f"{stem}-{number}",
        reason=reason,
        kinds=finding.verdicts,  # each of them: `matches` asks for all
        passes=passes,
        model=_glob_escape(finding.model),
        fingerprint=finding.fingerprint,
        expires=expires,
        optimizer=_glob_escape(optimizer),
    )


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


@dataclass(frozen=True)
class UpdateResult:
    added: tuple[BaselineEntry, ...]
    already_known: int


def update_baseline(
    path: Path,
    findings: Iterable[Finding],
    reason: str,
    expires: dt.date | None,
    today: dt.date,
    optimizer: str = ENTRY_OPTIMIZER,
) -> UpdateResult:
    """Add an entry for every finding no unexpired entry (default or file) matches yet.

    Existing text, comments included, is kept: new entries are appended when `entries:` is the
    file's last key, which is how this command and the documented layout write it.
    """
    if expires is not None and expires < today:
        raise UsageError(f"--expires {expires} is past: its entries would never apply; give a later date")
    exists = path.exists()
    layered = load_baseline(path if exists else None, optimizer)
    added: list[BaselineEntry] = []
    known = 0
    for finding in findings:
        if finding.status == FIXED:
            continue
        if layered.match(finding, today) or any(e.matches(finding) for e in added):
            known += 1
            continue
        taken = {e.id for e in (*layered.entries, *added)}
        entry = accepted_entry(finding, reason, expires, optimizer, taken)
        if not entry.matches(finding):
            raise InternalError(f"the entry written for {finding.fingerprint} would not accept it: {entry}")
        added.append(entry)
    if not added:
        return UpdateResult((), known)
    block = yaml.safe_dump([e.to_yaml() for e in added], sort_keys=False, allow_unicode=True)
    text = read_text(path, "baseline", "fix the path") if exists else ""
    appendable = _appendable(text)
    if appendable is not None:
        start, item_indent = appendable
        new_text = start.rstrip("\n") + "\n" + _indent(block, item_indent)
    else:
        existing = (parse_yaml(text, f"baseline {path}", ConfigError) or {}) if exists else {}
        data = {"version": BASELINE_VERSION, **existing}
        data["entries"] = list(data.get("entries") or []) + [e.to_yaml() for e in added]
        header = "" if exists else _NEW_FILE_HEADER
        new_text = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    parse_baseline(new_text, str(path))
    _write(path, new_text)
    return UpdateResult(tuple(added), known)


def _write(path: Path, text: str) -> None:
    """`path` holds the old baseline or the new one, never a part of it (a full disk left a 0-byte
    baseline, which the next run read as valid with no entries)."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise written_or_input_error(path, exc) from None


_NEW_FILE_HEADER = (
    "# ditox-ci baseline: known optimizer limitations that do not block a pull request.\n"
    "# Review every entry like code: replace each generated reason with why it is expected.\n"
)


def _appendable(text: str) -> tuple[str, str] | None:
    """The text to append new `- …` items to, and their indent, when the `entries:` list ends the
    file (an empty one too: `entries: []`, as `baseline init` writes it, or `entries:`), else None.

    Only then can the items be appended as text, keeping the reviewer's comments.
    """
    lines = text.splitlines()
    top_level = [
        i
        for i, line in enumerate(lines)
        if line and not line[0].isspace() and not line.startswith(("#", "-"))
    ]
    if not top_level or lines[top_level[-1]].rstrip() not in ("entries:", "entries: []"):
        return None
    after = lines[top_level[-1] + 1 :]
    items = [re.match(r"(\s*)- ", line) for line in after]
    indents = [m.group(1) for m in items if m]
    if indents and lines[top_level[-1]].rstrip() == "entries:":
        return text, indents[0]
    if any(line.strip() and not line.lstrip().startswith("#") for line in after):
        return None  # something else follows the list's key: rewritten whole
    lines[top_level[-1]] = "entries:"
    return "\n".join(lines), "  "


def _indent(block: str, indent: str) -> str:
    return "".join(f"{indent}{line}\n" for line in block.splitlines())


def init_baseline(
    path: Path, findings: Iterable[Finding], reason: str, today: dt.date, optimizer: str = ENTRY_OPTIMIZER
) -> UpdateResult:
    """A new baseline at `path` that accepts every finding of today's report the shipped default
    does not (none: an empty one), so the first pull request checked is judged on what it adds."""
    if path.exists():
        raise ConfigError(f"baseline {path} exists already; add to it with `ditox-ci baseline update`")
    result = update_baseline(path, findings, reason, None, today, optimizer)
    if not path.exists():
        _write(path, _NEW_FILE_HEADER + f"version: {BASELINE_VERSION}\nentries: []\n")
    return result
