#pragma once
// A record's plain members and their JSON keys in one table, read by both halves of its codec, so that writing a
// record and reading it back cannot drift apart. A table may cover part of a record (the rest coded by hand).
//   constexpr auto kFields = KINDEX_JSON_FIELDS(SetUpRecord, status, wall_s, ...);  // each key its member's name
//   fields_to_json(record, kFields);  fields_from_json<SetUpRecord>(j, kFields);  (or write_fields, read_fields)
#include <optional>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace kindex::runner {

template <class Record, class Member>
struct JsonField {
  const char* key;
  Member Record::*member;
  bool skip_empty;  // optional_field: written only when unlike Member{}
};

// Always written (a std::optional member, though, only when it holds a value).
template <class Record, class Member>
constexpr JsonField<Record, Member> field(const char* key, Member Record::*member) {
  return {key, member, false};
}
// Written only when set, so records stay short: "", false, 0 or an empty map is left out.
template <class Record, class Member>
constexpr JsonField<Record, Member> optional_field(const char* key, Member Record::*member) {
  return {key, member, true};
}

// field("m", &Record::m), ... (optional_field with KINDEX_JSON_OPTIONAL_FIELDS) for each member named, as a tuple.
#define KINDEX_JSON_FIELDS(Record, ...) \
  std::make_tuple(KINDEX_JSON_FIELDS_EXPAND(KINDEX_JSON_FIELDS_EACH(::kindex::runner::field, Record, __VA_ARGS__)))
#define KINDEX_JSON_OPTIONAL_FIELDS(Record, ...) \
  std::make_tuple(                               \
      KINDEX_JSON_FIELDS_EXPAND(KINDEX_JSON_FIELDS_EACH(::kindex::runner::optional_field, Record, __VA_ARGS__)))
// The preprocessor's loop over the members (__VA_OPT__ recursion; EXPAND's rescans allow 60 members and more).
#define KINDEX_JSON_FIELDS_EACH(make, Record, member, ...) \
  make(#member, &Record::member) __VA_OPT__(, KINDEX_JSON_FIELDS_AGAIN KINDEX_JSON_FIELDS_PARENS(make, Record, __VA_ARGS__))
#define KINDEX_JSON_FIELDS_AGAIN() KINDEX_JSON_FIELDS_EACH
#define KINDEX_JSON_FIELDS_PARENS ()
#define KINDEX_JSON_FIELDS_EXPAND(...) KINDEX_JSON_FIELDS_EXPAND4(KINDEX_JSON_FIELDS_EXPAND4(__VA_ARGS__))
#define KINDEX_JSON_FIELDS_EXPAND4(...) KINDEX_JSON_FIELDS_EXPAND3(KINDEX_JSON_FIELDS_EXPAND3(__VA_ARGS__))
#define KINDEX_JSON_FIELDS_EXPAND3(...) KINDEX_JSON_FIELDS_EXPAND2(KINDEX_JSON_FIELDS_EXPAND2(__VA_ARGS__))
#define KINDEX_JSON_FIELDS_EXPAND2(...) KINDEX_JSON_FIELDS_EXPAND1(KINDEX_JSON_FIELDS_EXPAND1(__VA_ARGS__))
#define KINDEX_JSON_FIELDS_EXPAND1(...) KINDEX_JSON_FIELDS_EXPAND0(KINDEX_JSON_FIELDS_EXPAND0(__VA_ARGS__))
#define KINDEX_JSON_FIELDS_EXPAND0(...) __VA_ARGS__

namespace json_fields_detail {
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class Record, class Member>
void write(nlohmann::json& j, const Record& r, const JsonField<Record, Member>& f) {
  const Member& v = r.*f.member;
  if constexpr (is_optional<Member>::value) {
    if (v) j[f.key] = *v;
  } else if (!f.skip_empty || !(v == Member{})) {
    j[f.key] = v;
  }
}

// A key present replaces the member; an absent one leaves it as it is (the record's default).
template <class Record, class Member>
void read(const nlohmann::json& j, Record& r, const JsonField<Record, Member>& f) {
  Member& v = r.*f.member;
  if constexpr (is_optional<Member>::value) {
    if (j.contains(f.key)) v = j[f.key].template get<typename Member::value_type>();
  } else {
    v = j.value(f.key, v);
  }
}
}  // namespace json_fields_detail

template <class Record, class... Fields>
void write_fields(nlohmann::json& j, const Record& r, const std::tuple<Fields...>& fields) {
  std::apply([&](const auto&... f) { (json_fields_detail::write(j, r, f), ...); }, fields);
}

template <class Record, class... Fields>
void read_fields(const nlohmann::json& j, Record& r, const std::tuple<Fields...>& fields) {
  std::apply([&](const auto&... f) { (json_fields_detail::read(j, r, f), ...); }, fields);
}

template <class Record, class Fields>
nlohmann::json fields_to_json(const Record& r, const Fields& fields) {
  nlohmann::json j = nlohmann::json::object();
  write_fields(j, r, fields);
  return j;
}

template <class Record, class Fields>
Record fields_from_json(const nlohmann::json& j, const Fields& fields) {
  Record r;
  read_fields(j, r, fields);
  return r;
}

}  // namespace kindex::runner
