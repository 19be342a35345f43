package matrix

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// describeWindowMs is how long the described group's member stays.
const describeWindowMs = 2500

// describeGroupsScenario is scenario 10's describe and list groups: while
// a franz-go member consumes the two-partition group topic, the client's
// admin API must describe the group as Stable with that member (its
// client id) assigned both partitions and list it; once the member
// committed and left, the group is Empty with no members and still
// listed (it keeps its committed offsets), as Kafka's GroupCoordinator
// reports it.
var describeGroupsScenario = Scenario{
	ID:    "7.describe-list-groups",
	Title: "describe and list groups through the client's admin API, with a member and after it left",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		m, err := e.OpenAnother(ctx, "franz-go")
		if err != nil {
			return "", err
		}
		defer m.Close()
		topic, err := groupTopic(ctx, e, d, "describe")
		if err != nil {
			return "", err
		}
		group := topic + "-g"
		type result struct {
			res driver.GroupConsumeResult
			err error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			res, err := m.GroupConsume(ctx, driver.GroupConsume{Group: group, Topic: topic, Count: 1 << 20, TimeoutMs: describeWindowMs, Commit: true})
			done <- result{res, err}
		}()
		var member result
		memberIn := false
		defer func() {
			if !memberIn {
				<-done // The member ends at its window or with ctx.
			}
		}()

		var stable driver.GroupDescription
		last := "not described yet"
		for {
			g, err := d.DescribeGroup(ctx, group)
			switch {
			case err != nil:
				last = err.Error()
			case g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Assignment) == 2:
				stable = g
			default:
				last = fmt.Sprintf("state %s with %d members", g.State, len(g.Members))
			}
			if stable.State != "" {
				break
			}
			if time.Since(start) > describeWindowMs*time.Millisecond-500*time.Millisecond {
				return "", fmt.Errorf("group %s was not described Stable with one member assigned 2 partitions while it consumed (last: %s)", group, last)
			}
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return "", ctx.Err()
			}
		}
		took := time.Since(start).Round(100 * time.Millisecond)
		sm := stable.Members[0]
		if stable.Group != group {
			return "", fmt.Errorf("described group is named %q, want %q", stable.Group, group)
		}
		if sm.ClientID != "matrix-franz-go-group" || sm.MemberID == "" {
			return "", fmt.Errorf("member described as id %q client %q, want a member id and client matrix-franz-go-group", sm.MemberID, sm.ClientID)
		}
		for i, tp := range sortedTPs(sm.Assignment) {
			if tp != (driver.TopicPartition{Topic: topic, Partition: int32(i)}) {
				return "", fmt.Errorf("member assigned %v, want %s partitions 0 and 1", sm.Assignment, topic)
			}
		}
		if err := expectListed(ctx, d, group, "while a member consumes"); err != nil {
			return "", err
		}
		member, memberIn = <-done, true
		if member.err != nil {
			return "", fmt.Errorf("member: %w", member.err)
		}
		if len(member.res.Records) != groupRecords {
			return "", fmt.Errorf("member read %d records, want %d", len(member.res.Records), groupRecords)
		}
		g, err := d.DescribeGroup(ctx, group)
		if err != nil {
			return "", fmt.Errorf("describe the group after its member left: %w", err)
		}
		if g.State != "Empty" || len(g.Members) != 0 {
			return "", fmt.Errorf("after its member left the group is %s with %d members, want Empty with none", g.State, len(g.Members))
		}
		if err := expectListed(ctx, d, group, "after its member left"); err != nil {
			return "", err
		}
		return fmt.Sprintf("Stable with member %s assigned both partitions (described after %v), then Empty; listed both times", sm.ClientID, took), nil
	},
}

func sortedTPs(tps []driver.TopicPartition) []driver.TopicPartition {
	out := slices.Clone(tps)
	slices.SortFunc(out, func(a, b driver.TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func expectListed(ctx context.Context, d driver.Driver, group, when string) error {
	gs, err := d.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups %s: %w", when, err)
	}
	if !slices.Contains(gs, group) {
		return fmt.Errorf("list groups %s: %s missing from %d groups", when, group, len(gs))
	}
	return nil
}
