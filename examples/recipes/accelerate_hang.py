"""Hugging Face Accelerate under c10d-observer: 2 CPU ranks on gloo, rank 1 stalls once.

Rank 1 sleeps STALL_S seconds (default 30) before step STALL_STEP (default 10); rank 0 waits in DDP's
gradient all_reduce meanwhile, which the observer reports, naming rank 1.  From a checkout (no GPU:
accelerate's --multi_gpu launcher is torchrun; Accelerator(cpu=True) makes the group on gloo):

    C10D_OBSERVER=1 C10D_OBSERVER_TIMEOUT=5 C10D_OBSERVER_DIR=/tmp/obs-accelerate \
        accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
        --dynamo_backend no examples/recipes/accelerate_hang.py
    python -m c10d_observer report /tmp/obs-accelerate

On GPUs, drop cpu=True.  Python 3.8+.
"""
import os
import time

import torch
from accelerate import Accelerator

STALL_STEP = int(os.environ.get("STALL_STEP", "10"))
STALL_S = float(os.environ.get("STALL_S", "30"))


def main():
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    model = torch.nn.Linear(32, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(640, 32), torch.randn(640, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for step, (x, y) in enumerate(loader):
        if step == STALL_STEP and accelerator.process_index == 1:
            time.sleep(STALL_S)  # the culprit; rank 0 waits for it in the gradient all_reduce
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    accelerator.wait_for_everyone()
    accelerator.print("done: %d steps" % (step + 1))
    accelerator.end_training()


if __name__ == "__main__":
    main()
