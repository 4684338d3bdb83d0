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

byzantine_indices = set(range(honest_n, honest_n + byzantine))
honest_mean_error = float(np.linalg.norm(np.mean(honest, axis=0) - truth) / np.linalg.norm(truth))
rules = ["mean", "median", "nnm:f=2 > trimmed_mean:f=2", "krum:f=2"]
errors, selected = {}, {}
for name, attack in [("scaled", attacks.Scaled(factor=-10.0, m=byzantine)), ("alie", attacks.ALIE(m=byzantine))]:
    evil = attack(honest, own=honest[0])
    inputs = honest + [evil] * byzantine  # workers 9 and 10 are Byzantine
    print(f"attack {attack.spec}:")
    for spec in rules:
        value, report = robust.aggregate(inputs, spec)
        error = float(np.linalg.norm(value - truth) / np.linalg.norm(truth))
        errors[name, spec], selected[name, spec] = error, list(report.selected)
        picked = f"  selected {report.selected}" if report.selected else ""
        print(f"  {spec:28s} relative error {error:6.3f}{picked}")

# The scaled attack ruins the mean (it lands farther from the truth than 0 does); every robust
# rule stays within half the mean's error.
assert errors["scaled", "mean"] > 1.0
for spec in rules[1:]:
    assert errors["scaled", spec] < 0.5 * errors["scaled", "mean"], (spec, errors["scaled", spec])
# ALIE barely moves the mean (within 10% of the honest workers' own mean), and Krum selects an
# attacker's vector.
assert errors["alie", "mean"] < 1.1 * honest_mean_error, (errors["alie", "mean"], honest_mean_error)
assert selected["alie", "krum:f=2"] and set(selected["alie", "krum:f=2"]) <= byzantine_indices

# A 2-D array is read in place (rows = workers), never stacked again.
matrix = np.stack(honest)
assert np.array_equal(robust.Aggregator("median")(matrix), robust.Aggregator("median")(honest))
print("rules:", ", ".join(robust.rule_names()))
