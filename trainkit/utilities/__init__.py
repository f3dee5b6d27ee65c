"""Small helpers any layer may use: rank-zero output, messages, seeding, atomic writes,
compile, throughput."""
