#include "bench/conform/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bench/common/doc.h"
#include "bench/common/gnuplot.h"

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

std::string numbers(const std::vector<double>& v) {
  std::string s;
  char b[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(b, sizeof(b), "%s%.1f", i == 0 ? "" : ", ", v[i]);
    s += b;
  }
  return s;
}

// A congestion scenario's rate curve in its JSON object ("" for the others).
std::string curve_json(const RateCurve& c) {
  if (c.empty()) return "";
  char b[160];
  std::snprintf(b, sizeof(b),
                ", \"curve\": {\"bin_ms\": %g, \"cnp_from_ms\": %.3f, \"cnp_to_ms\": %.3f, "
                "\"cnps\": %llu, ",
                c.bin_ms, c.cnp_from_ms, c.cnp_to_ms, static_cast<unsigned long long>(c.cnps));
  return b + std::string("\"measured_mbps\": [") + numbers(c.measured_mbps) +
         "], \"expected_mbps\": [" + numbers(c.expected_mbps) + "]}";
}

// The congestion scenarios' curves, one PNG each beside the page ("<stem>-<scenario>.png"):
// the gnuplot script and the files it must write; *images gets (file, scenario) per plot.
std::string curve_script(const std::string& stem, const std::vector<Result>& results,
                         std::vector<std::string>* files,
                         std::vector<std::pair<std::string, std::string>>* images) {
  std::string script =
      "set terminal pngcairo size 960,420 noenhanced font 'sans,10'\nset grid\n"
      "set key top right\nset xlabel 'ms'\nset ylabel 'Mb/s'\nset yrange [0:*]\n";
  for (const Result& r : results) {
    const RateCurve& c = r.outcome.curve;
    if (c.empty()) continue;
    const std::string file = stem + "-" + r.name + ".png";
    files->push_back(file);
    images->emplace_back(bench::base_name(file), r.name);
    std::string rows;
    char b[96];
    for (size_t i = 0; i < c.measured_mbps.size(); ++i) {
      std::snprintf(b, sizeof(b), "%g %.2f %.2f\n", (static_cast<double>(i) + 0.5) * c.bin_ms,
                    c.measured_mbps[i], c.expected_mbps[i]);
      rows += b;
    }
    std::snprintf(b, sizeof(b), "set object 1 rect from %.3f, graph 0 to %.3f, graph 1 ",
                  c.cnp_from_ms, c.cnp_to_ms);
    script += "set output " + bench::gp_quote(file) + "\n$d << EOD\n" + rows + "EOD\n" + b +
              "fc rgb '#ffdddd' fs solid 0.5 behind\nset title " +
              bench::gp_quote(r.name + ": the peer's rate and DCQCN's (CNPs in the shaded span)") +
              "\nplot $d using 1:2 with steps lw 2 title 'the peer', $d using 1:3 with lines "
              "lw 2 dt 2 title 'DCQCN'\nunset object 1\n";
  }
  return script;
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
        f, "%s\n    {\"name\": \"%s\", \"verdict\": \"%s\", \"rule\": \"%s\", \"seen\": \"%s\"%s}",
        i == 0 ? "" : ",", escape(r.name, false).c_str(), to_string(r.outcome.verdict),
        escape(r.rule, false).c_str(), escape(r.outcome.seen, false).c_str(),
        curve_json(r.outcome.curve).c_str());
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
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> images;
  const std::string script = curve_script(bench::path_stem(path), results, &files, &images);
  if (!files.empty()) {
    d.heading("Congestion response");
    std::string why;
    if (!bench::run_gnuplot(script, files, &why)) {
      d.para("Plots not drawn: " + why + ". The curves are in the JSON report (--json).");
    } else {
      d.para(
          "The peer's rate per millisecond as we received it, and the rate DCQCN's rules give "
          "a QP on the same path for the same CNPs (--dcqcn), from the 50 ms before them.");
      for (const auto& [file, name] : images) d.image(file, name);
    }
  }
  return d.write(path, err);
}

}  // namespace urnic::conform
