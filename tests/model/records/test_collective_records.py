"""Which records are collectives (model/records/records.py `_collective`): each category
judged once, the same answer as judging every record's."""

from __future__ import annotations

from tb_roofline.model.records import records
from tb_roofline.table.timeline import is_collective


def test_each_category_judged_once_as_every_record_would_be():
    categories = ["all-reduce", "loop fusion", "All-Gather", "", "send", "all-reduce", None, 3]
    categories = categories * 5
    got = records._collective(categories)
    assert got.dtype == bool and len(got) == len(categories)
    assert got.tolist() == [is_collective(str(c)) for c in categories]
    assert got.any() and not got.all()
    assert records._collective([]).tolist() == []
