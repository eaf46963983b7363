"""Writes attestation_pyca.json: a kindex rerun attestation signed outside kindex, with pyca/cryptography's Ed25519
and Python's json as the canonical form (sorted keys, no whitespace: JCS for this ASCII statement), so that the C++
reader and signature check are tested against bytes they did not make. The key is the fixed bytes 0..31."""

import hashlib
import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
statement = {
    "type": "kindex.dev/rerun-attestation/v1",
    "originalRunDigest": "sha256:" + "a" * 64,
    "rerunDigest": "sha256:" + "b" * 64,
    "environment": {"environmentDigest": "sha256:" + "c" * 64, "gpu": "NVIDIA H200", "architecture": "sm_90",
                    "driver": "580.95.05", "cudaToolkit": "13.0", "clocks": {"locked": False, "smMhzAtStart": 1980},
                    "libraries": {"kindex": "0.1.0"}},
    "verdict": "replicated",
    "basis": {"status": "passed", "sameImplementation": True, "protocolDigest": "sha256:" + "d" * 64,
              "tolerance": {"atol": 0.01, "rtol": 0.01}},
    "signedAt": "2026-12-07T05:00:00.000Z",
    "keyId": "ed25519:" + hashlib.sha256(public).hexdigest()[:16],
}
canonical = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
document = {"kindexAttestation": 1, "statement": statement, "publicKey": public.hex(), "signature": key.sign(canonical).hex()}
Path(__file__).with_name("attestation_pyca.json").write_text(json.dumps(document) + "\n")
