"""Static analysis of candidate files: what is found, and what clean candidates must not trigger."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelwright.harness.checks.static.analysis import CandidateAnalysis, analyze_candidate, detect_backend
from kernelwright.harness.verdicts import Reason

CUDA_SRC = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def cuda_candidate(cuda_src: str = CUDA_SRC, forward: str = "return relu.relu_cuda(x)", extra: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "from torch.utils.cpp_extension import load_inline\n"
        f"{extra}\n"
        f"cuda_src = r'''{cuda_src}'''\n"
        "cpp_src = 'torch::Tensor relu_cuda(torch::Tensor x);'\n"
        "relu = load_inline(name='relu', cpp_sources=cpp_src, cuda_sources=cuda_src,\n"
        "                   functions=['relu_cuda'], verbose=False)\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n\n"
        "    def forward(self, x):\n"
        f"{body}\n"
    )


CPP_OMP = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
torch::Tensor relu_cpu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    int64_t n = x.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        int half = 0;  // a variable named half is not a half type
        out[i] = in[i] > 0.f ? in[i] : 0.f + half;
    }
    return y;
}
"""

ext = load_inline(name="relu_cpu", cpp_sources=[source], functions=["relu_cpu"],
                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ext = ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.relu_cpu(x.contiguous())
'''

TRITON_MATMUL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + offs)
        b = tl.load(b_ptr + offs)
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(c_ptr + offs, acc)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK"]), triton.cdiv(N, meta["BLOCK"]))
    matmul_kernel[grid](a, b, c, M, N, K)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return matmul(A.contiguous(), B.contiguous())
"""

KERNELBENCH_STYLE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elementwise_add_source = (
    "#include <torch/extension.h>\\n"
    "__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {\\n"
    "    int idx = blockIdx.x * blockDim.x + threadIdx.x;\\n"
    "    if (idx < size) { out[idx] = a[idx] + b[idx]; }\\n"
    "}\\n"
) + """
torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                       out.data_ptr<float>(), size);
    return out;
}
"""

elementwise_add_cpp_source = "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"
FUNCTIONS = ["elementwise_add_cuda"]

elementwise_add = load_inline(
    name="elementwise_add",
    cpp_sources=elementwise_add_cpp_source,
    cuda_sources=elementwise_add_source,
    functions=FUNCTIONS,
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.elementwise_add = elementwise_add

    def forward(self, a, b):
        return self.elementwise_add.elementwise_add_cuda(a, b)
'''


def codes(analysis: CandidateAnalysis, severity: str | None = None) -> set[str]:
    return {f.code for f in analysis.findings if severity is None or f.severity == severity}


def finding(analysis: CandidateAnalysis, code: str):
    return next(f for f in analysis.findings if f.code == code)


# ---- clean candidates ------------------------------------------------------------------


def test_clean_cuda_relu_has_no_findings() -> None:
    analysis = analyze_candidate(cuda_candidate(forward="# torch.relu = x\nreturn relu.relu_cuda(x.contiguous())"))
    assert analysis.findings == ()
    assert analysis.backend == "cuda"
    assert analysis.has_modelnew
    assert analysis.cuda_kernels == ("relu_kernel",)
    assert analysis.launched_kernels == ("relu_kernel",)
    assert analysis.extensions[0].functions == ("relu_cuda",)
    assert analysis.extensions[0].resolved
    assert analysis.torch_ops_in_forward == ()


def test_clean_cpp_openmp_relu_has_no_findings() -> None:
    analysis = analyze_candidate(CPP_OMP)
    assert analysis.findings == ()
    assert analysis.backend == "cpp"
    assert "#pragma omp parallel for" in analysis.extensions[0].cpp_sources


def test_clean_triton_matmul_with_ieee_dot_has_no_findings() -> None:
    analysis = analyze_candidate(TRITON_MATMUL)
    assert analysis.findings == ()
    assert analysis.backend == "triton"
    assert analysis.triton_kernels == ("matmul_kernel",)
    assert analysis.launched_kernels == ("matmul_kernel",)


def test_kernelbench_style_sources_in_module_variables_resolve() -> None:
    analysis = analyze_candidate(KERNELBENCH_STYLE)
    assert analysis.findings == ()
    ext = analysis.extensions[0]
    assert ext.name == "elementwise_add"
    assert ext.functions == ("elementwise_add_cuda",)
    assert ext.resolved
    assert "elementwise_add_kernel<<<" in ext.cuda_sources
    assert analysis.cuda_kernels == ("elementwise_add_kernel",)


def test_unresolvable_source_is_recorded_not_rejected() -> None:
    source = cuda_candidate().replace("cuda_sources=cuda_src", "cuda_sources=open('k.cu').read()")
    analysis = analyze_candidate(source)
    assert not analysis.extensions[0].resolved
    assert "kernel_not_launched" not in codes(analysis, "reject")


def test_fstring_source_with_module_constant_resolves() -> None:
    source = cuda_candidate().replace(
        "cuda_src = r'''",
        "THREADS = 128\nkernel = f'__global__ void k(float* x) {{ x[0] = {THREADS}; }}'\ncuda_src = kernel + r'''",
    )
    analysis = analyze_candidate(source)
    ext = analysis.extensions[0]
    assert ext.resolved
    assert ext.cuda_sources.startswith("__global__ void k(float* x) { x[0] = 128; }")
    assert set(analysis.cuda_kernels) == {"k", "relu_kernel"}
    unlaunched = finding(analysis, "kernel_not_launched")
    assert unlaunched.severity == "flag"
    assert "k is never launched" in unlaunched.message


def test_fstring_with_unknown_name_is_unresolved() -> None:
    source = cuda_candidate().replace("cuda_sources=cuda_src", "cuda_sources=f'{cuda_src}{get_more()}'")
    assert not analyze_candidate(source).extensions[0].resolved


# ---- backend detection and malformed files ----------------------------------------------


@pytest.mark.parametrize(
    ("source", "backend"),
    [
        (cuda_candidate(), "cuda"),
        (CPP_OMP, "cpp"),
        (TRITON_MATMUL, "triton"),
        ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n", "python"),
        ("from torch.utils.cpp_extension import load\next = load(name='k', sources=['k.cpp', 'k.cu'])\n", "cuda"),
    ],
)
def test_detect_backend(source: str, backend: str) -> None:
    assert detect_backend(source) == backend


def test_syntax_error_is_reported_not_raised() -> None:
    analysis = analyze_candidate("import torch\nclass ModelNew(nn.Module:\n    pass\n")
    assert analysis.syntax_error is not None
    assert analysis.syntax_error.startswith("line 2")
    assert not analysis.has_modelnew


def test_missing_modelnew() -> None:
    analysis = analyze_candidate(cuda_candidate().replace("class ModelNew", "class Other"))
    assert not analysis.has_modelnew
    assert analysis.syntax_error is None


def test_large_file_is_analyzed() -> None:
    helpers = "\n".join(f"def helper_{i}(x):\n    return x.view(-1)\n" for i in range(100))
    analysis = analyze_candidate(cuda_candidate(extra=helpers))
    assert analysis.findings == ()


# ---- findings, one or more candidates per reason ------------------------------------------


def test_reason_strings_match_verdicts() -> None:
    emitted = {
        "calls_reference", "exception_fallback", "torch_fallback", "no_custom_kernel", "kernel_not_launched",
        "side_stream", "input_cache", "patched_timer", "patched_torch", "global_state", "precision_downgrade",
        "lazy_output", "cuda_graph_replay",
    }  # fmt: skip
    assert emitted <= {r.value for r in Reason}


@pytest.mark.parametrize(
    "snippet",
    [
        "class ModelNew(Model):\n    def forward(self, x):\n        return relu.relu_cuda(x)\n",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        relu.relu_cuda(x)\n        return Model()(x)\n",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        relu.relu_cuda(x)\n"
        "        return Model.forward(self, x)\n",
        "from reference_problem import Model\n",
    ],
)
def test_calls_reference(snippet: str) -> None:
    source = cuda_candidate().split("class ModelNew")[0] + snippet
    if "class ModelNew" not in snippet:
        source = cuda_candidate(extra=snippet)
    assert finding(analyze_candidate(source), "calls_reference").severity == "reject"


def test_try_except_fallback_to_torch_is_rejected() -> None:
    forward = """
    try:
        return relu.relu_cuda(x)
    except RuntimeError:
        return torch.relu(x)
    """
    analysis = analyze_candidate(cuda_candidate(forward=forward))
    found = finding(analysis, "exception_fallback")
    assert found.severity == "reject"
    assert "torch.relu" in found.message


def test_except_branch_calling_a_torch_helper_method_is_rejected() -> None:
    source = cuda_candidate(forward="try:\n    return relu.relu_cuda(x)\nexcept Exception:\n    return self._ref(x)")
    source += "\n    def _ref(self, x):\n        return F.relu(x)\n"
    assert finding(analyze_candidate(source), "exception_fallback").severity == "reject"


def test_except_that_only_reraises_is_fine() -> None:
    forward = "try:\n    return relu.relu_cuda(x)\nexcept RuntimeError as e:\n    raise ValueError('bad') from e"
    assert "exception_fallback" not in codes(analyze_candidate(cuda_candidate(forward=forward)))


def test_device_keyed_torch_branch_is_flagged() -> None:
    forward = "if not x.is_cuda:\n    return torch.relu(x)\nreturn relu.relu_cuda(x)"
    found = finding(analyze_candidate(cuda_candidate(forward=forward)), "exception_fallback")
    assert found.severity == "flag"


def test_torch_ops_in_forward_are_flagged_and_listed() -> None:
    source = cuda_candidate(
        forward="""
        y = relu.relu_cuda(x)
        z = torch.matmul(y, y) + F.softmax(y, dim=-1) + (y @ y) + y.sum()
        return self.fc(torch.cat([z, z]))
        """
    ).replace("super().__init__()", "super().__init__()\n        self.fc = nn.Linear(4, 4)")
    analysis = analyze_candidate(source)
    assert set(analysis.torch_ops_in_forward) == {"torch.matmul", "F.softmax", "@", ".sum", "nn.Linear", "torch.cat"}
    assert codes(analysis, "flag") == {"torch_fallback"}
    assert codes(analysis, "reject") == set()


def test_trivial_torch_calls_are_not_ops() -> None:
    forward = "y = torch.empty_like(x).view(-1)\nrelu.relu_cuda(x.reshape(-1).contiguous())\nreturn y.float()"
    analysis = analyze_candidate(cuda_candidate(forward=forward))
    assert analysis.torch_ops_in_forward == ()
    assert analysis.findings == ()


def test_torch_ops_in_init_are_not_forward_ops() -> None:
    source = cuda_candidate().replace("super().__init__()", "super().__init__()\n        self.w = torch.randn(4).exp()")
    assert analyze_candidate(source).torch_ops_in_forward == ()


@pytest.mark.parametrize("use", ["ModelNew = torch.compile(ModelNew)", "fast = torch.jit.script(lambda x: x)"])
def test_torch_compile_is_rejected(use: str) -> None:
    found = finding(analyze_candidate(cuda_candidate() + use + "\n"), "torch_fallback")
    assert found.severity == "reject"


def test_torch_compiler_is_compiling_is_not_torch_compile() -> None:
    forward = "if torch.compiler.is_compiling():\n    pass\nreturn relu.relu_cuda(x)"
    assert "torch_fallback" not in codes(analyze_candidate(cuda_candidate(forward=forward)), "reject")


@pytest.mark.parametrize(
    "use",
    [
        "exec('def fallback(x):\\n    return x.relu()')",
        "fast = eval('lambda x: x.relu()')",
        "code = compile('y = 1', 'f', 'exec')",
        "import builtins\nbuiltins.exec('pass')",
    ],
)
def test_running_source_text_is_rejected(use: str) -> None:
    found = finding(analyze_candidate(cuda_candidate() + use + "\n"), "dynamic_code")
    assert found.severity == "reject"


def test_model_eval_and_re_compile_are_not_dynamic_code() -> None:
    source = cuda_candidate() + "import re\nPATTERN = re.compile('x')\nm = ModelNew().eval()\n"
    assert "dynamic_code" not in codes(analyze_candidate(source), "reject")


def test_no_custom_kernel() -> None:
    source = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    analysis = analyze_candidate(source)
    assert finding(analysis, "no_custom_kernel").severity == "reject"
    assert analysis.torch_ops_in_forward == (".relu",)


def test_cuda_kernel_never_launched_is_rejected() -> None:
    source = cuda_candidate(cuda_src=CUDA_SRC.replace("relu_kernel<<<", "// relu_kernel<<<\n    dummy<<<"))
    source = source.replace("dummy<<<", "(void)")  # the launch is gone; only a comment mentions it
    analysis = analyze_candidate(source)
    found = finding(analysis, "kernel_not_launched")
    assert found.severity == "reject"
    assert "relu_kernel" in found.message
    assert found.line is not None and "__global__ void relu_kernel" in source.splitlines()[found.line - 1]


def test_extension_function_never_called_is_rejected() -> None:
    analysis = analyze_candidate(cuda_candidate(forward="return torch.relu(x)"))
    messages = [f.message for f in analysis.rejections if f.code == "kernel_not_launched"]
    assert any("relu_cuda" in m for m in messages)
    assert "torch.relu" in analysis.torch_ops_in_forward


def test_kernel_used_only_outside_forward_is_rejected() -> None:
    source = cuda_candidate(forward="return torch.relu(x)").replace(
        "super().__init__()", "super().__init__()\n        self.warm = relu.relu_cuda(torch.ones(4))"
    )
    found = finding(analyze_candidate(source), "kernel_not_launched")
    assert found.severity == "reject"
    assert "forward" in found.message


def test_triton_kernel_never_launched_is_rejected() -> None:
    source = TRITON_MATMUL.replace("matmul_kernel[grid](a, b, c, M, N, K)", "c = a @ b")
    analysis = analyze_candidate(source)
    assert finding(analysis, "kernel_not_launched").severity == "reject"
    assert "@" in analysis.torch_ops_in_forward


@pytest.mark.parametrize(
    "cuda_line",
    [
        "cudaStream_t s; cudaStreamCreate(&s);",
        "auto s = at::cuda::getStreamFromPool();",
        "std::thread t([]{}); t.join();",
    ],
)
def test_side_streams_in_cuda_are_rejected(cuda_line: str) -> None:
    src = CUDA_SRC.replace("auto y = torch::empty_like(x);", f"auto y = torch::empty_like(x);\n    {cuda_line}")
    found = finding(analyze_candidate(cuda_candidate(cuda_src=src)), "side_stream")
    assert found.severity == "reject"


def test_launch_on_pool_stream_is_rejected() -> None:
    src = CUDA_SRC.replace(
        "auto y = torch::empty_like(x);", "auto y = torch::empty_like(x);\n    auto s = c10::cuda::getStreamFromPool();"
    )
    src = src.replace("at::cuda::getCurrentCUDAStream()>>>", "s>>>")
    messages = [f.message for f in analyze_candidate(cuda_candidate(cuda_src=src)).rejections]
    assert any("non-default stream 's'" in m for m in messages)


def test_launch_on_current_stream_variable_is_fine() -> None:
    src = CUDA_SRC.replace(
        "auto y = torch::empty_like(x);",
        "auto y = torch::empty_like(x);\n    cudaStream_t st = at::cuda::getCurrentCUDAStream();",
    )
    src = src.replace("at::cuda::getCurrentCUDAStream()>>>", "st>>>")
    assert analyze_candidate(cuda_candidate(cuda_src=src)).findings == ()


FAST_SRC = r"""
#include <cstdint>
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" int relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
    BODY
    relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
    return (int)cudaGetLastError();
}
EXTRA
"""


def fast_candidate(body: str = "", extra: str = "", signature: str = "ptr, ptr, i64, stream") -> str:
    """A kernelwright.fastext candidate: the loader fills the launcher's `stream` parameter with
    the current stream when Python calls it (never passed from Python)."""
    source = FAST_SRC.replace("BODY", body).replace("EXTRA", extra)
    return (
        "import torch\nimport torch.nn as nn\nfrom kernelwright.fastext import load_kernels\n\n"
        f'SOURCE = r"""{source}"""\n'
        f'lib = load_kernels("kw_relu", SOURCE, {{"relu": "{signature}"}}, lang="cuda")\n\n\n'
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        y = torch.empty_like(x)\n"
        "        lib.relu(x, y, x.numel())\n"
        "        return y\n"
    )


def test_a_fastext_launchers_loader_filled_stream_is_the_current_stream() -> None:
    """The fastext loader passes torch's current stream for a `stream` parameter: launching on it
    is not a side stream (every fast-form candidate was flagged `side_stream` before)."""
    assert "side_stream" not in codes(analyze_candidate(fast_candidate()))


def test_a_fastext_launcher_called_under_a_side_stream_made_current_is_rejected() -> None:
    """The loader passes whatever stream is current: a forward that makes its own stream current
    around the call is the Python side's side stream (and the profile's stream check's)."""
    source = fast_candidate().replace(
        "        lib.relu(x, y, x.numel())\n",
        "        with torch.cuda.stream(torch.cuda.Stream()):\n            lib.relu(x, y, x.numel())\n",
    )
    assert "with torch.cuda.stream" in source
    assert "side_stream" in codes(analyze_candidate(source), "reject")


@pytest.mark.parametrize(
    ("body", "extra", "signature", "severity"),
    [
        # the parameter replaced inside the launcher: a side stream
        ("cudaStreamCreate(&stream);", "", "ptr, ptr, i64, stream", "reject"),
        ("stream = other_stream();", "cudaStream_t other_stream();", "ptr, ptr, i64, stream", "flag"),
        # the launcher called from its own C++ with a stream of the source's choosing
        (
            "",
            'extern "C" int relu2(const float* x, float* y, int64_t n) { cudaStream_t s = nullptr; '
            "cudaStreamCreateWithFlags(&s, 1); return relu(x, y, n, s); }",
            "ptr, ptr, i64, stream",
            "flag",
        ),
        # ... or through a pointer to it, which no call by name shows
        (
            "",
            "cudaStream_t other_stream();\n"
            'extern "C" int relu2(const float* x, float* y, int64_t n) { auto f = &relu; '
            "return f(x, y, n, other_stream()); }",
            "ptr, ptr, i64, stream",
            "flag",
        ),
        # the loader fills no stream here: the last argument is a number passed from Python
        ("", "", "ptr, ptr, i64, i64", "flag"),
    ],
)
def test_a_launcher_stream_the_loader_may_not_have_filled_is_not_trusted(
    body: str, extra: str, signature: str, severity: str
) -> None:
    found = [f for f in analyze_candidate(fast_candidate(body, extra, signature)).findings if f.code == "side_stream"]
    assert found, "no side_stream finding"
    assert severity in {f.severity for f in found}


def test_python_side_stream_and_threads() -> None:
    source = cuda_candidate(
        forward="s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    return relu.relu_cuda(x)",
        extra="import threading",
    )
    findings = [f for f in analyze_candidate(source).findings if f.code == "side_stream"]
    assert {f.severity for f in findings} == {"reject", "flag"}


@pytest.mark.parametrize(
    "forward",
    [
        "key = x.data_ptr()\nif key in self.cache:\n    return self.cache[key]\nreturn relu.relu_cuda(x)",
        "if id(x) == self.last:\n    return self.out\nreturn relu.relu_cuda(x)",
        "self.cache[x] = relu.relu_cuda(x)\nreturn self.cache[x]",
    ],
)
def test_input_caches_are_rejected(forward: str) -> None:
    found = finding(analyze_candidate(cuda_candidate(forward=forward)), "input_cache")
    assert found.severity == "reject"


def test_passing_data_ptr_to_a_kernel_is_fine() -> None:
    forward = "relu.relu_cuda(x, x.data_ptr())\nreturn x"
    assert "input_cache" not in codes(analyze_candidate(cuda_candidate(forward=forward)))


def test_shape_keyed_config_cache_is_flagged() -> None:
    forward = "self.configs[tuple(x.shape)] = 256\nreturn relu.relu_cuda(x)"
    assert finding(analyze_candidate(cuda_candidate(forward=forward)), "input_cache").severity == "flag"


def test_lru_cache_is_rejected() -> None:
    source = cuda_candidate(extra="import functools\n@functools.lru_cache(maxsize=None)\ndef run(x):\n    return x\n")
    assert finding(analyze_candidate(source), "input_cache").severity == "reject"


def test_static_tensor_in_cuda_is_only_a_flag() -> None:
    """A static scratch buffer is honest; fresh inputs on every checked call catch a cache, and the
    repeated first trial catches a returned buffer (`output_reused`)."""
    src = CUDA_SRC.replace("auto y = torch::empty_like(x);", "static torch::Tensor y = torch::empty_like(x);")
    assert finding(analyze_candidate(cuda_candidate(cuda_src=src)), "input_cache").severity == "flag"


HALF_SWITCH = """
    switch (x.scalar_type()) {
        case at::kHalf: {
            auto p = reinterpret_cast<__half*>(x.data_ptr<at::Half>());
            (void)p;
            break;
        }
        default: break;
    }
    if (x.scalar_type() == at::ScalarType::BFloat16) {
        c10::BFloat16 unused;
        (void)unused;
    }
    int n = x.numel();"""


def test_half_in_a_dtype_dispatch_is_a_flag_not_a_rejection() -> None:
    src = CUDA_SRC.replace("int n = x.numel();", HALF_SWITCH)
    analysis = analyze_candidate(cuda_candidate(cuda_src=src))
    assert "precision_downgrade" in codes(analysis, "flag")
    assert "precision_downgrade" not in codes(analysis, "reject")


def test_half_kernel_parameters_are_recorded_for_the_work_share() -> None:
    extra_kernel = "__global__ void relu_half(const __half* x, __half* y, int n) { }\n"
    src = CUDA_SRC.replace("torch::Tensor relu_cuda", extra_kernel + "torch::Tensor relu_cuda")
    analysis = analyze_candidate(cuda_candidate(cuda_src=src))
    assert analysis.half_kernels == ("relu_half",)
    assert "precision_downgrade" not in codes(analysis, "reject")


@pytest.mark.parametrize(
    "line",
    [
        "auto h = x.to(at::kHalf);",  # converts outside any dtype gate
        "c10::Half h;",
    ],
)
def test_half_outside_a_dtype_gate_is_rejected(line: str) -> None:
    src = CUDA_SRC.replace("int n = x.numel();", f"{line}\n    int n = x.numel();")
    assert "precision_downgrade" in codes(analyze_candidate(cuda_candidate(cuda_src=src)), "reject")


def test_half_inside_a_kernel_is_judged_when_that_kernel_runs() -> None:
    src = CUDA_SRC.replace("if (i < n) y[i]", "__half h = __float2half(x[i]); (void)h;\n    if (i < n) y[i]")
    analysis = analyze_candidate(cuda_candidate(cuda_src=src))
    assert analysis.half_kernels == ("relu_kernel",)  # the work share rejects it if it runs
    assert "precision_downgrade" not in codes(analysis, "reject")


def test_half_in_a_device_helper_is_rejected() -> None:
    helper = "__device__ float through_half(float v) { return __half2float(__float2half(v)); }\n"
    src = CUDA_SRC.replace("__global__ void relu_kernel", helper + "__global__ void relu_kernel")
    assert "precision_downgrade" in codes(analyze_candidate(cuda_candidate(cuda_src=src)), "reject")


def test_cuda_sources_made_at_run_time_are_still_cuda() -> None:
    source = cuda_candidate().replace("cuda_sources=cuda_src", "cuda_sources=f'{cuda_src}'")
    assert analyze_candidate(source).backend == "cuda"


@pytest.mark.parametrize("call", ["at::cpu::clamp_min(x, 0)", "at::native::relu(x)", "at::cuda::clamp_min(x, 0)"])
def test_direct_aten_kernel_calls_are_rejected(call: str) -> None:
    """They bypass the dispatcher, so the profiler sees no op: the work would pass as the candidate's."""
    src = CUDA_SRC.replace("auto y = torch::empty_like(x);", f"auto y = {call};")
    found = finding(analyze_candidate(cuda_candidate(cuda_src=src)), "torch_fallback")
    assert found.severity == "reject" and "dispatcher" in found.message


def test_cuda_utilities_are_not_direct_kernel_calls() -> None:
    analysis = analyze_candidate(cuda_candidate())
    assert "torch_fallback" not in codes(analysis)  # at::cuda::getCurrentCUDAStream is a utility


def test_static_pointer_compared_to_data_ptr_is_rejected() -> None:
    src = CUDA_SRC.replace(
        "auto y = torch::empty_like(x);",
        "static const void* last = nullptr;\n    if (x.data_ptr() == last) { }\n    auto y = torch::empty_like(x);",
    )
    assert finding(analyze_candidate(cuda_candidate(cuda_src=src)), "input_cache").severity == "reject"


@pytest.mark.parametrize(
    "patch",
    [
        "torch.cuda.Event.elapsed_time = lambda self, other: 0.001",
        "import time\ntime.perf_counter = lambda: 0.0",
        "torch.cuda.synchronize = lambda: None",
        "setattr(torch.cuda, 'synchronize', lambda: None)",
    ],
)
def test_patched_timers_are_rejected(patch: str) -> None:
    assert finding(analyze_candidate(cuda_candidate(extra=patch)), "patched_timer").severity == "reject"


@pytest.mark.parametrize(
    "patch",
    [
        "torch.relu = lambda x: x",
        "torch.Tensor.__add__ = lambda a, b: a",
        "F.softmax = None",
        "setattr(torch, 'mm', f)",
    ],
)
def test_patched_torch_is_rejected(patch: str) -> None:
    assert finding(analyze_candidate(cuda_candidate(extra=patch)), "patched_torch").severity == "reject"


def test_comments_and_strings_do_not_trigger_findings() -> None:
    extra = '# torch.relu = x\nNOTE = "torch.cuda.synchronize = None; torch.cuda.Stream()"\n'
    assert analyze_candidate(cuda_candidate(extra=extra)).findings == ()


@pytest.mark.parametrize(
    "setting",
    [
        "torch.backends.cudnn.benchmark = True",
        "torch.backends.cuda.matmul.allow_tf32 = False",
        "torch.use_deterministic_algorithms(True)",
        "torch.set_num_threads(1)",
        "torch.set_default_dtype(torch.float64)",
    ],
)
def test_global_state_is_rejected(setting: str) -> None:
    assert finding(analyze_candidate(cuda_candidate(extra=setting)), "global_state").severity == "reject"


@pytest.mark.parametrize(
    "setting", ["torch.backends.cuda.matmul.allow_tf32 = True", "torch.set_float32_matmul_precision('high')"]
)
def test_enabling_tf32_in_fp32_problem_is_precision_downgrade(setting: str) -> None:
    analysis = analyze_candidate(cuda_candidate(extra=setting))
    assert finding(analysis, "precision_downgrade").severity == "reject"
    assert "global_state" not in codes(analysis)


@pytest.mark.parametrize(
    "forward",
    ["return relu.relu_cuda(x.half()).float()", "return relu.relu_cuda(x.to(torch.bfloat16))"],
)
def test_python_precision_downgrade(forward: str) -> None:
    source = cuda_candidate(forward=forward)
    assert finding(analyze_candidate(source), "precision_downgrade").severity == "reject"
    assert "precision_downgrade" not in codes(analyze_candidate(source, problem_dtype="float16"))


def test_dtype_comparison_is_not_a_downgrade() -> None:
    forward = "assert x.dtype != torch.float16\nreturn relu.relu_cuda(x)"
    assert analyze_candidate(cuda_candidate(forward=forward)).findings == ()


@pytest.mark.parametrize(
    "cuda_line",
    [
        "__half h = __float2half(1.0f);",
        "c10::Half h;",
        'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {};");',
    ],
)
def test_cuda_precision_downgrade(cuda_line: str) -> None:
    src = CUDA_SRC.replace("int n = x.numel();", f"int n = x.numel();\n    {cuda_line}")
    assert finding(analyze_candidate(cuda_candidate(cuda_src=src)), "precision_downgrade").severity == "reject"
    assert "precision_downgrade" not in codes(analyze_candidate(cuda_candidate(cuda_src=src), problem_dtype="bfloat16"))


def test_triton_default_tf32_dot_is_flagged() -> None:
    found = finding(analyze_candidate(TRITON_MATMUL.replace(", allow_tf32=False", "")), "precision_downgrade")
    assert found.severity == "flag"
    assert "ieee" in found.message


def test_triton_explicit_tf32_and_fp16_casts_are_rejected() -> None:
    source = TRITON_MATMUL.replace("allow_tf32=False", 'input_precision="tf32"')
    assert finding(analyze_candidate(source), "precision_downgrade").severity == "reject"
    source = TRITON_MATMUL.replace("a = tl.load(a_ptr + offs)", "a = tl.load(a_ptr + offs).to(tl.float16)")
    assert finding(analyze_candidate(source), "precision_downgrade").severity == "reject"


@pytest.mark.parametrize(
    "extra",
    [
        "class Lazy(torch.Tensor):\n    pass\n",
        "class M:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        return func(*args)\n",
    ],
)
def test_lazy_outputs_are_rejected(extra: str) -> None:
    assert finding(analyze_candidate(cuda_candidate(extra=extra)), "lazy_output").severity == "reject"


def test_returning_a_closure_is_flagged() -> None:
    forward = "y = relu.relu_cuda(x)\nreturn lambda: y"
    assert finding(analyze_candidate(cuda_candidate(forward=forward)), "lazy_output").severity == "flag"


def test_cuda_graphs_are_flagged() -> None:
    forward = "g = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    y = relu.relu_cuda(x)\ng.replay()\nreturn y"
    found = finding(analyze_candidate(cuda_candidate(forward=forward)), "cuda_graph_replay")
    assert found.severity == "flag"
    src = CUDA_SRC.replace("return y;", "cudaGraphLaunch(exec, 0);\n    return y;")
    assert finding(analyze_candidate(cuda_candidate(cuda_src=src)), "cuda_graph_replay").severity == "flag"


def test_torch_op_in_cpp_extension_is_flagged() -> None:
    src = CUDA_SRC.replace("return y;", "return torch::matmul(x, x);")
    found = finding(analyze_candidate(cuda_candidate(cuda_src=src)), "torch_fallback")
    assert found.severity == "flag"
    assert "torch::matmul" in found.message


# ---- operators the candidate registers itself (issue #28) ------------------------------

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"

CUSTOM_OP_CPP = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = '''
#include <torch/extension.h>
torch::Tensor relu_cpu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
    return y;
}
'''
ext = load_inline(name="relu_op_cpu", cpp_sources=[source], functions=["relu_cpu"])

@torch.library.custom_op("kwtest::relu", mutates_args=())
def relu_op(x: torch.Tensor) -> torch.Tensor:
    BODY

@relu_op.register_fake
def _(x):
    return torch.empty_like(x)

EXTRA

class ModelNew(nn.Module):
    def forward(self, x):
        return FORWARD
"""


def custom_op_candidate(
    body: str = "return ext.relu_cpu(x)", forward: str = "torch.ops.kwtest.relu(x)", extra: str = ""
) -> str:
    return CUSTOM_OP_CPP.replace("BODY", body).replace("FORWARD", forward).replace("EXTRA", extra)


TORCH_LIBRARY_CUDA = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
at::Tensor relu_cuda(const at::Tensor& x) {
    auto y = at::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
REGISTRATION
'''
load_inline(name="relu_lib", cpp_sources="", cuda_sources=cuda_src, is_python_module=False)

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.kwlib.relu(x)
"""


def torch_library_candidate(registration: str) -> str:
    return TORCH_LIBRARY_CUDA.replace("REGISTRATION", registration)


def test_custom_op_around_a_load_inline_function_is_the_candidates_kernel() -> None:
    analysis = analyze_candidate(custom_op_candidate())
    assert analysis.rejections == ()
    assert analysis.own_ops == ("kwtest::relu",)
    assert analysis.torch_ops_in_forward == ()  # torch.ops.kwtest.relu is not PyTorch's
    assert "torch_fallback" not in codes(analysis)  # register_fake's torch.empty_like never runs on real inputs


def test_custom_op_called_through_its_python_name_or_overload_is_the_candidates_kernel() -> None:
    for forward in ("relu_op(x)", "torch.ops.kwtest.relu.default(x)"):
        assert analyze_candidate(custom_op_candidate(forward=forward)).rejections == ()


def test_bundled_custom_op_and_torch_library_candidates_are_not_rejected() -> None:
    for name, op in (
        ("custom_op_relu_cpp.py", "kw_custom::relu"),
        ("torch_library_relu_cpp.py", "kw_lib::relu"),
        ("custom_op_relu_cuda.py", "kw_custom_cuda::relu"),
    ):
        analysis = analyze_candidate((CANDIDATES / name).read_text())
        assert analysis.rejections == (), name
        assert analysis.own_ops == (op,)
        assert analysis.torch_ops_in_forward == ()


@pytest.mark.parametrize(
    "registration",
    [
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor", &relu_cuda); }',
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor"); }\n'
        'TORCH_LIBRARY_IMPL(kwlib, CUDA, m) { m.impl("relu", TORCH_FN(relu_cuda)); }',
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor", [](const at::Tensor& x) { return relu_cuda(x); }); }',
    ],
)
def test_torch_library_in_the_candidates_own_extension_is_its_kernel(registration: str) -> None:
    analysis = analyze_candidate(torch_library_candidate(registration))
    assert analysis.rejections == ()
    assert analysis.own_ops == ("kwlib::relu",)
    assert analysis.launched_kernels == ("relu_kernel",)


@pytest.mark.parametrize(
    "registration",
    [
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor", TORCH_FN(at::relu)); }',
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor", [](const at::Tensor& x) { return at::relu(x); }); }',
        'TORCH_LIBRARY(kwlib, m) { m.def("relu(Tensor x) -> Tensor"); }',  # no implementation at all
    ],
)
def test_torch_library_op_wrapping_pytorch_is_not_the_candidates_kernel(registration: str) -> None:
    analysis = analyze_candidate(torch_library_candidate(registration))
    assert any(f.code == "kernel_not_launched" and "forward" in f.message for f in analysis.rejections)


def test_custom_op_whose_body_calls_torch_stays_a_fallback() -> None:
    analysis = analyze_candidate(custom_op_candidate(body="return torch.relu(x)"))
    assert any(f.code == "kernel_not_launched" and "forward" in f.message for f in analysis.rejections)
    assert "torch.relu" in analysis.torch_ops_in_forward  # the op's body is read like forward's own code
    assert finding(analysis, "torch_fallback").severity == "flag"


def test_custom_op_kernel_overridden_by_a_torch_kernel_is_flagged() -> None:
    extra = '@relu_op.register_kernel("cpu")\ndef _cpu(x):\n    return torch.relu(x)\n'
    analysis = analyze_candidate(custom_op_candidate(extra=extra))
    assert "torch.relu" in analysis.torch_ops_in_forward  # the profiler decides who did the work
    assert any(f.code == "torch_fallback" and "torch.relu" in f.message for f in analysis.findings)


def test_library_define_and_impl_with_an_extension_function_is_the_candidates_kernel() -> None:
    extra = (
        'lib = torch.library.Library("kwdef", "DEF")\n'
        'lib.define("relu(Tensor x) -> Tensor")\n'
        'lib.impl("relu", ext.relu_cpu, "CPU")\n'
    )
    analysis = analyze_candidate(custom_op_candidate(forward="torch.ops.kwdef.relu(x)", extra=extra))
    assert analysis.rejections == ()
    assert "kwdef::relu" in analysis.own_ops
    wrapper = extra.replace("ext.relu_cpu", "torch.relu")
    analysis = analyze_candidate(custom_op_candidate(body="return x", forward="torch.ops.kwdef.relu(x)", extra=wrapper))
    assert any(f.code == "kernel_not_launched" for f in analysis.rejections)


def test_aten_ops_stay_pytorch_even_beside_a_custom_op() -> None:
    analysis = analyze_candidate(custom_op_candidate(forward="torch.ops.aten.relu(x)"))
    assert "torch.ops.aten.relu" in analysis.torch_ops_in_forward
    assert any(f.code == "kernel_not_launched" and "forward" in f.message for f in analysis.rejections)
    # an op of the candidate's namespace that it never registered is not its own either
    analysis = analyze_candidate(custom_op_candidate(forward="torch.ops.kwtest.gelu(x)"))
    assert "torch.ops.kwtest.gelu" in analysis.torch_ops_in_forward
    assert any(f.code == "kernel_not_launched" for f in analysis.rejections)


@pytest.mark.parametrize(
    "extra",
    [
        'lib = torch.library.Library("aten", "IMPL")\nlib.impl("relu", relu_op, "CPU")\n',
        '@torch.library.impl("aten::relu", "cpu")\ndef _mine(x):\n    return ext.relu_cpu(x)\n',
        '@torch.library.custom_op("prims::my_relu", mutates_args=())\ndef _mine(x: torch.Tensor) -> torch.Tensor:\n'
        "    return ext.relu_cpu(x)\n",
    ],
)
def test_registering_in_a_pytorch_namespace_is_patched_torch(extra: str) -> None:
    analysis = analyze_candidate(custom_op_candidate(extra=extra))
    assert finding(analysis, "patched_torch").severity == "reject"


def test_torch_library_impl_of_an_aten_op_in_cpp_is_patched_torch() -> None:
    registration = 'TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl("relu", &relu_cuda); }'
    analysis = analyze_candidate(torch_library_candidate(registration))
    assert finding(analysis, "patched_torch").severity == "reject"
    assert analysis.own_ops == ()


def test_library_impl_that_is_a_torch_function_is_not_the_candidates_kernel() -> None:
    extra = 'lib = torch.library.Library("kwdef", "DEF")\nlib.define("relu(Tensor x) -> Tensor")\nlib.impl("relu", torch.relu, "CPU")\n'
    analysis = analyze_candidate(custom_op_candidate(forward="torch.ops.kwdef.relu(x)", extra=extra))
    assert analysis.own_ops == ("kwtest::relu",)  # kwdef::relu has no implementation of the candidate's
    assert "torch.ops.kwdef.relu" in analysis.torch_ops_in_forward
    assert any(f.code == "torch_fallback" and "torch.relu" in f.message for f in analysis.findings)
    assert any(f.code == "kernel_not_launched" and "forward" in f.message for f in analysis.rejections)


def test_torch_library_cpu_function_that_only_calls_aten_is_not_the_candidates_kernel() -> None:
    source = (CANDIDATES / "torch_library_relu_cpp.py").read_text()
    start, end = source.index("    auto xc = x.contiguous();"), source.index("    return out;\n}")
    wrapper = source[:start] + "    auto out = at::relu(x);\n" + source[end:]
    analysis = analyze_candidate(wrapper)
    assert any(f.code == "kernel_not_launched" and "forward" in f.message for f in analysis.rejections)
    assert any(f.code == "torch_fallback" and "at::relu" in f.message for f in analysis.findings)
