"""The engine: plan the (model x config) jobs, run them in isolated workers, judge each outcome."""
