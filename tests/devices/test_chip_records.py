"""One record per chip (`devices/chips.py`): every key of the tables beside the data sheets names
a chip, every GPU finds its architecture's rates, every figure cites a document of
`devices/sources.py`, and the peaks a chip gives the model are the record's."""

from __future__ import annotations

import pytest

from tb_roofline.devices import chips, sources
from tb_roofline.devices.datasheets import TABLE
from tb_roofline.devices.host_links import HOST_LINKS

# Chips whose architecture has no published per-SM rates yet: their peaks come from the data
# sheet only (a profile's SMs and clock cannot be multiplied out). Each must still be a gap.
KNOWN_GAPS = {
    "b300": ["gpu_arch_rates"],  # compute capability 10.3 (Blackwell Ultra)
    "gb300": ["gpu_arch_rates"],
}


def test_every_side_table_key_names_a_chip():
    assert chips.unknown_keys() == []
    assert set(chips.CHIPS) == {s.key for s in TABLE}
    assert len(chips.CHIPS) == len(TABLE)  # no two entries share a key


def test_a_misspelled_key_is_reported(monkeypatch):
    monkeypatch.setitem(HOST_LINKS, "h100-sxm5", HOST_LINKS["h100-sxm"])
    assert chips.unknown_keys() == ["host_links.HOST_LINKS: h100-sxm5"]


@pytest.mark.parametrize("key", sorted(chips.CHIPS))
def test_every_chip_resolves_in_the_tables_it_needs(key):
    assert chips.missing_figures(chips.CHIPS[key]) == KNOWN_GAPS.get(key, [])


def _documents() -> list[str]:
    """The documents of sources.py, up to their first format field."""
    texts = [v for k, v in vars(sources).items() if k.isupper() and isinstance(v, str)]
    return [t.split("{", 1)[0] for t in texts if t.split("{", 1)[0]]


@pytest.mark.parametrize("key", sorted(chips.CHIPS))
def test_every_figure_cites_a_document(key):
    documents = _documents()
    chip = chips.CHIPS[key]
    for source in chip.sources():
        if source.startswith("CUDA C++ Programming Guide") or "architecture whitepaper" in source:
            continue  # on-chip and per-SM rates cite the vendor's guides in their own modules
        if source.startswith("derived: ") and chip.arch is not None:
            continue  # SMs x clock x the architecture's rate, its whitepaper cited there
        assert any(d in source for d in documents), source


@pytest.mark.parametrize("key", sorted(chips.CHIPS))
def test_the_model_gets_the_records_links(key):
    chip = chips.CHIPS[key]
    device = chip.spec.to_device_info()
    host = device.memory("host")
    assert (host.gbs if host else None) == (chip.host_link.value if chip.host_link else None)
    peer = device.memory("interconnect")
    assert (peer.gbs if peer else None) == (chip.link[1].value if chip.link else None)
    if chip.link:
        assert chip.link[0] in peer.name
    for precision, figure in chip.spec.compute.items():
        assert device.peak_for(precision) == pytest.approx(figure.value * 1000.0)
