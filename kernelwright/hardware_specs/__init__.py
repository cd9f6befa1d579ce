"""GPU (and CPU) specifications: a sourced data table, live detection, and the query the agent calls."""
