"""PyTorch Lightning under c10d-observer: 2 CPU ranks on gloo, rank 1 stalls once in training_step.

Rank 1 sleeps STALL_S seconds (default 30) at step STALL_STEP (default 10); rank 0 waits in DDP's
gradient all_reduce meanwhile, which the observer reports, naming rank 1.  From a checkout:

    C10D_OBSERVER=1 C10D_OBSERVER_TIMEOUT=5 C10D_OBSERVER_DIR=/tmp/obs-lightning \
        torchrun --nproc_per_node=2 examples/recipes/lightning_hang.py
    python -m c10d_observer report /tmp/obs-lightning

Under Slurm with Lightning's auto-requeue, give the observer SIGUSR2 (docs/recipes.md, "PyTorch
Lightning").  Python 3.8+.
"""
import os
import signal
import time

import torch
import lightning as L

STALL_STEP = int(os.environ.get("STALL_STEP", "10"))
STALL_S = float(os.environ.get("STALL_S", "30"))


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(32, 1)

    def on_train_start(self):
        # who handles SIGUSR1 now that Lightning has set its handlers (printed once per rank)
        print("rank %d: SIGUSR1 handler: %r" % (self.global_rank, signal.getsignal(signal.SIGUSR1)),
              flush=True)

    def training_step(self, batch, batch_idx):
        if batch_idx == STALL_STEP and self.global_rank == 1:
            time.sleep(STALL_S)  # the culprit; rank 0 waits for it in the gradient all_reduce
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    data = torch.utils.data.TensorDataset(torch.randn(640, 32), torch.randn(640, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "2")),
                        num_nodes=int(os.environ.get("NUM_NODES", "1")), strategy="ddp",
                        max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Tiny(), loader)


if __name__ == "__main__":
    main()
