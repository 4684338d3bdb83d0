import numpy as np
import pytest

from ballot import attacks
from conftest import torch_or_skip


def honest(rng, n=8, d=50):
    return [rng.standard_normal(d).astype(np.float32) for _ in range(n)]


def test_sign_flip_ipm_zero_scaled(rng):
    h = honest(rng)
    mean = np.mean(np.stack(h).astype(np.float64), axis=0)
    np.testing.assert_allclose(attacks.SignFlip()(h), -mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(attacks.SignFlip()(h, own=h[0]), -h[0])
    np.testing.assert_allclose(attacks.IPM(eps=0.5)(h), -0.5 * mean, rtol=1e-5, atol=1e-6)
    assert not attacks.Zero()(h).any()
    np.testing.assert_allclose(attacks.Scaled(factor=3.0)(h, own=h[1]), 3 * h[1], rtol=1e-6)


def test_alie_follows_the_paper(rng):
    h = honest(rng, n=40, d=30)
    x = np.stack(h).astype(np.float64)
    z = attacks.alie_z(50, 10)
    out = attacks.ALIE(m=10, n=50)(h)
    np.testing.assert_allclose(out, x.mean(0) - z * x.std(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(attacks.ALIE(z=1.5)(h), x.mean(0) - 1.5 * x.std(0), rtol=1e-4, atol=1e-5)
    assert attacks.alie_z(50, 24) == pytest.approx(1.4261, abs=1e-4)


def test_gaussian_and_mimic(rng):
    h = honest(rng)
    g = attacks.Gaussian(sigma=200.0)
    a, b = g(h), g(h)
    assert 150 < a.std() < 250 and not np.array_equal(a, b)
    np.testing.assert_array_equal(attacks.Mimic(target=2)(h), h[2])


def test_errors(rng):
    with pytest.raises(ValueError, match="not a gradient attack"):
        attacks.craft("reverse", honest(rng))
    with pytest.raises(ValueError):
        attacks.craft("nope", honest(rng))
    with pytest.raises(ValueError, match="m < n"):
        attacks.craft("alie", honest(rng, n=2), m=3, n=3)
    with pytest.raises(ValueError, match="honest vectors"):
        attacks.craft("alie", honest(rng, n=10), m=1, n=3)  # 10 honest of 3 workers
    with pytest.raises(TypeError, match="honest_vectors: expected an array"):
        attacks.craft("alie", 5)
    with pytest.raises(ValueError, match="m < n"):
        attacks.alie_z(3, 5)
    with pytest.raises(ValueError, match="non-negative"):
        attacks.alie_z(3, -1)


def test_torch(rng):
    torch = torch_or_skip()
    h = [torch.from_numpy(v) for v in honest(rng)]
    out = attacks.ALIE()(h)
    assert isinstance(out, torch.Tensor)


def test_every_gradient_attack_of_the_table_crafts(rng):
    names = attacks.attack_names("gradient")
    assert {"sign_flip", "alie", "ipm", "mimic"} <= set(names)
    assert "reverse" in attacks.attack_names("sign") and "none" in attacks.attack_names()
    vectors = honest(rng)
    for spec in attacks.attack_examples("gradient"):
        out = attacks.craft(spec, vectors, m=2, own=vectors[0])
        assert out.shape == vectors[0].shape and np.all(np.isfinite(out)), spec
