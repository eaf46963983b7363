#pragma once
// The feed of followed things (store/feed.hpp) as words and as Atom 1.0 (RFC 4287): the one writer of both, for
// `kindex feed` and the server's /feed.xml and /feeds/<kind>/<value>.xml.
#include <string>

#include <nlohmann/json.hpp>

namespace kindex::web {

// One line saying what a feed event is: "Record moved in NAME on GPU: A 1.20 µs → B 1.10 µs (0.92×)".
std::string feed_event_title(const nlohmann::json& event);
// The feed as an Atom document. `base`: the absolute address the links start with ("http://host:port"; empty for
// relative links), `self`: the path it is served at, `title`: the feed's title.
std::string atom_feed(const nlohmann::json& feed, const std::string& base, const std::string& self,
                      const std::string& title);

}  // namespace kindex::web
