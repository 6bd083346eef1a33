package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"

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
