"""The first compiler errors are lifted out of a build's output (g++, nvcc, the linker)."""

from __future__ import annotations

from kernelwright.harness.compiler_output import first_errors, with_first_errors

GCC = """[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=kw -c /home/u/.cache/kw/build-cache/ab/abcdef/main.cpp -o main.o
FAILED: main.o
/home/u/.cache/kw/build-cache/ab/abcdef/main.cpp: In function 'at::Tensor f(at::Tensor)':
/home/u/.cache/kw/build-cache/ab/abcdef/main.cpp:1:47: error: expected primary-expression before ';' token
    1 | torch::Tensor f(torch::Tensor x) { return x +; }
      |                                               ^
/home/u/.cache/kw/build-cache/ab/abcdef/main.cpp:1:47: error: expected primary-expression before ';' token
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
RuntimeError: Error building extension 'kw'
"""

NVCC = """/tmp/kw/cuda.cu(12): error: identifier "blockDimx" is undefined
      int i = blockIdx.x * blockDimx + threadIdx.x;
/tmp/kw/cuda.cu(20): error: too few arguments in function call
2 errors detected in the compilation of "/tmp/kw/cuda.cu".
"""


def test_gcc_errors_keep_file_line_and_message_without_folders() -> None:
    assert first_errors(GCC) == ["main.cpp:1: error: expected primary-expression before ';' token"]


def test_nvcc_errors() -> None:
    assert first_errors(NVCC) == [
        'cuda.cu:12: error: identifier "blockDimx" is undefined',
        "cuda.cu:20: error: too few arguments in function call",
    ]


def test_linker_errors_and_fatal_errors() -> None:
    text = (
        "main.cpp:3:10: fatal error: cuda_fp8.h: No such file or directory\nlib.o: undefined reference to `foo(int)'\n"
    )
    assert first_errors(text) == [
        "main.cpp:3: error: cuda_fp8.h: No such file or directory",
        "link: undefined reference to `foo(int)'",
    ]


def test_the_message_leads_with_torchs_summary_then_the_compiler() -> None:
    message = with_first_errors("Error building extension 'kw'", GCC)
    assert message == "Error building extension 'kw': main.cpp:1: error: expected primary-expression before ';' token"
    assert (
        with_first_errors("Error building extension 'kw'", "no compiler lines here") == "Error building extension 'kw'"
    )
