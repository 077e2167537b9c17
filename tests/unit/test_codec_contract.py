"""One JSON contract whichever engine runs: the Lambda handler and eager mode use the
interpreter's C codec, long-lived processes switch to orjson (``codec.use_orjson()``), and
a job must not change meaning between them (see kindling/core/codec.py's docstring)."""

import dataclasses
import datetime
import enum
import subprocess
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore

STANDARD = (codec._loads, codec._dumps)
ORJSON = codec._orjson_engine()


class Colour(enum.Enum):
    RED = "red"
    NAN = float("nan")


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: float
    tags: list


def nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


UTC = datetime.UTC
VALUES = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "nan in a list": [1, float("nan")],
    "nan as an enum's value": Colour.NAN,
    "nan in a dataclass": Point(float("nan"), []),
    "2**63-1": 2**63 - 1,
    "2**63": 2**63,
    "2**64-1": 2**64 - 1,
    "2**64": 2**64,
    "2**70": 2**70,
    "-2**63": -(2**63),
    "-2**63-1": -(2**63) - 1,
    "int key": {1: "a"},
    "tuple key": {(1, 2): "a"},
    "None key": {None: "a"},
    "bool key": {True: "a"},
    "float key": {1.5: "a"},
    "int key deep inside": {"a": [{"b": {2: "c"}}]},
    "int key inside a dataclass": Point(1.0, [{3: "x"}]),
    "str subclass key": {Name("k"): 1},
    "naive datetime": datetime.datetime(2026, 1, 2, 3, 4, 5, 6),
    "aware datetime": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    "datetime +02:00": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    "date": datetime.date(2026, 1, 2),
    "time": datetime.time(3, 4, 5, 6),
    "aware time": datetime.time(3, 4, 5, tzinfo=UTC),
    "uuid": uuid.UUID(int=7),
    "enum": Colour.RED,
    "dataclass": Point(1.5, ["a", None]),
    "254 deep": nested(254),
    "255 deep": nested(255),
    "300 deep": nested(300),
    "10000 deep": nested(10_000),
    "bytes": b"x",
    "set": {1},
    "tuple": (1, "a"),
    "str subclass": Name("x"),
    "a very long string": "é" * 1_000_000,
    "lone surrogate": "\ud800",
    "None": None,
    "object with a value attribute": type("Box", (), {"value": 1})(),
    "object with isoformat": type("Stamp", (), {"isoformat": lambda self: "now"})(),
}


def outcome(dumps, value):
    try:
        return "ok", dumps(value)
    except codec.EncodeError as exc:
        return "refused", str(exc)


@pytest.mark.parametrize("name", VALUES)
def test_both_engines_write_the_same_text_or_refuse_with_the_same_error(name):
    value = VALUES[name]
    assert outcome(STANDARD[1], value) == outcome(ORJSON[1], value)


@pytest.mark.parametrize("name", ["nan", "inf", "-inf", "nan in a list", "nan as an enum's value",
                                  "nan in a dataclass", "int key", "tuple key", "None key", "bool key",
                                  "float key", "int key deep inside", "int key inside a dataclass", "255 deep",
                                  "300 deep", "10000 deep", "bytes", "set", "lone surrogate",
                                  "object with a value attribute", "object with isoformat"])
@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
def test_values_outside_the_contract_are_refused_with_an_encode_error(engine, name):
    with pytest.raises(codec.EncodeError) as caught:
        engine[1](VALUES[name])
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["2**63-1", "2**63", "2**64-1", "2**64", "2**70", "-2**63", "-2**63-1",
                                  "tuple", "str subclass", "None", "254 deep"])
@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
def test_accepted_values_read_back_exactly(engine, name):
    loads, dumps = engine
    value = VALUES[name]
    back = loads(dumps(value))
    assert back == (list(value) if isinstance(value, tuple) else value)
    assert type(back) is type(value) or isinstance(value, tuple | str)


def test_special_types_are_written_as_documented():
    dumps = STANDARD[1]
    assert dumps(VALUES["naive datetime"]) == '"2026-01-02T03:04:05.000006"'
    assert dumps(VALUES["aware datetime"]) == '"2026-01-02T03:04:05+00:00"'
    assert dumps(VALUES["date"]) == '"2026-01-02"'
    assert dumps(VALUES["uuid"]) == '"00000000-0000-0000-0000-000000000007"'
    assert dumps(VALUES["enum"]) == '"red"'
    assert dumps(VALUES["dataclass"]) == '{"x":1.5,"tags":["a",null]}'


TEXTS = ["[NaN]", "Infinity", "-Infinity", "1e400", "[-1e400]", "18446744073709551616", "1180591620717411303424",
         "-9223372036854775809", '{"n": 12345678901234567890123}', '"12345678901234567890123"',
         "[" * 254 + "]" * 254, "[" * 255 + "]" * 255, "[" * 2000 + "]" * 2000, '["[[[[' + "[" * 300 + '"]',
         '"\\ud83d\\ude00"', '"\\ud800"', "", "{", '{"a":1}}', "\ufeff1", b"\xef\xbb\xbf1", b'"\xff"',
         '"\x1f"', "1" * 5000, '{"a":1,"a":2}', " [1] "]


