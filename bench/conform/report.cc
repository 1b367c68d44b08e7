#include "bench/conform/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bench/common/doc.h"

namespace urnic::conform {
namespace {

// XML and JSON both need their specials escaped; what the peer "did" is our own text, but a
// rule or a description may hold quotes or angle brackets.
std::string escape(const std::string& s, bool xml) {
  std::string o;
  for (char ch : s) {
    if (xml && ch == '<') {
      o += "&lt;";
    } else if (xml && ch == '>') {
      o += "&gt;";
    } else if (xml && ch == '&') {
      o += "&amp;";
    } else if (ch == '"') {
      o += xml ? "&quot;" : "\\\"";
    } else if (!xml && ch == '\\') {
      o += "\\\\";
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      o += ' ';
    } else {
      o += ch;
    }
  }
  return o;
}

struct Counts {
  size_t pass = 0, fail = 0, na = 0;
};
Counts count(const std::vector<Result>& rs) {
  Counts c;
  for (const Result& r : rs) {
    if (r.outcome.verdict == Verdict::kPass) ++c.pass;
    if (r.outcome.verdict == Verdict::kFail) ++c.fail;
    if (r.outcome.verdict == Verdict::kNotApplicable) ++c.na;
  }
  return c;
}

FILE* open_out(const std::string& path, std::string* err) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) *err = "cannot write " + path + ": " + std::strerror(errno);
  return f;
}

bool close_out(FILE* f, const std::string& path, std::string* err) {
  if (std::fclose(f) == 0) return true;
  *err = "cannot write " + path + ": " + std::strerror(errno);
  return false;
}

}  // namespace

void print_result(const Result& r) {
  std::printf("%-14s %-24s %s\n%15s rule: %s\n", to_string(r.outcome.verdict), r.name.c_str(),
              r.outcome.seen.c_str(), "", r.rule.c_str());
  std::fflush(stdout);
}

void print_summary(const std::vector<Result>& results) {
  const Counts c = count(results);
  std::printf("\n%-24s %s\n", "scenario", "verdict");
  for (const Result& r : results)
    std::printf("%-24s %s\n", r.name.c_str(), to_string(r.outcome.verdict));
  std::printf("%zu scenarios: %zu PASS, %zu FAIL, %zu NOT-APPLICABLE\n", results.size(), c.pass,
              c.fail, c.na);
}

bool write_junit(const std::string& path, const std::vector<Result>& results, std::string* err) {
  FILE* f = open_out(path, err);
  if (f == nullptr) return false;
  const Counts c = count(results);
  std::fprintf(f,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"urnic-conform\" "
               "tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\">\n",
               results.size(), c.fail, c.na);
  for (const Result& r : results) {
    std::fprintf(f, "  <testcase classname=\"urnic-conform\" name=\"%s\">\n",
                 escape(r.name, true).c_str());
    const std::string seen = escape(r.outcome.seen, true), rule = escape(r.rule, true);
    if (r.outcome.verdict == Verdict::kFail)
      std::fprintf(f, "    <failure message=\"%s\">rule: %s</failure>\n", seen.c_str(),
                   rule.c_str());
    else if (r.outcome.verdict == Verdict::kNotApplicable)
      std::fprintf(f, "    <skipped message=\"%s\"/>\n", seen.c_str());
    else
      std::fprintf(f, "    <system-out>%s (rule: %s)</system-out>\n", seen.c_str(), rule.c_str());
    std::fprintf(f, "  </testcase>\n");
  }
  std::fprintf(f, "</testsuite>\n");
  return close_out(f, path, err);
}

bool write_json(const std::string& path, const std::vector<Result>& results, std::string* err) {
  FILE* f = open_out(path, err);
  if (f == nullptr) return false;
  const Counts c = count(results);
  std::fprintf(f, "{\n  \"pass\": %zu,\n  \"fail\": %zu,\n  \"not_applicable\": %zu,\n", c.pass,
               c.fail, c.na);
  std::fprintf(f, "  \"scenarios\": [");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(
        f, "%s\n    {\"name\": \"%s\", \"verdict\": \"%s\", \"rule\": \"%s\", \"seen\": \"%s\"}",
        i == 0 ? "" : ",", escape(r.name, false).c_str(), to_string(r.outcome.verdict),
        escape(r.rule, false).c_str(), escape(r.outcome.seen, false).c_str());
  }
  std::fprintf(f, "\n  ]\n}\n");
  return close_out(f, path, err);
}

bool write_page(const std::string& path, const RunInfo& run, const std::vector<Result>& results,
                std::string* err) {
  const Counts c = count(results);
  bench::Doc d(*bench::doc_format_for(path), "urnic-conform report");
  d.para("Peer " + run.peer + " (perftest server), from " + run.local + "; " + bench::utc_now() +
         ".");
  d.para(std::to_string(results.size()) + " scenarios: " + std::to_string(c.pass) + " PASS, " +
         std::to_string(c.fail) + " FAIL, " + std::to_string(c.na) + " NOT-APPLICABLE.");
  if (!run.faults.empty())
    d.para("Faults were injected (" + run.faults +
           "): the verdicts assume a clean link, so a FAIL may be the injection's doing.");
  std::vector<std::vector<std::string>> rows;
  for (const Result& r : results)
    rows.push_back({r.name, r.rule, to_string(r.outcome.verdict), r.outcome.seen});
  d.table({"scenario", "rule", "verdict", "what the peer did"}, rows);
  return d.write(path, err);
}

}  // namespace urnic::conform
