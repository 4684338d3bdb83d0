"""ByzFL's aggregators, pre-aggregators and attacks on Ballot's C++ rules.

Same class names, constructor arguments and call signatures as ByzFL 0.0.11
(``byzfl.aggregators``, ``byzfl.attacks``), so a ByzFL user switches by changing one import::

    from byzfl import Krum, NNM, SignFlipping                      # before
    from ballot.compat.byzfl import Krum, NNM, SignFlipping        # after

Inputs are what ByzFL takes: a list of 1-D numpy arrays or torch tensors, or one 2-D array or
tensor (rows = vectors); CUDA tensors too (the result is on their device; the classes computed
partly in numpy copy them to the host first). Aggregators and attacks return one vector, pre-aggregators the stacked
vectors (2-D), of the input's type (torch in, torch out). ByzFL itself is not needed.

Where this module follows ByzFL rather than the papers (each class's docstring says how):

- ``Krum(f)`` / ``MultiKrum(f)`` score each vector by its n − f − 1 nearest neighbours (ByzFL),
  not n − f − 2 (Blanchard et al.): run as Ballot's ``krum:f=f−1`` / ``multi_krum:f=f−1,m=n−f``,
  which score exactly n − f − 1 neighbours; ``MultiKrum`` averages n − f vectors. f = 0 is
  computed on top of Ballot's mean in numpy (see the classes).
- ``GeometricMedian(nu, T)`` runs exactly T smoothed Weiszfeld steps from 0 (ByzFL), not
  Ballot's tolerance-stopped iteration from the mean: computed in numpy (one distance pass and one
  weighted sum per step), not by Ballot's ``geometric_median``.
- ``CenteredClipping(m, L, tau)`` keeps the previous aggregate as the next centre (ByzFL's state,
  as in Karimireddy et al.); Ballot's ``centered_clipping`` starts from 0 unless given a centre,
  so the previous aggregate is handed to it (``set_center``) before each call.
- ``Bucketing(s)`` shuffles with the same global RNG call as ByzFL (``torch.randperm`` for tensors,
  ``numpy.random.permutation`` for arrays), so after the same seed it gives ByzFL's buckets
  exactly; Ballot's ``bucketing`` (Philox) is not used. Bucket means are Ballot's ``mean``.
- ``ALittleIsEnough(tau)`` is mean **+** tau·std with the sample (n − 1) std, as ByzFL 0.0.11
  computes it; Ballot's ``alie`` is mean − z·std with the population std, so z = −tau·√(n/(n−1)).

Other deliberate differences from ByzFL (never silent):

- float32 only: float64 input is a TypeError (ByzFL computes numpy float64 in float64 and converts
  torch tensors with ``.float()``; Ballot never copies silently). Rows are read in place, so
  each must be contiguous (a 2-D array may have any row stride, not a column-major layout: a
  transposed tensor is a ValueError; ``.contiguous()`` / ``np.ascontiguousarray`` first).
- Non-finite inputs follow Ballot's contract (left out, never win) instead of propagating
  NaN/inf or being picked as ByzFL may; e.g. ``Median`` of 5 rows, one +inf, is the median of
  the 4 finite rows.
- Pre-aggregators never modify their input (ByzFL's ``Clipping`` and ``ARC`` clip a 2-D input in
  place and return it); they return a new 2-D array or tensor.
- ``Inf`` returns float32 +inf (ByzFL: float64), so the result can go to Ballot's rules.
- ``Gaussian`` draws from Ballot's Philox generator, seeded from the global RNG of the input's
  framework (so ``torch.manual_seed`` / ``numpy.random.seed`` reproduce a run) — the same
  distribution as ByzFL, not the same numbers.
- ``CenteredClipping(m=...)`` accepts an initial centre (ByzFL 0.0.11 rejects every m not None).
- ``MDA`` refuses more than 10⁶ subsets (Ballot's ``max_subsets``; ValueError) where ByzFL
  enumerates them all.

The pre-aggregators cannot run as Ballot pipeline stages here: the binding only returns a rule's
single output, not a pre-aggregator's stacked vectors. ``Bucketing`` averages each bucket with
Ballot's ``mean``; ``Clipping``, and ``ARC`` are computed in numpy with Ballot's formula, and ``NNM``
takes its distances from a numpy Gram product, then Ballot's ``mean`` of each neighbourhood.

CAF, SMEA and MoNNA run Ballot's ``caf``, ``smea`` and ``monna`` rules (ValueError naming the rule
if this build lacks them). ByzFL's CAF and SMEA estimate each top eigenvalue with one power-
iteration step from a random vector, so their outputs are random; Ballot's are not, and the two
agree only where the choice is clear-cut.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from ballot import attacks as _attacks
from ballot import robust as _robust
from ballot._arrays import is_torch

__all__ = [
    "Average", "Median", "TrMean", "GeometricMedian", "Krum", "MultiKrum", "CenteredClipping", "MDA",
    "MoNNA", "Meamed", "CAF", "SMEA",
    "NNM", "Bucketing", "Clipping", "ARC",
    "SignFlipping", "InnerProductManipulation", "ALittleIsEnough", "Mimic", "LabelFlipping", "Inf", "Gaussian",
    "Optimal_InnerProductManipulation", "Optimal_ALittleIsEnough",
]

_BLOCK = 1 << 16  # columns per block of the numpy passes (n × 256 KiB of float32 temporaries)


# --------------------------------------------------------------------------------------------
# Inputs and outputs


def _check_vectors(vectors: Any, what: str = "vectors") -> Any:
    """ByzFL's accepted input types, float32 only; returns the reference (first vector or array)."""
    if isinstance(vectors, (list, tuple)):
        if len(vectors) == 0:
            raise ValueError(f"{what}: at least one vector is needed")
        reference = vectors[0]
        if not (isinstance(reference, np.ndarray) or is_torch(reference)):
            raise TypeError(f"'{what}' should be a 'list' of ('np.ndarray' or 'torch.Tensor') or 'np.ndarray'"
                            f" or 'torch.Tensor', got a list of {type(reference).__name__}")
    elif isinstance(vectors, np.ndarray) or is_torch(vectors):
        reference = vectors
        if vectors.ndim != 2:
            raise ValueError(f"{what}: expected a 2-D array (rows = vectors), got {vectors.ndim}-D")
    else:
        raise TypeError(f"'{what}' should be a 'list' of ('np.ndarray' or 'torch.Tensor') or 'np.ndarray'"
                        f" or 'torch.Tensor', got {type(vectors).__name__}")
    dtype = str(reference.dtype)
    if dtype not in ("float32", "torch.float32"):
        raise TypeError(f"{what}: ballot.compat.byzfl takes float32 vectors, got {dtype} (ByzFL computes "
                        "numpy float64 in float64 and converts tensors with .float(); Ballot never converts "
                        "silently: pass x.astype(numpy.float32) or x.float())")
    return reference


