package main

import (
	"reflect"
	"testing"
)

func TestPlanThrottle(t *testing.T) {
	plan := []assignment{
		{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4}}, // 1,2,3 -> adds 4
		{Topic: "a", Partition: 1, Replicas: []int32{3, 2, 1}}, // reorder only: no throttle
		{Topic: "a", Partition: 2, Replicas: []int32{1, 2}},    // drops 3 only: no throttle
		{Topic: "b", Partition: 0, Replicas: []int32{5}},       // 1 -> 5
	}
	current := map[tp][]int32{{"a", 0}: {1, 2, 3}, {"a", 1}: {1, 2, 3}, {"a", 2}: {1, 2, 3}, {"b", 0}: {1}}
	ongoing := map[tp]reassignment{{"c", 3}: {replicas: []int32{6, 1, 7}, adding: []int32{7}, removing: []int32{1}}}
	th := planThrottle(plan, current, ongoing)
	want := throttle{
		leader:   map[string]string{"a": "0:1,0:2,0:3", "b": "0:1", "c": "3:1,3:6"},
		follower: map[string]string{"a": "0:4", "b": "0:5", "c": "3:7"},
		brokers:  []int32{1, 2, 3, 4, 5, 6, 7},
	}
	if !reflect.DeepEqual(th, want) {
		t.Errorf("throttle\n%+v\nwant\n%+v", th, want)
	}
	// A partition of the plan still moving is throttled from where its
	// move started.
	ongoing = map[tp]reassignment{{"a", 0}: {replicas: []int32{2, 3, 5, 1}, adding: []int32{5}, removing: []int32{1}}}
	th = planThrottle(plan[:1], current, ongoing)
	if th.leader["a"] != "0:1,0:2,0:3" || th.follower["a"] != "0:4" {
		t.Errorf("throttle of a redirected move %+v", th)
	}
}
