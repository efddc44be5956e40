"""DeepSpeed under c10d-observer: 2 CPU ranks on gloo, rank 1 stalls once.

Rank 1 sleeps STALL_S seconds (default 30) before step STALL_STEP (default 10); rank 0 waits in the
gradient all_reduce meanwhile, which the observer reports, naming rank 1.  From a checkout, on CPU
(DS_ACCELERATOR=cpu; without oneCCL installed DeepSpeed's CPU accelerator makes the group on gloo):

    DS_ACCELERATOR=cpu C10D_OBSERVER=1 C10D_OBSERVER_TIMEOUT=5 C10D_OBSERVER_DIR=/tmp/obs-deepspeed \
        torchrun --nproc_per_node=2 examples/recipes/deepspeed_hang.py
    python -m c10d_observer report /tmp/obs-deepspeed

On GPUs, leave DS_ACCELERATOR unset (the `deepspeed` launcher works the same way).  Python 3.8+.
"""
import os
import time

import torch
import deepspeed

STALL_STEP = int(os.environ.get("STALL_STEP", "10"))
STALL_S = float(os.environ.get("STALL_S", "30"))


def main():
    deepspeed.init_distributed()  # the accelerator's backend: gloo on CPU, NCCL on NVIDIA GPUs
    model = torch.nn.Linear(32, 1)
    config = {"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": 0}}
    engine, _, _, _ = deepspeed.initialize(model=model, config=config,
                                           optimizer=torch.optim.SGD(model.parameters(), lr=0.01))
    rank = engine.global_rank
    torch.manual_seed(rank)
    for step in range(20):
        x = torch.randn(16, 32, device=engine.device)
        y = torch.randn(16, 1, device=engine.device)
        if step == STALL_STEP and rank == 1:
            time.sleep(STALL_S)  # the culprit; rank 0 waits for it in the gradient all_reduce
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    if rank == 0:
        print("done: %d steps" % (step + 1), flush=True)


if __name__ == "__main__":
    main()