def _count(vectors: Any) -> int:
    return len(vectors) if isinstance(vectors, (list, tuple)) else int(vectors.shape[0])


def _numpy_rows(vectors: Any) -> np.ndarray:
    """The vectors as one 2-D float32 numpy array: a view for a 2-D array or CPU tensor, a stacked
    copy for a list; CUDA tensors are copied to the host (the result goes back to their device)."""
    def as_np(x: Any) -> np.ndarray:
        if is_torch(x):
            return x.detach().cpu().numpy()
        return x
    if isinstance(vectors, (list, tuple)):
        rows = [as_np(x) for x in vectors]
        for i, x in enumerate(rows):
            if x.ndim != 1 or x.shape != rows[0].shape or x.dtype != np.float32:
                raise ValueError(f"vectors[{i}]: expected a 1-D float32 vector of {rows[0].shape[0]} values")
        return np.stack(rows)
    return np.ascontiguousarray(as_np(vectors))


def _like(value: np.ndarray, reference: Any) -> Any:
    """A numpy result in the reference's type (torch tensor on its device, or numpy)."""
    if is_torch(reference):
        import torch

        tensor = torch.from_numpy(np.ascontiguousarray(value))
        return tensor if reference.device.type == "cpu" else tensor.to(reference.device)
    return value


