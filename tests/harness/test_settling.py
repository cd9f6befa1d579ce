"""`checks/settling.py`: an output is copied right after the call, checked against a first look
at random positions, and (when it failed) looked at again a while later."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from kernelwright.harness.checks import settling


def _output() -> torch.Tensor:
    return torch.randn(64, 1024).relu()


def test_an_honest_output_is_the_same_in_its_copy_and_first_look() -> None:
    out = _output()
    look = settling.first_look([out])
    assert not settling.changed_while_copied(look, [settling.copy_output(out)])


def test_nans_in_an_honest_output_are_not_a_change() -> None:
    out = _output()
    out[3, :17] = float("nan")
    out[60, 5] = float("inf")
    look = settling.first_look([out], sample=out.numel())
    copy = settling.copy_output(out)
    assert not settling.changed_while_copied(look, [copy])
    assert settling.settled_since([copy], [out], settling.now() - 1.0, "cpu")


def test_a_fill_that_lands_between_the_look_and_the_copy_is_seen() -> None:
    out = torch.zeros(64, 1024)
    look = settling.first_look([out])
    out.copy_(_output() + 1.0)  # the work finished after the call returned, before the copy read it
    assert settling.changed_while_copied(look, [settling.copy_output(out)])


def test_a_small_unfinished_part_is_seen_at_random_positions() -> None:
    out = torch.zeros(64, 1024)
    look = settling.first_look([out])
    flat = out.view(-1)
    flat[torch.randperm(flat.numel())[: flat.numel() // 100]] = 1.0  # 1% of the output written late
    assert settling.changed_while_copied(look, [settling.copy_output(out)])


def test_positions_differ_from_look_to_look() -> None:
    out = _output()
    first, second = settling.first_look([out]), settling.first_look([out])
    assert first.positions[0] is not None and second.positions[0] is not None
    assert not all(torch.equal(a, b) for a, b in zip(first.positions[0], second.positions[0], strict=True))


def test_every_kind_of_output_is_copied_and_looked_at() -> None:
    output = (torch.tensor(3.0), [torch.arange(5), 2.5], torch.empty(0, 4), torch.ones(2, 3).t())
    tensors = settling.output_tensors(output)
    assert len(tensors) == 4
    copy = settling.copy_output(output)
    assert isinstance(copy, tuple) and isinstance(copy[1], list) and copy[1][1] == 2.5
    copies = settling.output_tensors(copy)
    assert all(a.data_ptr() != b.data_ptr() or a.numel() == 0 for a, b in zip(tensors, copies, strict=True))
    look = settling.first_look(tensors)
    assert look.positions[2] is None  # nothing to look at in an empty tensor
    assert not settling.changed_while_copied(look, copies)
    for k in (0, 3):  # a 0-d tensor, a transposed (non-contiguous) view
        tensors[k].add_(1.0)
        assert settling.changed_while_copied(look, settling.output_tensors(settling.copy_output(output)))
        tensors[k].sub_(1.0)


def test_a_tensor_subclass_output_is_copied_as_a_plain_tensor() -> None:
    class Sub(torch.Tensor):
        pass

    out = _output().as_subclass(Sub)
    copy = settling.copy_output(out)
    assert type(copy) is torch.Tensor and torch.equal(copy, out.as_subclass(torch.Tensor))


def test_an_output_a_thread_finishes_later_has_not_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    out = torch.zeros(64, 1024)
    copy = settling.copy_output(out)
    copied_at = settling.now()
    threading.Timer(0.01, lambda: out.copy_(_output() + 1.0)).start()
    assert not settling.settled_since([copy], [out], copied_at, "cpu")


def test_the_second_look_waits_only_what_is_left_of_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(settling, "_sleep", slept.append)
    out = _output()
    copy = settling.copy_output(out)
    assert settling.settled_since([copy], [out], settling.now(), "cpu")
    assert len(slept) == 1 and settling.WAIT_S * 0.5 < slept[0] <= settling.WAIT_S
    assert settling.settled_since([copy], [out], time.perf_counter() - 2 * settling.WAIT_S, "cpu")
    assert len(slept) == 1  # the wait had already passed


def test_a_changed_shape_or_dtype_is_not_the_same() -> None:
    a = torch.ones(4)
    assert not settling.same_values(a, torch.ones(2, 2))
    assert not settling.same_values(a, torch.ones(4, dtype=torch.float64))
    assert settling.same_values(torch.arange(4), torch.arange(4))
    assert not settling.same_values(torch.arange(4), torch.arange(1, 5))
