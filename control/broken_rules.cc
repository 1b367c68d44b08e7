// The names of BrokenRules (include/urnic/counters.h): the rules the responder, the connection
// manager, datagram QPs and congestion control break on purpose in testing builds, so that a
// conformance tester's scenarios can be shown to fail (urnic-perf --break-rule, URNIC_BREAK_RULES).
#include <algorithm>
#include <iterator>
#include <utility>

#include "urnic/config.h"
#include "urnic/counters.h"

namespace urnic {
namespace {

constexpr std::pair<const char*, bool BrokenRules::*> kRules[] = {
    {"duplicate_ack", &BrokenRules::duplicate_ack},
    {"psn_seq_nak", &BrokenRules::psn_seq_nak},
    {"rnr_timer", &BrokenRules::rnr_timer},
    {"cm_rep_resources", &BrokenRules::cm_rep_resources},
    {"cm_rej_reason", &BrokenRules::cm_rej_reason},
    {"cm_rep_retry", &BrokenRules::cm_rep_retry},
    {"cm_dup_req", &BrokenRules::cm_dup_req},
    {"cm_mra", &BrokenRules::cm_mra},
    {"cm_drep", &BrokenRules::cm_drep},
    {"cm_drep_again", &BrokenRules::cm_drep_again},
    {"cm_dreq_qpn", &BrokenRules::cm_dreq_qpn},
    {"cm_stale", &BrokenRules::cm_stale},
    {"cm_max_retries", &BrokenRules::cm_max_retries},
    {"cm_rej", &BrokenRules::cm_rej},
    {"cm_dreq_rep_sent", &BrokenRules::cm_dreq_rep_sent},
    {"cm_drep_unknown", &BrokenRules::cm_drep_unknown},
    {"ud_src_qp", &BrokenRules::ud_src_qp},
    {"ud_qkey", &BrokenRules::ud_qkey},
    {"ud_icrc", &BrokenRules::ud_icrc},
    {"ud_pmtu", &BrokenRules::ud_pmtu},
    {"ud_imm", &BrokenRules::ud_imm},
    {"ud_empty", &BrokenRules::ud_empty},
    {"cc_cnp_dest_qp", &BrokenRules::cc_cnp_dest_qp},
    {"cc_cnp_unpaced", &BrokenRules::cc_cnp_unpaced},
    {"cc_reduce_period", &BrokenRules::cc_reduce_period},
    {"cc_no_recovery", &BrokenRules::cc_no_recovery},
};

}  // namespace

Status parse_broken_rules(std::string_view list, BrokenRules* out, std::string* unknown) noexcept {
  if (!kTesting) return Status::kNotSupported;
  if (out == nullptr) return Status::kInvalidParameter;
  BrokenRules r = *out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (name.empty()) continue;
    const auto* rule = std::find_if(std::begin(kRules), std::end(kRules),
                                    [&](const auto& k) { return name == k.first; });
    if (rule == std::end(kRules)) {
      if (unknown != nullptr) *unknown = std::string(name);
      return Status::kInvalidParameter;
    }
    r.*(rule->second) = true;
  }
  *out = r;
  return Status::kSuccess;
}

const char* broken_rule_names() noexcept {
  static const std::string names = [] {
    std::string s;
    for (const auto& k : kRules) s += std::string(s.empty() ? "" : ", ") + k.first;
    return s;
  }();
  return names.c_str();
}

}  // namespace urnic