def _check_f(f: Any) -> int:
    if not isinstance(f, int) or f < 0:
        raise ValueError("f must be a non-negative integer")
    return f


def _check_two_f(f: int, n: int) -> None:
    if 2 * f >= n:
        raise ValueError(f"Cannot tolerate 2f ≥ n. Got f={f}, n={n}")


def _squared_distances(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """‖x_i − z‖² for every row (float64 sums of float32 blocks; one pass, no n × d temporary)."""
    out = np.zeros(x.shape[0])
    for begin in range(0, x.shape[1], _BLOCK):
        diff = x[:, begin:begin + _BLOCK] - z[begin:begin + _BLOCK]
        out += np.einsum("ij,ij->i", diff, diff)
    return out


def _squared_norms(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape[0])
    for begin in range(0, x.shape[1], _BLOCK):
        block = x[:, begin:begin + _BLOCK]
        out += np.einsum("ij,ij->i", block, block)
    return out


class _Rule:
    """Holds Ballot aggregators by spec (built once, reused by every call)."""

    def _aggregator(self, spec: str) -> _robust.Aggregator:
        cache: Dict[str, _robust.Aggregator] = self.__dict__.setdefault("_ballot_aggregators", {})
        rule = cache.get(spec)
        if rule is None:
            rule = cache[spec] = _robust.Aggregator(spec)
        return rule

    def _run(self, spec: str, vectors: Any) -> Any:
        _check_vectors(vectors)
        return self._aggregator(spec)(vectors)


# --------------------------------------------------------------------------------------------
# Aggregators


class Average(_Rule):
    """The mean (Ballot ``mean``)."""

    def __init__(self) -> None:
        pass

    def __call__(self, vectors: Any) -> Any:
        return self._run("mean", vectors)


class Median(_Rule):
    """The coordinate-wise median, the mean of the two middle values for even n (Ballot
    ``median``; ByzFL's ``torch.quantile(q=0.5)`` / ``np.median`` are the same)."""

    def __init__(self) -> None:
        pass

    def __call__(self, vectors: Any) -> Any:
        return self._run("median", vectors)


class TrMean(_Rule):
    """Coordinate-wise trimmed mean: drop the f largest and f smallest (Ballot ``trimmed_mean``)."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        return self._run(f"trimmed_mean:f={self.f}" if self.f else "mean", vectors)


class Meamed(_Rule):
    """Per coordinate, the mean of the n − f values closest to the median (Ballot ``meamed``). On
    a tie in distance Ballot keeps the lower value; ByzFL's ``argpartition`` keeps either, so the two
    can differ where such a tie straddles the n − f boundary (equal distances on both sides)."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        return self._run(f"meamed:f={self.f}", vectors)


class Krum(_Rule):
    """Krum as ByzFL defines it: score(i) = the sum of the squared distances to its n − f − 1
    nearest other vectors (Blanchard et al. use n − f − 2); output the vector of least score.

    f ≥ 1 runs Ballot's ``krum:f=f−1``, which scores n − (f−1) − 2 = n − f − 1 neighbours and
    needs n ≥ 2(f−1) + 3, i.e. ByzFL's 2f < n. f = 0 scores all n − 1 others, and
    Σ_j ‖x_i − x_j‖² = n‖x_i − x̄‖² + const, so the output is the vector closest to the mean:
    Ballot's ``mean``, then the distances to it in numpy (one pass). Ties go to the lowest index,
    as ByzFL's argmin.
    """

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        if self.f >= 1:
            return self._run(f"krum:f={self.f - 1}", vectors)
        mean = self._aggregator("mean")(vectors)
        mean = mean.detach().cpu().numpy() if is_torch(mean) else mean
        rows = _numpy_rows(vectors)
        return _like(rows[int(np.argmin(_squared_distances(rows, mean)))].copy(), reference)


class MultiKrum(_Rule):
    """Multi-Krum as ByzFL defines it: the mean of the n − f vectors of least Krum score, with
    ByzFL's score over n − f − 1 neighbours (see :class:`Krum`): Ballot's
    ``multi_krum:f=f−1,m=n−f``. f = 0 averages all n vectors: Ballot's ``mean``."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        n = _count(vectors)
        _check_two_f(self.f, n)
        if self.f == 0:
            return self._run("mean", vectors)
        return self._run(f"multi_krum:f={self.f - 1},m={n - self.f}", vectors)


class GeometricMedian(_Rule):
    """ByzFL's smoothed Weiszfeld: z₀ = 0, then exactly T steps z ← Σβ_i x_i / Σβ_i with
    β_i = 1/max(nu, ‖x_i − z‖); rows with a non-finite value are left out (ByzFL leaves out
    rows with an inf, Ballot any non-finite row).

    Ballot's ``geometric_median:start=zero,max_iterations=T,nu=nu,tolerance=-1`` (one Gram
    product, the steps on the n × n Gram matrix, one weighted sum). nu ≤ 0, which Ballot's rule
    refuses, runs in numpy (two passes a step); every row non-finite gives NaN, as ByzFL.
    """

    def __init__(self, nu: float = 0.1, T: int = 3) -> None:
        if not isinstance(nu, float):
            raise TypeError("nu must be a float")
        self.nu = nu
        if not isinstance(T, int) or T < 0:
            raise ValueError("T must be a non-negative integer")
        self.T = T

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        if self.nu > 0:
            spec = f"geometric_median:start=zero,max_iterations={self.T},nu={self.nu!r},tolerance=-1"
            try:
                return self._aggregator(spec)(vectors)
            except ValueError as error:
                if "every input is non-finite" not in str(error):
                    raise
                return _like(np.full(reference.shape[-1], np.nan, np.float32), reference)
        rows = _numpy_rows(vectors)
        finite = np.isfinite(_squared_norms(rows))
        if not finite.all():
            rows = rows[finite]
        z = np.zeros(rows.shape[1], dtype=np.float32)
        if rows.shape[0] == 0:
            return _like(np.full(z.shape, np.nan, np.float32), reference)
        for _ in range(self.T):
            with np.errstate(divide="ignore"):
                beta = 1.0 / np.maximum(np.sqrt(_squared_distances(rows, z)), self.nu)
            z = (beta / beta.sum()).astype(np.float32) @ rows
        return _like(z, reference)


class CenteredClipping(_Rule):
    """Centered clipping (Karimireddy, He, Jaggi 2021) with ByzFL's options: from the centre m,
    L times v ← v + mean_i clip_tau(x_i − v). m starts at 0 and becomes each call's output (the
    previous aggregate, ByzFL's state); ``m`` may also be given as a float32 vector (ByzFL 0.0.11
    rejects every m). Ballot's ``centered_clipping:f=0,tau=tau,iterations=L`` with the centre set
    (``Aggregator.set_center``); L = 1 reads the vectors twice (distances, clipped mean).
    tau = 0 returns the centre (Ballot needs tau > 0). One object per client stream, as ByzFL."""

    def __init__(self, m: Any = None, L: int = 1, tau: float = 100.0) -> None:
        if m is not None and not (isinstance(m, np.ndarray) or is_torch(m)):
            raise TypeError("m must be of type np.ndarray or torch.Tensor")
        self.m = m
        if not isinstance(L, int) or L < 0:
            raise ValueError("L must be a non-negative integer")
        self.L = L
        if not isinstance(tau, float) or tau < 0.0:
            raise ValueError("tau must be a non-negative float")
        self.tau = tau

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        centre = None
        if self.m is not None:
            centre = self.m.detach().cpu().numpy() if is_torch(self.m) else np.asarray(self.m)
            if centre.dtype != np.float32:
                raise TypeError(f"m: expected float32, got {centre.dtype}")
        if self.L == 0 or self.tau == 0.0:
            d = reference.shape[-1]
            out = np.zeros(d, np.float32) if centre is None else centre.copy()
        else:
            rule = self._aggregator(f"centered_clipping:f=0,tau={self.tau!r},iterations={self.L}")
            rule.set_center(centre)
            out = rule(vectors)
            out = out.detach().cpu().numpy() if is_torch(out) else out
        result = _like(out, reference)
        self.m = result
        return result


class MDA(_Rule):
    """Minimum-diameter averaging: the mean of the n − f vectors of least diameter (Ballot
    ``mda``, exact branch and bound; ties to the lexicographically first subset, as ByzFL). Ballot
    refuses more than 10⁶ subsets C(n, f) (ValueError); ByzFL enumerates them all."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        return self._run(f"mda:f={self.f}", vectors)


