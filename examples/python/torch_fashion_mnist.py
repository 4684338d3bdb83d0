"""A PyTorch model trained by a Ballot cluster on Fashion-MNIST (the Debian dataset).

Every node runs this script; the server is `ballot server` and needs no torch. Three runs:

    # signSGD with majority vote through the certified election code, one node reverses its votes
    python -m ballot.torch.run --nodes 7 --byzantine 1 --attack reverse --rounds 3000 \\
        --lr "constant:lr=0.001 > cosine:rounds=3000,min=0.05" examples/python/torch_fashion_mnist.py

    # the gradient path: a robust rule against ALIE
    python -m ballot.torch.run --nodes 7 --byzantine 1 --attack alie --rule "nnm:f=1 > trimmed_mean:f=1" \\
        --update sgd:momentum=0.9 --lr constant:lr=0.05 --rounds 1500 \\
        examples/python/torch_fashion_mnist.py --algorithm gradient

    # federated: 4 local SGD steps per round, robust aggregation of the model deltas (FedAvg's step)
    python -m ballot.torch.run --nodes 7 --byzantine 1 --attack alie --rule "nnm:f=1 > trimmed_mean:f=1" \\
        --update sgd --lr constant:lr=1 --rounds 500 \\
        examples/python/torch_fashion_mnist.py --algorithm local --local-steps 4

Node 0 prints the test accuracy of the final parameters, which every honest node shares. Add
`--device cuda` after the script to train the model on a GPU (the replica and the protocol stay on
the host; see ballot.torch.node).
"""

import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import ballot.torch as bt

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split):
    images = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # N × 1 × 28 × 28
    return x, torch.from_numpy(labels.astype(np.int64))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class Mlp(nn.Module):  # 784-128-10, the built-in `mlp:hidden=128`
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 128)
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x.flatten(1))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    parser.add_argument("--algorithm", choices=["vote", "gradient", "local"], default="vote")
    parser.add_argument("--local-steps", type=int, default=4)
    parser.add_argument("--local-lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="where the model trains: cpu, cuda or cuda:K")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # Ballot's kernels run on the current device
    model = (Cnn() if args.model == "cnn" else Mlp()).to(device)
    train_x, train_y = (t.to(device) for t in load("train"))
    algorithm = {
        "vote": bt.SignVote(),
        "gradient": bt.RobustGradient(),
        "local": bt.RobustLocalSGD(sync_every=args.local_steps, local_lr=args.local_lr),
    }[args.algorithm]
    node = bt.Node(model, algorithm=algorithm, examples=len(train_x))

    def step(indices):
        indices = indices.to(device)
        return F.cross_entropy(model(train_x[indices]), train_y[indices])

    started = time.time()
    stats = node.run(step)
    print(f"node {node.index}: {stats['rounds']} rounds in {time.time() - started:.1f} s, "
          f"{stats['votes_sent']} votes sent, byzantine={node.byzantine}, digest {node.model_digest()}", flush=True)
    if node.index == 0:
        test_x, test_y = (t.to(device) for t in load("t10k"))
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum())
                          for i in range(0, len(test_x), 1000))
        print(f"test accuracy {100.0 * correct / len(test_x):.2f}%", flush=True)


if __name__ == "__main__":
    main()
