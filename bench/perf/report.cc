#include "bench/perf/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "bench/common/doc.h"
#include "bench/common/gnuplot.h"

namespace urnic::perf {
namespace {

struct BwRow {
  std::string test;
  BwReport r;
};
struct LatRow {
  std::string test;
  uint64_t size = 0, iters = 0;
  LatStats s;
  bool duration = false;  // -D: only the average and the transaction rate
  double avg_us = 0, tps = 0;
};
struct OlRecord {
  OpenLoopRun run;
  OpenLoopConfig cfg;
  std::vector<OpenLoopInterval> iv;
  Histogram h;
};
// What the run printed, in order. One run per process, so one record.
struct Recorded {
  std::vector<BwRow> bw;
  std::vector<LatRow> lat;
  std::vector<OlRecord> ol;
};
Recorded& recorded() {
  static Recorded r;
  return r;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string num(uint64_t v) { return std::to_string(v); }
std::string us(uint64_t ns) { return fmt("%.2f", static_cast<double>(ns) / 1e3); }
// Log-scale axes have no place for zero: a latency of 0 ns is drawn at 1 ns.
std::string us_log(uint64_t ns) {
  return fmt("%.4g", static_cast<double>(std::max<uint64_t>(ns, 1)) / 1e3);
}

std::string shell_words(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_=.,/:%@+") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      a = q + "'";
    }
    s += (i == 0 ? "" : " ") + a;
  }
  return s;
}

// The plots: a gnuplot script that draws them all, and the files it must write.
struct Plots {
  std::string script;
  std::vector<std::string> files;
  // The image (page-relative name) and its caption, per section.
  std::string bw, lat;
  std::vector<std::vector<std::pair<std::string, std::string>>> ol;