class MoNNA(_Rule):
    """The mean of the n − f nearest neighbours of vector ``idx`` (itself included): Ballot's
    ``monna:f=f,pivot=idx``."""

    def __init__(self, f: int = 0, idx: int = 0) -> None:
        self.f = _check_f(f)
        if not isinstance(idx, int) or idx < 0:
            raise ValueError("idx must be a non-negative integer")
        self.idx = idx

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        n = _count(vectors)
        _check_two_f(self.f, n)
        if not self.idx < n:
            raise ValueError(f"idx must be smaller than n, but got idx={self.idx} and n={n}")
        return self._run(f"monna:f={self.f},pivot={self.idx}", vectors)


class CAF(_Rule):
    """Covariance-bound agnostic filter (Allouah et al.): Ballot's ``caf:f=f``. ByzFL estimates
    each top eigenvalue by one power-iteration step from a random vector; Ballot's rule does
    not draw random numbers, so the outputs agree only where the filtering is clear-cut."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        return self._run(f"caf:f={self.f}", vectors)


class SMEA(_Rule):
    """Smallest maximum eigenvalue averaging: the mean of the n − f vectors whose covariance has
    the least top eigenvalue: Ballot's ``smea:f=f``. ByzFL estimates each eigenvalue by one
    power-iteration step from a random vector, so its choice is random where subsets are close."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        _check_vectors(vectors)
        _check_two_f(self.f, _count(vectors))
        return self._run(f"smea:f={self.f}", vectors)


