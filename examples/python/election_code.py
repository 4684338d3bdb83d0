"""Election codes from Python: certify which number of Byzantine nodes a code tolerates, show the
counter-example when it does not, find the minimum-redundancy code, and estimate error
probabilities by Monte Carlo (Sohn et al., NeurIPS 2020)."""

from ballot import election

paper = election.code("paper5", 5)
print(paper)
certificates = {b: paper.certify(b) for b in (1, 2)}
for b, c in certificates.items():
    print(f"b = {b}: tolerant = {c.tolerant}", "" if c.tolerant else f"- {c.counter_example.text}")
# The paper's code tolerates one Byzantine node and not two; the counter-example is a real defeat:
# at most two nodes, after whose attack the correct votes are no majority.
assert certificates[1].tolerant and certificates[1].counter_example is None
defeat = certificates[2].counter_example
assert not certificates[2].tolerant and defeat is not None
assert len(defeat.byzantine) <= 2 and 2 * defeat.correct_votes <= paper.n

best = election.find_minimum_redundancy_code(7, 1)
print(f"n = 7, b = 1: minimum {best.ones} ones (general construction: {best.construction_ones}),"
      f" proven optimal: {best.proven_optimal}")
assert best.proven_optimal and best.ones == 29 < best.construction_ones
assert best.code.certify(1).tolerant

table = election.monte_carlo_table(15, [6], ["identity", "bernoulli:r=2", "bernoulli:r=3"], ties="abstain")
for row in table:
    print(f"{row['code']:14s} b = {row['b']}  P(wrong vote) = {row['error']:.3f} ± {row['standard_error']:.3f}")
# More redundancy, fewer wrong votes: each step down exceeds three standard errors of the
# difference, so it is not Monte Carlo noise.
for low, high in zip(table, table[1:]):
    noise = (low["standard_error"] ** 2 + high["standard_error"] ** 2) ** 0.5
    assert low["error"] - high["error"] > 3 * noise, (low, high)
