"""Gradient attacks (C++ ``ballot::attacks``): what a Byzantine worker sends instead of its
honest gradient, crafted from the honest vectors of the round (an omniscient attacker, as in
the evaluation engine). docs/attacks.md gives the formulas.

Each attack is a callable object in the style of ByzFL's attack classes:
``attack(honest_vectors) -> vector``, where honest_vectors is a list of 1-D float32 arrays or
tensors or one 2-D array; the result has the input's type. ``m`` is the number of attackers
(ALIE's z depends on it) and ``n`` the total number of workers (default: honest + m).
"""

from __future__ import annotations

from typing import Any, List, Optional

from ballot import _native
from ballot._arrays import count, first_of, like, shape_of


def _count(vectors: Any) -> int:
    return len(vectors) if isinstance(vectors, (list, tuple)) else shape_of(vectors, "honest_vectors")[0]


def craft(spec: str, honest_vectors: Any, *, m: int = 1, n: Optional[int] = None, own: Any = None,
          seed: int = 0, stream: int = 0) -> Any:
    """The vector an attacker sends under the attack ``spec`` (``"alie"``, ``"ipm:eps=0.5"``,
    ``"gaussian:sigma=200"``, ``"scaled:factor=-10"``, ``"sign_flip"``, ``"zero"``,
    ``"mimic:target=0"``). ``own``: the attacker's own honest gradient (sign_flip and scaled
    use it; without it they use the honest mean). Gaussian draws from Philox ``(seed, stream)``."""
    honest, m = _count(honest_vectors), count(m, "m")
    total = honest + m if n is None else count(n, "n")
    if n is not None and (m >= total or honest + m > total):
        raise ValueError(f"craft: need m < n and n >= honest vectors + m, got n={total}, m={m} and {honest} "
                         "honest vectors")
    value = _native.craft_gradient(spec, honest_vectors, own, total, m, count(seed, "seed"), count(stream, "stream"))
    return like(value, first_of(honest_vectors) if _count(honest_vectors) else own)


def attack_names(domain: Optional[str] = None) -> List[str]:
    """The attack names of the C++ table (docs/attacks.md), optionally of one domain:
    ``"gradient"``, ``"sign"``, ``"data"`` or ``"protocol"`` (``"none"`` has domain ``"none"``)."""
    return [name for name, dom, _, _ in _native.attack_table() if domain is None or dom == domain]


def attack_examples(domain: Optional[str] = None) -> List[str]:
    """One valid spec of each attack (its table example), optionally of one domain."""
    return [example for _, dom, example, _ in _native.attack_table() if domain is None or dom == domain]


def alie_z(n: int, m: int) -> float:
    """z of "a little is enough" for n workers of which m attack (Baruch et al., 2019)."""
    n, m = count(n, "n"), count(m, "m")
    if m >= n:
        raise ValueError(f"alie_z: need m < n, got n={n}, m={m}")
    return float(_native.alie_z(n, m))


class GradientAttack:
    """An attack by spec with its coalition size; ``__call__(honest_vectors, own=None)``."""

    def __init__(self, spec: str, m: int = 1, n: Optional[int] = None, seed: int = 0) -> None:
        self.spec, self.m, self.n, self.seed = spec, m, n, seed
        self._calls = 0

    def __call__(self, honest_vectors: Any, own: Any = None) -> Any:
        # Each call draws from its own stream, so repeated calls give fresh Gaussian noise.
        self._calls += 1
        return craft(self.spec, honest_vectors, m=self.m, n=self.n, own=own, seed=self.seed, stream=self._calls)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, m={self.m})"


class SignFlip(GradientAttack):
    """-g_own (the negated honest mean when own is not given)."""

    def __init__(self, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__("sign_flip", m, n)


class Scaled(GradientAttack):
    """factor * g_own."""

    def __init__(self, factor: float = -10.0, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__(f"scaled:factor={factor!r}", m, n)


class Gaussian(GradientAttack):
    """N(0, sigma^2) per coordinate."""

    def __init__(self, sigma: float = 200.0, m: int = 1, n: Optional[int] = None, seed: int = 0) -> None:
        super().__init__(f"gaussian:sigma={sigma!r}", m, n, seed)


class Zero(GradientAttack):
    def __init__(self, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__("zero", m, n)


class ALIE(GradientAttack):
    """mean - z * std of the honest vectors; z from (n, m) unless given (Baruch et al., 2019)."""

    def __init__(self, z: Optional[float] = None, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__("alie" if z is None else f"alie:z={z!r}", m, n)


class IPM(GradientAttack):
    """-eps * mean of the honest vectors (Xie et al., 2019)."""

    def __init__(self, eps: float = 0.1, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__(f"ipm:eps={eps!r}", m, n)


class Mimic(GradientAttack):
    """A copy of honest worker ``target`` (Karimireddy et al., 2022)."""

    def __init__(self, target: int = 0, m: int = 1, n: Optional[int] = None) -> None:
        super().__init__(f"mimic:target={int(target)}", m, n)
