"""Election codes from Python: certify which number of Byzantine nodes a code tolerates, show the
counter-example when it does not, find the minimum-redundancy code, and estimate error
probabilities by Monte Carlo (Sohn et al., NeurIPS 2020)."""

from ballot import election

paper = election.code("paper5", 5)
print(paper)
for b in (1, 2):
    c = paper.certify(b)
    print(f"b = {b}: tolerant = {c.tolerant}", "" if c.tolerant else f"- {c.counter_example.text}")

best = election.find_minimum_redundancy_code(7, 1)
print(f"n = 7, b = 1: minimum {best.ones} ones (general construction: {best.construction_ones}),"
      f" proven optimal: {best.proven_optimal}")

for row in election.monte_carlo_table(15, [6], ["identity", "bernoulli:r=2", "bernoulli:r=3"], ties="abstain"):
    print(f"{row['code']:14s} b = {row['b']}  P(wrong vote) = {row['error']:.3f} ± {row['standard_error']:.3f}")
