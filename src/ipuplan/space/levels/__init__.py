"""The freedom levels, one module each: `(Context, unclaimed groups) -> Decisions`."""
