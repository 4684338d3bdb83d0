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


def _momentum_reference(m, g, beta):
    keep, mix = np.float32(beta), np.float32(1.0 - beta)
    return keep * m + mix * g  # float32 multiplies and an add, each rounded to nearest


@pytest.mark.parametrize("d", [0, 1, 63, 64, 65, 4099])
def test_momentum_pack_is_the_signum_momentum_and_its_signs(rng, d):
    m = rng.standard_normal(d).astype(np.float32)
    g = rng.standard_normal(d).astype(np.float32)
    expected = _momentum_reference(m, g, 0.9)
    words = signs.momentum_pack(m, g, 0.9)
    np.testing.assert_array_equal(m, expected)  # bit for bit
    np.testing.assert_array_equal(words, reference_pack(expected))


def test_apply_update_is_the_sign_rule_and_heavy_ball(rng):
    d = 1000
    x = rng.standard_normal(d).astype(np.float32)
    v = rng.standard_normal(d).astype(np.float32)
    vote = signs.pack(v)
    ones = np.where(v < 0, np.float32(-1), np.float32(1))
    lr, wd = np.float32(0.01), np.float32(1e-4)

    sign_rule = x.copy()
    signs.apply_update(sign_rule, vote=vote, lr=0.01, weight_decay=1e-4)
    np.testing.assert_array_equal(sign_rule, x - lr * (ones + wd * x))

    params, buffer = x.copy(), np.zeros(d, np.float32)
    expected_x, expected_b = x.copy(), None
    for step in range(3):
        signs.apply_update(params, vote=vote, lr=0.01, weight_decay=1e-4, momentum=0.9, buffer=buffer,
                           first_step=step == 0)
        decayed = ones + wd * expected_x
        expected_b = decayed if step == 0 else np.float32(0.9) * expected_b + np.float32(1.0) * decayed
        expected_x = expected_x - lr * expected_b
    np.testing.assert_array_equal(params, expected_x)
    np.testing.assert_array_equal(buffer, expected_b)

    sgd = x.copy()
    signs.apply_update(sgd, direction=v, lr=0.01, weight_decay=1e-4)
    np.testing.assert_array_equal(sgd, x - lr * (v + wd * x))


def test_hot_path_refuses_bad_arguments(rng):
    x = np.zeros(10, np.float32)
    vote = signs.pack(x)
    with pytest.raises(ValueError, match="exactly one"):
        signs.apply_update(x, lr=0.1)
    with pytest.raises(ValueError, match="exactly one"):
        signs.apply_update(x, vote=vote, direction=x, lr=0.1)
    with pytest.raises(ValueError, match="buffer"):
        signs.apply_update(x, vote=vote, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="momentum"):
        signs.apply_update(x, vote=vote, lr=0.1, momentum=1.5, buffer=x.copy())
    with pytest.raises(ValueError, match="finite"):
        signs.apply_update(x, vote=vote, lr=float("nan"))
    with pytest.raises(ValueError):
        signs.apply_update(x, vote=signs.pack(np.zeros(200, np.float32)), lr=0.1)  # 200 signs for 10 params
    with pytest.raises(ValueError, match="beta"):
        signs.momentum_pack(x, x.copy(), 1.0)
    with pytest.raises(ValueError, match="sizes"):
        signs.momentum_pack(x, np.zeros(11, np.float32))


def test_cuda_hot_path_matches_the_cpu(rng):
    torch = torch_or_skip()
    import ballot

    if not ballot.has_cuda or signs.cuda_device_count() == 0 or not torch.cuda.is_available():
        pytest.skip("no CUDA device (or a build without CUDA): the CUDA path is checked on a GPU machine")
    for d in (0, 1, 63, 64, 65, (1 << 20) + 3):
        m = torch.from_numpy(rng.standard_normal(d + 1).astype(np.float32))
        g = torch.from_numpy(rng.standard_normal(d + 1).astype(np.float32))
        for offset in (0, 1):  # a view at an odd offset takes the kernels' unaligned path
            cpu_m, gpu_m = m[offset:offset + d].clone(), m.cuda()[offset:offset + d]
            gpu_words = signs.momentum_pack(gpu_m, g.cuda()[offset:offset + d], 0.9)
            cpu_words = signs.momentum_pack(cpu_m, g[offset:offset + d], 0.9)
            assert torch.equal(gpu_m.cpu(), cpu_m) and torch.equal(gpu_words.cpu(), cpu_words)

            vote = cpu_words
            cpu_x, gpu_x = m[offset:offset + d].clone(), m.cuda()[offset:offset + d]
            cpu_b, gpu_b = torch.zeros(d), torch.zeros(d, device="cuda")
            for step in range(2):
                options = dict(lr=0.05, weight_decay=1e-4, momentum=0.9, first_step=step == 0)
                signs.apply_update(cpu_x, vote=vote, buffer=cpu_b, **options)
                signs.apply_update(gpu_x, vote=vote.cuda(), buffer=gpu_b, **options)
                signs.apply_update(cpu_x, direction=g[offset:offset + d], lr=0.01, weight_decay=1e-3)
                signs.apply_update(gpu_x, direction=g.cuda()[offset:offset + d], lr=0.01, weight_decay=1e-3)
            assert torch.equal(gpu_x.cpu(), cpu_x) and torch.equal(gpu_b.cpu(), cpu_b), (d, offset)


