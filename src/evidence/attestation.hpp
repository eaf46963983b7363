#pragma once
// Signed rerun attestations: a statement that a rerun re-measured a run (both by runDigest), in which environment
// and with which verdict, signed with Ed25519 (OpenSSL) over the statement's JCS bytes (jcs.hpp, the one
// canonical form), so that someone who was not there can check it. The document, one JSON line:
//   {"kindexAttestation": 1, "statement": {...}, "publicKey": "<64 hex: raw Ed25519 key>",
//    "signature": "<128 hex: Ed25519 over canonical_json(statement)>"}
// statement: {"type": kAttestationType, "originalRunDigest", "rerunDigest", "environment": {...}, "verdict":
// "replicated" | "not_replicated", "basis": {...}, "signedAt", "keyId"}. What the environment and basis hold and
// how the verdict follows from a store is store/attestations.hpp's; this layer knows only the shape and the
// signature. Keys are PEM files (PKCS#8 private, SubjectPublicKeyInfo public); a key's id is
// "ed25519:" + the first 16 hex digits of SHA-256 of its raw 32 bytes.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kindex::evidence {

inline constexpr const char* kAttestationType = "kindex.dev/rerun-attestation/v1";
inline constexpr size_t kMaxAttestationBytes = 1u << 20;

struct KeyPair {
  std::string private_pem, public_pem, key_id;
};
// A fresh Ed25519 key pair.
KeyPair generate_key_pair();

// An Ed25519 private key read from PEM; kindex::Error naming `where` when the text is not one.
class SigningKey {
 public:
  static SigningKey from_pem(const std::string& pem, const std::string& where);
  const std::string& public_key_hex() const { return public_hex_; }
  std::string key_id() const;
  std::string sign(std::string_view message) const;  // the 64-byte signature

 private:
  std::shared_ptr<void> key_;  // EVP_PKEY
  std::string public_hex_;
};

// The raw public key (64 hex digits) of an Ed25519 public key in PEM (or of the public half of a private key's
// PEM); kindex::Error naming `where` otherwise.
std::string public_key_hex_from_pem(const std::string& pem, const std::string& where);
// "ed25519:<16 hex>" for a raw public key given as 64 hex digits.
std::string key_id_of(const std::string& public_key_hex);

struct Attestation {
  nlohmann::json statement;
  std::string public_key;  // 64 hex digits
  std::string signature;   // 128 hex digits
  nlohmann::json document() const;
  std::string line() const { return document().dump(); }
  std::string digest() const;  // sha256 of the document's JCS: the id the store and the pages give it
};

// Signs `statement` (its type and keyId are set here). kindex::Error when it cannot be canonicalised.
Attestation sign_attestation(nlohmann::json statement, const SigningKey& key);

// Reads an attestation document strictly: every member present with its type, no unknown member, digests as
// "sha256:<hex>", hex of the right length, at most kMaxAttestationBytes. kindex::Error naming `where` and the field.
Attestation parse_attestation(std::string_view text, const std::string& where);

// Empty when the signature verifies over the statement with the attestation's own key and the statement's keyId
// is that key's id; otherwise what is wrong ("the signature does not verify ...").
std::string signature_problem(const Attestation& attestation);

}  // namespace kindex::evidence
