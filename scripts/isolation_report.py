"""What a candidate's worker gets here (a GPU-host check): the kernel and its security modules,
`confine.probe()`'s promise, whether the CUDA driver starts under the layers
(`confine.cuda_after_layers()`), and what a process confined with CUDA (`cuda=True`) reports in
both orders, with the threads it runs afterwards."""

import os
import subprocess
import sys
from pathlib import Path

from kernelwright.harness.sandbox import confine

CONFINED = (
    "import os, pathlib\n"
    "from kernelwright.harness.sandbox import confine\n"
    "i = confine.confine([pathlib.Path('/tmp/kw-confine-check')], 'best-effort', cuda=True)\n"
    "print('threads after confine:', len(os.listdir('/proc/self/task')))\n"
    "print('confined:', i.model_dump_json())\n"
)

lsm = Path("/sys/kernel/security/lsm")
print("uid", os.geteuid(), "kernel", os.uname().release)
print("lsm:", lsm.read_text().strip() if lsm.exists() else "(no /sys/kernel/security/lsm)")
print("probe:", confine.probe().model_dump_json())
print("cuda after layers:", confine.cuda_after_layers())
for order in ("before-layers", "after-layers"):
    env = {**os.environ, confine.CUDA_INIT_VAR: order}
    done = subprocess.run([sys.executable, "-c", CONFINED], capture_output=True, text=True, timeout=120, env=env)
    print(f"[{order}]", done.stdout.strip() or done.stderr.strip()[-800:])
