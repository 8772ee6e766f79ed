"""AdamW for the Trainer without torch.optim: the same floats, without the training machinery it imports.

Constructing the first torch.optim optimizer imports about 830 modules (torch.optim.Optimizer's
dynamo-disable wrappers import torch._dynamo, and with it sympy and mpmath): about 72 MB in every
process that trains, and in the forkserver that preloads it for the workers (bench/README.md,
"A training process's memory"). This class is the update torch.optim.AdamW(params, lr, weight_decay, betas, eps=1e-8,
foreach=True) makes on the CPU, written from torch's documented algorithm (decoupled weight decay,
bias-corrected moments) and its multi-tensor implementation (torch/optim/adam.py, _multi_tensor_adam,
capturable=False), op for op, so that the parameters are bit-identical to torch's step after step
(tests/test_adamw.py checks a real Trainer over hundreds of steps against torch.optim.AdamW):

    step_t  += 1                                    (a float32 tensor per parameter, as torch keeps it)
    p       *= 1 - lr * weight_decay
    m        = lerp(m, g, 1 - beta1)
    v        = v * beta2 + (1 - beta2) * g * g
    p       += -lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The parts of torch's interface the Trainer and the benches use: `param_groups` (one group; a
Trainer sets its "lr" before each step), `zero_grad(set_to_none=True)`, `step()` and `state`
(per parameter: step, exp_avg, exp_avg_sq, as torch names them). A parameter whose grad is None
at a step is skipped, as torch skips it: its moments and its step count do not move. No amsgrad,
maximize, complex parameters or closures: the Trainer uses none of them.
"""
from __future__ import annotations

import torch


class AdamW:
    """Decoupled-weight-decay Adam over a list of float CPU parameters (one param group)."""

    def __init__(self, params, lr: float, weight_decay: float = 1e-2, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        params = list(params)
        if not params:
            raise ValueError("AdamW got an empty parameter list")
        if min(lr, eps, weight_decay) < 0.0:
            raise ValueError(f"invalid lr {lr}, eps {eps} or weight_decay {weight_decay}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid betas {betas}")
        self.param_groups = [{"params": params, "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse or p.is_complex() or p.device.type != "cpu":
                    raise RuntimeError("AdamW here takes dense real CPU tensors only")
                state = self.state.get(p)
                if state is None:  # as torch's _init_group: a float32 step count, moments like p
                    state = self.state[p] = {
                        "step": torch.tensor(0.0, dtype=torch.float32),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if params:
                _update(params, grads, exp_avgs, exp_avg_sqs, steps, lr=group["lr"], betas=group["betas"],
                        eps=group["eps"], weight_decay=group["weight_decay"])


def _update(params, grads, exp_avgs, exp_avg_sqs, steps, *, lr: float, betas, eps: float,
            weight_decay: float) -> None:
    """torch 2.x's _multi_tensor_adam with decoupled_weight_decay=True, capturable=False, on CPU tensors.
    The parameters all share one device and dtype in the Trainer; the foreach ops work per tensor, so
    grouping them by (device, dtype) as torch does changes no number."""
    beta1, beta2 = betas
    torch._foreach_add_(steps, torch.tensor(1.0), alpha=1.0)
    if weight_decay != 0:
        torch._foreach_mul_(params, 1 - lr * weight_decay)
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
    bias_correction1 = [1 - beta1 ** step.item() for step in steps]
    bias_correction2 = [1 - beta2 ** step.item() for step in steps]
    step_size = [(lr / bc) * -1 for bc in bias_correction1]
    bias_correction2_sqrt = [bc ** 0.5 for bc in bias_correction2]
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bias_correction2_sqrt)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, exp_avgs, denom, step_size)
