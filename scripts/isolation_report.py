"""What a candidate's worker gets here (a GPU-host check): the kernel and its security modules,
`confine.probe()`'s promise, and what a process confined with CUDA (`cuda=True`) reports, with the
threads it runs after the driver's initialisation."""

import os
import subprocess
import sys
from pathlib import Path

from kernelwright.harness.process import confine

CONFINED = (
    "import os, pathlib\n"
    "from kernelwright.harness.process import confine\n"
    "i = confine.confine([pathlib.Path('/tmp/kw-confine-check')], 'best-effort', cuda=True)\n"
    "print('threads after confine:', len(os.listdir('/proc/self/task')))\n"
    "print('confined:', i.model_dump_json())\n"
)

lsm = Path("/sys/kernel/security/lsm")
print("uid", os.geteuid(), "kernel", os.uname().release)
print("lsm:", lsm.read_text().strip() if lsm.exists() else "(no /sys/kernel/security/lsm)")
print("probe:", confine.probe().model_dump_json())
done = subprocess.run([sys.executable, "-c", CONFINED], capture_output=True, text=True, timeout=120)
print(done.stdout.strip() or done.stderr.strip()[-800:])
