"""Stage 4, what a solver sees: a `Problem` of indices and integers, and the objective's terms. Importing a
solver backend loads this stage and nothing of the plan's facts or candidate space."""
