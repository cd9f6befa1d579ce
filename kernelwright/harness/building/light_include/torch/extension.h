// kernelwright's light torch/extension.h for the .cu of a load_inline build (issue #29;
// kernelwright/harness/building/light_header.py says when it is used, and falls back to torch's
// own header on any error). torch's header is torch/all.h (the C++ frontend) + torch/python.h
// (pybind11, Python.h) over torch/types.h; a kernel's .cu uses torch/types.h. The guards are
// torch's own.
#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)
#pragma once

#include <torch/types.h>

#else
#error "This file should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is defined."
#endif  // !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)
