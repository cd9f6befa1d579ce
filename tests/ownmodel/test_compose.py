"""Several candidate files become one: colliding names renamed by token, code and strings kept."""

from __future__ import annotations

import pytest

from kernelwright.errors import UsageError
from kernelwright.ownmodel.compose import compose, rename

_A = '''from __future__ import annotations

import torch
from torch import nn

cpp_sources = """int lib(float* x);  // lib stays lib in here"""
lib = load(name="lib", cpp_sources=cpp_sources)


class ModelNew(nn.Module):
    def forward(self, x):
        self.lib = lib  # a comment naming lib
        return lib.run(x, lib=lib)
'''
_B = """import torch

lib = object()


def helper(lib):
    return lib


class ModelNew(torch.nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
"""


def test_only_colliding_names_are_renamed_and_never_attributes_keywords_or_strings() -> None:
    (a, b), future = compose([("a.py", _A), ("b.py", _B)])
    assert future and "from __future__" not in a.source + b.source
    assert (a.class_name, b.class_name) == ("_KwRegion0", "_KwRegion1")
    assert '_kw0_lib = load(name="lib", cpp_sources=cpp_sources)' in a.source  # cpp_sources does not collide
    assert "self.lib = _kw0_lib  # a comment naming lib" in a.source
    assert "return _kw0_lib.run(x, lib=_kw0_lib)" in a.source
    assert '"""int lib(float* x);  // lib stays lib in here"""' in a.source
    assert "class _KwRegion0(nn.Module):" in a.source
    assert "def helper(_kw1_lib):\n    return _kw1_lib" in b.source  # a parameter: renamed with its uses
    assert "super(_KwRegion1, self).__init__()" in b.source
    compile(a.source + b.source, "<merged>", "exec")


def test_rename_keeps_the_layout() -> None:
    source = "x = f(a,  b)\nprint( x )\n"
    assert rename(source, {"x": "yy"}) == "yy = f(a,  b)\nprint( yy )\n"


def test_a_candidate_without_modelnew_or_with_a_syntax_error_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="defines no class ModelNew"):
        compose([("a.py", "class Model:\n    pass\n")])
    with pytest.raises(UsageError, match="syntax error on line 1"):
        compose([("a.py", "def (:\n")])
