"""The sandbox a worker runs candidate code in (docs/threat-model.md): `isolation.py` (what a
worker gets: scrubbed environment, redaction, the layers in force), `confine.py` (network namespace,
Landlock, capabilities, limits), `seccomp.py` (the socket filter), `audit.py` (what candidate code
attempts), `scratch.py` (scratch folders), `confined_exec.py` (a command run under the layers).
"""