def decoded(loads, text):
    try:
        return "ok", loads(text)
    except codec.DecodeError as exc:
        return "refused", str(exc)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_both_engines_read_the_same_value_or_refuse_with_the_same_error(text):
    for data in (text, text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else (text,):
        assert decoded(STANDARD[0], data) == decoded(ORJSON[0], data)


@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
def test_reading_keeps_big_integers_exact_and_refuses_infinity_and_deep_nesting(engine):
    loads = engine[0]
    assert loads("1180591620717411303424") == 2**70
    assert loads(b"[-9223372036854775809]") == [-(2**63) - 1]
    for text in ["1e400", "[NaN]", "[" * 255 + "]" * 255]:
        with pytest.raises(codec.DecodeError):
            loads(text)
    assert loads("[" * 254 + "]" * 254) == nested(254)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text() | st.datetimes() | st.uuids(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


def _has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return isinstance(value, list) and any(_has_float(v) for v in value)


@given(json_values)
def test_the_engines_agree_on_any_accepted_value_byte_for_byte_but_a_floats_spelling(value):
    """The same text, except that orjson may spell a float's exponent another way (``e-8``
    for ``e-08``): the same number either way, read back alike by both engines."""
    text, fast = STANDARD[1](value), ORJSON[1](value)
    if not _has_float(value):
        assert fast == text
    assert STANDARD[0](text) == ORJSON[0](text) == ORJSON[0](text.encode()) == STANDARD[0](fast)


def test_a_failed_encode_leaves_nothing_behind_for_the_next():
    """The C encoder is shared by every call: a failure must not make a later, valid value
    look "circular"."""
    value = [b"not json"]
    with pytest.raises(codec.EncodeError):
        codec._dumps(value)
    value[0] = 1
    assert codec._dumps(value) == "[1]"


def test_use_orjson_switches_to_the_engine_that_keeps_the_contract():
    code = ("from kindling.core import codec; assert codec.use_orjson()\n"
            "for v in (float('nan'), {1: 'a'}, [[[]]] * 2):\n"
            "    try: print(codec.dumps(v))\n"
            "    except codec.EncodeError as e: print('refused', e)\n"
            "print(repr(codec.loads('1180591620717411303424')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["refused NaN and infinity are not JSON (nan)",
                                "refused dict keys must be str, got int 1",
                                "[[[]],[[]]]",
                                "1180591620717411303424"]


# End to end: a task's result is recorded the same way through the runner with either engine.

RESULTS = {"nan": float("nan"), "big": 2**70, "int_key": {1: "a"}}


def run_with(engine, monkeypatch, name):
    monkeypatch.setattr(codec, "loads", engine[0])
    monkeypatch.setattr(codec, "dumps", engine[1])
    reg = Registry()
    runs = []

    @reg.task(name="give")
    def give():
        runs.append(1)
        return RESULTS[name]

    store = MemoryResultStore()
    job = new_job("give", job_id="j1")
    outcomes = Runner(reg, store, log=None, metrics=False).run([Delivery("m1", encode_job(job).decode(), 1)])
    record = store.records["j1"]
    return {"status": outcomes[0].status, "runs": len(runs), "result": record.get("result"),
            "error": record.get("error", {}).get("type"), "message": record.get("error", {}).get("message"),
            "retry_in": outcomes[0].retry_in}


@pytest.mark.parametrize("name", RESULTS)
def test_a_result_is_recorded_the_same_way_with_either_engine(name, monkeypatch):
    standard = run_with(STANDARD, monkeypatch, name)
    with_orjson = run_with(ORJSON, monkeypatch, name)
    assert standard == with_orjson


@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
@pytest.mark.parametrize("name", ["nan", "int_key"])
def test_a_result_the_codec_refuses_is_dead_at_once_not_retried(engine, name, monkeypatch):
    """The same value fails the same way on every run: running the task again would only
    repeat its effects."""
    seen = run_with(engine, monkeypatch, name)
    assert (seen["status"], seen["runs"], seen["error"]) == ("dead", 1, "UnencodableResult")
    assert seen["message"].startswith("task result cannot be encoded as JSON: ")


@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
def test_a_big_integer_result_is_recorded_and_read_back_exactly(engine, monkeypatch):
    seen = run_with(engine, monkeypatch, "big")
    assert seen["status"] == "succeeded" and seen["result"] == "1180591620717411303424"
    assert engine[0](seen["result"]) == 2**70


@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
@pytest.mark.parametrize("args", [[float("nan")], [{1: "a"}], [b"x"], [nested(300)]], ids=["nan", "int key", "bytes",
                                                                                             "300 deep"])
def test_every_sender_refuses_the_same_arguments(engine, args, monkeypatch):
    monkeypatch.setattr(codec, "dumps", engine[1])
    with pytest.raises(TypeError, match="arguments are not JSON-serializable"):
        encode_job(new_job("t", args))


@pytest.mark.parametrize("engine", [STANDARD, ORJSON], ids=["standard", "orjson"])
def test_a_big_integer_argument_arrives_exactly(engine, monkeypatch):
    from kindling.core.envelope import decode_job

    monkeypatch.setattr(codec, "loads", engine[0])
    monkeypatch.setattr(codec, "dumps", engine[1])
    assert decode_job(encode_job(new_job("t", [2**70], {"n": -(2**63) - 1}))).args == [2**70]


def test_eager_mode_refuses_arguments_a_queue_would_refuse():
    from kindling.tools.testing import eager

    reg = Registry()
    echo = reg.task(name="echo")(lambda value: value)
    with eager() as jobs:
        with pytest.raises(TypeError, match="dict keys must be str"):
            echo.delay({1: "a"})
        assert echo.delay({"1": "a"}).result() == {"1": "a"}
        assert echo.delay(2**70).result() == 2**70
        assert len(jobs.records) == 2
