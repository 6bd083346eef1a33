package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func parts(name string, n int32) {
	cl, _ := kgo.NewClient(kgo.SeedBrokers(*addr))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := adm.CreateTopic(ctx, n, 1, nil, name)
	fmt.Printf("parts: create %s with %d partitions: %v %v in %v; serving %v, fds %s, RSS %s\n", name, n, err, r.Err, time.Since(start).Round(time.Millisecond), alive(), fds(), rss())
}
