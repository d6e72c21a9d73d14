"""Collector settings for the scheduler process (pysched.util.gctune)."""

import gc

import pytest

from pysched.util import gctune


@pytest.fixture
def restore_gc():
    threshold, enabled, starting = gc.get_threshold(), gc.isenabled(), gctune._starting
    yield
    gctune._starting = starting
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()
    gc.unfreeze()


def test_configure_raises_only_the_young_threshold_and_begins_start_up(restore_gc):
    gc.set_threshold(700, 11, 12)
    gctune._starting = False
    gctune.configure()
    assert gc.get_threshold() == (gctune.YOUNG_THRESHOLD, 11, 12)
    assert gctune._starting


def test_without_configure_large_decodes_are_never_frozen(restore_gc):
    gc.unfreeze()
    gctune._starting = False            # a tool or the benchmark driver: configure() never ran
    with gctune.paused():
        page = [{"metadata": {"name": f"p-{i}"}} for i in range(5_000)]
    assert gc.get_freeze_count() == 0
    assert len(page) == 5_000


def test_paused_disables_collection_and_restores_it_even_on_error(restore_gc):
    gc.enable()
    with pytest.raises(RuntimeError):
        with gctune.paused():
            assert not gc.isenabled()
            raise RuntimeError("decode failed")
    assert gc.isenabled()
    gc.disable()
    with gctune.paused():
        pass
    assert not gc.isenabled()   # was off before: stays off


def test_freeze_moves_live_objects_out_of_collections(restore_gc):
    gc.unfreeze()
    kept = [{"pod": i} for i in range(1000)]
    gctune.freeze()
    assert gc.get_freeze_count() >= len(kept)


def test_during_start_up_a_large_decode_is_frozen_instead_of_left_for_a_young_collection(restore_gc):
    gc.unfreeze()
    gc.enable()
    gctune._starting = True
    with gctune.paused():
        page = [{"metadata": {"name": f"p-{i}"}} for i in range(20_000)]
    # Without the freeze every one of these dicts would be counted in generation 0, and the next
    # allocation would start a collection that walks them all.
    assert gc.get_count()[0] < 1_000
    assert gc.get_freeze_count() >= 2 * len(page)
    assert gctune._starting


def test_after_start_up_decodes_are_not_frozen(restore_gc):
    gc.unfreeze()
    gc.enable()
    gctune._starting = True
    gctune.freeze()                    # the informers have synced
    assert not gctune._starting
    before = gc.get_freeze_count()
    with gctune.paused():
        page = [{"metadata": {"name": f"p-{i}"}} for i in range(5_000)]
    assert gc.get_freeze_count() == before
    assert len(page) == 5_000
