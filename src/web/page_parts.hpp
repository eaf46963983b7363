#pragma once
// The pieces every page file builds with (pages.cpp defines them): formatting, escaping, the page frame, the plots'
// palette and log scale. Inside src/web only.
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace kindex::web::page_parts {

std::string fmt(const char* format, double v);  // printf of one number
std::string url(const std::string& s);          // a percent-encoded URL component
std::string e(const nlohmann::json& v);         // a JSON value as escaped HTML text ("" for null)
std::string page(const std::string& title, const std::string& body);  // the frame: header, style, main
std::string dl(const std::vector<std::pair<std::string, std::string>>& rows);  // a definition list of HTML values
extern const char* const kPalette[8];
// Where v falls between lo and hi on a log scale, from px_lo to px_hi.
double log_position(double v, double lo, double hi, double px_lo, double px_hi);

}  // namespace kindex::web::page_parts