# --------------------------------------------------------------------------------------------
# Pre-aggregators: return the stacked vectors (2-D), never modify the input


class NNM(_Rule):
    """Nearest-neighbour mixing (Allouah et al. 2023): each vector becomes the mean of its n − f
    nearest vectors (itself included) — Ballot's ``nnm`` stage, whose stacked output is returned
    (ties in distance go to the lower index; exact float ties may pick another neighbour than
    ByzFL's sort). Ballot's stage needs n ≥ 2f + 1; below that (ByzFL takes any f < n) the same
    mixing is computed in numpy, with exact distances in float64."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        n = _count(vectors)
        if not self.f < n:
            raise ValueError(f"f must be smaller than len(vectors), but got f={self.f} and len(vectors)={n}")
        if n >= 2 * self.f + 1:
            return _robust.PreAggregator(f"nnm:f={self.f}")(vectors)
        rows = _numpy_rows(vectors).astype(np.float64)
        mixed = np.empty(rows.shape, dtype=np.float32)
        for i in range(n):
            distance = ((rows - rows[i]) ** 2).sum(axis=1)
            distance[i] = -1.0  # itself first, whatever ties at 0
            nearest = np.argsort(distance, kind="stable")[:n - self.f]
            mixed[i] = rows[nearest].mean(axis=0)
        return _like(mixed, reference)


class Bucketing(_Rule):
    """Bucketing (Karimireddy, He, Jaggi 2022) as ByzFL does it: shuffle with the framework's
    global RNG (``torch.randperm(n)`` for tensors, ``numpy.random.permutation`` for arrays: the same
    draws as ByzFL, so the same buckets after the same seed), then the mean of each run of s
    vectors, the last bucket holding the n mod s left over — Ballot's ``bucketing`` stage with
    ``shuffle=0`` over the permuted rows (views, not copies)."""

    def __init__(self, s: int = 1) -> None:
        if not isinstance(s, int) or s <= 0:
            raise ValueError("s must be a positive integer")
        self.s = s

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        n = _count(vectors)
        if is_torch(reference):
            import torch

            order = torch.randperm(n).tolist()
        else:
            order = np.random.permutation(n).tolist()
        return _robust.PreAggregator(f"bucketing:s={self.s},shuffle=0")([vectors[i] for i in order])


class Clipping(_Rule):
    """x_i · min(1, c/‖x_i‖) per vector — Ballot's ``clipping:tau=c`` stage; c = 0 (every
    non-zero vector becomes 0, which Ballot's stage refuses as a threshold) is computed in numpy."""

    def __init__(self, c: float = 2.0) -> None:
        if not isinstance(c, float) or c < 0:
            raise ValueError("c must be a non-negative float")
        self.c = c

    @staticmethod
    def _clip_rows(vectors: Any, reference: Any, norms: np.ndarray, threshold: float, which: Any) -> Any:
        scale = np.ones(len(norms), np.float32)
        rows = np.asarray(which, dtype=np.int64)
        over = rows[norms[rows] > threshold]
        scale[over] = (threshold / norms[over]).astype(np.float32)
        return _like(_numpy_rows(vectors) * scale[:, None], reference)

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        if self.c > 0:
            return _robust.PreAggregator(f"clipping:tau={self.c!r}")(vectors)
        norms = np.sqrt(_squared_norms(_numpy_rows(vectors)))
        return self._clip_rows(vectors, reference, norms, self.c, np.arange(len(norms)))


