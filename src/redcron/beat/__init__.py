"""The beat process: shard ownership and the fire loop (the pure schedule
arithmetic it uses lives in :mod:`redcron.schedule`)."""
