"""Robust aggregation from Python: 9 honest workers and 2 attackers, under two attacks.

- "scaled" (a large reversed step) ruins the mean; every robust rule shrugs it off.
- "a little is enough" (ALIE) stays within the honest spread: it barely moves the mean, and
  Krum, which prefers the tightest cluster, selects the attacker's vector — the kind of result
  an evaluation should show. Works the same on torch tensors (pass tensors, get a tensor back).
"""

import numpy as np

from ballot import attacks, robust

rng = np.random.default_rng(0)
d, honest_n, byzantine = 10_000, 9, 2
truth = rng.standard_normal(d).astype(np.float32)
honest = [truth + 0.5 * rng.standard_normal(d).astype(np.float32) for _ in range(honest_n)]

for attack in [attacks.Scaled(factor=-10.0, m=byzantine), attacks.ALIE(m=byzantine)]:
    evil = attack(honest, own=honest[0])
    inputs = honest + [evil] * byzantine  # workers 9 and 10 are Byzantine
    print(f"attack {attack.spec}:")
    for spec in ["mean", "median", "nnm:f=2 > trimmed_mean:f=2", "krum:f=2"]:
        value, report = robust.aggregate(inputs, spec)
        error = float(np.linalg.norm(value - truth) / np.linalg.norm(truth))
        picked = f"  selected {report.selected}" if report.selected else ""
        print(f"  {spec:28s} relative error {error:6.3f}{picked}")

# A 2-D array is read in place (rows = workers), never stacked again.
matrix = np.stack(honest)
assert np.array_equal(robust.Aggregator("median")(matrix), robust.Aggregator("median")(honest))
print("rules:", ", ".join(robust.rule_names()))
