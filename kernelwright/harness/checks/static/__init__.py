"""Static analysis of a candidate file: `analysis.py` is the entry point (`analyze_candidate`);
`pysource.py` reads the Python module and the extension sources it builds; `cpp.py` the C++/CUDA;
`forward.py` what `forward` does; `pyrules.py` the module-level rules; `common.py` shared types
and tree-sitter helpers.
"""
