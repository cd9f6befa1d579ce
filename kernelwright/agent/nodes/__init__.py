"""The graph's nodes, one module each, with their prompt templates in `prompts/`."""
