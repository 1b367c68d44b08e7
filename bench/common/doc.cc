#include "bench/common/doc.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace urnic::bench {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  if (s.size() <= n) return false;  // ".md" alone names no file
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - n + i])) != suffix[i]) return false;
  return true;
}

}  // namespace

std::optional<DocFormat> doc_format_for(const std::string& path) {
  if (ends_with(path, ".md") || ends_with(path, ".markdown")) return DocFormat::kMarkdown;
  if (ends_with(path, ".html") || ends_with(path, ".htm")) return DocFormat::kHtml;
  return std::nullopt;
}

std::string escape_markdown(const std::string& s) {
  // The characters that open emphasis, code, links, raw HTML, entities, headings and
  // strikethrough, the table cell separator, and the escape character itself.
  static constexpr const char* kSpecial = "\\`*_[]<>|&#~";
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    if (ch == '\n' || ch == '\r' || ch == '\t') {
      o += ' ';
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      continue;  // no control characters in a page
    } else {
      if (std::strchr(kSpecial, ch) != nullptr) o += '\\';
      o += ch;
    }
  }
  return o;
}

std::string escape_html(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\n') o += ch;
    }
  }
  return o;
}

std::string path_stem(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  return path.substr(0, dot);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

Doc::Doc(DocFormat f, const std::string& title) : f_(f), title_(title) {}

std::string Doc::esc(const std::string& s) const {
  return f_ == DocFormat::kHtml ? escape_html(s) : escape_markdown(s);
}

void Doc::heading(const std::string& text) {
  body_ += f_ == DocFormat::kHtml ? "<h2>" + esc(text) + "</h2>\n" : "## " + esc(text) + "\n\n";
}

void Doc::para(const std::string& text) {
  body_ += f_ == DocFormat::kHtml ? "<p>" + esc(text) + "</p>\n" : esc(text) + "\n\n";
}

void Doc::code(const std::string& text) {
  if (f_ == DocFormat::kHtml) {
    body_ += "<pre>" + escape_html(text) + "</pre>\n";
    return;
  }
  // A fence longer than any run of backticks in the text cannot be closed by it.
  size_t run = 0, longest = 0;
  for (char ch : text) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  body_ += fence + "\n" + text + "\n" + fence + "\n\n";
}

void Doc::table(const std::vector<std::string>& head,
                const std::vector<std::vector<std::string>>& rows) {
  const bool html = f_ == DocFormat::kHtml;
  auto row = [&](const std::vector<std::string>& cells, bool th) {
    std::string line = html ? "<tr>" : "|";
    for (size_t i = 0; i < head.size(); ++i) {
      const std::string c = i < cells.size() ? esc(cells[i]) : "";
      line += html ? (th ? "<th>" + c + "</th>" : "<td>" + c + "</td>") : " " + c + " |";
    }
    body_ += line + (html ? "</tr>\n" : "\n");
  };
  if (html) body_ += "<table>\n";
  row(head, true);
  if (!html) {
    body_ += "|";
    for (size_t i = 0; i < head.size(); ++i) body_ += " --- |";
    body_ += "\n";
  }
  for (const auto& r : rows) row(r, false);
  body_ += html ? "</table>\n" : "\n";
}

void Doc::image(const std::string& src, const std::string& alt) {
  if (f_ == DocFormat::kHtml) {
    body_ += "<p><img src=\"" + escape_html(src) + "\" alt=\"" + escape_html(alt) + "\"></p>\n";
    return;
  }
  // A link destination in angle brackets may hold spaces; '<', '>' and line breaks it may not.
  std::string dest;
  for (char ch : src) {
    if (ch == '<' || ch == '>' || ch == '\\') dest += '\\';
    dest += ch;
  }
  body_ += "![" + escape_markdown(alt) + "](<" + dest + ">)\n\n";
}

std::string Doc::str() const {
  if (f_ == DocFormat::kMarkdown) return "# " + esc(title_) + "\n\n" + body_;
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + esc(title_) +
         "</title>\n<style>body{font-family:sans-serif;max-width:70em;margin:auto}"
         "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px;"
         "text-align:left}</style></head>\n<body>\n<h1>" +
         esc(title_) + "</h1>\n" + body_ + "</body></html>\n";
}

bool Doc::write(const std::string& path, std::string* err) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string s = str();
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  if (std::fclose(f) != 0 || !ok) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace urnic::bench
