"""Built-in adapters over optimizers other than onnxoptimizer.

Each module here follows the custom-optimizer contract exactly (`optimize(model, passes,
fixed_point)`, `get_available_passes()`, `get_fuse_and_elimination_passes()` and the optional
declarations of `ditox_ci.optimizers`) and imports nothing but onnx and its optimizer, so a repro
bundle can carry a copy of it and run without ditox-ci installed.
"""