  std::string add(const std::string& stem, const std::string& suffix, const std::string& body) {
    const std::string file = stem + "-" + suffix + ".png";
    files.push_back(file);
    script += "set output " + bench::gp_quote(file) + "\n" + body +
              "unset logscale\nset autoscale\nset format x\nset key inside top left\nunset xtics\n"
              "set xtics\nunset y2tics\nset ytics mirror\n";
    return bench::base_name(file);
  }
};

std::string datablock(const std::string& name, const std::string& rows) {
  return "$" + name + " << EOD\n" + rows + "EOD\n";
}

// Size on a log2 axis, one line per test: bandwidth, or latency (typical and p99).
void plot_sizes(const Options& o, const std::string& stem, Plots* p) {
  const Recorded& r = recorded();
  std::map<std::string, std::string> bw, lat;
  for (const BwRow& b : r.bw)
    bw[b.test] +=
        num(b.r.size) + " " + fmt("%.6g", b.r.bw_avg) + " " + fmt("%.6g", b.r.msg_rate) + "\n";
  for (const LatRow& l : r.lat)
    lat[l.test] += num(l.size) + " " + fmt("%.6g", l.duration ? l.avg_us : l.s.typical) + " " +
                   fmt("%.6g", l.duration ? l.avg_us : l.s.p99) + "\n";
  if (!bw.empty()) {
    std::string body, plot = "plot ";
    int i = 0;
    for (const auto& [test, rows] : bw) {
      body += datablock("bw" + std::to_string(i), rows);
      plot += std::string(i == 0 ? "" : ", ") + "$bw" + std::to_string(i) +
              " using 1:2 with linespoints lw 2 title " + bench::gp_quote(test);
      ++i;
    }
    body +=
        "set title 'urnic-perf: bandwidth by message size'\nset logscale x 2\nset key outside "
        "right top\nset format x '%.0b "
        "%BB'\n"
        "set xlabel 'message size (bytes)'\nset ylabel 'BW average (" +
        std::string(o.gbits ? "Gb/s" : "MB/s") + ")'\nset yrange [0:*]\n" + plot +
        "\nset autoscale y\n";
    p->bw = p->add(stem, "bw", body);
  }
  if (!lat.empty()) {
    std::string body, plot = "plot ";
    int i = 0;
    for (const auto& [test, rows] : lat) {
      body += datablock("lat" + std::to_string(i), rows);
      const std::string d = "$lat" + std::to_string(i);
      plot += std::string(i == 0 ? "" : ", ") + d + " using 1:2 with linespoints lw 2 title " +
              bench::gp_quote(test + " typical") + ", " + d +
              " using 1:3 with linespoints dt 2 title " + bench::gp_quote(test + " p99");
      ++i;
    }
    body +=
        "set title 'urnic-perf: latency by message size'\nset logscale x 2\nset key outside right "
        "top\nset format x '%.0b "
        "%BB'\nset logscale y\n"
        "set xlabel 'message size (bytes)'\nset ylabel 'latency (us)'\n" +
        plot + "\n";
    p->lat = p->add(stem, "lat", body);
  }
}

// The quantiles drawn on the percentile plot: q = 1 - 10^(-k/10), as far as the samples reach.
std::vector<std::pair<double, uint64_t>> percentile_curve(const Histogram& h) {
  std::vector<std::pair<double, uint64_t>> pts;
  if (h.count() == 0) return pts;
  const double kmax = 10 * std::log10(static_cast<double>(h.count()));
  for (int k = 0; k <= kmax; ++k) {
    const double q = 1 - std::pow(10.0, -k / 10.0);
    pts.emplace_back(1 / (1 - q), h.quantile(q));
  }
  pts.emplace_back(static_cast<double>(h.count()), h.max());
  return pts;
}

void plot_open_loop(const std::string& stem, Plots* p) {
  const Recorded& r = recorded();
  for (size_t k = 0; k < r.ol.size(); ++k) {
    const OlRecord& o = r.ol[k];
    const std::string tag = "ol" + std::to_string(k + 1);
    std::vector<std::pair<std::string, std::string>> imgs;
    std::string series, curve;
    for (const OpenLoopInterval& iv : o.iv)
      series += fmt("%.3f", iv.t_end) + " " + fmt("%.6g", o.cfg.rate / 1e6) + " " +
                fmt("%.6g", iv.achieved / 1e6) + " " + us_log(iv.p50) + " " + us_log(iv.p99) + " " +
                us_log(iv.p999) + " " + us_log(iv.max) + "\n";
    for (const auto& [x, ns] : percentile_curve(o.h))
      curve += fmt("%.6g", x) + " " + us_log(ns) + "\n";
    const std::string what = o.run.test + ", " + num(o.run.size) + " B, " + num(o.run.qps) +
                             " QPs, target " + fmt("%.4g", o.cfg.rate / 1e6) + " Mpps";
    if (!series.empty()) {
      const std::string d = datablock(tag + "s", series), ds = "$" + tag + "s";
      imgs.emplace_back(
          p->add(stem, tag + "-rate",
                 d + "set title " + bench::gp_quote("open loop, offered vs achieved: " + what) +
                     "\nset xlabel 'time (s)'\nset ylabel 'rate (Mpps)'\nset xrange [0:*]\nset "
                     "yrange [0:*]\n"
                     "plot " +
                     ds + " using 1:2 with lines lw 2 title 'offered', " + ds +
                     " using 1:3 with linespoints lw 2 title 'achieved'\nset autoscale y\n"),
          "offered and achieved rate per second");
      imgs.emplace_back(
          p->add(stem, tag + "-latency",
                 d + "set title " + bench::gp_quote("open loop, latency per second: " + what) +
                     "\nset xlabel 'time (s)'\nset ylabel 'latency from the due time (us)'\nset "
                     "xrange [0:*]\n"
                     "set logscale y\nplot " +
                     ds + " using 1:4 with linespoints title 'p50', " + ds +
                     " using 1:5 with linespoints title 'p99', " + ds +
                     " using 1:6 with linespoints title 'p99.9', " + ds +
                     " using 1:7 with lines dt 2 title 'max'\n"),
          "p50, p99, p99.9 and max latency per second (log scale)");
    }
    if (!curve.empty())
      imgs.emplace_back(
          p->add(stem, tag + "-percentiles",
                 datablock(tag + "p", curve) + "set title " +
                     bench::gp_quote("open loop, latency by percentile: " + what) +
                     "\nset logscale x\nset logscale y\nset xtics ('0%%' 1, '90%%' 10, '99%%' 100, "
                     "'99.9%%' 1000, '99.99%%' 10000, '99.999%%' 100000, '99.9999%%' 1000000)\n"
                     "set xlabel 'percentile'\nset ylabel 'latency from the due time (us)'\n"
                     "plot $" +
                     tag + "p using 1:2 with linespoints lw 2 title 'whole run'\n"),
          "latency by percentile over the whole run (log scales)");
    p->ol.push_back(imgs);
  }
}

void bw_section(const Options& o, bench::Doc& d, const Plots& p, bool plots) {
  const Recorded& r = recorded();
  if (r.bw.empty()) return;
  const std::string u = o.gbits ? "Gb/s" : "MB/s";
  d.heading("Bandwidth");
  std::vector<std::vector<std::string>> rows;
  for (const BwRow& b : r.bw)
    rows.push_back({b.test, num(b.r.size), num(b.r.iters), fmt("%.2f", b.r.bw_peak),
                    fmt("%.2f", b.r.bw_avg), fmt("%.6f", b.r.msg_rate)});
  d.table({"test", "bytes", "iterations", "BW peak [" + u + "]", "BW average [" + u + "]",
           "MsgRate [Mpps]"},
          rows);
  if (plots && !p.bw.empty()) d.image(p.bw, "bandwidth by message size");
}

void lat_section(bench::Doc& d, const Plots& p, bool plots) {
  const Recorded& r = recorded();
  if (r.lat.empty()) return;
  d.heading("Latency");
  std::vector<std::vector<std::string>> rows;
  for (const LatRow& l : r.lat) {
    if (l.duration)
      rows.push_back({l.test, num(l.size), num(l.iters), "", "", fmt("%.2f", l.avg_us), "", "", "",
                      "", fmt("%.0f", l.tps)});
    else
      rows.push_back({l.test, num(l.size), num(l.iters), fmt("%.2f", l.s.min),
                      fmt("%.2f", l.s.typical), fmt("%.2f", l.s.avg), fmt("%.2f", l.s.stdev),
                      fmt("%.2f", l.s.p99), fmt("%.2f", l.s.p999), fmt("%.2f", l.s.max), ""});
  }
  d.table({"test", "bytes", "iterations", "t_min [us]", "t_typical [us]", "t_avg [us]",
           "t_stdev [us]", "99% [us]", "99.9% [us]", "t_max [us]", "tps (-D)"},
          rows);
  if (plots && !p.lat.empty()) d.image(p.lat, "latency by message size");
}

void open_loop_sections(bench::Doc& d, const Plots& p, bool plots) {
  const Recorded& r = recorded();
  for (size_t k = 0; k < r.ol.size(); ++k) {
    const OlRecord& o = r.ol[k];
    const Histogram& h = o.h;
    const double achieved =
        o.run.seconds > 0 ? static_cast<double>(o.run.messages) / o.run.seconds : 0;
    d.heading("Open loop " + std::to_string(k + 1) + ": " + o.run.test + ", " + num(o.run.size) +
              " B, " + num(o.run.qps) + " QPs, " +
              (o.cfg.arrival == Arrival::kPoisson ? "Poisson" : "constant") + " arrivals");
    d.para("Offered " + fmt("%.4f", o.cfg.rate / 1e6) + " Mpps, achieved " +
           fmt("%.4f", achieved / 1e6) + " Mpps (" +
           fmt("%.2f", o.cfg.rate > 0 ? 100 * achieved / o.cfg.rate : 0) +
           " % of the offered) over " + fmt("%.3f", o.run.seconds) + " s, " + num(o.run.messages) +
           " requests. Latency runs from when each request fell due (no coordinated omission).");
    d.table({"min [us]", "p50 [us]", "p90 [us]", "p99 [us]", "p99.9 [us]", "p99.99 [us]",
             "max [us]", "mean [us]"},
            {{us(h.min()), us(h.quantile(0.5)), us(h.quantile(0.9)), us(h.quantile(0.99)),
              us(h.quantile(0.999)), us(h.quantile(0.9999)), us(h.max()),
              fmt("%.2f", h.mean() / 1e3)}});
    std::vector<std::vector<std::string>> rows;
    for (const OpenLoopInterval& iv : o.iv)
      rows.push_back({fmt("%.3f", iv.t_end), fmt("%.4f", o.cfg.rate / 1e6),
                      fmt("%.4f", iv.achieved / 1e6), num(iv.completions), us(iv.p50), us(iv.p99),
                      us(iv.p999), us(iv.max)});
    d.para("Per second:");
    d.table({"t [s]", "offered [Mpps]", "achieved [Mpps]", "completions", "p50 [us]", "p99 [us]",
             "p99.9 [us]", "max [us]"},
            rows);
    if (plots && k < p.ol.size())
      for (const auto& [img, alt] : p.ol[k]) d.image(img, alt);
  }
}

}  // namespace

