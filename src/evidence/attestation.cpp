#include "evidence/attestation.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/hex.hpp"
#include "evidence/digest.hpp"
#include "evidence/jcs.hpp"
#include "evidence/manifest.hpp"
#include "evidence/reader.hpp"

namespace kindex::evidence {

using nlohmann::json;

namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

const char* kWhere = "attestation";

std::string raw_public_hex(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != sizeof raw)
    throw Error(kWhere, "public key", "", "OpenSSL could not read the raw Ed25519 public key");
  return hex_lower(std::string_view(reinterpret_cast<const char*>(raw), len));
}

// Hex digits to bytes; nullopt unless exactly `bytes` bytes of lowercase hex.
std::optional<std::string> from_hex(const std::string& hex, size_t bytes) {
  if (hex.size() != 2 * bytes) return std::nullopt;
  std::string out(bytes, '\0');
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    out[i / 2] = static_cast<char>(i % 2 == 0 ? v << 4 : (static_cast<unsigned char>(out[i / 2]) | v));
  }
  return out;
}

std::string pem_of(EVP_PKEY* key, bool private_half) {
  Bio bio(BIO_new(BIO_s_mem()), &BIO_free);
  const int ok = private_half ? PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                              : PEM_write_bio_PUBKEY(bio.get(), key);
  if (!bio || ok != 1) throw Error(kWhere, "key", "", "OpenSSL could not write the key as PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// A PEM private key, or (public_only) a public key or the public half of a private one; Ed25519 only.
Key read_pem(const std::string& pem, bool public_only, const std::string& where) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(std::min<size_t>(pem.size(), 1u << 20))), &BIO_free);
  if (!bio) throw Error(where, "key", "", "OpenSSL could not read the key");
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key && public_only) {
    Bio again(BIO_new_mem_buf(pem.data(), static_cast<int>(std::min<size_t>(pem.size(), 1u << 20))), &BIO_free);
    key.reset(PEM_read_bio_PUBKEY(again.get(), nullptr, nullptr, nullptr));
  }
  if (!key)
    throw Error(where, "key", pem.substr(0, std::min<size_t>(pem.find('\n'), 40)),
                public_only ? "not a PEM public or private key" : "not a PEM private key (make one with `kindex keygen`)");
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    const char* name = OBJ_nid2sn(EVP_PKEY_id(key.get()));
    throw Error(where, "key type", name ? name : "unknown", "kindex signs with Ed25519 keys only");
  }
  return key;
}

}  // namespace

KeyPair generate_key_pair() {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                                  &EVP_PKEY_CTX_free);
  EVP_PKEY* made = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &made) != 1)
    throw Error(kWhere, "key", "", "OpenSSL could not generate an Ed25519 key");
  Key key(made, &EVP_PKEY_free);
  return {pem_of(key.get(), true), pem_of(key.get(), false), key_id_of(raw_public_hex(key.get()))};
}

SigningKey SigningKey::from_pem(const std::string& pem, const std::string& where) {
  Key key = read_pem(pem, false, where);
  SigningKey out;
  out.public_hex_ = raw_public_hex(key.get());
  out.key_ = std::shared_ptr<void>(key.release(), [](void* k) { EVP_PKEY_free(static_cast<EVP_PKEY*>(k)); });
  return out;
}

std::string SigningKey::key_id() const { return key_id_of(public_hex_); }

std::string SigningKey::sign(std::string_view message) const {
  MdCtx md(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  unsigned char sig[64];
  size_t len = sizeof sig;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, nullptr, nullptr, static_cast<EVP_PKEY*>(key_.get())) != 1 ||
      EVP_DigestSign(md.get(), sig, &len, reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1)
    throw Error(kWhere, "signature", "", "OpenSSL could not sign");
  return std::string(reinterpret_cast<const char*>(sig), len);
}

std::string public_key_hex_from_pem(const std::string& pem, const std::string& where) {
  return raw_public_hex(read_pem(pem, true, where).get());
}

std::string key_id_of(const std::string& public_key_hex) {
  const auto raw = from_hex(public_key_hex, 32);
  if (!raw) throw Error(kWhere, "publicKey", public_key_hex.substr(0, 80), "not 64 lowercase hex digits");
  return "ed25519:" + sha256_hex(*raw).substr(0, 16);
}

json Attestation::document() const {
  return {{"kindexAttestation", 1}, {"statement", statement}, {"publicKey", public_key}, {"signature", signature}};
}

std::string Attestation::digest() const { return sha256_digest(document()); }

Attestation sign_attestation(json statement, const SigningKey& key) {
  if (!statement.is_object()) throw Error(kWhere, "statement", statement.dump().substr(0, 60), "not an object");
  statement["type"] = kAttestationType;
  statement["keyId"] = key.key_id();
  Attestation a;
  a.public_key = key.public_key_hex();
  a.signature = hex_lower(key.sign(canonical_json(statement)));
  a.statement = std::move(statement);
  return a;
}

