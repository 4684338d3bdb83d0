"""Gradient compression from Python: encode a per-layer gradient with a few codecs, decode it,
and keep error feedback's memory across steps (save and restore it as node state)."""

import numpy as np

from ballot import codecs

rng = np.random.default_rng(1)
layout = [("conv", 4_608), ("fc", 62_730)]
gradient = rng.standard_normal(sum(size for _, size in layout)).astype(np.float32)

for spec in ["fp32", "topk:ratio=0.01", "qsgd:s=16", "terngrad", "onebit", "scaled_sign"]:
    codec = codecs.Codec(spec, seed=7)
    data = codec.encode(gradient, layout)
    decoded = codec.decode(data, layout)
    error = float(np.linalg.norm(decoded - gradient) / np.linalg.norm(gradient))
    print(f"{codec.spec:40s} {len(data):8d} bytes ({4 * gradient.size / len(data):5.1f}x smaller), error {error:.3f}")
    assert decoded.dtype == np.float32 and decoded.shape == gradient.shape
    if spec == "fp32":
        # fp32 is the uncompressed reference: exact, at the 24-byte header plus 4 bytes a coordinate.
        assert error == 0.0 and len(data) == 24 + 4 * gradient.size, (error, len(data))
    else:
        assert len(data) < 4 * gradient.size, (spec, len(data))

ef = codecs.Codec("topk:ratio=0.01,ef=1")
for step in range(3):
    ef.encode(gradient, layout)
memory_norm = float(np.linalg.norm(ef.memory))
print("error-feedback memory norm after 3 steps:", memory_norm)
# Top-k sends 1% of the coordinates a step; the memory keeps what it did not send.
assert np.isfinite(memory_norm) and memory_norm > 0.0
state = ef.save_state()
restored = codecs.Codec("topk:ratio=0.01,ef=1")
restored.load_state(state, layout)
assert np.array_equal(restored.memory, ef.memory)
