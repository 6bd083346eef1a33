package controller

import (
	"fmt"
	"slices"
	"testing"
)

func TestFenceOut(t *testing.T) {
	live := func(id int32) bool { return id != 2 && id != 9 } // 2 fenced, 9 unknown
	for _, c := range []struct {
		replicas, isr []int32
		leader        int32
		want          string
	}{
		{[]int32{1, 2, 3}, []int32{1, 2, 3}, 1, "[2] [1 3] 1"},
		{[]int32{2, 1, 3}, []int32{2, 1, 3}, 2, "[2] [1 3] -1"},
		{[]int32{1, 3}, nil, -1, "[] [] -1"},
		{[]int32{9, 2}, []int32{9}, 9, "[9 2] [] -1"},
	} {
		isr := slices.Clone(c.isr)
		off, in, lead := FenceOut(c.replicas, isr, c.leader, live)
		if off == nil {
			off = []int32{}
		}
		if got := fmt.Sprint(off, in, lead); got != c.want {
			t.Errorf("FenceOut(%v, %v, %d) = %s, want %s", c.replicas, c.isr, c.leader, got, c.want)
		}
		if !slices.Equal(isr, c.isr) {
			t.Errorf("FenceOut changed its ISR argument: %v", isr)
		}
	}
}
