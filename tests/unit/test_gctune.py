"""Collector settings for the scheduler process (pysched.util.gctune)."""

import gc

import pytest

from pysched.util import gctune


@pytest.fixture
def restore_gc():
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()
    gc.unfreeze()


def test_configure_raises_only_the_young_threshold(restore_gc):
    gc.set_threshold(700, 11, 12)
    gctune.configure()
    assert gc.get_threshold() == (gctune.YOUNG_THRESHOLD, 11, 12)


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
