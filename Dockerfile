# ditox-ci as a GitHub container action. Runs as root with the workspace mounted by the runner,
# so there is no USER or WORKDIR here (GitHub sets the working directory to the workspace); the
# entrypoint hands what it writes to the workspace's owner.
# The base is pinned by digest (Dependabot keeps it current); both stages use the same one.
ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm@sha256:8f64a67710f3d981cf3008d6f9f1dbe61accd7927f165f4e37ea3f8b883ccc3f

# Stage 1: every dependency into a virtual environment, each file checked against its hash.
FROM ${PYTHON_IMAGE} AS dependencies
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
COPY requirements.lock models.lock /tmp/
# --no-deps plus `pip check`: the lock must be complete, nothing may be resolved at build time.
# The packaged models come last and without their own dependencies (PyTorch, OpenCV), which is
# why `pip check` runs before them.
# Then the packages' own test suites go, which nothing in the image runs: every folder named
# `tests` (scipy's 30 MB, numpy's 15 MB, jsonschema's, referencing's, certifi's; 47 MB of the
# locked packages). onnx keeps all of its `backend/test`: its `case` code makes the onnx-node
# corpus and its `data` is the onnx-data corpus. pip is left whole.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/models.lock \
    && find /opt/venv/lib -type d -name tests -not -path '*/site-packages/onnx/*' \
        -not -path '*/site-packages/pip/*' -prune -exec rm -rf {} +

# Stage 2: the environment and the code, nothing of the build.
FROM ${PYTHON_IMAGE}
COPY --from=dependencies /opt/venv /opt/venv
# PYTHONSAFEPATH: no Python in the container imports from the working directory (the workspace)
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/ditox
COPY ditox_ci /opt/ditox/ditox_ci
COPY templates /opt/ditox/templates
COPY entrypoint.py /opt/ditox/entrypoint.py
# The package's bytecode, compiled once here: PYTHONDONTWRITEBYTECODE keeps a run from writing it,
# so every `ditox-ci` process of every step, and its workers' forkserver, compiled it again.
RUN python -m compileall -q /opt/ditox/ditox_ci

ENTRYPOINT ["python", "-P", "/opt/ditox/entrypoint.py"]