Attestation parse_attestation(std::string_view text, const std::string& where) {
  if (text.size() > kMaxAttestationBytes)
    throw Error(where, "size", std::to_string(text.size()) + " bytes", "an attestation is at most 1 MiB");
  const json doc = parse_json_strict(text, where);
  auto member = [&](const json& object, const std::string& path, const std::string& key, json::value_t type,
                    const char* what) -> const json& {
    auto it = object.find(key);
    if (it == object.end()) throw Error(where, path + key, "", "missing");
    const bool ok = type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
    if (!ok) throw Error(where, path + key, it->dump().substr(0, 80), std::string("must be ") + what);
    return *it;
  };
  auto only = [&](const json& object, const std::string& path, const std::set<std::string>& known) {
    for (const auto& [k, v] : object.items())
      if (!known.count(k)) throw Error(where, path + k, v.dump().substr(0, 80), "unknown member of an attestation");
  };
  if (!doc.is_object()) throw Error(where, "attestation", doc.dump().substr(0, 80), "must be a JSON object");
  only(doc, "", {"kindexAttestation", "statement", "publicKey", "signature"});
  if (member(doc, "", "kindexAttestation", json::value_t::number_integer, "1") != 1)
    throw Error(where, "kindexAttestation", doc["kindexAttestation"].dump(), "this kindex reads version 1 only");
  Attestation a;
  a.statement = member(doc, "", "statement", json::value_t::object, "an object");
  a.public_key = member(doc, "", "publicKey", json::value_t::string, "a string").get<std::string>();
  a.signature = member(doc, "", "signature", json::value_t::string, "a string").get<std::string>();
  if (!from_hex(a.public_key, 32)) throw Error(where, "publicKey", a.public_key.substr(0, 80), "must be 64 lowercase hex digits");
  if (!from_hex(a.signature, 64)) throw Error(where, "signature", a.signature.substr(0, 80), "must be 128 lowercase hex digits");

  const json& s = a.statement;
  const std::string p = "statement.";
  only(s, p, {"type", "originalRunDigest", "rerunDigest", "environment", "verdict", "basis", "signedAt", "keyId"});
  const std::string type = member(s, p, "type", json::value_t::string, "a string");
  if (type != kAttestationType) throw Error(where, p + "type", type, std::string("must be ") + kAttestationType);
  for (const char* digest : {"originalRunDigest", "rerunDigest"}) {
    const std::string d = member(s, p, digest, json::value_t::string, "a string");
    if (!is_sha256_digest(d)) throw Error(where, p + digest, d.substr(0, 80), "must be sha256:<64 hex digits>");
  }
  member(s, p, "environment", json::value_t::object, "an object");
  member(s, p, "basis", json::value_t::object, "an object");
  const std::string verdict = member(s, p, "verdict", json::value_t::string, "a string");
  if (verdict != "replicated" && verdict != "not_replicated")
    throw Error(where, p + "verdict", verdict, "must be replicated or not_replicated");
  const std::string at = member(s, p, "signedAt", json::value_t::string, "a string");
  (void)utc_instant(at, where, p + "signedAt");
  const std::string id = member(s, p, "keyId", json::value_t::string, "a string");
  if (id.size() != 24 || id.rfind("ed25519:", 0) != 0 || !from_hex(id.substr(8), 8))
    throw Error(where, p + "keyId", id.substr(0, 80), "must be ed25519:<16 hex digits>");
  (void)canonical_json(s);  // refuses what cannot be signed (invalid UTF-8, non-finite numbers)
  return a;
}

std::string signature_problem(const Attestation& a) {
  const auto key_bytes = from_hex(a.public_key, 32);
  const auto sig = from_hex(a.signature, 64);
  if (!key_bytes || !sig) return "the public key or signature is not hex of the right length";
  const std::string stated = a.statement.is_object() ? a.statement.value("keyId", "") : "";
  if (stated != key_id_of(a.public_key))
    return "the statement's keyId " + stated + " is not the id of the attestation's public key (" +
           key_id_of(a.public_key) + ")";
  std::string message;
  try {
    message = canonical_json(a.statement);
  } catch (const Error& e) {
    return "the statement cannot be canonicalised: " + e.problem();
  }
  Key key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                      reinterpret_cast<const unsigned char*>(key_bytes->data()), key_bytes->size()),
          &EVP_PKEY_free);
  MdCtx md(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!key || !md || EVP_DigestVerifyInit(md.get(), nullptr, nullptr, nullptr, key.get()) != 1)
    return "OpenSSL could not load the public key";
  const int ok = EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                                  reinterpret_cast<const unsigned char*>(message.data()), message.size());
  return ok == 1 ? "" : "the signature does not verify over the statement with key " + stated;
}

}  // namespace kindex::evidence
