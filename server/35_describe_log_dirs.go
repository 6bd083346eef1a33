package server

// DescribeLogDirs, versions 0-4: the broker's log directories and the
// size of each partition in them. v1 adds the throttle time; v2 is
// flexible; v3 adds a top-level error code; v4 adds each directory's
// total and usable bytes (from statfs where the platform has it, else -1).
//
// Every log dir of log.dirs is answered (as an absolute path), holding
// each requested partition that is open in it (every partition when
// topics is null), with its size on disk (the sum of its segments' .log
// files, as Kafka counts), offset lag 0 and no future replica (replica
// moves between directories do not exist). A log dir holding a partition
// that is offline or failed (faults.go) is answered with
// KAFKA_STORAGE_ERROR, as Kafka answers an offline log dir.

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/sluicemq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(handler{key: 35, minVersion: 0, maxVersion: 4, serve: serveDescribeLogDirs})
}

func serveDescribeLogDirs(_ context.Context, b *Broker, _ *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dirs := make([]kmsg.DescribeLogDirsResponseDir, len(b.cfg.LogDirs))
	index := map[string]int{}
	failed := b.failedDirs()
	for i, dir := range b.cfg.LogDirs {
		index[filepath.Clean(dir)] = i
		clean := filepath.Clean(dir)
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = dir
		rd.TotalBytes, rd.UsableBytes = diskSpace(dir)
		rd.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
		if failed[clean] {
			// A partition in it is offline or failed (faults.go); the
			// others in it still serve and are listed.
			rd.ErrorCode = kerr.KafkaStorageError.Code
		}
		dirs[i] = rd
	}
	add := func(t meta.Topic, parts []int32) {
		for _, p := range parts {
			part, ok := b.partition(t.Name, p)
			if !ok || p >= t.Partitions {
				continue
			}
			i, ok := index[filepath.Dir(part.Dir())]
			if !ok {
				continue
			}
			rd := &dirs[i]
			if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != t.Name {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = t.Name
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition = p
			rp.Size = part.Size()
			rt := &rd.Topics[len(rd.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
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
	resp.Dirs = dirs
	return resp, nil
}
