"""``client.prefetch.list_meta``: a LIST page's metadata read without decoding its items."""

from __future__ import annotations

import orjson
import pytest

from pysched.client.prefetch import PrefetchError, list_meta


def test_the_metadata_before_the_items_is_read_alone():
    page = (b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc=",'
            b'"remainingItemCount":7},"items":[{"metadata":{"name":"a"}} ,BROKEN')
    # The items are never decoded: a body that is not JSON after them still gives the metadata.
    assert list_meta(page) == {"resourceVersion": "42", "continue": "abc=", "remainingItemCount": 7}


def test_other_field_orders_are_decoded_whole():
    page = orjson.dumps({"items": [{"metadata": {"name": "a"}}], "metadata": {"resourceVersion": "9"}})
    assert list_meta(page) == {"resourceVersion": "9"}


def test_a_body_that_is_not_a_list_is_an_error():
    with pytest.raises(PrefetchError):
        list_meta(b'{"kind":"Status","items":"nope"}')
    with pytest.raises(orjson.JSONDecodeError):
        list_meta(b"<html>")
