"""The local GitHub REST server with the report's pull request open, for the publisher's tests."""

import pytest

from tests.integration.github_fixtures import PR, SHA
from tests.integration.github_server import GitHubServer


@pytest.fixture
def server():
    with GitHubServer() as srv:
        srv.open_pull(PR, SHA)
        yield srv
