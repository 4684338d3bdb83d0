"""signSGD with majority vote from Python: pack gradients to 1 bit per coordinate, vote, unpack.
With torch CUDA tensors on a CUDA build, the same calls run the CUDA kernels on torch's stream."""

import numpy as np

from ballot import signs

rng = np.random.default_rng(2)
d = 1_000_003
truth = rng.standard_normal(d).astype(np.float32)
workers = [truth + rng.standard_normal(d).astype(np.float32) for _ in range(15)]
packed = [signs.pack(g) for g in workers]
print(f"{d} coordinates -> {packed[0].nbytes} bytes per worker ({4 * d / packed[0].nbytes:.1f}x smaller)")
packed[:3] = [signs.pack(-g) for g in workers[:3]]  # three workers reverse their signs
vote = signs.majority_vote(packed, d)
print(f"vote agrees with sign(truth) on {signs.agreement(vote, signs.pack(truth), d) / d:.3%} of coordinates")
step = signs.unpack(vote, d, scale=1e-3)
assert step.dtype == np.float32 and step.shape == (d,)
