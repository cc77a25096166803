"""Stage 3, the candidate space: which value groups may change and the layouts each may take. One module per
freedom level in `levels/`; `scopes` runs the levels a scope is made of."""
