// Package server is Sluice's broker: the Kafka protocol served over the
// partitions this node holds, and the node's part of the cluster. The
// sluice binary (every command) is in cmd/sluice; server.properties is
// read by package config; the web console is package console.
//
// One path, whatever the cluster's size: a broker without
// controller.quorum.voters runs as a one-voter cluster (etcd's and
// KRaft's combined mode), so a single node and a five-broker cluster run
// the same produce, fetch, metadata, group and controller code. Every
// partition, __consumer_offsets and the metadata log __cluster_metadata
// are raft groups of package replica, the one door for records; the
// controller's decisions are package controller's, over package meta's
// store.
//
// Each Kafka API lives in its own file, named by its key
// (00_produce.go, 01_fetch.go, …), registered in registry.go and
// encoded and decoded with franz-go's kmsg; conn.go reads requests and
// writes responses, pipelining produce. With an authorizer, each API
// checks the connection's principal as Kafka's KafkaApis does
// (authorize.go, and the *_authz.go files for the group, transaction and
// admin APIs). DESIGN.md has the paths of a
// produce and of a fetch through these files, the goroutines and the
// lock order.
package server