class ARC(Clipping):
    """Adaptive robust clipping (Allouah et al. 2024): the k = ⌊2f/n · (n − f)⌋ vectors of largest
    norm are clipped to the norm of the largest one left (ByzFL's ARC; ties in norm go to the
    lower index, as ByzFL's stable sort, and a tie at the threshold changes nothing). Ballot's
    ``arc`` stage (two reads, one write) where n ≥ 2f + 1 and ByzFL's float k equals the exact
    one; otherwise (ByzFL also takes f up to n) computed in numpy like :class:`Clipping`. A
    vector with an inf or NaN comes back unchanged from the stage (ByzFL's scaling turns it into
    zeros and NaN); Ballot's rules leave such a vector out."""

    def __init__(self, f: int = 0) -> None:
        self.f = _check_f(f)

    def __call__(self, vectors: Any) -> Any:
        reference = _check_vectors(vectors)
        n = _count(vectors)
        if n == 0:
            raise ValueError("vectors: at least one vector is needed")
        if not self.f < n + 1:
            raise ValueError(f"f must be smaller than len(vectors)+1, but got f={self.f} and len(vectors)={n}")
        clipped = int((2 * self.f / n) * (n - self.f))
        if n >= 2 * self.f + 1 and clipped == 2 * self.f * (n - self.f) // n:
            return _robust.PreAggregator(f"arc:f={self.f}")(vectors)
        norms = np.sqrt(_squared_norms(_numpy_rows(vectors)))
        order = np.argsort(norms, kind="stable")
        cut = n - clipped
        return self._clip_rows(vectors, reference, norms, float(norms[order[cut - 1]]), order[cut:])


# --------------------------------------------------------------------------------------------
# Attacks: attack(honest_vectors) -> one vector


class _Attack:
    def _craft(self, spec: str, honest_vectors: Any, **kwargs: Any) -> Any:
        _check_vectors(honest_vectors, "honest_vectors")
        return _attacks.craft(spec, honest_vectors, **kwargs)


class SignFlipping(_Attack):
    """−mean of the honest vectors (Ballot's ``sign_flip`` without an own gradient)."""

    def __init__(self) -> None:
        pass

    def __call__(self, honest_vectors: Any) -> Any:
        return self._craft("sign_flip", honest_vectors)


