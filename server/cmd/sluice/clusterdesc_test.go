package main

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClusterDescribe(t *testing.T) {
	// Sluice answers DescribeCluster v2 (KIP-1073): a single node has no
	// fenced brokers.
	bs := startSluice(t)
	host, port, _ := net.SplitHostPort(bs)
	out := mustSluice(t, "cluster", "describe", "--bootstrap-server", bs)
	wantContains(t, "sluice", out, "Cluster ID: ", "Controller: 1", "Brokers: 1", "Fenced brokers: none",
		"ID  HOST       PORT", fmt.Sprintf("1   %s  %s  -     yes         no", host, port))
	var info clusterInfo
	if err := json.Unmarshal([]byte(mustSluice(t, "cluster", "describe", "--bootstrap-server", bs, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.ClusterID == "" || info.Controller != 1 || len(info.Brokers) != 1 || !info.FencedKnown || info.Source != "DescribeCluster v2" || strconv.Itoa(int(info.Brokers[0].Port)) != port {
		t.Errorf("sluice --json: %+v", info)
	}

	// kfake answers v2, with IsFenced.
	bs = startKfake(t)
	out = mustSluice(t, "cluster", "describe", "--bootstrap-server", bs)
	wantContains(t, "kfake", out, "Cluster ID: kfake-test", "Brokers: 1", "Fenced brokers: none", "no")
	if err := json.Unmarshal([]byte(mustSluice(t, "cluster", "describe", "--bootstrap-server", bs, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.ClusterID != "kfake-test" || !info.FencedKnown || info.Brokers[0].Fenced == nil || *info.Brokers[0].Fenced {
		t.Errorf("kfake --json: %+v", info)
	}
}

// TestClusterDescribeMetadataFallback: a cluster without DescribeCluster
// is described from Metadata.
func TestClusterDescribeMetadataFallback(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3)
	f.mu.Lock()
	f.unsupported[kmsg.DescribeCluster.Int16()] = true
	f.mu.Unlock()
	out := mustSluice(t, "cluster", "describe", "--bootstrap-server", bs)
	wantContains(t, "describe", out, "Brokers: 3", "Fenced brokers: unknown (the cluster does not report them)", "\n1   ", "\n2   ", "\n3   ")
	var info clusterInfo
	if err := json.Unmarshal([]byte(mustSluice(t, "cluster", "describe", "--bootstrap-server", bs, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Source) < 8 || info.Source[:8] != "Metadata" {
		t.Errorf("source %q, want Metadata", info.Source)
	}
}

func TestClusterDescribeUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	wantExit(t, 1, []string{"cluster", "describe", "--bootstrap-server", addr, "--timeout", "2s"}, "sluice cluster describe:", "hint:")
}

// HEARTBEAT-AGE comes from DescribeQuorum's LastFetchTimestamp: an age
// for each broker, "down" first for a fenced one, "unknown" for one the
// quorum has no time for; --json carries it in ms (null when unknown).
func TestClusterDescribeHeartbeatAge(t *testing.T) {
	f, bs := newFakeCluster(t, 1, 2, 3)
	now := time.Now().UnixMilli()
	f.mu.Lock()
	f.lastFetch[1] = now - 400
	f.lastFetch[2] = now - 80_000
	f.fenced[2] = true
	f.mu.Unlock()
	out := mustSluice(t, "cluster", "describe", "--bootstrap-server", bs)
	wantContains(t, "describe", out, "HEARTBEAT-AGE", "Fenced brokers: 2", "down 1m20s", "unknown")
	if strings.Contains(out, "Heartbeat ages:") {
		t.Errorf("a cluster with DescribeQuorum: %s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "1 ") && !strings.Contains(line, " 0.4s") && !strings.Contains(line, " 0.5s") {
			t.Errorf("broker 1's line: %q, want 0.4s", line)
		}
		if strings.HasPrefix(line, "3 ") && !strings.HasSuffix(strings.TrimSpace(line), "unknown") {
			t.Errorf("broker 3's line: %q, want unknown", line)
		}
	}
	var info clusterInfo
	if err := json.Unmarshal([]byte(mustSluice(t, "cluster", "describe", "--bootstrap-server", bs, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.HeartbeatSource != "DescribeQuorum v2" || len(info.Brokers) != 3 {
		t.Fatalf("--json: %+v", info)
	}
	b1, b2, b3 := info.Brokers[0], info.Brokers[1], info.Brokers[2]
	if b1.HeartbeatAgeMs == nil || *b1.HeartbeatAgeMs < 400 || *b1.HeartbeatAgeMs > 5000 || b2.HeartbeatAge != "down 1m20s" || b3.HeartbeatAgeMs != nil || b3.HeartbeatAge != "unknown" {
		t.Errorf("--json brokers: %+v %+v %+v", b1, b2, b3)
	}

	// Without DescribeQuorum: unknown, and the rest as before.
	f.mu.Lock()
	f.unsupported[kmsg.DescribeQuorum.Int16()] = true
	f.mu.Unlock()
	out = mustSluice(t, "cluster", "describe", "--bootstrap-server", bs)
	wantContains(t, "no DescribeQuorum", out, "Brokers: 3", "Heartbeat ages: unknown: the cluster does not offer DescribeQuorum", "HEARTBEAT-AGE")
	if strings.Contains(out, "0.4s") || strings.Contains(out, "down") {
		t.Errorf("no DescribeQuorum: %s", out)
	}
}

// Against a Sluice cluster, every broker heartbeated within the last
// seconds.
func TestClusterDescribeHeartbeatAgeSluice(t *testing.T) {
	bs := startSluiceCluster(t, 3)
	var info clusterInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := sluice(t, "cluster", "describe", "--bootstrap-server", bs, "--json")
		var err error
		if code != 0 {
			err = fmt.Errorf("exit %d: %s", code, errOut)
		} else {
			info = clusterInfo{}
			err = json.Unmarshal([]byte(out), &info)
		}
		if err == nil && len(info.Brokers) == 3 && info.HeartbeatSource == "DescribeQuorum v2" &&
			!slices.ContainsFunc(info.Brokers, func(b brokerInfo) bool { return b.HeartbeatAgeMs == nil || *b.HeartbeatAgeMs > 3000 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster describe: %+v, %v", info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
