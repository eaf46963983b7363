// `kindex attest verify FILE...`: checks signed rerun attestations (one JSON line each, as `kindex rerun --sign`
// writes them) against the store: the signature, the statement against the runs and environment the store holds,
// and the signer's key against the keys the store trusts (or --trust). Exit 0 only when every one is verified.
// `kindex attest trust KEY.pub...`: trusts signers' public keys in the store. A thin layer over store/attestations.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/index_common.hpp"
#include "core/error.hpp"
#include "evidence/attestation.hpp"
#include "evidence/reader.hpp"
#include "store/attestations.hpp"

namespace kindex::cli {

namespace {

using nlohmann::json;

int verify(const Common& common, const std::vector<std::string>& files, const std::vector<std::string>& trust) {
  std::set<std::string> trusted;
  for (const auto& t : trust) trusted.insert(evidence::public_key_hex_from_pem(evidence::read_file_bytes(t), t));
  auto store = open_store(common.store, false);
  json report = json::array();
  bool all = true;
  for (const auto& file : files) {
    evidence::for_each_line(file, "attestations", [&](const std::string& line, const std::string& where) {
      json item = {{"where", where}};
      try {
        const evidence::Attestation a = evidence::parse_attestation(line, where);
        const store::AttestationCheck check = store::check_attestation(*store, a, trusted);
        item.update({{"status", check.status}, {"problems", check.problems}, {"statement", a.statement}});
      } catch (const Error& e) {
        item.update({{"status", "malformed"}, {"problems", {e.what()}}});
      }
      all = all && item["status"] == "verified";
      report.push_back(item);
    });
  }
  if (common.json_output) {
    std::cout << report.dump(2) << "\n";
  } else {
    for (const auto& item : report) {
      std::cout << item["where"].get<std::string>() << ": ";
      if (item["status"] == "verified") {
        const json& s = item["statement"];
        std::cout << "verified: " << (s["verdict"] == "replicated" ? "replicated" : "not replicated") << " by "
                  << s["keyId"].get<std::string>() << " on "
                  << s["environment"].value("gpu", json("an unknown GPU")).get<std::string>() << " (rerun "
                  << s["rerunDigest"].get<std::string>() << " of run " << s["originalRunDigest"].get<std::string>()
                  << ")\n";
      } else {
        std::cout << "NOT VERIFIED (" << item["status"].get<std::string>() << ")\n";
        for (const auto& p : item["problems"]) std::cout << "  " << p.get<std::string>() << "\n";
      }
    }
  }
  if (report.empty()) throw Error("kindex attest verify", "files", "", "hold no attestation");
  return all ? 0 : 1;
}

}  // namespace

void add_attest_command(CLI::App& app, Registry& registry) {
  CLI::App* attest = app.add_subcommand("attest", "Signed rerun attestations: verify them, trust signers' keys");
  attest->require_subcommand(1);

  auto common = std::make_shared<Common>();
  auto files = std::make_shared<std::vector<std::string>>();
  auto trust = std::make_shared<std::vector<std::string>>();
  CLI::App* v = attest->add_subcommand(
      "verify", "Check attestations: signature, the statement against the store's runs, the signer's key");
  v->add_option("files", *files, "Attestation files (one JSON line each)")->required();
  v->add_option("--trust", *trust, "Also trust these public keys (PEM) for this check");
  add_common(v, *common);
  v->callback([&registry, common, files, trust] {
    registry.selected = [common, files, trust] { return verify(*common, *files, *trust); };
  });

  auto store = std::make_shared<std::string>();
  auto keys = std::make_shared<std::vector<std::string>>();
  CLI::App* t = attest->add_subcommand("trust", "Trust signers' public keys (PEM, as `kindex keygen` writes FILE.pub)");
  t->add_option("keys", *keys, "Public key files")->required();
  t->add_option("--store", *store,
                std::string("Store: sqlite:PATH, PATH or postgresql://... (default $KINDEX_STORE or ") + kDefaultStore + ")");
  t->callback([&registry, store, keys] {
    registry.selected = [store, keys] {
      auto s = open_store(*store, true);
      for (const auto& k : *keys) {
        const std::string hex = evidence::public_key_hex_from_pem(evidence::read_file_bytes(k), k);
        const bool added = store::trust_key(*s, hex, k);
        std::cout << evidence::key_id_of(hex) << (added ? " trusted" : " was already trusted") << " (" << k << ")\n";
      }
      return 0;
    };
  });
}

}  // namespace kindex::cli