// Rows are kept for the page (--report) and for a closed-loop run's JSON (--json).
static bool recording(const Options& o) { return !o.report.empty() || !o.json.empty(); }

void record_bw_row(const Options& o, Test t, const BwReport& r) {
  if (recording(o)) recorded().bw.push_back({test_name(t), r});
}

void record_lat_row(const Options& o, Test t, uint64_t size, uint64_t iters, const LatStats& s) {
  if (recording(o)) recorded().lat.push_back({test_name(t), size, iters, s, false, 0, 0});
}

void record_lat_duration_row(const Options& o, Test t, uint64_t size, uint64_t iters, double avg_us,
                             double tps) {
  if (recording(o))
    recorded().lat.push_back({test_name(t), size, iters, LatStats{}, true, avg_us, tps});
}

bool write_closed_loop_json(const Options& o, int exit_code, std::string* err) {
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) {
    *err = "cannot write " + o.json + ": " + std::strerror(errno);
    return false;
  }
  const Recorded& r = recorded();
  std::fprintf(f, "{\n  \"mode\": \"closed_loop\",\n  \"exit_code\": %d,\n  \"bw\": [", exit_code);
  for (size_t i = 0; i < r.bw.size(); ++i) {
    const BwReport& b = r.bw[i].r;
    std::fprintf(
        f,
        "%s\n    {\"test\": \"%s\", \"bytes\": %llu, \"iterations\": %llu, "
        "\"bw_peak\": %.6g, \"bw_avg\": %.6g, \"bw_unit\": \"%s\", \"msg_rate_mpps\": %.6g}",
        i == 0 ? "" : ",", r.bw[i].test.c_str(), static_cast<unsigned long long>(b.size),
        static_cast<unsigned long long>(b.iters), b.bw_peak, b.bw_avg, o.gbits ? "Gb/s" : "MB/s",
        b.msg_rate);
  }
  std::fprintf(f, "\n  ],\n  \"lat\": [");
  for (size_t i = 0; i < r.lat.size(); ++i) {
    const LatRow& l = r.lat[i];
    std::fprintf(f, "%s\n    {\"test\": \"%s\", \"bytes\": %llu, \"iterations\": %llu, ",
                 i == 0 ? "" : ",", l.test.c_str(), static_cast<unsigned long long>(l.size),
                 static_cast<unsigned long long>(l.iters));
    if (l.duration)
      std::fprintf(f, "\"t_avg_us\": %.6g, \"tps\": %.6g}", l.avg_us, l.tps);
    else
      std::fprintf(f,
                   "\"t_min_us\": %.6g, \"t_typical_us\": %.6g, \"t_avg_us\": %.6g, "
                   "\"t_stdev_us\": %.6g, \"p99_us\": %.6g, \"p999_us\": %.6g, \"t_max_us\": %.6g}",
                   l.s.min, l.s.typical, l.s.avg, l.s.stdev, l.s.p99, l.s.p999, l.s.max);
  }
  std::fprintf(f, "\n  ]\n}\n");
  if (std::fclose(f) != 0) {
    *err = "cannot write " + o.json + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void record_open_loop(const Options& o, const OpenLoop& ol, const OpenLoopRun& run) {
  if (!o.report.empty()) recorded().ol.push_back({run, ol.config(), ol.intervals(), ol.total()});
}

bool write_perf_report(const Options& o, int argc, char** argv, int exit_code, std::string* err,
                       std::string* plot_note) {
  const Recorded& r = recorded();
  const std::string stem = bench::path_stem(o.report);
  Plots p;
  plot_sizes(o, stem, &p);
  plot_open_loop(stem, &p);
  plot_note->clear();
  bool plots = false;
  if (!p.files.empty()) {
    const std::string head =
        "set terminal pngcairo size 960,480 noenhanced font 'sans,10'\nset grid\nset key top "
        "left\n";
    plots = bench::run_gnuplot(head + p.script, p.files, plot_note);
  }
  bench::Doc d(*bench::doc_format_for(o.report), "urnic-perf report");
  char host[256] = "?";
  (void)gethostname(host, sizeof host - 1);
  d.para("Run on " + std::string(host) + ", " + bench::utc_now() + "; " +
         (o.sweep                     ? "loopback sweep"
          : o.loopback()              ? "loopback (two adapters in one process)"
          : o.role() == Role::kServer ? "server"
                                      : "client of " + o.server) +
         "; exit status " + std::to_string(exit_code) +
         (exit_code == 0 ? " (passed)." : " (failed)."));
  d.code(shell_words(argc, argv));
  if (!plot_note->empty()) d.para("Plots not drawn: " + *plot_note + ".");
  if (r.bw.empty() && r.lat.empty() && r.ol.empty())
    d.para("No results were recorded: the run ended before its first result.");
  bw_section(o, d, p, plots);
  lat_section(d, p, plots);
  open_loop_sections(d, p, plots);
  return d.write(o.report, err);
}

}  // namespace urnic::perf
