#include "store/attestations.hpp"

#include "core/error.hpp"
#include "evidence/manifest.hpp"
#include "store/query_internal.hpp"
#include "store/rows.hpp"

namespace kindex::store {

using nlohmann::json;

namespace {

// A value as a problem quotes it: short enough for a line.
std::string quoted(const json& v) {
  std::string s = v.dump();
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

json or_null(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? json() : *it;
}

}  // namespace

json attestation_claims(Store& store, const std::string& rerun) {
  const std::string id = query_internal::find_id(store, "benchmark_runs", "run_digest", rerun, "run");
  auto rows = store.db().query(
      "SELECT x.run_digest, p.reproduces_run_digest, p.same_implementation, x.status, x.protocol_key, "
      "x.environment_key, rm.manifest, w.manifest FROM benchmark_runs x JOIN run_manifests rm ON rm.run_id = x.id "
      "JOIN workloads w ON w.id = x.workload_id LEFT JOIN run_reruns p ON p.run_id = x.id WHERE x.id = ?",
      {id});
  if (rows.empty() || rows[0].is_null(1))
    throw Error("attestation", "run", rerun, "is not a rerun: it re-measured no run (kindex rerun)");
  const Row& r = rows[0];
  const json run_manifest = json::parse(r.text(6));
  const json& env = member_or_empty(run_manifest, "environment");
  const json& spec = member_or_empty(env, "spec");
  const json& software = member_or_empty(spec, "software");
  const json& hardware = member_or_empty(spec, "hardware");
  auto clock = store.db().query(
      "SELECT value FROM measurements WHERE run_id = ? AND metric = 'sm_clock' ORDER BY statistic LIMIT 1", {id});
  const json environment = {
      {"environmentDigest", r.text(5)},
      {"gpu", or_null(hardware, "product")},
      {"architecture", or_null(hardware, "architecture")},
      {"driver", or_null(software, "driver")},
      {"cudaToolkit", or_null(software, "cudaToolkit")},
      {"clocks", {{"locked", or_null(member_or_empty(spec, "settings"), "clocksLocked")},
                  {"smMhzAtStart", clock.empty() ? json() : json(clock[0].real(0))}}},
      {"libraries", member_or_empty(software, "libraries")}};
  const json workload = json::parse(r.text(7));
  const bool same = r.integer(2) != 0;
  const std::string status = r.text(3);
  const json basis = {{"status", status},
                      {"sameImplementation", same},
                      {"protocolDigest", r.text(4)},
                      {"tolerance", member_or_empty(member_or_empty(workload, "spec"), "correctness")}};
  return {{"originalRunDigest", r.text(1)},
          {"rerunDigest", r.text(0)},
          {"environment", environment},
          {"verdict", same && status == "passed" ? "replicated" : "not_replicated"},
          {"basis", basis}};
}

AttestationCheck check_attestation(Store& store, const evidence::Attestation& a, const std::set<std::string>& trusted) {
  AttestationCheck out;
  auto problem = [&](const std::string& status, const std::string& what) {
    if (out.status.empty()) out.status = status;
    out.problems.push_back(what);
  };
  if (std::string bad = evidence::signature_problem(a); !bad.empty()) {
    problem("bad_signature", bad);
    return out;  // nothing the statement says can be relied on
  }
  const json& s = a.statement;
  const std::string rerun = s.value("rerunDigest", "");
  if (store.db().query("SELECT 1 FROM benchmark_runs WHERE run_digest = ?", {rerun}).empty()) {
    problem("rerun_missing", "the rerun " + rerun + " is not in this store: its digests cannot be checked");
  } else {
    json claims;
    try {
      claims = attestation_claims(store, rerun);
    } catch (const Error& e) {
      problem("mismatch", "the run " + rerun + " " + e.problem());
    }
    for (const auto& [field, value] : claims.items())
      if (s.value(field, json()) != value)
        problem("mismatch", "statement." + field + " is " + quoted(s.value(field, json())) + ", the store says " +
                                quoted(value));
  }
  const std::string key_id = s.value("keyId", "");
  const bool known = trusted.count(a.public_key) ||
                     !store.db().query("SELECT 1 FROM attestation_keys WHERE key_id = ? AND public_key = ?",
                                       {key_id, a.public_key}).empty();
  if (!known) problem("unknown_key", "the key " + key_id + " is not one this store trusts (kindex attest trust KEY.pub)");
  if (out.status.empty()) out.status = "verified";
  return out;
}

bool keep_attestation(Store& store, const evidence::Attestation& a, const std::string& where, const std::string& created_at) {
  if (std::string bad = evidence::signature_problem(a); !bad.empty())
    throw Error(where, "signature", a.statement.value("keyId", ""), bad + ": not kept");
  return insert_row(store.db(), "run_attestations",
                    {{"id", a.digest()},
                     {"rerunDigest", a.statement.at("rerunDigest")},
                     {"originalRunDigest", a.statement.at("originalRunDigest")},
                     {"keyId", a.statement.at("keyId")},
                     {"document", a.line()},
                     {"createdAt", created_at.empty() ? evidence::utc_timestamp_now() : created_at}},
                    where);
}

bool trust_key(Store& store, const std::string& public_key_hex, const std::string& name) {
  const std::string id = evidence::key_id_of(public_key_hex);
  auto held = store.db().query("SELECT public_key FROM attestation_keys WHERE key_id = ?", {id});
  if (!held.empty() && held[0].text(0) != public_key_hex)
    throw Error("attestation keys", "key", id, "another public key with this id is already trusted here");
  return insert_row(store.db(), "attestation_keys",
                    {{"keyId", id}, {"publicKey", public_key_hex}, {"name", name},
                     {"createdAt", evidence::utc_timestamp_now()}},
                    "attestation keys");
}

json attestations_of(Store& store, const std::string& run_digest) {
  json out = json::array();
  for (const auto& r : store.db().query(
           "SELECT a.id, a.document, x.id FROM run_attestations a LEFT JOIN benchmark_runs x ON x.run_digest = "
           "a.rerun_digest WHERE a.original_run_digest = ? OR a.rerun_digest = ? ORDER BY a.created_at, a.id",
           {run_digest, run_digest})) {
    const std::string id = r.text(0);
    json item = {{"id", id}, {"href", "/api/attestations/" + id}, {"rerunId", query_internal::opt_text(r, 2)}};
    try {
      const evidence::Attestation a = evidence::parse_attestation(r.text(1), "attestation " + id);
      const AttestationCheck check = check_attestation(store, a);
      const json& s = a.statement;
      item.update({{"keyId", s["keyId"]},
                   {"gpu", s["environment"].value("gpu", json())},
                   {"verdict", s["verdict"]},
                   {"signedAt", s["signedAt"]},
                   {"originalRunDigest", s["originalRunDigest"]},
                   {"rerunDigest", s["rerunDigest"]},
                   {"status", check.status},
                   {"problems", check.problems}});
    } catch (const Error& e) {
      item.update({{"status", "malformed"}, {"problems", {e.what()}}});
    }
    out.push_back(std::move(item));
  }
  return out;
}

std::string attestation_document(Store& store, const std::string& id) {
  auto rows = store.db().query("SELECT document FROM run_attestations WHERE id = ?", {id});
  if (rows.empty()) throw Error("index", "attestation", id, "no such attestation");
  return rows[0].text(0);
}

}  // namespace kindex::store
