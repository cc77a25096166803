"""Stage 1, the plan as the compiler wrote it: the JSON format, the layout and operation grammar (Rust Debug
syntax), the per-tile budgets and their one rule, and the atomic writer."""
