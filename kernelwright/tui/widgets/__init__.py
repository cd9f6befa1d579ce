"""The main screen's widgets; each renders a part of a `RunProgress` and knows nothing else."""
