"""ditox-ci: guards ONNX graph optimizers against miscompilation."""

__version__ = "0.1.0"
# where the project lives: the Action is `uses: ditox/action@v1`
PROJECT_URL = "https://github.com/ditox/action"
