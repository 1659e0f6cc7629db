"""output.dumps: msgspec-encoded JSON byte-identical to json.dumps(indent=1, ensure_ascii=False, allow_nan=False)."""
from __future__ import annotations

import json
import math
import random

import pytest

from launchtui.output import dumps


def stdlib(doc) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def random_float(rng: random.Random) -> float:
    v = rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)
    return rng.choice([v, round(v, rng.randint(0, 8)), float(int(v)), 0.0, -0.0, 5e-324, 1.7976931348623157e308])


def test_floats_of_every_magnitude_are_spelled_as_repr():
    rng = random.Random(11)
    floats = [random_float(rng) for _ in range(50_000)]
    assert dumps(floats) == stdlib(floats)
    # the forms msgspec spells differently, at the top level, in objects and as the last item
    for v in (1e16, 1e-05, 1.5e-07, 2.5e-05, 1.2345678901234568e17, 1e300, -3e-5, 1e22):
        for doc in (v, [v], {"a": v}, {"a": [1, v]}, [[v], {"b": v}]):
            assert dumps(doc) == stdlib(doc), doc


def test_strings_that_look_like_numbers_are_left_alone():
    doc = {"e12": "x e12,\n0.00001", "n": ["1e-7", "0.00001,", "k_e1"], "s": "tilesize128x128x64_e1",
           "v": [1e-7, "1e-7"]}
    assert dumps(doc) == stdlib(doc)


def test_structure_escapes_and_unicode_match():
    doc = {"empty_list": [], "empty_obj": {}, "nested": [[], [{}], {"a": {"b": []}}], "none": None,
           "bools": [True, False], "big": 2**63 - 1, "neg": -(2**62), "tuple": (1, 2),
           "text": "".join(map(chr, range(0x800))) + "\U0001F600\u2028\ufeff", 3: "int key"}
    assert dumps(doc) == stdlib(doc)


def test_nan_and_infinity_are_refused_like_the_standard_library():
    for bad in (float("nan"), [1.0, float("inf")], {"a": {"b": -math.inf}}, [-math.nan], {"k": [math.inf * 0]}):
        with pytest.raises(ValueError):
            dumps(bad)


def test_integers_whose_bytes_look_like_a_nan_take_the_fast_path(monkeypatch):
    import launchtui.output as out
    doc = {"ids": [0x05D7CB7FFA000000, 0xCB7FF80000000000 >> 8, 2**64 - 1], "x": [1.5, -0.0]}
    monkeypatch.setattr(out, "_has_nonfinite", lambda x: pytest.fail("slow walk for integers"))
    assert dumps(doc) == stdlib(doc)


def test_what_msgspec_cannot_encode_falls_back_to_the_standard_library():
    assert dumps({True: 1, None: 2}) == stdlib({True: 1, None: 2})   # keys json coerces
    assert dumps([2**70]) == stdlib([2**70])                          # beyond 64 bits
    assert dumps({"name": "bad \udcff byte"}) == '{\n "name": "bad \\\\xff byte"\n}\n'  # printable()
    with pytest.raises(TypeError):
        dumps({"x": object()})


def test_chunks_are_written_atomically_and_gzip_is_deterministic(tmp_path):
    import gzip
    from launchtui.errors import UsageError
    from launchtui.output import write_atomic_chunks
    parts = [b'{"a":', b"1}\n"]
    plain = write_atomic_chunks(tmp_path / "x.json", iter(parts))
    assert plain.read_bytes() == b'{"a":1}\n'
    one = write_atomic_chunks(tmp_path / "x.json.gz", iter(parts), compress=True).read_bytes()
    two = write_atomic_chunks(tmp_path / "y.json.gz", iter(parts), compress=True).read_bytes()
    assert one == two and gzip.decompress(one) == b'{"a":1}\n'    # no name, no time in the header
    with pytest.raises(UsageError, match="exists; use --force"):
        write_atomic_chunks(tmp_path / "x.json", iter([b"other"]))
    assert plain.read_bytes() == b'{"a":1}\n'

    def failing():
        yield b"part"
        raise UsageError("stopped half way")
    with pytest.raises(UsageError):
        write_atomic_chunks(tmp_path / "z.json", failing())
    assert not (tmp_path / "z.json").exists() and not list(tmp_path.glob(".*.tmp"))


def test_pipelined_writes_in_order_and_stops_on_either_sides_error():
    """The writer thread sees every chunk in order; a chunk maker's error ends the writer after what
    was queued, and the writer's error (a full disk) stops the maker and is raised to the caller."""
    import threading
    from launchtui.output import pipelined
    got, threads = [], set()
    pipelined((b"%d," % i for i in range(1000)), lambda c: got.append(c) or threads.add(threading.current_thread()))
    assert b"".join(got) == b"".join(b"%d," % i for i in range(1000))
    assert threads and threading.current_thread() not in threads     # written beside the maker

    def maker_fails():
        yield b"a"
        raise ValueError("made half way")
    seen = []
    with pytest.raises(ValueError, match="made half way"):
        pipelined(maker_fails(), seen.append)
    assert seen == [b"a"]

    made = []

    def many():
        for i in range(10_000):
            made.append(i)
            yield b"x"

    def full(c):
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError, match="No space left"):
        pipelined(many(), full)
    assert len(made) < 10                 # the maker stopped soon after the writer failed
