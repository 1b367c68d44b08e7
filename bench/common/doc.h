// The one-page reports of urnic's tools (--report=FILE): headings, paragraphs, tables and
// images, written as Markdown or HTML by the file's extension. Everything put in is text, and is
// escaped for the format on the way out, so a scenario's description or a command line can hold
// pipes, angle brackets or ampersands without breaking the table around it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace urnic::bench {

enum class DocFormat { kMarkdown, kHtml };

// .md / .markdown: Markdown; .html / .htm: HTML; anything else: nullopt (the caller refuses it,
// rather than guess).
std::optional<DocFormat> doc_format_for(const std::string& path);

// Markdown: a backslash before every character that could start markup (CommonMark lets any
// ASCII punctuation be escaped so) and before the pipe that would end a table cell; line breaks
// become spaces. HTML: the five entities.
std::string escape_markdown(const std::string& s);
std::string escape_html(const std::string& s);

// "<dir>/<stem>" of a report path: its side files (PNGs) are "<stem>-NAME.png" beside it.
std::string path_stem(const std::string& path);
// The last component of a path (what the page refers to its side files by).
std::string base_name(const std::string& path);
// Now, as "2024-05-01 12:00:00 UTC".
std::string utc_now();

class Doc {
 public:
  Doc(DocFormat f, const std::string& title);

  void heading(const std::string& text);
  void para(const std::string& text);
  // Preformatted text (a command line).
  void code(const std::string& text);
  // Each row has as many cells as `head`; a short row is padded, a long one cut.
  void table(const std::vector<std::string>& head,
             const std::vector<std::vector<std::string>>& rows);
  // `src` is relative to the page (a PNG beside it).
  void image(const std::string& src, const std::string& alt);

  std::string str() const;
  // False with the reason in *err when the file cannot be written.
  bool write(const std::string& path, std::string* err) const;

 private:
  std::string esc(const std::string& s) const;

  DocFormat f_;
  std::string title_;
  std::string body_;
};

}  // namespace urnic::bench
