// Handler-level tests: hand-built messages in order, duplicated, stale, refused; each
// comment says what must happen.
#include "policy/gateway.h"

#include <gtest/gtest.h>

#include "world.h"

namespace sg::policy {
namespace {

TEST(PolicyGateway, CleanSwitchHappensAtTheAgreedRound) {
  World w(3, 3);
  ASSERT_TRUE(w.propose(1));
  ASSERT_EQ(w.flight.size(), 2u);  // PROPOSE to both members
  EXPECT_EQ(w.flight[0].round, 0 + 3);
  while (!w.flight.empty()) w.deliver(0);  // PREPARED, DECIDE, ACK
  for (int g = 0; g < 3; ++g) EXPECT_EQ(w.gws[g].state().next->decision, Decision::kCommit);
  EXPECT_FALSE(w.gws[0].switch_in_progress() && w.gws[0].state().next->decision != Decision::kCommit);
  for (Round r = 1; r <= 4; ++r)
    for (int g = 0; g < 3; ++g) ASSERT_TRUE(w.begin(g)) << r;
  EXPECT_EQ(w.used[2], 0u);
  EXPECT_EQ(w.used[3], 1u);  // everyone switched at round 3
  EXPECT_EQ(w.used[4], 1u);
  for (int g = 0; g < 3; ++g) EXPECT_EQ(w.gws[g].active_version(), 1u);
}

TEST(PolicyGateway, UndecidedSwitchBlocksTheSwitchRoundOnly) {
  World w(3, 2);
  ASSERT_TRUE(w.propose(1));
  w.deliver(0);  // member 1 prepares; its PREPARED is now in flight
  EXPECT_TRUE(w.gws[1].may_begin(1).go);   // rounds before the switch run on
  EXPECT_FALSE(w.gws[1].may_begin(2).go);  // the switch round waits for the decision
  EXPECT_TRUE(w.gws[2].may_begin(2).go);   // member 2 has promised nothing yet
  EXPECT_FALSE(w.gws[0].may_begin(2).go);  // nor may the coordinator: it is undecided
}

TEST(PolicyGateway, MemberAlreadyPastTheRoundRefusesAndTheSwitchIsRetriedLater) {
  // Member 2 races ahead to round 1 before hearing of the switch planned for round 1.
  World fresh(3, 1);
  fresh.gws[2].begin_round(1);  // only member 2 began round 1
  fresh.next_round[2] = 2;
  ASSERT_TRUE(fresh.propose(1));  // coordinator still at round 0: proposes round 1
  while (!fresh.flight.empty()) fresh.deliver(0);
  EXPECT_EQ(fresh.gws[0].active_version(), 0u);
  EXPECT_FALSE(fresh.gws[0].state().next.has_value());  // aborted
  EXPECT_TRUE(fresh.gws[0].switch_in_progress());       // and wanted again
  EXPECT_EQ(fresh.gws[0].aborts(), 1u);
  EXPECT_EQ(fresh.gws[0].aborts_later(), 1u);
  fresh.tick(0);  // re-proposed after the round member 2 is in, with twice the margin
  ASSERT_FALSE(fresh.flight.empty());
  EXPECT_EQ(fresh.flight[0].round, 1 + 2);
  fresh.settle(10);
  EXPECT_EQ(fresh.violation, "");
  EXPECT_EQ(fresh.min_active(), 1u);
}

TEST(PolicyGateway, AMemberStillBeforeTheLastSwitchDelaysTheNextOneWithoutPushingItFarOut) {
  // The coordinator approves rounds ahead of its engine, so it passes a committed switch
  // round, and may propose again, while members have not reached that round yet. They refuse
  // (a committed switch not yet reached), which says nothing about being ahead: the retries
  // must not double the margin each time. They did, and on `fluctuating` a policy proposed at
  // round 12 was still not in force at round 50: 38 rounds on stale trees.
  World w(3, 3);
  ASSERT_TRUE(w.propose(1));
  while (!w.flight.empty()) w.deliver(0);
  for (int r = 1; r <= 3; ++r) ASSERT_TRUE(w.begin(0));  // the coordinator reaches the switch round
  ASSERT_TRUE(w.begin(1));
  ASSERT_TRUE(w.begin(2));  // members at round 1: still holding the committed switch to version 1
  ASSERT_EQ(w.gws[0].active_version(), 1u);
  ASSERT_TRUE(w.propose(2));
  for (int tick = 0; tick < 20; ++tick) {  // a second of retries while the members catch up
    while (!w.flight.empty()) w.deliver(0);
    w.tick(0);
  }
  while (!w.flight.empty()) w.deliver(0);
  EXPECT_EQ(w.gws[1].active_version(), 0u);
  EXPECT_GE(w.gws[0].aborts(), 20u);  // refused at every retry: counted, never as "late"
  EXPECT_EQ(w.gws[0].aborts_later(), 0u);
  for (int g = 1; g <= 2; ++g)
    for (int r = 2; r <= 3; ++r) ASSERT_TRUE(w.begin(g));  // the members switch to version 1
  w.tick(0);
  while (!w.flight.empty()) w.deliver(0);
  for (int g = 0; g < 3; ++g) {
    ASSERT_TRUE(w.gws[g].state().next.has_value()) << g;
    EXPECT_EQ(w.gws[g].state().next->decision, Decision::kCommit) << g;
    // Switch round: the coordinator's round (3) plus the configured margin, not 3 + 64.
    EXPECT_EQ(w.gws[g].state().next->switch_round, 3 + 3) << g;
  }
  w.settle(12);
  EXPECT_EQ(w.violation, "");
  EXPECT_EQ(w.min_active(), 2u);
}

TEST(PolicyGateway, DuplicatesAreAnsweredNotReapplied) {
  World w(3, 3);
  ASSERT_TRUE(w.propose(1));
  const Message propose = w.flight[0];
  w.deliver(0, true);  // duplicate PROPOSE: two PREPARED come back, same content
  w.deliver(0);
  size_t prepared = 0;
  for (const Message& m : w.flight) prepared += m.type == MsgType::kPrepared && m.from == propose.to;
  EXPECT_EQ(prepared, 2u);
  w.settle(3);
  EXPECT_EQ(w.min_active(), 1u);
  // A very late copy of the old PROPOSE changes nothing.
  w.gws[propose.to].on_message(propose, 0);
  EXPECT_TRUE(w.gws[propose.to].take_outbox().empty());
  EXPECT_EQ(w.gws[propose.to].active_version(), 1u);
}

TEST(PolicyGateway, RestartedMemberWaitsUntilItLearnsThePolicyInForce) {
  World w(3, 2);
  ASSERT_TRUE(w.propose(1));
  w.settle(6);
  ASSERT_EQ(w.min_active(), 1u);
  w.restart(2);
  EXPECT_FALSE(w.gws[2].synced());
  EXPECT_FALSE(w.gws[2].may_begin(w.next_round[2]).go);  // takes no part yet
  w.tick(2);                                             // STATE_REQUEST
  ASSERT_EQ(w.flight.size(), 1u);
  EXPECT_EQ(w.flight[0].type, MsgType::kStateRequest);
  w.deliver(0);  // coordinator answers
  w.deliver(0);
  EXPECT_TRUE(w.gws[2].synced());
  EXPECT_EQ(w.gws[2].active_version(), 1u);
  EXPECT_TRUE(w.gws[2].may_begin(w.next_round[2]).go);
  // Where it rejoins: the coordinator's round, and no earlier than the policy in force.
  EXPECT_EQ(w.gws[2].cluster_round(), w.gws[0].state().current_round);
  EXPECT_GT(w.gws[2].cluster_round(), 0);
  EXPECT_LE(w.gws[2].first_round(), w.gws[2].cluster_round());
}

TEST(PolicyGateway, StateReplyForAnEarlierIncarnationIsIgnored) {
  World w(3, 2);
  w.restart(1);
  w.tick(1);
  const Message old_request = w.flight[0];
  w.restart(1);  // restarted again before the answer came
  w.gws[0].on_message(old_request, 0);
  for (Message& m : w.gws[0].take_outbox()) w.gws[1].on_message(m, 0);
  EXPECT_FALSE(w.gws[1].synced());
}

TEST(PolicyGateway, RestartedCoordinatorRecoversAndFinishesAPreparedSwitch) {
  World w(3, 3);
  ASSERT_TRUE(w.propose(1));
  // Both members prepare; the coordinator dies before deciding.
  w.deliver(0);
  w.deliver(0);
  w.flight.clear();  // the PREPAREDs are lost with it
  w.restart(0);
  EXPECT_FALSE(w.gws[0].synced());
  w.settle(6);
  EXPECT_EQ(w.violation, "");
  for (int g = 0; g < 3; ++g) EXPECT_EQ(w.gws[g].active_version(), 1u) << g;  // every member had promised
}

TEST(PolicyGateway, RestartedCoordinatorAbortsASwitchNotEveryonePromised) {
  World w(3, 3);
  ASSERT_TRUE(w.propose(1));
  w.deliver(0);      // member 1 prepares
  w.flight.clear();  // member 2 never heard of it
  w.restart(0);
  w.settle(2);
  EXPECT_EQ(w.violation, "");
  EXPECT_FALSE(w.gws[1].state().next.has_value() &&
               w.gws[1].state().next->decision == Decision::kUndecided);  // told to drop it
  w.settle(10);  // and the plan is proposed again and goes through
  EXPECT_EQ(w.min_active(), 1u);
}

TEST(PolicyGateway, WholeClusterRestartFallsBackToTheBootstrapPolicy) {
  World w(3, 2);
  for (int g = 0; g < 3; ++g) w.restart(g);
  w.settle(4);
  for (int g = 0; g < 3; ++g) {
    EXPECT_TRUE(w.gws[g].synced());
    EXPECT_EQ(w.gws[g].active_version(), 0u);
    EXPECT_EQ(w.gws[g].first_round(), w.gws[0].state().active->from_round) << g;
  }
}

TEST(PolicyGateway, BadInputIsCountedAndIgnored) {
  World w(3, 2);
  const uint8_t junk[] = {1, 2, 3};
  w.gws[1].on_bytes(junk, 0);
  Message m;
  m.type = MsgType::kPropose;
  m.from = 0;
  m.to = 2;  // addressed to someone else
  w.gws[1].on_message(m, 0);
  m.to = 1;
  m.from = 9;  // no such gateway
  w.gws[1].on_message(m, 0);
  EXPECT_EQ(w.gws[1].bad_messages(), 3u);
  // A PROPOSE whose plan does not decode is refused, not adopted.
  m.from = 0;
  m.version = 1;
  m.attempt = 1;
  m.round = 5;
  m.plan = {0xde, 0xad};
  w.gws[1].on_message(m, 0);
  auto out = w.gws[1].take_outbox();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].status, 0);
  EXPECT_FALSE(w.gws[1].state().next.has_value());
  // Only the coordinator proposes, and only a decodable plan for this many sites.
  EXPECT_FALSE(w.gws[1].propose(plan_bytes(3, 1), 0));
  EXPECT_FALSE(w.gws[0].propose(plan_bytes(4, 1), 0));
}

}  // namespace
}  // namespace sg::policy
