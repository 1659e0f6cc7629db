"""Small readers of the generator's files for tests/test_fixture_*.py: an SQL connection, a Kineto
document parsed with exact decimals, a µs token as exact ns, and the ground truth's kernel table in
the readers' shape. Deliberately independent of launchtui: they check that what the writers put in
the files agrees with the ground truth the simulation computed."""
from __future__ import annotations

import gzip
import json
import sqlite3
from decimal import Decimal


def ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def load_kineto(path):
    raw = gzip.open(path, "rb").read().decode("utf-8")
    return raw, json.loads(raw, parse_float=Decimal)


def ns_of(x) -> int:
    """µs token (int or Decimal) -> exact int ns; fails if it is not a whole number of ns."""
    v = Decimal(x) * 1000
    assert v == v.to_integral_value(), x
    return int(v)


def gt_table(gt):
    """{(device, kernel name): [launches, API ns, queue count, queue ns, kernel ns]} of a ground truth."""
    return {(r["device_id"], r["kernel_name"]): [r["launch_count"], r["sum_api_ns"],
                                                  r["queue_count"], r["sum_queue_ns"],
                                                  r["sum_kernel_ns"]]
            for r in gt["kernel_table"]}