def test_arrays_on_two_cuda_devices_are_refused(rng):
    torch = torch_or_skip()
    import ballot

    if not ballot.has_cuda or signs.cuda_device_count() < 2 or not torch.cuda.is_available():
        pytest.skip("needs two CUDA devices")
    m0 = torch.zeros(100, device="cuda:0")
    g1 = torch.ones(100, device="cuda:1")
    with torch.cuda.device(0):
        with pytest.raises(ValueError, match="different CUDA devices"):
            signs.momentum_pack(m0, g1)
        with pytest.raises(ValueError, match="different CUDA devices"):
            signs.apply_update(m0, lr=0.1, direction=g1)
        assert not m0.any()
        with pytest.raises(ValueError, match="current CUDA device"):
            signs.pack(g1)  # a kernel runs on the current device
    with torch.cuda.device(1):
        assert signs.unpack(signs.pack(g1), 100).device == g1.device


def test_sizes_weights_and_factors_from_the_caller_are_checked():
    words = np.zeros(0, np.uint64)
    # A d whose word count would wrap (bits + 63 past 2**64) is a ValueError, not a crash.
    with pytest.raises(ValueError, match="words"):
        signs.agreement(words, words, 2**64 - 1)
    with pytest.raises(ValueError, match="non-negative"):
        signs.agreement(words, words, -1)
    voters = [np.zeros(1, np.uint64)] * 2
    with pytest.raises(TypeError, match="integers"):
        signs.majority_vote(voters, 10, weights=[0.6, 0.4])  # not truncated to an empty vote
    with pytest.raises(ValueError, match="below 2"):
        signs.majority_vote(voters, 10, weights=[2**32, 0])
    np.testing.assert_array_equal(signs.majority_vote(voters, 10, weights=[np.int64(3), 2]), voters[0])
    x = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="float32"):
        signs.apply_update(x, lr=1e39, direction=np.ones(3, np.float32))  # finite as a double only
    assert not x.any()
    with pytest.raises(TypeError, match="values: expected an array"):
        signs.pack([1.0, -1.0])
    with pytest.raises(TypeError, match="momentum: expected an array"):
        signs.momentum_pack([0.0], np.zeros(1, np.float32))


def test_torch_tensors_that_torch_would_not_export_are_refused():
    torch = torch_or_skip()
    g = torch.randn(70)
    negated = g._neg_view()  # reads as -g only through torch
    with pytest.raises(ValueError, match="resolve_neg"):
        signs.pack(negated)
    np.testing.assert_array_equal(signs.pack(negated.resolve_neg()).numpy(), signs.pack(-g).numpy())
    # A parameter is updated under torch.no_grad(), as torch's own in-place updates must be.
    w = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="no_grad"):
        signs.apply_update(w, lr=1.0, direction=torch.ones(3))
    assert w.detach().eq(1).all()
    with torch.no_grad():
        signs.apply_update(w, lr=1.0, direction=torch.ones(3))
    assert w.detach().eq(0).all()
    # Reading one is fine (a gradient attack crafted from parameters, say).
    np.testing.assert_array_equal(signs.pack(w).numpy(), signs.pack(torch.zeros(3)).numpy())


class _ForeignDeviceWords:
    """A uint64 array that DLPack says lives on a Vulkan device (type 7): the memory is host
    memory here, but a caller's array on such a device must be refused, never read as the CPU's."""

    def __init__(self, *shape):
        import ctypes

        class Device(ctypes.Structure):
            _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

        class DataType(ctypes.Structure):
            _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32),
                        ("dtype", DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

        class Managed(ctypes.Structure):
            _fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

        self.memory = np.zeros(shape, np.uint64)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.managed = Managed(Tensor(self.memory.ctypes.data, Device(7, 0), len(shape), DataType(1, 64, 1), self.shape,
                                      None, 0), None, None)
        self.ctypes = ctypes

    def __dlpack_device__(self):
        return (7, 0)

    def __dlpack__(self, stream=None, **_):
        new_capsule = self.ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = self.ctypes.py_object
        new_capsule.argtypes = [self.ctypes.c_void_p, self.ctypes.c_char_p, self.ctypes.c_void_p]
        return new_capsule(self.ctypes.addressof(self.managed), b"dltensor", None)


def test_word_arrays_on_other_devices_are_refused():
    with pytest.raises(ValueError, match="CPU or a CUDA device"):
        signs.majority_vote(_ForeignDeviceWords(3, 2), 100)  # one 2-D array
    with pytest.raises(ValueError, match="CPU or a CUDA device"):
        signs.majority_vote([_ForeignDeviceWords(2)], 100)  # a list of rows
