#pragma once
// Signed rerun attestations in the store (the document and its signature: evidence/attestation.hpp).
//
// What a rerun attests to is read from the store, never typed in: its original's runDigest (the rerun's
// reproduces_run label), its own runDigest, its environment (GPU, architecture, driver, CUDA toolkit, clocks: locked
// and the SM clock at the start, library versions, the ExecutionEnvironment digest) and the verdict with its basis:
// "replicated" when the rerun ran the run's own implementation and passed the protocol's correctness check within
// the workload's tolerance (its status), "not_replicated" otherwise. Timing is not part of the verdict (a rerun runs
// on another machine); the pages give the ratio of the two latencies beside it.
//
// An attestation is shown as verified only when its signature verifies, its statement equals what the store says
// of that rerun (so it cannot be replayed onto another run or claim another environment or verdict), and its key
// is one the store trusts. Everything else is reported with what is wrong.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evidence/attestation.hpp"
#include "store/store.hpp"

namespace kindex::store {

// {originalRunDigest, rerunDigest, environment, verdict, basis} of a rerun in this store (id, id prefix or
// runDigest); kindex::Error naming the run when it is absent or re-measured no run.
nlohmann::json attestation_claims(Store& store, const std::string& rerun);

struct AttestationCheck {
  // verified | bad_signature | rerun_missing | mismatch | unknown_key (the first problem found, in that order)
  std::string status;
  std::vector<std::string> problems;
  bool verified() const { return status == "verified"; }
};
// `trusted`: public keys (64 hex) trusted for this check besides the store's attestation_keys.
AttestationCheck check_attestation(Store& store, const evidence::Attestation& attestation,
                                   const std::set<std::string>& trusted = {});

// Keeps an attestation with its runs (idempotent; true when inserted). A signature that does not verify is a
// kindex::Error naming `where`: the store keeps no forged document. Runs it names may arrive later.
// `created_at`: when it was first kept (an import keeps the exporting store's); empty for now.
bool keep_attestation(Store& store, const evidence::Attestation& attestation, const std::string& where,
                      const std::string& created_at = "");
// Trusts a signer's public key (64 hex) in this store; true when newly trusted.
bool trust_key(Store& store, const std::string& public_key_hex, const std::string& name);

// The attestations naming this run (as original or rerun), oldest first, each checked:
// {id, keyId, gpu, verdict, signedAt, originalRunDigest, rerunDigest, rerunId (null when absent), status, problems,
//  href: the document's address under the API}.
nlohmann::json attestations_of(Store& store, const std::string& run_digest);
// The stored document (one JSON line) of an attestation by id (its digest); kindex::Error when none.
std::string attestation_document(Store& store, const std::string& id);

}  // namespace kindex::store
