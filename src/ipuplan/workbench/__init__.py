"""Stage 8, tools around the optimiser: plans synthesised from a real one, and the batch exploration of many."""
