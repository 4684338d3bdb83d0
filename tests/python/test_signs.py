import numpy as np
import pytest

from ballot import signs
from conftest import torch_or_skip


def reference_pack(x):
    bits = (~(x < 0)).astype(np.uint64)
    words = np.zeros(signs.words_for(len(x)), np.uint64)
    for i, b in enumerate(bits):
        words[i // 64] |= b << np.uint64(i % 64)
    return words


@pytest.mark.parametrize("d", [0, 1, 63, 64, 65, 1000])
def test_pack_matches_the_definition(rng, d):
    x = rng.standard_normal(d).astype(np.float32)
    if d > 3:
        x[:3] = [0.0, -0.0, np.nan]
    words = signs.pack(x)
    assert words.dtype == np.uint64
    np.testing.assert_array_equal(words, reference_pack(x))
    np.testing.assert_array_equal(signs.unpack(words, d, 0.5), np.where(x < 0, -0.5, 0.5).astype(np.float32))


def test_majority_vote_with_ties_and_weights(rng):
    d = 130
    xs = [rng.standard_normal(d).astype(np.float32) for _ in range(4)]
    packed = [signs.pack(x) for x in xs]
    count = sum((x >= 0).astype(int) for x in xs)
    expected = signs.pack(np.where(count * 2 >= 4, 1.0, -1.0).astype(np.float32))
    np.testing.assert_array_equal(signs.majority_vote(packed, d), expected)
    np.testing.assert_array_equal(signs.majority_vote(np.stack(packed), d), expected)
    weighted = signs.majority_vote(packed, d, weights=[3, 1, 1, 0])
    wcount = 3 * (xs[0] >= 0) + (xs[1] >= 0) + (xs[2] >= 0)
    np.testing.assert_array_equal(weighted, signs.pack(np.where(wcount * 2 >= 5, 1.0, -1.0).astype(np.float32)))


def test_agreement(rng):
    x = rng.standard_normal(100).astype(np.float32)
    assert signs.agreement(signs.pack(x), signs.pack(x), 100) == 100
    assert signs.agreement(signs.pack(x), signs.pack(-x), 100) == sum(x == 0)


def test_bad_words_are_value_errors():
    with pytest.raises(ValueError, match="words"):
        signs.unpack(np.zeros(3, np.uint64), 64)
    with pytest.raises(ValueError, match="padding|malformed"):
        signs.unpack(np.array([1 << 63], np.uint64), 10)
    with pytest.raises(TypeError, match="uint64"):
        signs.majority_vote([np.zeros(1, np.float32)], 10)
    with pytest.raises(ValueError, match="weights"):
        signs.majority_vote([np.zeros(1, np.uint64)], 10, weights=[1, 2])


def test_torch_cpu_tensors_use_int64_words(rng):
    torch = torch_or_skip()
    x = torch.from_numpy(rng.standard_normal(100).astype(np.float32))
    w = signs.pack(x)
    assert isinstance(w, torch.Tensor) and w.dtype == torch.int64
    np.testing.assert_array_equal(w.numpy().view(np.uint64), reference_pack(x.numpy()))
    v = signs.majority_vote([w, w, signs.pack(-x)], 100)
    assert torch.equal(v, w)
    assert torch.equal(signs.unpack(w, 100), torch.where(x < 0, -1.0, 1.0))


def test_cuda_tensors_match_the_cpu(rng):
    torch = torch_or_skip()
    import ballot

    if not ballot.has_cuda or signs.cuda_device_count() == 0 or not torch.cuda.is_available():
        pytest.skip("no CUDA device (or a build without CUDA): the CUDA path is checked on a GPU machine")
    for d in (0, 1, 63, 64, 65, (1 << 20) + 3):
        x = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
        gpu = signs.pack(x.cuda())
        assert torch.equal(gpu.cpu(), signs.pack(x))
        assert torch.equal(signs.unpack(gpu, d, 2.0).cpu(), signs.unpack(signs.pack(x), d, 2.0))
        rows = [signs.pack(torch.from_numpy(rng.standard_normal(d).astype(np.float32))) for _ in range(5)]
        assert torch.equal(signs.majority_vote([r.cuda() for r in rows], d).cpu(), signs.majority_vote(rows, d))
        assert torch.equal(signs.majority_vote([r.cuda() for r in rows], d, weights=[1, 2, 3, 0, 1]).cpu(),
                           signs.majority_vote(rows, d, weights=[1, 2, 3, 0, 1]))
