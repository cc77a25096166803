"""Stage 7, plans and results turned into words: the text tables, the HTML page, the plan diff."""
