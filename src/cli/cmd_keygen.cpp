// `kindex keygen FILE`: an Ed25519 key pair for signing rerun attestations (`kindex rerun --sign FILE`): the private
// key in FILE (PEM, readable by its owner only), the public key in FILE.pub (PEM, what others trust with
// `kindex attest trust`). Never overwrites a file.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "evidence/attestation.hpp"

namespace kindex::cli {

namespace {

// Creates `path` with `mode` and writes `text`; an existing file is an error (a key is never replaced by accident).
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    throw Error("kindex keygen", "file", path,
                errno == EEXIST ? "already exists: choose another name (keys are never overwritten)"
                                : std::string("cannot create: ") + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw Error("kindex keygen", "file", path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

void add_keygen_command(CLI::App& app, Registry& registry) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "keygen", "Make an Ed25519 key pair for signing rerun attestations: FILE (private) and FILE.pub (public)");
  cmd->add_option("file", *file, "Where to write the private key (the public key goes to FILE.pub)")->required();
  cmd->callback([&registry, file] {
    registry.selected = [file] {
      const evidence::KeyPair keys = evidence::generate_key_pair();
      std::error_code ec;
      for (const std::string path : {*file, *file + ".pub"})  // checked before either is written
        if (std::filesystem::exists(path, ec))
          throw Error("kindex keygen", "file", path, "already exists: choose another name (keys are never overwritten)");
      write_new_file(*file, keys.private_pem, 0600);
      write_new_file(*file + ".pub", keys.public_pem, 0644);
      std::cout << "key " << keys.key_id << ": private " << *file << ", public " << *file << ".pub\n"
                << "sign a rerun with `kindex rerun RUN --sign " << *file << "`; others trust it with "
                << "`kindex attest trust " << *file << ".pub`\n";
      return 0;
    };
  });
}

}  // namespace kindex::cli
