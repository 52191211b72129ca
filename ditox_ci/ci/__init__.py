"""CI plumbing: merging shard reports, the Action's input/output mapping (the shard planner is
engine/shard.py)."""
