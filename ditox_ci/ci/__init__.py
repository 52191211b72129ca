"""CI plumbing: shard planning, merging shard reports, the Action's input/output mapping."""
