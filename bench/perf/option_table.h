// urnic-perf's option table (option_table.cc): one row per option with its names, argument,
// help text and parser, read by both --help and parse_options (issue 43 item 4), and the
// value parsers the rows share with options.cc.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "bench/perf/perf.h"

namespace urnic::perf {

// What a row's parser sees: the option as given and its argument ("--size=64", "-s64", or the
// next word), with the checks every option shares.
struct OptionArg {
  Options* o;
  std::string key;  // "-s" or "--size", as given
  std::string val;
  bool has_val;
  int* i;  // argv index, advanced past a separate argument
  int argc;
  char** argv;
  bool* test_given;

  bool value(std::string* out);
  bool num(uint64_t* out, uint64_t lo, uint64_t hi);
  bool flag();
  // value() that must be one of `allowed` ("--sr takes auto, on or off, not 'x'").
  bool one_of(std::string* out, std::initializer_list<const char*> allowed);
};

// One option: its names ("-s --size": the first short and long one are shown, later long ones
// are accepted spellings), its argument (nullptr: a flag), its help (nullptr: not shown; lines
// split by '\n') and its parser (false: it printed why).
struct OptionRow {
  const char* names;
  const char* arg;
  const char* help;
  bool (*parse)(OptionArg&);
};

// The row that has `key` among its names, or nullptr.
const OptionRow* find_option(std::string_view key);
// The option list of --help, group by group, from the rows.
void print_option_table();

// Value parsers (options.cc); each prints why it refuses.
namespace opts {
bool parse_u64(const std::string& s, uint64_t* out);
bool parse_double(const std::string& s, double* out);
bool parse_broken_rules(const std::string& list, BrokenRules* r);
bool parse_rate(const std::string& s, Options* o);
bool parse_inject(const std::string& spec, const char* opt, FaultConfig* f);
bool parse_connection(const std::string& s, Options* o);
bool parse_mix(const std::string& spec, Options* o);
// --mix-file=FILE (mix_file.cc): settings and operations through the options they stand for.
bool parse_mix_file(const std::string& path, OptionArg& a);
bool check_address(const std::string& key, const std::string& text);
}  // namespace opts

}  // namespace urnic::perf