class InnerProductManipulation(_Attack):
    """−tau · mean of the honest vectors (Xie et al. 2019): Ballot's ``ipm:eps=tau``, or
    ``scaled:factor=−tau`` (the same λ·mean) for tau ≤ 0, which ``ipm`` refuses."""

    def __init__(self, tau: float = 2.0) -> None:
        if not isinstance(tau, float):
            raise TypeError("tau must be a float.")
        self.tau = tau

    def __call__(self, honest_vectors: Any) -> Any:
        spec = f"ipm:eps={self.tau!r}" if self.tau > 0 else f"scaled:factor={-self.tau!r}"
        return self._craft(spec, honest_vectors)


class ALittleIsEnough(_Attack):
    """mean + tau · std of the honest vectors, std with n − 1 (ByzFL 0.0.11's formula; Baruch et
    al. subtract). Ballot's ``alie`` is mean − z·std with the population std, so it runs with
    z = −tau·√(n/(n−1)) for n honest vectors (n ≥ 2)."""

    def __init__(self, tau: float = 1.5) -> None:
        if not isinstance(tau, float):
            raise TypeError("tau must be a float.")
        self.tau = tau

    def __call__(self, honest_vectors: Any) -> Any:
        _check_vectors(honest_vectors, "honest_vectors")
        n = _count(honest_vectors)
        if n < 2:
            raise ValueError(f"ALittleIsEnough needs at least 2 honest vectors for the sample std, got {n}")
        return self._craft(f"alie:z={-self.tau * math.sqrt(n / (n - 1))!r}", honest_vectors)


class Mimic(_Attack):
    """A copy of honest vector ``epsilon`` (Ballot's ``mimic:target=epsilon``)."""

    def __init__(self, epsilon: int = 0) -> None:
        if not isinstance(epsilon, int) or epsilon < 0:
            raise ValueError("epsilon must be a non-negative int.")
        self.epsilon = epsilon

    def __call__(self, honest_vectors: Any) -> Any:
        if not self.epsilon < _count(honest_vectors):
            raise ValueError(f"epsilon must be smaller than len(honest_vectors), but got epsilon={self.epsilon}"
                             f" and len(honest_vectors)={_count(honest_vectors)}")
        return self._craft(f"mimic:target={self.epsilon}", honest_vectors)


class LabelFlipping(Average):
    """ByzFL's label flipping: the attack is in the data (the Byzantine workers train on flipped
    labels, as Ballot's ``label_flip`` does), so as a vector attack it returns the mean of the
    vectors it is given — the gradients those workers computed on flipped labels (Ballot
    ``mean``)."""


class Inf(_Attack):
    """+inf in every coordinate, as float32 (ByzFL returns float64)."""

    def __init__(self) -> None:
        pass

    def __call__(self, honest_vectors: Any) -> Any:
        reference = _check_vectors(honest_vectors, "honest_vectors")
        return _like(np.full(reference.shape[-1], np.inf, np.float32), reference)


class Gaussian(_Attack):
    """N(mu, sigma²) per coordinate: Ballot's ``gaussian:sigma=sigma`` (Philox) plus mu. The
    Philox seed is drawn from the global RNG of the input's framework (torch or numpy), so seeding
    it reproduces a run as in ByzFL; the numbers differ from ByzFL's (same distribution)."""

    def __init__(self, mu: float = 0.0, sigma: float = 1.0) -> None:
        if not isinstance(mu, float):
            raise TypeError("mu must be a float.")
        self.mu = mu
        if not isinstance(sigma, float) or sigma < 0:
            raise ValueError("sigma must be a non-negative float.")
        self.sigma = sigma

    def __call__(self, honest_vectors: Any) -> Any:
        reference = _check_vectors(honest_vectors, "honest_vectors")
        if is_torch(reference):
            import torch

            seed = int(torch.randint(0, 2 ** 62, (1,)).item())
        else:
            seed = int(np.random.randint(0, 2 ** 62, dtype=np.int64))
        out = self._craft(f"gaussian:sigma={self.sigma!r}", honest_vectors, seed=seed)
        if self.mu != 0.0:
            out += float(self.mu)
        return out


