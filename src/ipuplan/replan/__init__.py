"""Stage 6, a re-planning run: options, pins, the pipeline (`prepare`, `optimize`), the rewrite of a solution into a
plan, the explanation of budgets that cannot be met, and the peak / exchange sweep."""
