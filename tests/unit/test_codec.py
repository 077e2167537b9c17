import datetime
import enum
import json
import subprocess
import sys
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


def test_the_standard_codec_imports_neither_json_nor_orjson():
    code = ("import sys, kindling.core.codec as c; c.loads('[1]'); c.dumps({'a': 1}); "
            "print(sorted(m for m in ('json', 'orjson', 're') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}; {code}"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
