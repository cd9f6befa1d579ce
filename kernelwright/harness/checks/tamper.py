"""Tamper evidence for the harness's own machinery inside a candidate's worker.

The candidate runs in the process that measures it, so it could replace the harness's timing,
drawing, checking or reporting functions, hook the baselines (a global forward pre-hook, a
torch-function or dispatch mode that slows eager and torch.compile or hands the candidate their
outputs), or write to the protocol channel. `harness_snapshot` records the identity of every
function and class attribute of the harness modules loaded in the worker, the global module
hooks and the mode stacks; `harness_changes` names what differs later. An adversary in the same
process can always restore what it replaced before a snapshot is compared: this makes tampering
evident in the common case, and the reference's process re-checks the outputs that were measured
(`workers/reference.py`), which the candidate cannot reach.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from kernelwright.harness.verdicts import Reason

# Modules whose functions and classes a candidate must not replace (those loaded are watched).
WATCHED_MODULES = (
    "kernelwright.harness.workers.main",
    "kernelwright.harness.workers.candidate",
    "kernelwright.harness.workers.jobs",
    "kernelwright.harness.workers.messages",
    "kernelwright.harness.timing.timers",
    "kernelwright.harness.timing.run",
    "kernelwright.harness.timing.stats",
    "kernelwright.harness.checks.dynamic",
    "kernelwright.harness.checks.tamper",
    "kernelwright.harness.fuzz",
    "kernelwright.harness.checks.recorder",
    "kernelwright.harness.outputs",
    "kernelwright.harness.cuda_ipc",
    "torch.serialization",
    "torch.nn.modules.module",
)

_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_always_called",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
)
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _entries(name: str) -> dict[str, int]:
    module = sys.modules.get(name)
    if module is None:
        return {}
    out: dict[str, int] = {}
    for attr, value in list(vars(module).items()):
        if callable(value) and not attr.startswith("__"):
            out[f"{name}.{attr}"] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for member, inner in list(vars(value).items()):
                    if callable(inner) or isinstance(inner, staticmethod | classmethod | property):
                        out[f"{name}.{attr}.{member}"] = id(inner)
    return out


def _stack_depths() -> dict[str, int]:
    depths = {}
    for fn in ("_len_torch_function_stack", "_len_torch_dispatch_stack"):
        counter = getattr(torch._C, fn, None)
        if counter is not None:
            depths[fn] = int(counter())
    return depths


def harness_snapshot(models: tuple[torch.nn.Module, ...] = ()) -> dict[str, Any]:
    """What `harness_changes` compares: function identities, hook counts, mode stack depths."""
    ids: dict[str, int] = {}
    for name in WATCHED_MODULES:
        ids |= _entries(name)
    hooks = {name: len(getattr(torch.nn.modules.module, name, {}) or {}) for name in _HOOK_DICTS}
    for i, model in enumerate(models):
        for sub_name, sub in model.named_modules():
            count = sum(len(getattr(sub, attr, {}) or {}) for attr in _MODULE_HOOKS)
            hooks[f"baseline {i} {sub_name or 'model'}"] = count
    return {"ids": ids, "hooks": hooks, "stacks": _stack_depths()}


def harness_changes(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[Reason, str]]:
    changes: list[tuple[Reason, str]] = []
    replaced = [name for name, ident in before["ids"].items() if after["ids"].get(name) != ident]
    if replaced:
        changes.append(
            (Reason.HARNESS_TAMPERED, f"the harness's own functions were replaced: {', '.join(sorted(replaced)[:8])}")
        )
    hooked = [name for name, n in after["hooks"].items() if n != before["hooks"].get(name, 0)]
    if hooked:
        changes.append(
            (Reason.HARNESS_TAMPERED, f"module hooks were added or removed: {', '.join(sorted(hooked)[:8])}")
        )
    stacks = [name for name, n in after["stacks"].items() if n != before["stacks"].get(name)]
    if stacks:
        changes.append((Reason.HARNESS_TAMPERED, f"a torch function or dispatch mode was left active ({stacks})"))
    return changes
