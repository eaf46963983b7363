// Signed rerun attestations (evidence/attestation.hpp): Ed25519 against RFC 8032's own test vector, sign and verify,
// every statement field tampered, another key, the signature itself, and the reader's errors.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "core/error.hpp"
#include "evidence/attestation.hpp"
#include "evidence/digest.hpp"
#include "evidence/jcs.hpp"
#include "support/paths.hpp"

using namespace kindex::evidence;
using nlohmann::json;

namespace {

// RFC 8032 section 7.1, TEST 1: the secret key as PKCS#8 PEM, its public key, and its signature of the empty message.
const char* kRfcKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";
const char* kRfcPublic = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const char* kRfcSignature =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {d[c >> 4], d[c & 15]};
  return out;
}

json statement() {
  return {{"originalRunDigest", "sha256:" + std::string(64, 'a')},
          {"rerunDigest", "sha256:" + std::string(64, 'b')},
          {"environment",
           {{"environmentDigest", "sha256:" + std::string(64, 'c')},
            {"gpu", "NVIDIA H200"},
            {"architecture", "sm_90"},
            {"driver", "580.95.05"},
            {"cudaToolkit", "13.0"},
            {"clocks", {{"locked", false}, {"smMhzAtStart", 1980}}},
            {"libraries", {{"kindex", "0.1.0"}, {"flashinfer", "0.7.2"}}}}},
          {"verdict", "replicated"},
          {"basis",
           {{"status", "passed"},
            {"sameImplementation", true},
            {"protocolDigest", "sha256:" + std::string(64, 'd')},
            {"tolerance", {{"atol", 0.01}, {"rtol", 0.01}}}}},
          {"signedAt", "2026-12-07T05:00:00.000Z"}};
}

// Whether the document is refused: by the reader, or by the signature check.
bool refused(const json& document) {
  try {
    return !signature_problem(parse_attestation(document.dump(), "test")).empty();
  } catch (const kindex::Error&) {
    return true;
  }
}

// Every leaf of `j` (its JSON pointer), so that each field of the statement is tampered with in turn.
void leaves(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) leaves(v, at / k, out);
  } else {
    out.push_back(at);
  }
}

// Another value of the same type (digests and hex keep their shape, so the reader accepts them).
json altered(const json& v) {
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() + 1;
  if (v.is_number()) return v.get<double>() * 2 + 1;
  if (v.is_string()) {
    std::string s = v;
    if (s.empty()) return "x";
    char& c = s.back();
    c = c == 'a' ? 'b' : c == 'Z' ? 'Y' : 'a';
    return s;
  }
  return json{{"added", 1}};
}

}  // namespace

TEST(Attestation, Ed25519MatchesRfc8032TestVector1) {
  const SigningKey key = SigningKey::from_pem(kRfcKeyPem, "rfc8032");
  EXPECT_EQ(key.public_key_hex(), kRfcPublic);
  EXPECT_EQ(hex(key.sign("")), kRfcSignature);
  EXPECT_EQ(key.key_id(), "ed25519:" + sha256_hex([] {
                            std::string raw;
                            const std::string h = kRfcPublic;
                            for (size_t i = 0; i < h.size(); i += 2) raw += char(std::stoi(h.substr(i, 2), nullptr, 16));
                            return raw;
                          }()).substr(0, 16));
  EXPECT_EQ(public_key_hex_from_pem(kRfcKeyPem, "rfc8032"), kRfcPublic);  // the public half of a private key
}

TEST(Attestation, SignedStatementVerifiesOverItsCanonicalBytesInAnyLayout) {
  const KeyPair pair = generate_key_pair();
  const SigningKey key = SigningKey::from_pem(pair.private_pem, "key");
  EXPECT_EQ(key.key_id(), pair.key_id);
  EXPECT_EQ(public_key_hex_from_pem(pair.public_pem, "key.pub"), key.public_key_hex());
  const Attestation a = sign_attestation(statement(), key);
  EXPECT_EQ(a.statement["type"], kAttestationType);
  EXPECT_EQ(a.statement["keyId"], pair.key_id);
  EXPECT_EQ(a.line().find('\n'), std::string::npos);  // one JSON line
  EXPECT_EQ(signature_problem(parse_attestation(a.line(), "line")), "");
  // Whitespace and member order are not what is signed: the statement's JCS bytes are.
  EXPECT_EQ(signature_problem(parse_attestation(a.document().dump(4), "indented")), "");
  // The signature is over canonical_json(statement), nothing else: OpenSSL's signature of those bytes is the one
  // in the document (Ed25519 is deterministic).
  EXPECT_EQ(hex(key.sign(canonical_json(a.statement))), a.signature);
  EXPECT_EQ(a.digest(), sha256_digest(a.document()));
}

