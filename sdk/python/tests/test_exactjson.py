from decimal import Decimal

import pytest

from dynamo2pc import exactjson


def test_numbers_keep_their_digits_both_ways():
    text = '{"a":12.50,"b":12345678901234567890123456789012345678,"c":-1E-130,"d":[1.0,7],"e":"café"}'
    v = exactjson.loads(text.encode())
    assert v["a"] == Decimal("12.50") and str(v["a"]) == "12.50"
    assert v["b"] == 12345678901234567890123456789012345678 and type(v["b"]) is int
    assert exactjson.dumps(v) == text


def test_a_float_or_a_non_finite_number_is_refused():
    with pytest.raises(TypeError, match="Decimal"):
        exactjson.dumps({"amount": 0.1})
    with pytest.raises(TypeError):
        exactjson.dumps(Decimal("NaN"))
    with pytest.raises(ValueError):
        exactjson.loads('{"a": NaN}')
