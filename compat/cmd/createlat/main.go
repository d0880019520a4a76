// Command createlat creates one-partition topics against a running broker
// from one client, one request after the other, and prints the rate and
// the requests' round trips (p50, p90, p99, max): the single-client
// CreateTopics figure of the performance issue, with its distribution.
//
//	go run ./cmd/createlat -addr 127.0.0.1:9092 -n 1000
//	go run ./cmd/createlat -addr 127.0.0.1:9092 -n 3000 -per 100 -prefix pre-
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "broker `address`")
	n := flag.Int("n", 1000, "topics to create")
	per := flag.Int("per", 1, "topics per CreateTopics request")
	rf := flag.Int("rf", 1, "replication factor")
	prefix := flag.String("prefix", fmt.Sprintf("t%d-", time.Now().Unix()), "topic name prefix")
	flag.Parse()
	if err := run(*addr, *n, *per, int16(*rf), *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "createlat:", err)
		os.Exit(1)
	}
}

func run(addr string, n, per int, rf int16, prefix string) error {
	if n < 1 || per < 1 {
		return fmt.Errorf("-n and -per must be positive")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	// Connected, and the controller known, before the clock starts.
	if _, err := adm.ListTopics(ctx); err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	var lat []time.Duration
	start := time.Now()
	for first := 0; first < n; first += per {
		var names []string
		for i := first; i < min(first+per, n); i++ {
			names = append(names, fmt.Sprintf("%s%d", prefix, i))
		}
		t0 := time.Now()
		resps, err := adm.CreateTopics(ctx, 1, rf, nil, names...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fmt.Errorf("create %s..: %w", names[0], err)
		}
		lat = append(lat, time.Since(t0))
	}
	el := time.Since(start)
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Microsecond) }
	fmt.Printf("%d topics in %v: %.0f/s; round trip p50 %v p90 %v p99 %v max %v\n",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), q(0.5), q(0.9), q(0.99), lat[len(lat)-1].Round(time.Microsecond))
	return nil
}
