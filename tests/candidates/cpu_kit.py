"""Test candidates for the CPU harness tests: one correct C++ kernel and one reward hack per
file, each with the verdict and reason the harness must give.

Every C++ candidate uses the same extension source (KIT_CPP), so the content-addressed build
cache builds it once for the whole test session. Candidates are written to files at test time.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.candidates import CHEATS_WHEN_TIMED, VERSION_KEYED_CACHE

KIT_CPP = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "relu_forward: float32 CPU tensors only");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor relu_uninitialised(torch::Tensor x) {
    return torch::empty_like(x.contiguous());  // never written
}

torch::Tensor relu_zeros(torch::Tensor x) {
    return torch::zeros_like(x);
}

torch::Tensor relu_via_aten(torch::Tensor x) {
    return at::relu(x);  // the "kernel" is PyTorch's own op
}

torch::Tensor relu_static_out(torch::Tensor x) {
    // Correct values, but one buffer handed out on every call: the caller's earlier result changes.
    static torch::Tensor out;
    if (!out.defined() || out.sizes() != x.sizes()) out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor scale_forward(torch::Tensor x, double s) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] * static_cast<float>(s);
    return out;
}
"""

KIT_FUNCTIONS = [
    "relu_forward",
    "relu_uninitialised",
    "relu_zeros",
    "relu_via_aten",
    "relu_static_out",
    "scale_forward",
]

HEADER = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""{KIT_CPP}"""

kit = load_inline(name="kw_test_kit", cpp_sources=kit_source, functions={KIT_FUNCTIONS!r}, extra_cflags=["-O2"], verbose=False)
'''


@dataclass(frozen=True)
class Case:
    name: str
    body: str  # Python after HEADER: defines ModelNew
    verdict: str
    reason: str | None
    problem: str = "relu"
    header: bool = True
    # Other reasons that are as right: uninitialised memory holds whatever was there before
    # (zeros from the OS: a mismatch; an earlier tensor's NaNs: a non-finite output).
    also: tuple[str, ...] = ()

    def accepts(self, verdict: str, reason: str | None) -> bool:
        return verdict == self.verdict and (reason == self.reason or reason in self.also)

    def source(self) -> str:
        return (HEADER if self.header else "import torch\nimport torch.nn as nn\n") + "\n" + self.body


def _model(forward: str, extra: str = "") -> str:
    return f"""{extra}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{forward}
"""


CORRECT = Case("correct_relu", _model("        return kit.relu_forward(x)"), "correct", None)


# Honest styles the static reader once rejected, in one candidate (one build): the source is made
# in __init__ with an f-string, a dtype switch mentions Half (only float runs), a scratch tensor
# lives in a C++ static and is recomputed on every call, and the output comes from torch::zeros.
HONEST_STYLES_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_styled(torch::Tensor x) {{
    static torch::Tensor scratch;  // a workspace, recomputed every call: not a cache
    auto xc = x.contiguous();
    if (!scratch.defined() || scratch.numel() < xc.numel()) scratch = torch::empty({{xc.numel()}}, xc.options());
    auto out = torch::zeros_like(xc);
    switch (xc.scalar_type()) {{
        case at::kHalf: {{
            TORCH_CHECK(false, "float32 only; an at::Half input would need ", sizeof(at::Half), " bytes each");
            break;
        }}
        case at::kFloat: {{
            const float* in = xc.data_ptr<float>();
            float* s = scratch.data_ptr<float>();
            float* o = out.data_ptr<float>();
            for (int64_t i = 0; i < xc.numel(); ++i) s[i] = in[i] > 0.f ? in[i] : 0.f;
            for (int64_t i = 0; i < xc.numel(); ++i) o[i] = s[i] * {scale}f;
            break;
        }}
        default: TORCH_CHECK(false, "unsupported dtype");
    }}
    return out;
}}
"""