def _concat(reference: Any, rows: Any, extra: List[Any]) -> Any:
    if is_torch(reference):
        import torch

        stacked = torch.stack(list(rows)) if isinstance(rows, (list, tuple)) else rows
        return torch.cat([stacked, torch.stack(extra)]) if extra else stacked
    stacked = np.stack(rows) if isinstance(rows, (list, tuple)) else rows
    return np.concatenate([stacked, np.stack(extra)]) if extra else stacked


def _norm(x: Any) -> float:
    return float(np.sqrt(_squared_norms((x.detach().cpu().numpy() if is_torch(x) else x)[None, :])[0]))


class _OptimalSearch(_Attack):
    """ByzFL's search for the attack factor: evaluate the distance between the aggregate (f copies
    of the attack vector among the honest ones, through ``pre_agg_list`` then ``agg``) and the
    honest mean; expansion doubling ``delta`` while it grows, then contraction by ``ratio``, with
    ``evals`` evaluations in all. The same steps as ByzFL 0.0.11, on this module's classes."""

    _attack: Any = None

    def __init__(self, agg: Any = None, pre_agg_list: Optional[List[Any]] = None, f: int = 1, evals: int = 20,
                 start: float = 0.0, delta: float = 10.0, ratio: float = 0.8) -> None:
        self.agg = Average() if agg is None else agg
        self.pre_agg_list = [Clipping()] if pre_agg_list is None else pre_agg_list
        if not isinstance(f, int) or f < 0:
            raise ValueError("f must be a non-negative integer")
        self.f = f
        if not isinstance(evals, int) or evals <= 0:
            raise ValueError("evals must be a positive integer")
        self.evals = evals
        if not isinstance(start, float):
            raise ValueError("start must be a float.")
        self.start = start
        if not isinstance(delta, float) or delta == 0:
            raise ValueError("delta must be a non-zero float.")
        self.delta = delta
        if not isinstance(ratio, float) or ratio <= 0.5 or ratio >= 1:
            raise ValueError("ratio must be a float in (0.5, 1) exclusive.")
        self.ratio = ratio

    def _evaluate(self, honest_vectors: Any, avg_honest_vector: Any, current_tau: float) -> float:
        byzantine_vector = type(self)._attack(tau=current_tau)(honest_vectors)
        vectors = _concat(_check_vectors(honest_vectors), honest_vectors, [byzantine_vector] * self.f)
        for pre_agg in self.pre_agg_list:
            vectors = pre_agg(vectors)
        return _norm(self.agg(vectors) - avg_honest_vector)

    def __call__(self, honest_vectors: Any) -> Any:
        _check_vectors(honest_vectors, "honest_vectors")
        avg = Average()(honest_vectors)
        best_x = self.start
        best_y = self._evaluate(honest_vectors, avg, best_x)
        delta, remaining = self.delta, self.evals - 1
        while remaining > 0:  # expansion
            prop_x = best_x + delta
            prop_y = self._evaluate(honest_vectors, avg, prop_x)
            remaining -= 1
            if prop_y > best_y:
                best_x, best_y = prop_x, prop_y
                delta *= 2
            else:
                delta *= self.ratio
                break
        while remaining > 0:  # contraction
            prop_x = best_x + delta
            prop_y = self._evaluate(honest_vectors, avg, prop_x)
            remaining -= 1
            if prop_y > best_y:
                best_x, best_y = prop_x, prop_y
            delta *= self.ratio
        return type(self)._attack(tau=best_x)(honest_vectors)


class Optimal_InnerProductManipulation(_OptimalSearch):
    """:class:`InnerProductManipulation` with the factor tau found by ByzFL's search (defaults:
    ``agg=Average()``, ``pre_agg_list=[Clipping()]``, this module's classes)."""

    _attack = InnerProductManipulation


class Optimal_ALittleIsEnough(_OptimalSearch):
    """:class:`ALittleIsEnough` with the factor tau found by ByzFL's search (defaults:
    ``agg=Average()``, ``pre_agg_list=[Clipping()]``, this module's classes)."""

    _attack = ALittleIsEnough
