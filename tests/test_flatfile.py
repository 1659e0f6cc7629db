"""trace/flatfile.py: arrays round-trip exactly (dtype, shape, values, empty ones), are mapped
copy-on-write (writing to one never changes the file), and a file that is not ours or is cut short
raises ValueError (the model cache then rebuilds the entry)."""
import numpy as np
import pytest

from launchtui.trace import flatfile


def _arrays():
    rng = np.random.default_rng(3)
    return {"a.i64": rng.integers(-10**12, 10**12, 1001), "a.i32": rng.integers(0, 9, 17).astype(np.int32),
            "b.u8": np.arange(5, dtype=np.uint8), "b.f64": rng.random(33), "empty": np.zeros(0, np.int64),
            "m2d": rng.integers(0, 5, (7, 3)), "bool": rng.random(9) > 0.5}


def test_round_trip(tmp_path):
    f = tmp_path / "x.model"
    flatfile.write(f, {"format_version": 1, "strings": ["a", "é"]}, _arrays())
    header, got = flatfile.read(f)
    assert header == {"format_version": 1, "strings": ["a", "é"]}
    want = _arrays()
    assert list(got) == list(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape
        np.testing.assert_array_equal(got[k], v)
    assert not list(tmp_path.glob(".tmp-*")), "the temporary is renamed, not left"


def test_mapped_copy_on_write(tmp_path):
    f = tmp_path / "x.model"
    flatfile.write(f, {}, {"v": np.arange(100, dtype=np.int64)})
    _, got = flatfile.read(f)
    got["v"][:] = -1                        # an analysis writing in place
    _, again = flatfile.read(f)
    assert again["v"].tolist() == list(range(100))


@pytest.mark.parametrize("cut", [3, 20, -8])
def test_foreign_or_truncated_file_raises(tmp_path, cut):
    f = tmp_path / "x.model"
    flatfile.write(f, {"k": 1}, {"v": np.arange(1000, dtype=np.int64)})
    data = f.read_bytes()
    f.write_bytes(data[:cut])
    with pytest.raises(ValueError):
        flatfile.read(f)
    f.write_bytes(b"PK\x03\x04" + data[4:])   # e.g. an old .npz
    with pytest.raises(ValueError):
        flatfile.read(f)
