import datetime
import enum
import json
import uuid

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kindling.core import codec

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


@given(json_values)
def test_standard_codec_agrees_with_orjson(value):
    text = codec._dumps(value)
    assert codec._loads(text) == orjson.loads(text) == orjson.loads(orjson.dumps(value))
    assert codec._loads(orjson.dumps(value)) == orjson.loads(orjson.dumps(value))


@pytest.mark.parametrize("bad", ["", " ", "nul", "[1,]", '{"a":1}}', "NaN", "[Infinity]", "\x00"])
def test_invalid_json_raises_value_error_like_orjson(bad):
    with pytest.raises(ValueError):
        codec._loads(bad)
    with pytest.raises(ValueError):
        orjson.loads(bad)


def test_special_types_are_written_like_orjson():
    class Colour(enum.Enum):
        RED = "red"

    value = {"at": datetime.datetime(2026, 1, 2, 3, 4, 5), "d": datetime.date(2026, 1, 2),
             "u": uuid.UUID(int=7), "c": Colour.RED}
    assert json.loads(codec._dumps(value)) == orjson.loads(orjson.dumps(value))
    with pytest.raises(TypeError):
        codec._dumps({"x": object()})
    with pytest.raises(ValueError):
        codec._dumps(float("nan"))
