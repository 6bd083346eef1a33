package server

// DescribeLogDirs, versions 0-4: the broker's log directories and the
// size of each partition in them. v1 adds the throttle time; v2 is
// flexible; v3 adds a top-level error code; v4 adds each directory's
// total and usable bytes (from statfs where the platform has it, else -1).
//
// Sluice keeps partitions in the first of log.dirs only, so the answer is
// that one directory (as an absolute path), holding each requested
// partition that exists (every partition when topics is null), with its
// size on disk (the sum of its segments' .log files, as Kafka counts),
// offset lag 0 and no future replica (replica moves between directories
// do not exist).

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 35, minVersion: 0, maxVersion: 4, serve: serveDescribeLogDirs})
}

func serveDescribeLogDirs(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := b.cfg.LogDirs[0]
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir = dir
	rd.TotalBytes, rd.UsableBytes = diskSpace(dir)
	rd.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
	add := func(t meta.Topic, parts []int32) {
		rt := kmsg.NewDescribeLogDirsResponseDirTopic()
		rt.Topic = t.Name
		for _, p := range parts {
			part, ok := b.partition(t.Name, p)
			if !ok || p >= t.Partitions {
				continue
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition = p
			rp.Size = part.Size()
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			rd.Topics = append(rd.Topics, rt)
		}
	}
	if req.Topics == nil {
		for _, t := range b.meta.Topics() {
			parts := make([]int32, t.Partitions)
			for p := range parts {
				parts[p] = int32(p)
			}
			add(t, parts)
		}
	} else {
		for _, rt := range req.Topics {
			if t, ok := b.meta.Topic(rt.Topic); ok {
				parts := slices.Clone(rt.Partitions)
				slices.Sort(parts)
				add(t, slices.Compact(parts))
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{rd}
	return resp, nil
}