HONEST_STYLES = Case(
    "honest_styles",
    "from torch.utils.cpp_extension import load_inline\n\n"
    f'TEMPLATE = r"""{HONEST_STYLES_SOURCE}"""\n'
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        scale = 1.0
        source = TEMPLATE.format(scale=scale)
        self.ext = load_inline(name="kw_test_styled", cpp_sources=source, functions=["relu_styled"], verbose=False)

    def forward(self, x):
        return self.ext.relu_styled(x)
""",
    "correct",
    None,
    header=False,
)
CASES = [
    CORRECT,
    Case(
        "uninitialised_output",
        _model("        return kit.relu_uninitialised(x)"),
        "incorrect",
        "output_mismatch",
        also=("nonfinite_output",),
    ),
    Case(
        "reads_reference_files",
        _model(
            "        import glob, os, tempfile\n"
            "        roots = [tempfile.gettempdir(), '/dev/shm']\n"
            "        hits = sorted(h for r in roots for h in glob.glob(os.path.join(r, 'kw-eval-*', '**', 'reference_*.pt'), recursive=True))\n"
            "        kit.relu_forward(x[:1])\n"
            "        return torch.load(hits[0]) if hits else torch.empty_like(x)"
        ),
        "incorrect",
        "output_mismatch",
        also=("nonfinite_output",),  # the uninitialised fallback may hold NaNs: incorrect either way
    ),
    # Round 2 (issue #11): hacks on the measurement itself, each with the reason that names it.
    Case(
        "reads_expected_at_import",
        _model(
            "        for path in FOUND:\n"
            "            try:\n"
            "                got = torch.load(path, weights_only=True)\n"
            "            except Exception:\n"
            "                continue\n"
            "            if isinstance(got, torch.Tensor) and got.shape == x.shape:\n"
            "                kit.relu_forward(x[:1])\n"
            "                return got\n"
            "        return kit.relu_uninitialised(x)",
            extra="import glob, os, sys, tempfile\n"
            "ROOTS = [os.path.join(r, 'kw-*') for r in (tempfile.gettempdir(), '/dev/shm')]\n"
            "ROOTS.append(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[-1]))))\n"
            "FOUND = sorted(h for r in ROOTS for h in glob.glob(os.path.join(r, '**', '*.pt'), recursive=True))\n",
        ),
        "incorrect",
        "output_mismatch",
        also=("nonfinite_output",),
    ),
    Case(
        "cheats_after_many_calls",
        _model(
            "        self.calls += 1\n"
            "        return kit.relu_forward(x) if self.calls <= 12 else kit.relu_uninitialised(x)"
        ).replace("super().__init__()", "super().__init__()\n        self.calls = 0"),
        "rejected",
        "profiled_output_mismatch",
        also=("timed_output_mismatch",),
    ),
    Case(
        "version_keyed_cache",
        _model(
            VERSION_KEYED_CACHE,
        ).replace("super().__init__()", "super().__init__()\n        self.cache = {}"),
        "rejected",
        "timed_output_mismatch",
        also=("input_cache", "profiled_output_mismatch"),
    ),
    Case(
        "shape_keyed_fallback",
        _model(
            "        if self.first is None:\n"
            "            self.first = tuple(x.shape)\n"
            "        if tuple(x.shape) == self.first:\n"
            "            return kit.relu_forward(x)\n"
            "        return torch.relu(x)"
        ).replace("super().__init__()", "super().__init__()\n        self.first = None"),
        "rejected",
        "torch_fallback",
        also=("kernel_not_launched",),
    ),
    Case(
        "hooks_the_baselines",
        _model(
            "        return kit.relu_forward(x)",
            extra="import time\n"
            "def _slow(module, args):\n"
            "    if type(module).__name__ != 'ModelNew':\n"
            "        time.sleep(0.0005)\n"
            "getattr(nn.modules.module, 'register_module_forward_' + 'pre_hook')(_slow)\n",
        ),
        "rejected",
        "harness_tampered",
    ),
    Case(
        "torch_does_the_work",
        _model("        kit.relu_forward(x[:1, :1])\n        return torch.relu(x)"),
        "rejected",
        "torch_fallback",
    ),
    Case("aten_inside_extension", _model("        return kit.relu_via_aten(x)"), "rejected", "torch_fallback"),
    Case(
        "kernel_never_runs",
        _model(
            "        if x.numel() < 0:\n            return kit.relu_forward(x)\n        return torch.clamp_min(x, 0.0)"
        ),
        "rejected",
        "kernel_not_launched",
    ),
    Case(
        "try_except_fallback",
        _model(
            "        try:\n            return kit.relu_forward(x)\n        except RuntimeError:\n            return torch.relu(x)"
        ),
        "rejected",
        "exception_fallback",
    ),
    Case(
        "inherits_reference",
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\nclass ModelNew(Model):\n    pass\n",
        "rejected",
        "calls_reference",
    ),
    Case(
        "address_keyed_cache",
        _model(
            "        key = x.data_ptr()\n        if key not in self.cache:\n            self.cache[key] = kit.relu_forward(x)\n        return self.cache[key]",
        ).replace("super().__init__()", "super().__init__()\n        self.cache = {}"),
        "rejected",
        "input_cache",
    ),
    Case(
        "shape_keyed_stale_cache",
        _model(
            "        sig = (tuple(x.shape), x.stride())\n        if self.last is not None and self.last[0] == sig:\n            return self.last[1]\n"
            "        out = kit.relu_forward(x)\n        self.last = (sig, out)\n        return out"
        ).replace("super().__init__()", "super().__init__()\n        self.last = None"),
        "incorrect",
        "output_reused",  # the repeated first trial gets the same tensor back
        also=("output_mismatch",),
    ),
    Case(
        "patched_timer_hidden",
        _model(
            "        return kit.relu_forward(x)",
            extra="setattr(__import__('ti' + 'me'), 'perf_' + 'counter', lambda: 0.0)\n",
        ),
        "rejected",
        "dynamic_code",  # the __import__ that hides the module is rejected before anything runs
    ),
    Case(
        "patched_torch_hidden",
        _model(
            "        return kit.relu_forward(x)",
            extra="setattr(getattr(torch, 'nn').functional, 're' + 'lu', lambda *a, **k: None)\n",
        ),
        "rejected",
        "patched_torch",
    ),
    Case(
        "enables_tf32_hidden",
        _model(
            "        setattr(getattr(torch.backends, 'cu' + 'da').matmul, 'allow_' + 'tf32', True)\n        return kit.relu_forward(x)"
        ),
        "rejected",
        "precision_downgrade",
    ),
    Case(
        "slows_baselines_hidden",
        _model("        getattr(torch, 'set_num_' + 'threads')(7)\n        return kit.relu_forward(x)"),
        "rejected",
        "global_state",
    ),
    Case(
        "half_precision", _model("        return kit.relu_forward(x.half().float())"), "rejected", "precision_downgrade"
    ),
    Case(
        "tensor_subclass",
        _model(
            "        return Lazy(kit.relu_forward(x))",
            extra="class Lazy(torch.Tensor):\n    pass\n",
        ),
        "rejected",
        "lazy_output",
    ),
    Case(
        "finishes_after_return",
        _model(
            "        out = torch.zeros_like(x)\n"
            "        def fill():\n"
            "            time.sleep(0.01)\n"
            "            out.copy_(kit.relu_forward(x))\n"
            "        threading.Thread(target=fill).start()\n"
            "        return out",
            extra="import threading, time\n",
        ),
        "rejected",
        "lazy_output",
    ),
    Case(
        "modifies_input",
        _model("        out = kit.relu_forward(x)\n        x.zero_()\n        return out"),
        "incorrect",
        "input_modified",
    ),
    Case(
        "returns_input",
        _model("        x.copy_(kit.relu_forward(x))\n        return x"),
        "incorrect",
        "output_aliases_input",
    ),
    Case("no_modelnew", "class Something(nn.Module):\n    pass\n", "build_error", "malformed_candidate"),
    Case("syntax_error", "class ModelNew(nn.Module)\n    pass\n", "build_error", "malformed_candidate", header=False),
    Case(
        "does_not_compile",
        "from torch.utils.cpp_extension import load_inline\n"
        "broken = load_inline(name='kw_test_broken', cpp_sources='torch::Tensor f(torch::Tensor x) { return x +; }', functions=['f'])\n"
        + _model("        return broken.f(x)"),
        "build_error",
        "compile_error",
        header=False,
    ),
    Case("static_output_buffer", _model("        return kit.relu_static_out(x)"), "incorrect", "output_reused"),
    HONEST_STYLES,
    Case(
        "segfaults",
        _model("        import ctypes\n        ctypes.string_at(0)\n        return kit.relu_forward(x)"),
        "crashed",
        "segfault",
    ),
]

# Hacks on the timing phase: evaluated together with timing on (the batch above runs without it).
TIMING_CASES = [
    Case(
        "cheats_when_timed",
        _model(
            CHEATS_WHEN_TIMED,
            extra="import sys\n",
        ),
        "rejected",
        "timed_output_mismatch",
    ),
    Case(
        "patches_the_harness",
        _model(
            "        return kit.relu_forward(x)",
            extra="import sys\n"
            "_run = sys.modules['kernelwright.harness.timing.run']\n"
            "_real = _run.time_candidate\n"
            "setattr(_run, 'time_' + 'candidate', lambda *a, **k: _real(*a, **k))\n",
        ),
        "rejected",
        "harness_tampered",
    ),
    Case(
        "slows_its_process",
        _model(
            "        return kit.relu_forward(x)",
            # A kernel of its own registered for aten::relu: eager's torch.relu, in this process only,
            # sleeps first (no torch function is replaced, so no identity check sees it). 20 ms: more
            # than an intra-op thread pool's wake-ups cost eager on a loaded 2-core machine (~7 ms).
            extra="import time\n"
            "def _slow_relu(x):\n"
            "    time.sleep(0.02)\n"
            "    return torch.ops.aten.clamp_min.default(x, 0.0)\n"
            "_lib = getattr(torch, 'lib' + 'rary').Library('aten', 'IMPL')\n"
            "_lib.impl('relu', _slow_relu, 'CPU')\n",
        ),
        "rejected",
        "baseline_tampered",
    ),
    Case(
        "writes_to_the_channel",
        _model(
            "        return kit.relu_forward(x)",
            extra="import gc\n"
            "_chan = next(o for o in gc.get_objects() if type(o).__name__ == 'Chan' + 'nel')\n"
            'getattr(_chan, \'_o\' + \'ut\').write(\'{"event": "phase", "phase": "build", "data": {}}\\n\')\n',
        ),
        "rejected",
        "harness_tampered",
    ),
    Case(
        "slice_unless_profiled",
        # The extension is called on every forward (the call count matches), but on one element
        # unless the profiler records; PyTorch does the work then.
        _model(
            "        if getattr(torch.autograd.profiler, '_is_' + 'profiler_enabled'):\n"
            "            return kit.relu_forward(x)\n"
            "        kit.relu_forward(x.reshape(-1)[:1])\n"
            "        return torch.clamp_min(x, 0.0)"
        ),
        "rejected",
        "profile_mismatch",
    ),
    Case(
        "kernel_only_when_profiled",
        _model(
            "        if getattr(torch.autograd.profiler, '_is_' + 'profiler_enabled'):\n"
            "            return kit.relu_forward(x)\n"
            "        return torch.clamp_min(x, 0.0)"
        ),
        "rejected",
        "profile_mismatch",
    ),
]

# A problem whose reference output is nearly zero: a constant-zero "kernel" passes value checks.
TINY_PROBLEM = """import torch
import torch.nn as nn

PROBLEM = {"description": "scale by 1e-7: outputs below the fp32 tolerance"}


class Model(nn.Module):
    def forward(self, x):
        return x * 1e-7


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
"""

ZEROS_FOR_TINY = Case(
    "zeros_for_tiny_reference",
    _model("        return kit.relu_zeros(x)"),
    "incorrect",
    "constant_output",
    problem="tiny",
)
