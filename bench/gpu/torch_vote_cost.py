"""What a ballot.torch node's vote costs on a GPU, against the backward pass it follows.

The model is ResNet-50 (He et al. 2016: bottleneck blocks 3, 4, 6, 3; 25,557,032 parameters, as
torchvision's), defined here so the script needs only torch. Its gradient is made flat, as the
node makes it (one buffer the parameters' gradients view). Each case is timed with the device
synchronised around it, median of --reps runs after a warm-up:

- backward: forward and backward of a batch (--batch images of --size pixels), and backward
  alone (forward timed separately and subtracted);
- vote on the device (what SignVote does with work_on "auto" on a CUDA model): the worker
  momentum and the packing in one kernel pass (ballot.signs.momentum_pack) and the packed signs
  copied to the host (d/8 bytes);
- the decision applied on the device (the sign rule with weight decay): the decision's vote
  copied to the device (d/8 bytes) and ballot.signs.apply_update on the parameters;
- the host path (work_on "host"): the gradient copied to the host (4d bytes; the session's fold
  on the host comes on top) and the replica's parameters copied to the device (4d bytes; also
  what a node does after a state transfer);
- the gradient path (RobustGradient), for each --codec: the gradient encoded on the device by
  the codec's CUDA encoder and its bytes copied to the host (work_on "auto"), against the host
  path (the gradient copied to the host, 4d bytes, and encoded there by the CPU codec).

The target (issue: ballot.torch): packing and copying the vote <= 2 % of the backward time. The
physical limit of the device vote is one read and one write of the momentum plus one read of the
gradient (12d bytes) at the device's memory bandwidth, and d/8 bytes over PCIe; of the update, one
read and one write of the parameters (8d bytes) and d/8 bytes over PCIe.

Run: PYTHONPATH=<build>/python python3 bench/gpu/torch_vote_cost.py [--device cpu --batch 2 --reps 2]
(without a CUDA device it says so and runs on the CPU only when --device cpu is given).
"""

import argparse
import statistics
import sys
import time


def resnet50(torch):
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, inputs, width, stride):
            super().__init__()
            outputs = width * 4
            self.conv1 = nn.Conv2d(inputs, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, outputs, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(outputs)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inputs != outputs:
                self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(outputs))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + (x if self.downsample is None else self.downsample(x)))

    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, stride=2, padding=1)]
    inputs = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for k in range(blocks):
            layers.append(Bottleneck(inputs, width, stride if k == 0 else 1))
            inputs = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inputs, 1000)]
    return nn.Sequential(*layers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--beta", type=float, default=0.9)
    parser.add_argument("--codec", action="append",
                        help="a codec of the gradient path to time (repeatable; default topk:ratio=0.01, "
                             "qsgd:s=16,elias=0 and fp16)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_vote_cost: no torch; nothing measured")
        return 0
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("torch_vote_cost: torch has no CUDA device; nothing measured (--device cpu runs it on the CPU)")
        return 0
    import ballot
    from ballot import signs

    if device.type == "cuda" and not ballot.has_cuda:
        print("torch_vote_cost: this ballot module is built without CUDA; nothing measured")
        return 0

    torch.manual_seed(0)
    model = resnet50(torch).to(device)
    params = list(model.parameters())
    d = sum(p.numel() for p in params)
    flat_grad = torch.zeros(d, device=device)
    offset = 0
    for p in params:  # the node's layout: every gradient a view of one flat buffer
        p.grad = flat_grad[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    momentum = torch.zeros(d, device=device)
    host_words = torch.empty((d + 63) // 64, dtype=torch.int64, pin_memory=device.type == "cuda")
    host_grad = torch.empty(d, pin_memory=device.type == "cuda")
    host_params = torch.randn(d, pin_memory=device.type == "cuda")
    device_params = torch.empty(d, device=device)
    decision = signs.pack(torch.randn(d)).pin_memory() if device.type == "cuda" else signs.pack(torch.randn(d))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(work, reps=args.reps):
        work()  # warm-up
        times = []
        for _ in range(reps):
            sync()
            start = time.perf_counter()
            work()
            sync()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def forward():
        with torch.no_grad():
            loss_fn(model(x), y)

    def forward_backward():
        flat_grad.zero_()
        loss_fn(model(x), y).backward()

    def vote_on_device():
        words = signs.momentum_pack(momentum, flat_grad, args.beta)
        host_words.copy_(words, non_blocking=False)

    def update_on_device():
        vote = decision.to(device, non_blocking=True)
        signs.apply_update(device_params, lr=1e-3, vote=vote, weight_decay=1e-4)

    def gradient_to_host():
        host_grad.copy_(flat_grad)

    def parameters_to_device():
        device_params.copy_(host_params)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch_vote_cost: ResNet-50, d = {d:,}, batch {args.batch} x {args.size}^2, {name}, "
          f"median of {args.reps}")
    t_fb = timed(forward_backward)
    t_f = timed(forward)
    t_b = max(t_fb - t_f, 1e-9)
    t_vote = timed(vote_on_device, reps=max(args.reps, 20))
    t_update = timed(update_on_device, reps=max(args.reps, 20))
    t_host = timed(gradient_to_host, reps=max(args.reps, 20))
    t_params = timed(parameters_to_device, reps=max(args.reps, 20))
    print(f"  forward + backward      {t_fb * 1e3:9.3f} ms")
    print(f"  backward                {t_b * 1e3:9.3f} ms")
    print(f"  vote on the device      {t_vote * 1e3:9.3f} ms  = {100 * t_vote / t_b:6.2f} % of backward "
          f"(target <= 2 %); {12 * d / t_vote / 1e9:7.1f} GB/s of momentum + gradient traffic")
    print(f"  update on the device    {t_update * 1e3:9.3f} ms  = {100 * t_update / t_b:6.2f} % of backward; "
          f"{8 * d / t_update / 1e9:7.1f} GB/s of parameter traffic")
    print(f"  vote + update, device   {(t_vote + t_update) * 1e3:9.3f} ms  = "
          f"{100 * (t_vote + t_update) / t_b:6.2f} % of backward")
    print(f"  gradient to the host    {t_host * 1e3:9.3f} ms  = {100 * t_host / t_b:6.2f} % of backward "
          f"({4 * d / t_host / 1e9:6.1f} GB/s)")
    print(f"  parameters to the device {t_params * 1e3:8.3f} ms  = {100 * t_params / t_b:6.2f} % of backward "
          f"({4 * d / t_params / 1e9:6.1f} GB/s)")
    from ballot.codecs import Codec

    for spec in args.codec or ["topk:ratio=0.01", "qsgd:s=16,elias=0", "fp16"]:
        on_device, on_host = Codec(spec), Codec(spec)
        sent = on_device.wire_size(d)
        t_encode = timed(lambda: on_device.encode(flat_grad))

        def host_path():
            host_grad.copy_(flat_grad)
            on_host.encode(host_grad)

        t_host_encode = timed(host_path)
        print(f"  gradient path, {spec}: encoded on the device {t_encode * 1e3:9.3f} ms = "
              f"{100 * t_encode / t_b:6.2f} % of backward ({sent:,} bytes cross); on the host (4d copy + "
              f"CPU encode) {t_host_encode * 1e3:9.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