TEST(Attestation, OneSignedOutsideKindexVerifies) {
  // tests/evidence/data/make_attestation_pyca.py: pyca/cryptography's Ed25519 over Python's sorted, compact JSON.
  std::ifstream in(kindex::test::source_dir() + "/tests/evidence/data/attestation_pyca.json");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(text.empty());
  const Attestation a = parse_attestation(text, "attestation_pyca.json");
  EXPECT_EQ(signature_problem(a), "");
  EXPECT_EQ(a.statement["keyId"], key_id_of(a.public_key));
  Attestation other = a;
  other.statement["environment"]["clocks"]["smMhzAtStart"] = 1980.5;
  EXPECT_NE(signature_problem(other), "");
}

TEST(Attestation, EveryTamperedStatementFieldIsRefused) {
  const SigningKey key = SigningKey::from_pem(generate_key_pair().private_pem, "key");
  const json good = sign_attestation(statement(), key).document();
  ASSERT_FALSE(refused(good));
  std::vector<json::json_pointer> fields;
  leaves(good["statement"], json::json_pointer("/statement"), fields);
  ASSERT_GE(fields.size(), 16u);
  for (const auto& field : fields) {
    json tampered = good;
    tampered[field] = altered(tampered[field]);
    EXPECT_TRUE(refused(tampered)) << field.to_string() << " changed and still accepted";
    json removed = good;
    removed[field.parent_pointer()].erase(field.back());
    EXPECT_TRUE(refused(removed)) << field.to_string() << " removed and still accepted";
  }
  json added = good;
  added["statement"]["environment"]["note"] = "extra";
  EXPECT_TRUE(refused(added));
}

TEST(Attestation, AnotherKeyOrAnAlteredSignatureIsRefused) {
  const SigningKey key = SigningKey::from_pem(generate_key_pair().private_pem, "key");
  const SigningKey other = SigningKey::from_pem(generate_key_pair().private_pem, "other");
  const Attestation a = sign_attestation(statement(), key);
  // Another public key under the statement's keyId: the ids differ.
  Attestation swapped = a;
  swapped.public_key = other.public_key_hex();
  EXPECT_NE(signature_problem(swapped).find("is not the id of the attestation's public key"), std::string::npos);
  // Another key named consistently (keyId and publicKey both the other's): the signature is not that key's.
  swapped.statement["keyId"] = other.key_id();
  EXPECT_NE(signature_problem(swapped).find("the signature does not verify"), std::string::npos);
  for (size_t i : {size_t(0), size_t(63), size_t(127)}) {
    Attestation flipped = a;
    flipped.signature[i] = flipped.signature[i] == '0' ? '1' : '0';
    EXPECT_NE(signature_problem(flipped), "") << "signature digit " << i;
  }
}

TEST(Attestation, ReaderNamesTheFieldThatIsWrong) {
  const SigningKey key = SigningKey::from_pem(generate_key_pair().private_pem, "key");
  const json good = sign_attestation(statement(), key).document();
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_attestation(text, "a.json");
    } catch (const kindex::Error& e) {
      return e.what();
    }
    return "";
  };
  auto with = [&](const std::function<void(json&)>& change) {
    json d = good;
    change(d);
    return error_of(d.dump());
  };
  EXPECT_NE(with([](json& d) { d["statement"]["verdict"] = "probably"; })
                .find("a.json: statement.verdict = probably: must be replicated or not_replicated"),
            std::string::npos);
  EXPECT_NE(with([](json& d) { d["statement"].erase("rerunDigest"); }).find("statement.rerunDigest"), std::string::npos);
  EXPECT_NE(with([](json& d) { d["statement"]["originalRunDigest"] = "sha256:xyz"; }).find("must be sha256:<64 hex digits>"),
            std::string::npos);
  EXPECT_NE(with([](json& d) { d["publicKey"] = "00"; }).find("publicKey = 00: must be 64 lowercase hex digits"),
            std::string::npos);
  EXPECT_NE(with([](json& d) { d["signature"] = std::string(128, 'G'); }).find("signature"), std::string::npos);
  EXPECT_NE(with([](json& d) { d["kindexAttestation"] = 2; }).find("version 1 only"), std::string::npos);
  EXPECT_NE(with([](json& d) { d["extra"] = true; }).find("extra = true: unknown member"), std::string::npos);
  EXPECT_NE(with([](json& d) { d["statement"]["signedAt"] = "yesterday"; }).find("statement.signedAt"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{\"kindexAttestation\": 1,").find("a.json"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMaxAttestationBytes + 1, ' ')).find("at most 1 MiB"), std::string::npos);
  EXPECT_THROW(SigningKey::from_pem("not a key", "k.pem"), kindex::Error);
  EXPECT_THROW(public_key_hex_from_pem("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n", "k.pub"), kindex::Error);
}
