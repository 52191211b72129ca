"""ditox-ci: guards ONNX graph optimizers against miscompilation."""

__version__ = "0.1.0"
