// Which QPs an engine step looks at (issue 14 item 3): the ready list and the timer list, so
// that a step costs nothing for idle QPs however many the engine owns.
//
// A QP is on its engine's ready list while it may have something to send, retire or flush: from
// the event that gave it work until a visit finds nothing left (Engine::phase_tx_build). The
// events are
//   - a doorbell: a post published to its send or receive ring (Qp::ring_doorbell below; the
//     NDK doorbell, ndkpi.md §7.3: with NDK_OP_FLAG_DEFER one per batch);
//   - a frame for it (Engine::deliver_lc): ACKs free the window and complete WQEs, requests owe
//     responses;
//   - a timer that fired (Engine::phase_timers);
//   - a control message for it (Engine::apply: added, modified, flushed).
// The timer list holds the QPs with a local ACK timer or an RNR wait armed; a QP joins it after
// a visit or a frame that left one armed (every place that arms one runs inside a visit or an
// event that leads to one) and leaves it when the timer phase finds both off. The engine keeps
// the earliest deadline on the list and walks it only once that has come: busy QPs, whose
// timers are armed all the time, cost the timer phase nothing per step either.
//
// Both are intrusive doubly linked lists through links in the QP's engine-owned state: O(1) to
// add, remove and rotate, no allocation, and a destroyed QP is unlinked in O(1).
#pragma once

#include <algorithm>
#include <cstdint>

#include "dataplane/qp.h"

namespace urnic::dp {

template <QpLink QpLc::*L>
class QpList {
 public:
  uint32_t size() const noexcept { return size_; }
  Qp* front() const noexcept { return head_; }
  static Qp* next(Qp& q) noexcept { return link(q).next; }

  // Appends `q` unless it is on the list already (every event may add; adding twice is a no-op).
  void push_back(Qp& q) noexcept {
    QpLink& k = link(q);
    if (k.linked) return;
    k.linked = true;
    k.prev = tail_;
    k.next = nullptr;
    if (tail_ != nullptr)
      link(*tail_).next = &q;
    else
      head_ = &q;
    tail_ = &q;
    ++size_;
  }
  void remove(Qp& q) noexcept {
    QpLink& k = link(q);
    if (!k.linked) return;
    if (k.prev != nullptr)
      link(*k.prev).next = k.next;
    else
      head_ = k.next;
    if (k.next != nullptr)
      link(*k.next).prev = k.prev;
    else
      tail_ = k.prev;
    k = QpLink{};
    --size_;
  }
  // Removes every QP for which `pred` holds.
  template <typename Pred>
  void remove_if(Pred pred) noexcept {
    for (Qp* q = head_; q != nullptr;) {
      Qp* n = link(*q).next;
      if (pred(*q)) remove(*q);
      q = n;
    }
  }
  Qp* pop_front() noexcept {
    Qp* q = head_;
    if (q != nullptr) remove(*q);
    return q;
  }

 private:
  static QpLink& link(Qp& q) noexcept { return lc(q).*L; }
  Qp* head_ = nullptr;
  Qp* tail_ = nullptr;
  uint32_t size_ = 0;
};

using ReadyList = QpList<&QpLc::ready_link>;
using TimerList = QpList<&QpLc::timer_link>;

// The earliest of `qp`'s armed deadlines (local ACK timer, RNR wait, probe), TSC; UINT64_MAX
// when none is armed. Engine owner only.
inline uint64_t qp_next_deadline_lc(const Qp& qp) noexcept {
  const auto& r = lc(qp).req;
  // An unarmed deadline (0) minus one is the largest value, so it never wins the minimum:
  // branch-free, as this runs per frame and per visit.
  const uint64_t d = std::min({r.ack_deadline - 1, r.rnr_deadline - 1, r.probe_deadline - 1});
  return d == UINT64_MAX ? UINT64_MAX : d + 1;
}

// Whether the posters left work that a visit would take: a send WQE, or in ERR any WQE (it is
// flushed). Engine owner, after clearing the doorbell flag (Engine::phase_tx_build).
inline bool qp_posted_work_lc(Qp& qp) noexcept {
  QpLc& l = lc(qp);
  if (l.state == QpState::kErr) return !l.sq.empty() || !l.rq.empty();
  return l.state == QpState::kRts && !l.sq.empty();
}

// Whether `qp` has its local ACK timer or an RNR wait armed: it belongs on the timer list (the
// probe deadline rides with the ACK timer). Engine owner only.
inline bool qp_timer_armed_lc(const Qp& qp) noexcept {
  return (lc(qp).req.ack_deadline | lc(qp).req.rnr_deadline) != 0;
}

// Whether a visit may still find something to send for `qp` without a new event: responder
// output queued, or requester work not yet sent (new or resent, or held back by the pacer, the
// window or the TX space). Such a QP stays on the ready list. Engine owner only.
inline bool qp_tx_pending_lc(Qp& qp) noexcept {
  const QpLc& l = lc(qp);
  if (l.state != QpState::kRts && l.state != QpState::kSqd && l.state != QpState::kRtr)
    return false;
  if (l.resp.jobs_count != 0 || l.resp.ack_pending) return true;
  if (l.state == QpState::kRtr) return false;
  const auto& r = l.req;
  if (r.cur != r.tail || r.sr_head != r.sr_tail || r.probe_una) return true;
  // SQD starts nothing new (IBTA §10.3.1): its queued WQEs wait for the modify back to RTS,
  // which is a control event.
  return qp_posted_work_lc(qp);
}

}  // namespace urnic::dp
