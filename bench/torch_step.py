# bench/torch_step.py -- the PyTorch side of the speed comparison (issue 19
# point 3, issue 13 point 13).  Run BY HAND only: PyTorch is never a
# dependency of cnnsh, of scripts/setup, of the tests or of CI.
#
#   python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch
#   OMP_NUM_THREADS=2 /tmp/torchvenv/bin/python bench/torch_step.py \
#       [--net fmnist|resnet18|all] [--threads 2] [--steps N] [--batch 64]
#       [--resnet-steps 5] [--resnet-batch 16] [--sizes 32,224] [--train-only]
#       [--autocast bf16]
#
# It times the same work as cnnsh's own scripts, on the CPU, float32:
#   * fmnist: the network of examples/fashion_mnist.lua (examples/fmnist_net.lua:
#     conv 3x3 -> batch norm -> ReLU -> 2x2 max-pool, twice; flatten ->
#     linear 3136->128 -> ReLU -> dropout -> linear 128->10), one training
#     step = zero_grad, forward, cross-entropy, backward, Adam (lr 1e-3, the
#     defaults otherwise) at batch 64 of synthetic 1x28x28 inputs, and
#     evaluation (forward + argmax under no_grad) at batch 1000: as
#     bench/train.lua does for cnnsh;
#   * resnet18: torchvision's ResNet-18 layout (1000 classes; defined below
#     when torchvision is not installed), training (SGD lr 0.01, momentum
#     0.9, cross-entropy) and evaluation (eval mode, forward under no_grad) at
#     batch 16, 32x32 and 224x224: as bench/resnet.lua does for cnnsh.
# --autocast bf16 runs forward and loss under torch.autocast('cpu',
# dtype=torch.bfloat16) (fmnist training only), the counterpart of
# cnn.autocast('bfloat16'); --train-only skips the fmnist evaluation figure.
# Like the cnnsh scripts: warm-up steps, then 3 timed runs of N steps on the
# same batch; each figure is the median of the 3 runs' images/s.  One JSON
# line per figure, with the thread count PyTorch reports and the process's
# CPU seconds per wall second over the timed runs (2.0 = both threads busy).
# Compare with cnnsh only as ratios taken in one run on the same machine
# (bench/torch_compare.sh alternates the two).
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def fmnist_net(dropout=0.25):
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(128, 10))


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: two 3x3 convolutions and a shortcut."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


def resnet18_local(num_classes=1000):
    """ResNet-18 with torchvision's layout, for machines without torchvision."""
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    inplanes = 64
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes, 1)]
        inplanes = planes
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def resnet18():
    try:
        import torchvision
        return torchvision.models.resnet18(), "torchvision"
    except ImportError:
        return resnet18_local(), "local"


def measure(step, batch, warmup, steps):
    """Median images/s over 3 runs of `steps` calls, and CPU s per wall s."""
    for _ in range(warmup):
        step()
    rates, cpu, wall = [], 0.0, 0.0
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(steps):
            step()
        dt = time.perf_counter() - t0
        cpu += time.process_time() - c0
        wall += dt
        rates.append(steps * batch / dt)
    return statistics.median(rates), cpu / wall


def emit(**fields):
    fields["threads"] = torch.get_num_threads()
    fields["torch"] = torch.__version__
    print(json.dumps(fields), flush=True)


def bench_fmnist(a):
    torch.manual_seed(0)
    net = fmnist_net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    dtype = torch.bfloat16 if a.autocast == "bf16" else None

    def train_step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    net.train()
    rate, util = measure(train_step, a.batch, a.warmup, a.steps)
    emit(bench="train", net="fmnist_cnn", framework="pytorch", batch=a.batch,
         autocast=a.autocast or "off", images_per_s=round(rate, 1), cpu_per_wall=round(util, 2))
    if a.autocast or a.train_only:
        return
    xe = torch.randn(a.eval_batch, 1, 28, 28)
    net.eval()

    def eval_step():
        with torch.no_grad():
            net(xe).argmax(1)

    rate, util = measure(eval_step, a.eval_batch, a.warmup, a.steps)
    emit(bench="eval", net="fmnist_cnn", framework="pytorch", batch=a.eval_batch,
         images_per_s=round(rate, 1), cpu_per_wall=round(util, 2))


def bench_resnet18(a):
    torch.manual_seed(0)
    net, source = resnet18()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for size in (int(s) for s in a.sizes.split(",")):
        x = torch.randn(a.resnet_batch, 3, size, size)
        y = torch.randint(0, 1000, (a.resnet_batch,))

        def train_step():
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()

        def eval_step():
            with torch.no_grad():
                net(x)

        for mode, step in (("train", train_step), ("eval", eval_step)):
            net.train(mode == "train")
            rate, util = measure(step, a.resnet_batch, 1, a.resnet_steps)
            emit(bench="resnet18", mode=mode, size=size, batch=a.resnet_batch, framework="pytorch",
                 model=source, images_per_s=round(rate, 2), cpu_per_wall=round(util, 2))


def main():
    p = argparse.ArgumentParser(description="PyTorch CPU step timings to compare with cnnsh (by hand)")
    p.add_argument("--net", choices=("fmnist", "resnet18", "all"), default="all")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20, help="fmnist steps per timed run")
    p.add_argument("--warmup", type=int, default=3, help="fmnist warm-up steps")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--eval-batch", type=int, default=1000)
    p.add_argument("--resnet-steps", type=int, default=5)
    p.add_argument("--resnet-batch", type=int, default=16)
    p.add_argument("--sizes", default="32,224")
    p.add_argument("--autocast", choices=("bf16",), default=None)
    p.add_argument("--train-only", action="store_true", help="fmnist: no evaluation figure")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.net in ("fmnist", "all"):
        bench_fmnist(a)
    if a.net in ("resnet18", "all"):
        bench_resnet18(a)


if __name__ == "__main__":
    main()
