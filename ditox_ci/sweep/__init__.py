"""The sweep's driver: `setup` (the options of the commands that run models, and one sweep's
`SweepSetup`, resolved once), `plan` (what this shard sweeps), `run` (the sweep: the pool's pass
over the models, then the `stages` after it, then the report) and `progress` (its progress bars)."""
