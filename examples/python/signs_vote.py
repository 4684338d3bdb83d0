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
assert packed[0].nbytes == 8 * signs.words_for(d)  # 1 bit per coordinate, in whole 64-bit words
packed[:3] = [signs.pack(-g) for g in workers[:3]]  # three workers reverse their signs
vote = signs.majority_vote(packed, d)
truth_signs = signs.pack(truth)
vote_agreement = signs.agreement(vote, truth_signs, d) / d
print(f"vote agrees with sign(truth) on {vote_agreement:.3%} of coordinates")
# One honest worker, whose noise is as large as the signal, agrees on about 75%
# (1/2 + arcsin(1/√2)/π); the vote of 12 honest against 3 reversed must do clearly better than
# the best of them.
best_single = max(signs.agreement(p, truth_signs, d) for p in packed[3:]) / d
print(f"the best single honest worker agrees on {best_single:.3%}")
assert vote_agreement > best_single + 0.05, (vote_agreement, best_single)
step = signs.unpack(vote, d, scale=1e-3)
assert step.dtype == np.float32 and step.shape == (d,)
assert np.all(np.abs(step) == np.float32(1e-3)) and np.array_equal(signs.pack(step), vote)
