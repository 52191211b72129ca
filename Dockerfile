# ditox-ci as a GitHub container action. Runs as root with the workspace mounted by the runner,
# so there is no USER or WORKDIR here (GitHub sets the working directory to the workspace).
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/ditox

# Locked dependencies first: this layer is cached until requirements.lock changes.
COPY requirements.lock /opt/ditox/requirements.lock
# --no-deps plus `pip check`: the lock must be complete, nothing may be resolved at build time.
RUN pip install --no-cache-dir --no-deps -r /opt/ditox/requirements.lock && pip check

COPY ditox_ci /opt/ditox/ditox_ci
COPY templates /opt/ditox/templates
COPY entrypoint.py /opt/ditox/entrypoint.py

ENTRYPOINT ["python", "/opt/ditox/entrypoint.py"]
