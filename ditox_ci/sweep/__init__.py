"""The sweep's driver: `setup` (the options of the commands that run models, and one sweep's
`SweepSetup`, resolved once), `plan` (what this shard sweeps), `run` (the sweep, driving every
stage) and `progress` (its progress bars)."""
