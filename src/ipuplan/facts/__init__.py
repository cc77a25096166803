"""Stage 2, facts inferred from a plan, each computed once: liveness, the dataflow, the memory estimate, the
Gemm and attention families, the exchange a plan's movers send, and the consistency check."""
