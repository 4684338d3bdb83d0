"""The torch-ops equivalents of gpu_bench's kernels, timed the same way (CUDA events, mean of the
timed runs after a warm-up), so that bench/gpu/RESULTS.md can set them side by side.

torch has no bit packing: pack is (x >= 0) viewed as bytes times (1, 2, ..., 128) summed over each
8 coordinates; unpack the reverse; the vote unpacks every row to int8 ±1, sums and packs the
result (what a torch user writes). The codecs: top-k as torch.topk of |x| then the indices sorted
and the values gathered (what the wire holds), QSGD and TernGrad as their torch expressions
(levels as uint8, the signs and TernGrad's mask packed as above). The updates are the in-place torch expressions of
learning/optimizer.h's rules on an fp32 ±1 vote. Run: python3 bench/gpu/torch_ops.py
(needs torch with CUDA; says so and exits 0 otherwise).
"""

import sys


def main() -> int:
    try:
        import torch
    except ImportError:
        print("torch_ops: no torch; nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("torch_ops: torch has no CUDA device; nothing measured")
        return 0

    device = torch.device("cuda")
    weights = (2 ** torch.arange(8, device=device, dtype=torch.int32)).to(torch.uint8)
    shifts = torch.arange(8, device=device, dtype=torch.uint8)

    def pack(x):
        return ((x >= 0).view(-1, 8).to(torch.uint8) * weights).sum(dim=1, dtype=torch.uint8)

    def unpack(packed):
        return ((packed.unsqueeze(1) >> shifts) & 1).view(-1).to(torch.float32) * 2 - 1

    def vote(rows, n):
        total = torch.zeros(rows.shape[1] * 8, device=device, dtype=torch.int16)
        for i in range(n):
            total += ((rows[i].unsqueeze(1) >> shifts) & 1).view(-1)
        return pack((total - (n + 1) // 2).to(torch.float32))

    def timed(fn, repeats=20):
        fn()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / repeats  # ms

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print(f"{'operation':44s} {'ms':>10s}")
    rows = []
    for k in (26, 28):
        d = 1 << k
        x = torch.randn(d, device=device)
        rows.append((f"pack d=2^{k}", timed(lambda: pack(x))))
        packed = pack(x)
        rows.append((f"unpack d=2^{k}", timed(lambda: unpack(packed))))
        del x
    for n, k in ((15, 26), (63, 26)):
        d = 1 << k
        inputs = torch.randint(0, 256, (n, d // 8), device=device, dtype=torch.uint8)
        rows.append((f"vote n={n} d=2^{k}", timed(lambda: vote(inputs, n), repeats=5)))
        del inputs
    d = 1 << 26
    m, g, p = (torch.randn(d, device=device) for _ in range(3))
    rows.append(("momentum+pack d=2^26", timed(lambda: pack(m.mul_(0.9).add_(g, alpha=0.1)))))
    v = torch.sign(torch.randn(d, device=device))
    rows.append(("sign update d=2^26 (from a float vote)", timed(lambda: p.sub_(1e-4 * (v + 1e-4 * p)))))
    b = torch.randn(d, device=device)

    def heavy_ball():
        step = v + 1e-4 * p
        b.mul_(0.9).add_(step)
        p.sub_(1e-4 * b)

    rows.append(("heavy-ball update d=2^26 (from a float vote)", timed(heavy_ball)))
    rows.append(("sgd update d=2^26 (fp32)", timed(lambda: p.sub_(1e-4 * (g + 1e-4 * p)))))
    rows.append(("topk d=2^26 k=d/100 (of |x|)", timed(lambda: torch.topk(g.abs(), d // 100), repeats=5)))

    def topk_encode():
        # What the top-k codec sends: the indices of the k largest |x|, increasing, and their values.
        _, index = torch.topk(g.abs(), d // 100, sorted=False)
        index, _ = torch.sort(index)
        return index.to(torch.int32), g[index]

    rows.append(("topk encode d=2^26 k=d/100 (indices sorted)", timed(topk_encode, repeats=5)))

    def qsgd_encode(s=16):
        # QSGD's levels and signs (uint8 levels; torch has no bit planes): norm, scale, random rounding.
        r = g.abs() * (s / torch.linalg.vector_norm(g))
        low = torch.floor(r)
        level = low + (torch.rand_like(r) < r - low)
        return pack(g), level.to(torch.uint8)

    rows.append(("qsgd encode d=2^26 s=16 (uint8 levels)", timed(qsgd_encode)))

    def terngrad_encode():
        a = g.abs()
        keep = torch.rand_like(a) < a / a.max()
        return pack(g), pack(keep.to(torch.float32) - 0.5)

    rows.append(("terngrad encode d=2^26", timed(terngrad_encode)))
    for name, ms in rows:
        print(f"{name:44s} {ms:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
