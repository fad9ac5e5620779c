"""The signer and the verifier against docs/signing-vectors.json (as the Rust ones are)."""

import json

import pytest

from conftest import ROOT
from dynamo2pc.signing import SignatureError, read_secret_file, sign, verify

DOC = json.loads((ROOT / "docs/signing-vectors.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("v", DOC["vectors"], ids=lambda v: v["name"][:60])
def test_the_signer_gives_every_documented_vector(v, tmp_path):
    secret = v["secret"].encode()
    if "secretFile" in v:
        path = tmp_path / "secret.txt"
        path.write_bytes(v["secretFile"].encode())
        assert read_secret_file(path) == secret
    headers = sign(secret, v["txId"], int(v["timestamp"]), v["body"].encode())
    assert headers == {
        "x-twopc-timestamp": v["timestamp"],
        "x-twopc-tx-id": v["txId"],
        "x-twopc-signature": v["signature"],
    }
    assert v["stringToSign"] == f"v1\n{v['timestamp']}\n{v['txId']}\n{v['body']}"


@pytest.mark.parametrize("c", DOC["checks"], ids=lambda c: c["name"][:60])
def test_the_verifier_answers_every_documented_check(c):
    secret = DOC["vectors"][0]["secret"].encode()
    run = lambda: verify(secret, c["headers"], c["body"].encode(), c["now"], DOC["maxSkewMs"])  # noqa: E731
    if "txId" in c["expect"]:
        assert run() == c["expect"]["txId"]
    else:
        with pytest.raises(SignatureError) as e:
            run()
        assert e.value.code == c["expect"]["code"]


def test_a_secret_file_loses_one_newline_only_and_an_empty_one_is_refused(tmp_path):
    path = tmp_path / "s"
    path.write_bytes(b"0123456789abcdef\n\n")
    assert read_secret_file(path) == b"0123456789abcdef\n"
    path.write_bytes(b"0123456789abcdef\r\n")
    assert read_secret_file(path) == b"0123456789abcdef\r"
    path.write_bytes(b"\n")
    with pytest.raises(ValueError, match="empty"):
        read_secret_file(path)
